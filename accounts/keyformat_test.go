package accounts

import (
	"strings"
	"testing"
)

func TestKeyFormat(t *testing.T) {
	tags, err := NewKeyTags("secret")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key                string
		plausible, console bool
	}{
		{tags.Mint(PoolKeyPrefix), true, false},
		{tags.Mint(CombinedTokenPrefix), true, false},
		{PoolKeyPrefix + strings.Repeat("a", 16), true, false},
		{PoolKeyPrefix + strings.Repeat("a", 15), false, false},
		{PoolKeyPrefix + strings.Repeat("a", 129), false, false},
		{PoolKeyPrefix + strings.Repeat("a", 20) + "+", false, false},
		{"sk-" + strings.Repeat("a", 40), false, false},
		{ManagementKeyPrefix + strings.Repeat("a", 40), false, true},
		{SessionTokenPrefix + strings.Repeat("a", 40), false, true},
		{"", false, false},
	} {
		if got := PlausibleKey(c.key); got != c.plausible {
			t.Errorf("PlausibleKey(%q) = %v", c.key, got)
		}
		if got := ConsoleCredential(c.key); got != c.console {
			t.Errorf("ConsoleCredential(%q) = %v", c.key, got)
		}
	}
}
