package accounts_test

import (
	"crypto/rand"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	"github.com/timeblock/timeblock/accounts"
)

func mustKeyTags(t *testing.T, secret string) *accounts.KeyTags {
	t.Helper()
	tags, err := accounts.NewKeyTags(secret)
	if err != nil {
		t.Fatal(err)
	}
	return tags
}

// untagged is a key as minted before tags: 256 random bits.
func untagged(prefix string) string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func TestKeyTagsMintedKeysVerify(t *testing.T) {
	tags := mustKeyTags(t, "correct horse battery staple")
	// A restart (same secret, new value) verifies what the old one minted.
	again := mustKeyTags(t, "correct horse battery staple")
	for _, c := range []struct{ prefix, re string }{
		{accounts.PoolKeyPrefix, `^sk_pool_[A-Za-z0-9_-]{43}$`},
		{accounts.CombinedTokenPrefix, `^sk-compat-meta-[A-Za-z0-9_-]{43}$`},
	} {
		re := regexp.MustCompile(c.re)
		seen := map[string]bool{}
		for range 500 {
			k := tags.Mint(c.prefix)
			if !re.MatchString(k) {
				t.Fatalf("minted %q does not match the public format %s", k, c.re)
			}
			if seen[k] {
				t.Fatalf("minted %q twice", k)
			}
			seen[k] = true
			if !tags.Valid(k) || !again.Valid(k) {
				t.Fatalf("minted key %q does not verify", k)
			}
		}
	}
}

func TestKeyTagsRefuseWhatTheyDidNotMint(t *testing.T) {
	tags := mustKeyTags(t, "correct horse battery staple")
	other := mustKeyTags(t, "another secret, another operator")
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

	for _, prefix := range []string{accounts.PoolKeyPrefix, accounts.CombinedTokenPrefix} {
		k := tags.Mint(prefix)
		body := k[len(prefix):]

		// Any one character changed, in the random part or the tag.
		for i := range body {
			for _, c := range []byte{b64[(strings.IndexByte(b64, body[i])+1)%64], b64[(strings.IndexByte(b64, body[i])+33)%64]} {
				tampered := prefix + body[:i] + string(c) + body[i+1:]
				if tags.Valid(tampered) {
					t.Errorf("key with character %d changed (%q) verifies", i, tampered)
				}
			}
		}
		// The same body under the other kind's prefix: the prefix is signed.
		swapped := accounts.CombinedTokenPrefix + body
		if prefix == accounts.CombinedTokenPrefix {
			swapped = accounts.PoolKeyPrefix + body
		}
		if tags.Valid(swapped) {
			t.Errorf("%q verifies with its prefix swapped", k)
		}
		// Tagged under another secret.
		if o := other.Mint(prefix); tags.Valid(o) {
			t.Errorf("a key tagged under another secret verifies: %q", o)
		}
		if other.Valid(k) {
			t.Errorf("%q verifies under another secret", k)
		}
		// Old-format keys (all random): refused, as guesses are.
		for range 2000 {
			if old := untagged(prefix); tags.Valid(old) {
				t.Fatalf("untagged key %q verifies", old)
			}
		}
		// Shapes that are not a tagged key at all.
		for _, bad := range []string{
			"", prefix, k[:len(k)-1], k + "A", k + k[len(k)-1:], " " + k, k + " ",
			prefix + strings.Repeat("A", 43), prefix + body[:42] + "!",
			"mk_" + body, "st_" + body, body,
		} {
			if tags.Valid(bad) {
				t.Errorf("%q verifies", bad)
			}
		}
	}
}

func TestKeyTagsOneSpelling(t *testing.T) {
	// The last character carries 4 bits of the key and 2 padding bits; a lax
	// decoder reads 4 spellings alike, and each would cost a store read.
	tags := mustKeyTags(t, "correct horse battery staple")
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	k := tags.Mint(accounts.PoolKeyPrefix)
	last := strings.IndexByte(b64, k[len(k)-1])
	for pad := 1; pad < 4; pad++ {
		v := k[:len(k)-1] + string(b64[last|pad])
		if v != k && tags.Valid(v) {
			t.Errorf("%q, %q with other padding bits, verifies", k, v)
		}
	}
}

func TestNewKeyTagsNeedsSecret(t *testing.T) {
	for _, s := range []string{"", "  "} {
		if _, err := accounts.NewKeyTags(s); err == nil {
			t.Errorf("NewKeyTags(%q) succeeded", s)
		}
	}
}

func TestServiceMintsTaggedKeys(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, _ := e.user("tag@example.com", "")
		pool := e.pool("tagged", accounts.PoolActive, 10, false)
		key, err := e.svc.CreateKey(e.ctx, u.ID, e.sub(u, pool, accounts.SubActive, 1, accounts.BlockEurope).ID, "")
		if err != nil {
			t.Fatal(err)
		}
		ck, err := e.svc.CreateCombinedKey(e.ctx, u.ID, []string{
			e.sub(u, pool, accounts.SubActive, 1, accounts.BlockAsia).ID,
			e.sub(u, pool, accounts.SubActive, 1, accounts.BlockAsia).ID,
		}, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		// Every node has the secret: another service on the store verifies.
		other := e.newServiceOn(st)
		for _, k := range []string{key.APIKey, ck.Token} {
			if !e.svc.ValidKeyTag(k) || !other.ValidKeyTag(k) {
				t.Errorf("key %s… made by the service does not verify", k[:12])
			}
		}
		// The tag key is not the secret itself, nor shared with another secret.
		if mustKeyTags(t, "some other secret").Valid(key.APIKey) {
			t.Error("a service key verifies under another secret")
		}
		if e.svc.ValidKeyTag(untagged(accounts.PoolKeyPrefix)) {
			t.Error("an untagged key verifies")
		}
	})
}
