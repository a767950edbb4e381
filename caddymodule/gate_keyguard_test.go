package caddymodule

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// fromAddr sets the client address as Caddy's server does.
func fromAddr(r *http.Request, addr string) *http.Request {
	caddyhttp.SetVar(r.Context(), caddyhttp.ClientIPVarKey, addr)
	return r
}

func TestGateThrottlesFailedKeyChecks(t *testing.T) {
	f := newGateFixture(t, 0)
	const limit = 4
	f.gate.KeyFailuresPerMinute = limit
	const attacker, other = "203.0.113.9", "198.51.100.2"

	// Every kind of failure counts: missing, wrong kind, malformed, unknown.
	for i, key := range []string{"", "mk_abcdefgh_secretsecretsecret", "hello", tUnknown} {
		res := f.doRequest(t, fromAddr(f.request(chatPath, key, chatBody), attacker), nil)
		if res.status != http.StatusUnauthorized {
			t.Fatalf("failure %d: status %d, want 401", i, res.status)
		}
	}
	before := f.src.calls.Load()
	for _, path := range []string{chatPath, messagesPath} {
		// Refused before the key is looked at, even a valid one.
		res := f.doRequest(t, fromAddr(f.request(path, tKey, chatBody), attacker), nil)
		if res.status != http.StatusTooManyRequests {
			t.Fatalf("%s after %d failures: status %d %s, want 429", path, limit, res.status, res.body)
		}
		retry, err := strconv.Atoi(res.header.Get("Retry-After"))
		if err != nil || retry < 1 || retry > 60 {
			t.Errorf("%s: Retry-After %q, want 1..60 seconds", path, res.header.Get("Retry-After"))
		}
		assertErrorBody(t, path, res.body, "rate_limit_error", "too many requests with a missing or invalid API key")
	}
	if got := f.src.calls.Load() - before; got != 0 {
		t.Errorf("throttled requests asked the store %d times", got)
	}
	// Another address is not affected.
	if res := f.doRequest(t, fromAddr(f.request(chatPath, tKey, chatBody), other), nil); res.status != http.StatusOK {
		t.Errorf("other address: status %d %s", res.status, res.body)
	}
	// Successes do not count.
	for range 2 * limit {
		if res := f.doRequest(t, fromAddr(f.request(chatPath, tKey, chatBody), other), nil); res.status != http.StatusOK {
			t.Fatalf("valid key: status %d", res.status)
		}
	}
	if s := f.gate.state.guard.throttle.Stats(); s.Throttled != 2 || s.Failures != limit {
		t.Errorf("throttle stats = %+v, want 2 throttled, %d failures", s, limit)
	}

	// Off: failures never lead to 429.
	f.gate.KeyFailuresPerMinute = -1
	for range 3 * limit {
		if res := f.doRequest(t, fromAddr(f.request(chatPath, tUnknown, chatBody), attacker), nil); res.status != http.StatusUnauthorized {
			t.Fatalf("throttle off: status %d", res.status)
		}
	}
}

func TestGateThrottleDefault(t *testing.T) {
	if got := new(Gate).keyFailureLimit(); got != defaultKeyFailuresPerMinute {
		t.Errorf("default limit %d, want %d", got, defaultKeyFailuresPerMinute)
	}
	for in, want := range map[string]int{"10": 10, "0": -1} {
		g := new(Gate)
		if err := g.UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock_gate {\n key_failures_per_minute " + in + "\n}")); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if g.KeyFailuresPerMinute != want {
			t.Errorf("key_failures_per_minute %s → %d, want %d", in, g.KeyFailuresPerMinute, want)
		}
	}
	if (&Gate{KeyFailuresPerMinute: -1}).keyFailureLimit() != 0 {
		t.Error("0 in the Caddyfile does not turn the throttle off")
	}
	for _, bad := range []string{"key_failures_per_minute", "key_failures_per_minute -3", "key_failures_per_minute many", "key_failures_per_minute 1 2"} {
		if err := new(Gate).UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock_gate {\n " + bad + "\n}")); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestAccountsCaddyfileKeyFailures(t *testing.T) {
	a := new(Accounts)
	if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock_accounts {\n key_failures_per_minute 0\n}")); err != nil || a.KeyFailuresPerMinute != -1 {
		t.Fatalf("key_failures_per_minute 0: %d, %v; want -1 (off)", a.KeyFailuresPerMinute, err)
	}
	if err := new(Accounts).UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock_accounts")); err != nil {
		t.Fatalf("no block: %v", err)
	}
	if err := new(Accounts).UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock_accounts {\n lanes 3\n}")); err == nil {
		t.Fatal("unknown option parsed")
	}
}
