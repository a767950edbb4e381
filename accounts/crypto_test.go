package accounts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
)

func TestSealerRoundTrip(t *testing.T) {
	s, err := newSealer("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte(s.newPoolKey())
	a, err := s.seal(plain)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.seal(plain)
	if bytes.Equal(a, b) {
		t.Error("two seals of one plaintext are equal: the nonce is not random")
	}
	if bytes.Contains(a, plain) {
		t.Error("sealed record contains the plaintext")
	}
	got, err := s.open(a)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open = %q, %v; want %q", got, err, plain)
	}

	// Same secret, new sealer (a restart): still opens.
	s2, _ := newSealer("correct horse battery staple")
	if got, err := s2.open(a); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open after restart = %q, %v", got, err)
	}

	other, _ := newSealer("another secret")
	if _, err := other.open(a); err == nil || !strings.Contains(err.Error(), "different secret") {
		t.Errorf("open under another secret: err = %v, want a 'different secret' error", err)
	}
	tampered := bytes.Clone(a)
	tampered[len(tampered)-1] ^= 1
	if _, err := s.open(tampered); err == nil {
		t.Error("open of a tampered record succeeded")
	}
	if _, err := s.open([]byte("short")); err == nil {
		t.Error("open of a short record succeeded")
	}
}

func TestNewSealerNeedsSecret(t *testing.T) {
	for _, secret := range []string{"", "   "} {
		_, err := newSealer(secret)
		if err == nil {
			t.Fatalf("newSealer(%q) succeeded", secret)
		}
		// The message must say how to set one.
		for _, want := range []string{"secret", "TIMEBLOCK_SECRET", "timeblock {"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
	}
	if _, err := NewService(Config{Store: cryptoTestStore{}}); err == nil {
		t.Error("NewService without a secret succeeded")
	}
}

func TestTokenFormats(t *testing.T) {
	s, err := newSealer("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		gen  func() string
		re   string
	}{
		{"pool key", s.newPoolKey, `^sk_pool_[A-Za-z0-9_-]{43}$`},
		{"combined token", s.newCombinedToken, `^sk-compat-meta-[A-Za-z0-9_-]{43}$`},
		{"session token", newSessionToken, `^st_[A-Za-z0-9_-]{43}$`},
		{"management key", func() string { k, _ := newManagementKey(); return k }, `^mk_[a-z0-9]{8}_[A-Za-z0-9_-]{43}$`},
		{"id", newID, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`},
	}
	for _, c := range cases {
		re := regexp.MustCompile(c.re)
		seen := map[string]bool{}
		for range 200 {
			v := c.gen()
			if !re.MatchString(v) {
				t.Fatalf("%s %q does not match %s", c.name, v, c.re)
			}
			if seen[v] {
				t.Fatalf("%s repeated: %q", c.name, v)
			}
			seen[v] = true
		}
	}
	full, prefix := newManagementKey()
	if !strings.HasPrefix(full, prefix+"_") || len(prefix) != len("mk_")+8 {
		t.Errorf("management key %q, prefix %q: prefix must be mk_ + 8 chars and start the key", full, prefix)
	}
}

func TestHashKey(t *testing.T) {
	k := PoolKeyPrefix + randomToken()
	sum := sha256.Sum256([]byte(k))
	if got := HashKey(k); got != hex.EncodeToString(sum[:]) {
		t.Errorf("HashKey = %s, want hex SHA-256", got)
	}
	if HashKey(k) == HashKey(k+"x") {
		t.Error("different keys hash alike")
	}
}

func TestRandomAlnumIsUniformish(t *testing.T) {
	counts := map[rune]int{}
	for range 2000 {
		for _, r := range randomAlnum(8) {
			counts[r]++
		}
	}
	if len(counts) != len(alnum) {
		t.Fatalf("saw %d distinct characters, want %d", len(counts), len(alnum))
	}
	for r, n := range counts {
		// 16000 draws over 36 symbols: about 444 each.
		if n < 300 || n > 600 {
			t.Errorf("character %q drawn %d times", r, n)
		}
	}
}

// cryptoTestStore satisfies Store for tests that never reach it.
type cryptoTestStore struct{ Store }
