package billing

import (
	"testing"
	"time"
)

// Every charge key the package builds parses back to its kind and
// subscription; anything else is no charge key.
func TestChargeKeysRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		key, kind, sub, rest string
	}{
		{SubscribeKey("s1"), ChargeSubscribe, "s1", ""},
		{RenewalKey("s2", at), ChargeRenewal, "s2", "2026-11-26T08:00:00Z"},
		{RetryKey("s3", "c1", "pm_1"), ChargeRetry, "s3", "c1:pm_1"},
		{RefundKey(SubscribeKey("s1")), "", "", ""},
		{CancelKey(SubscribeKey("s1")), "", "", ""},
		{"", "", "", ""},
		{"subscribe", ChargeSubscribe, "", ""},
	} {
		kind, sub, rest := ParseKey(tc.key)
		if kind != tc.kind || sub != tc.sub || rest != tc.rest || ChargeKind(tc.key) != tc.kind {
			t.Errorf("ParseKey(%q) = %q %q %q, want %q %q %q", tc.key, kind, sub, rest, tc.kind, tc.sub, tc.rest)
		}
	}
}
