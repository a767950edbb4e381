package accounts

// Key tags. A new consumption key or combined-key token is 24 random bytes and
// an 8-byte tag, HMAC-SHA-256 of prefix || random under a key derived from the
// configured secret, in the same 43 base64url characters as before. Every node
// shares the secret, so any node can tell a key this service issued from a
// guess without a store read, including a key made a moment ago on another
// node, which that node's filter of live keys has not heard of yet.

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"
	"unsafe"
)

// tagInfo makes the tag key distinct from the sealing key (sealInfo), though
// both derive from the one secret.
const tagInfo = "timeblock/accounts: key tags v1"

const (
	keyBytes    = 32                   // a token's decoded size
	tagBytes    = 8                    // the tag: 64 bits, enough that forging one is guessing
	randomBytes = keyBytes - tagBytes  // 192 random bits still make a key unguessable
	tokenChars  = (keyBytes*8 + 5) / 6 // 43 unpadded base64url characters
)

// strictB64 refuses non-zero padding bits, so one tagged key has exactly one
// spelling: the variants a lax decoder accepts would pass the tag check and
// each cost a store read.
var strictB64 = base64.RawURLEncoding.Strict()

// KeyTags mints tagged keys and checks tags. It is safe for concurrent use;
// Valid allocates nothing.
type KeyTags struct {
	macs sync.Pool // of *tagScratch
}

// tagScratch is one HMAC state and its buffers, reused so that a check
// allocates nothing (an HMAC resets to its keyed state without rehashing
// the key).
type tagScratch struct {
	mac hash.Hash
	raw [keyBytes]byte
	sum [sha256.Size]byte
}

// NewKeyTags derives the tag key from secret with HKDF-SHA-256.
func NewKeyTags(secret string) (*KeyTags, error) {
	if strings.TrimSpace(secret) == "" {
		return nil, errors.New("key tags: no secret")
	}
	key, err := hkdf.Key(sha256.New, []byte(secret), nil, tagInfo, sha256.Size)
	if err != nil {
		return nil, fmt.Errorf("deriving the key tag key: %w", err)
	}
	t := &KeyTags{}
	t.macs.New = func() any { return &tagScratch{mac: hmac.New(sha256.New, key)} }
	return t, nil
}

// Mint returns a new tagged token: prefix (PoolKeyPrefix or
// CombinedTokenPrefix) + 43 base64url characters.
func (t *KeyTags) Mint(prefix string) string {
	s := t.get()
	defer t.put(s)
	if _, err := rand.Read(s.raw[:randomBytes]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never on supported platforms
	}
	copy(s.raw[randomBytes:], s.tag(prefix))
	return prefix + base64.RawURLEncoding.EncodeToString(s.raw[:])
}

// Valid reports whether key is a consumption key or combined-key token
// tagged under this secret. Keys minted before tags existed are 256 random
// bits and fail, as a guess does (but for 1 in 2^64). The tag is compared in
// constant time.
func (t *KeyTags) Valid(key string) bool {
	prefix := inferenceKeyPrefix(key)
	if prefix == "" {
		return false
	}
	enc := key[len(prefix):]
	if len(enc) != tokenChars {
		return false
	}
	s := t.get()
	defer t.put(s)
	// Decoded in place: []byte(enc) would allocate a copy of the key.
	if n, err := strictB64.Decode(s.raw[:], unsafe.Slice(unsafe.StringData(enc), len(enc))); err != nil || n != keyBytes {
		return false
	}
	return hmac.Equal(s.tag(prefix), s.raw[randomBytes:])
}

func (t *KeyTags) get() *tagScratch { return t.macs.Get().(*tagScratch) }

// put returns s to the pool without the key it held.
func (t *KeyTags) put(s *tagScratch) {
	clear(s.raw[:])
	t.macs.Put(s)
}

// tag returns the first tagBytes of HMAC(prefix || s.raw[:randomBytes]),
// in s.sum.
func (s *tagScratch) tag(prefix string) []byte {
	s.mac.Reset()
	s.mac.Write(unsafe.Slice(unsafe.StringData(prefix), len(prefix)))
	s.mac.Write(s.raw[:randomBytes])
	return s.mac.Sum(s.sum[:0])[:tagBytes]
}

// ValidKeyTag reports whether key carries a tag this service's secret made
// (KeyTags.Valid). The gate's cache asks it when the filter of live keys
// does not know a key, so that a key made on another node a moment ago is
// looked up instead of refused.
func (s *Service) ValidKeyTag(key string) bool { return s.sealer.tags.Valid(key) }
