package accounts

// The shapes of credentials, as their prefixes tell them apart (SPEC.md §4):
// what the gate may refuse from the text of a key alone, before any store
// read or tag check.

import "strings"

// inferenceKeyPrefix returns the prefix of a consumption key or a
// combined-key token, or "" when key has neither.
func inferenceKeyPrefix(key string) string {
	switch {
	case strings.HasPrefix(key, PoolKeyPrefix):
		return PoolKeyPrefix
	case strings.HasPrefix(key, CombinedTokenPrefix):
		return CombinedTokenPrefix
	}
	return ""
}

// PlausibleKey tells whether key has the shape of a consumption key or a
// combined-key token: its prefix, then 16 to 128 base64url characters. It
// takes more than Mint makes (keys from before tags, other lengths), so
// that only garbage is refused without a store lookup.
func PlausibleKey(key string) bool {
	prefix := inferenceKeyPrefix(key)
	if prefix == "" {
		return false
	}
	rest := key[len(prefix):]
	if len(rest) < 16 || len(rest) > 128 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ConsoleCredential tells whether key is a management key or a session
// token: a credential for the console and its API, never for inference.
func ConsoleCredential(key string) bool {
	return strings.HasPrefix(key, ManagementKeyPrefix) || strings.HasPrefix(key, SessionTokenPrefix)
}
