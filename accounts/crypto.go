package accounts

// Credentials and their protection at rest: every token the service issues is
// 256 bits, from crypto/rand but for the tag of consumption keys and
// combined-key tokens (keytag.go); tokens that must stay retrievable (those
// two) are sealed with AES-256-GCM under a key derived from the configured
// secret, and every token is found by its SHA-256 hash.

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Token prefixes (SPEC.md §4).
const (
	PoolKeyPrefix       = "sk_pool_"
	CombinedTokenPrefix = "sk-compat-meta-"
	ManagementKeyPrefix = "mk_"
	SessionTokenPrefix  = "st_"
)

// sealInfo binds derived keys to their use, so the same secret could safely
// derive other keys later.
const sealInfo = "timeblock/accounts: sealed credentials v1"

// sealer holds what the secret gives: it encrypts and decrypts retrievable
// credentials, and mints them tagged.
type sealer struct {
	aead cipher.AEAD
	tags *KeyTags
}

// newSealer derives an AES-256-GCM key and the key tag key (keytag.go) from
// secret with HKDF-SHA-256.
func newSealer(secret string) (*sealer, error) {
	if strings.TrimSpace(secret) == "" {
		return nil, errors.New("timeblock: no secret is configured; consumption keys are stored encrypted with it. " +
			"Set one in the global options, e.g. `timeblock { secret {env.TIMEBLOCK_SECRET} }` with " +
			"TIMEBLOCK_SECRET=$(openssl rand -base64 32), and keep it: changing it makes stored keys unreadable")
	}
	key, err := hkdf.Key(sha256.New, []byte(secret), nil, sealInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("deriving the sealing key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("sealing cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("sealing cipher: %w", err)
	}
	tags, err := NewKeyTags(secret)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead, tags: tags}, nil
}

// seal returns nonce || ciphertext || tag.
func (s *sealer) seal(plaintext []byte) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plaintext)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("sealing: %w", err)
	}
	return s.aead.Seal(nonce, nonce, plaintext, nil), nil
}

// open reverses seal. It fails when the record was sealed under another secret.
func (s *sealer) open(sealed []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n+s.aead.Overhead() {
		return nil, errors.New("opening sealed credential: record too short")
	}
	plaintext, err := s.aead.Open(nil, sealed[:n], sealed[n:], nil)
	if err != nil {
		return nil, errors.New("opening sealed credential: it was sealed under a different secret or is corrupt")
	}
	return plaintext, nil
}

// HashKey returns the lookup hash of a full credential (hex SHA-256). Every
// credential carries at least 192 random bits, so a fast unsalted hash is
// enough: there is nothing to brute-force.
func HashKey(full string) string {
	sum := sha256.Sum256([]byte(full))
	return hex.EncodeToString(sum[:])
}

// randomToken returns 256 random bits as 43 unpadded base64url characters.
func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand never fails on supported platforms (Go 1.24+ panics
		// itself rather than return an error).
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// newPoolKey returns a consumption key: sk_pool_ + 43 base64url chars, tagged.
func (s *sealer) newPoolKey() string { return s.tags.Mint(PoolKeyPrefix) }

// newCombinedToken returns a combined-key token: sk-compat-meta- + 43
// base64url chars, tagged.
func (s *sealer) newCombinedToken() string { return s.tags.Mint(CombinedTokenPrefix) }

// newSessionToken returns a session token: st_ + 43 base64url chars.
func newSessionToken() string { return SessionTokenPrefix + randomToken() }

// newManagementKey returns a management key and its displayable prefix:
// mk_ + 8 identifying chars (lower-case letters and digits, so the prefix is
// unambiguous to read back) + _ + 43 base64url chars.
func newManagementKey() (full, prefix string) {
	prefix = ManagementKeyPrefix + randomAlnum(8)
	return prefix + "_" + randomToken(), prefix
}

const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"

// randomAlnum returns n uniformly random characters of alnum.
func randomAlnum(n int) string {
	out := make([]byte, n)
	for i := range out {
		out[i] = alnum[randIntn(len(alnum))]
	}
	return string(out)
}

// randIntn returns a uniform int in [0, n) for small n, by rejection sampling.
func randIntn(n int) int {
	limit := 256 - 256%n
	var b [1]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic(fmt.Sprintf("crypto/rand: %v", err))
		}
		if int(b[0]) < limit {
			return int(b[0]) % n
		}
	}
}

// newID returns a random (version 4) UUID, the id of every stored record.
func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
