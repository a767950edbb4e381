package caddymodule

import (
	"net/http"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/translate"
)

// Refusals that retrying cannot fix say so (x-should-retry: false, which
// Claude Code and both SDK families honour) and carry no Retry-After; full
// lanes stay retryable.
func TestGateRefusalsSayNoRetry(t *testing.T) {
	f := newGateFixture(t, 0)
	cases := []struct {
		name, path, key, body string
		status                int
		kind, code            string
	}{
		{"no key", chatPath, "", chatBody, 401, "authentication_error", "missing_api_key"},
		{"no key, messages", messagesPath, "", messagesBody, 401, "authentication_error", ""},
		{"management key", chatPath, "mk_0123456789abcdef0123456789abcdef", chatBody, 401, "authentication_error", "invalid_api_key"},
		{"unknown key", chatPath, tUnknown, chatBody, 401, "authentication_error", "invalid_api_key"},
		{"unknown key, messages", messagesPath, tUnknown, messagesBody, 401, "authentication_error", ""},
		{"revoked", responsesPath, tRevoked, chatBody, 401, "authentication_error", ""},
		{"model not held", responsesPath, tKey, `{"model":"llama-70b","input":"hi"}`, 404, "not_found_error", "model_not_found"},
		{"model not held, messages", messagesPath, tKey, `{"model":"llama-70b","max_tokens":5,"messages":[]}`, 404, "not_found_error", ""},
		{"window closed", responsesPath, tEvening, chatBody, 429, "usage_limit_reached", "window_closed"},
		{"past due", chatPath, tPastDue, chatBody, 429, "usage_limit_reached", "payment_past_due"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := f.do(t, tc.path, tc.key, tc.body, nil)
			if res.status != tc.status {
				t.Fatalf("%d %s, want %d", res.status, res.body, tc.status)
			}
			if got := res.header.Get("X-Should-Retry"); got != "false" {
				t.Errorf("X-Should-Retry %q, want false", got)
			}
			if got := res.header.Get("Retry-After"); got != "" {
				t.Errorf("Retry-After %q, want none", got)
			}
			if got := res.header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q", got)
			}
			if tc.path == messagesPath {
				if gjson.Get(res.body, "type").Str != "error" || gjson.Get(res.body, "error.type").Str != tc.kind {
					t.Errorf("body %s, want a messages error of type %s", res.body, tc.kind)
				}
				return
			}
			if e := gjson.Get(res.body, "error"); e.Get("type").Str != tc.kind || e.Get("code").Str != tc.code || e.Get("message").Str == "" {
				t.Errorf("body %s, want type %s, code %s and a message", res.body, tc.kind, tc.code)
			}
		})
	}

	// Full lanes: retryable, after a second.
	started, release := make(chan struct{}, 1), make(chan struct{})
	done := make(chan result, 1)
	go func() { done <- f.do(t, chatPath, tKey, chatBody, blockingNext(started, release)) }()
	<-started
	res := f.do(t, responsesPath, tKey, `{"model":"qwen3-32b","input":"hi"}`, nil)
	if res.status != http.StatusTooManyRequests || res.header.Get("Retry-After") != "1" || res.header.Get("X-Should-Retry") != "" {
		t.Errorf("lanes full: %d, Retry-After %q, X-Should-Retry %q", res.status, res.header.Get("Retry-After"), res.header.Get("X-Should-Retry"))
	}
	if e := gjson.Get(res.body, "error"); e.Get("type").Str != "rate_limit_error" || e.Get("code").Str != "rate_limit_exceeded" {
		t.Errorf("lanes full: body %s", res.body)
	}
	close(release)
	<-done
}

// The pre-encoded refusals are what translate.Error writes, in every
// client format.
func TestStaticRefusalBodies(t *testing.T) {
	for _, ref := range []*staticRefusal{&refusalMissingKey, &refusalWrongKeyKind, &refusalInvalidKey} {
		want := &translate.Error{Status: ref.status, Message: gjson.GetBytes(ref.bodies[translate.Chat], "error.message").Str}
		if want.Message == "" {
			t.Fatalf("no message in %s", ref.bodies[translate.Chat])
		}
		for _, f := range translate.ClientFormats() {
			body := ref.bodies[f]
			if !gjson.ValidBytes(body) || gjson.GetBytes(body, "error.message").Str != want.Message {
				t.Errorf("%s: %s", f, body)
			}
		}
		if got := gjson.GetBytes(ref.bodies[translate.Gemini], "error.status").Str; got != "UNAUTHENTICATED" {
			t.Errorf("gemini status %q in %s", got, ref.bodies[translate.Gemini])
		}
	}
}

