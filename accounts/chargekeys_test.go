package accounts

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
		{chargeKeySubscribe("s1"), ChargeSubscribe, "s1", ""},
		{chargeKeyRenewal("s2", at), ChargeRenewal, "s2", "2026-11-26T08:00:00Z"},
		{chargeKeyRetry("s3", "c1", "pm_1"), ChargeRetry, "s3", "c1:pm_1"},
		{RefundKey(chargeKeySubscribe("s1")), "", "", ""},
		{CancelKey(chargeKeySubscribe("s1")), "", "", ""},
		{"", "", "", ""},
		{"subscribe", ChargeSubscribe, "", ""},
	} {
		kind, sub, rest := parseChargeKey(tc.key)
		if kind != tc.kind || sub != tc.sub || rest != tc.rest || ChargeKind(tc.key) != tc.kind {
			t.Errorf("parseChargeKey(%q) = %q %q %q, want %q %q %q", tc.key, kind, sub, rest, tc.kind, tc.sub, tc.rest)
		}
	}
}