func TestCodexPromo(t *testing.T) {
	for in, want := range map[string]string{
		"this key's window is closed.": "This key's window is closed",
		"Payment past due: pay":        "Payment past due: pay",
		"":                             "",
		"modèle fermé":                 "",
		"two\nlines":                   "",
	} {
		got, ok := codexPromo(in)
		if got != want || ok != (want != "") {
			t.Errorf("codexPromo(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestUntilText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		10 * time.Second:                  "10s",
		0:                                 "1s",
		90 * time.Second:                  "2m",
		6*time.Hour + 30*time.Minute:      "6h30m",
		14 * time.Hour:                    "14h",
		13*time.Hour + 59*time.Minute + 1: "14h",
	} {
		if got := untilText(d); got != want {
			t.Errorf("untilText(%v) = %q, want %q", d, got, want)
		}
	}
}

// Admitted responses carry the key's lanes, lanes in use and when its
// window closes, in Timeblock's headers and Codex's.
func TestGateStandingHeaders(t *testing.T) {
	f := newGateFixture(t, 0)
	want := map[string]string{
		"X-Timeblock-Lanes":              "1",
		"X-Timeblock-Lanes-In-Use":       "1",
		"X-Timeblock-Window-Closes":      "2026-03-02T16:00:00Z",
		"X-Codex-Primary-Used-Percent":   "18", // 08:00 → 09:30 of 08:00 → 16:00
		"X-Codex-Primary-Window-Minutes": "480",
		"X-Codex-Primary-Reset-At":       "1772467200", // 16:00

	}
	for _, path := range []string{chatPath, messagesPath, responsesPath} {
		res := f.do(t, path, tKey, chatBody, nil)
		if res.status != http.StatusOK {
			t.Fatalf("%s: %d %s", path, res.status, res.body)
		}
		for k, v := range want {
			if got := res.header.Values(k); len(got) != 1 || got[0] != v {
				t.Errorf("%s: %s = %q, want %q", path, k, got, v)
			}
		}
	}

	// Two requests in flight on the combined key's three lanes.
	started, release := make(chan struct{}, 1), make(chan struct{})
	done := make(chan result, 1)
	go func() { done <- f.do(t, chatPath, tCombined, chatBody, blockingNext(started, release)) }()
	<-started
	res := f.do(t, chatPath, tCombined, chatBody, nil)
	if res.header.Get("X-Timeblock-Lanes") != "3" || res.header.Get("X-Timeblock-Lanes-In-Use") != "2" {
		t.Errorf("combined key: lanes %q, in use %q; want 3 and 2", res.header.Get("X-Timeblock-Lanes"), res.header.Get("X-Timeblock-Lanes-In-Use"))
	}
	close(release)
	<-done

	// A key holding every hour, renewing: no window end to tell.
	f.src.put(tUnknown, &accounts.Entitlement{KeyID: "key_all", UserID: "u4", Grants: []accounts.Grant{
		grant("s9", accounts.HourMask(1<<24-1), 2, false),
	}})
	res = f.do(t, chatPath, tUnknown, chatBody, nil)
	if res.status != http.StatusOK {
		t.Fatalf("always-open key: %d %s", res.status, res.body)
	}
	if res.header.Get("X-Timeblock-Lanes") != "2" || res.header.Get("X-Timeblock-Window-Closes") != "" || res.header.Get("X-Codex-Primary-Reset-At") != "" {
		t.Errorf("always open: %v", res.header)
	}
}

// The standing headers cost one allocation (the values' slice) once the
// window is cached.
func TestStandingHeadersAllocs(t *testing.T) {
	f := newGateFixture(t, 0)
	ent := &accounts.Entitlement{KeyID: "key_1", Grants: []accounts.Grant{grant("s1", europe, 1, false)}}
	adm := ent.At(gateNow, "qwen3-32b")
	h := http.Header{}
	f.gate.setStanding(h, ent, &adm, 1, gateNow)
	if n := testing.AllocsPerRun(100, func() { f.gate.setStanding(h, ent, &adm, 1, gateNow) }); n > 1 {
		t.Errorf("setStanding: %v allocations, want at most 1", n)
	}
}
