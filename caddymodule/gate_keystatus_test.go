package caddymodule

import (
	"net/http"
	"testing"

	"github.com/tidwall/gjson"
)

// GET /v1/key answers the key's status from the cached entitlement
// (gateNow is 09:30 UTC, inside europe), whether its window is open or not.
func TestGateKeyStatus(t *testing.T) {
	f := newGateFixture(t, 0)
	cases := []struct {
		name, key string
		hdr       []string
		want      string
	}{
		{"open: closes at the end of the block", tKey, nil,
			`{"data":{"models":["qwen3-32b"],"windowOpen":true,"closesAt":"2026-03-02T16:00:00Z","nextOpensAt":null,"lanes":1,"lanesInUse":0,` +
				`"hours":[0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0]}}`},
		{"closed is an answer, not a refusal", tEvening, nil,
			`{"data":{"models":["qwen3-32b"],"windowOpen":false,"closesAt":null,"nextOpensAt":"2026-03-02T16:00:00Z","lanes":0,"lanesInUse":0,` +
				`"hours":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1]}}`},
		{"combined: lanes add, the boost adds none", tCombined, []string{"x-api-key", tCombined},
			`{"data":{"models":["qwen3-32b"],"windowOpen":true,"closesAt":"2026-03-02T16:00:00Z","nextOpensAt":null,"lanes":3,"lanesInUse":0,` +
				`"hours":[0,0,0,0,0,0,0,0,3,3,3,3,3,3,3,3,0,0,0,0,0,0,0,0]}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.key
			if tc.hdr != nil {
				key = "" // in x-api-key instead of Authorization
			}
			res := f.get(t, http.MethodGet, "/v1/key", key, tc.hdr...)
			if res.status != http.StatusOK || res.header.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %s", res.status, res.body)
			}
			if res.body != tc.want {
				t.Errorf("got  %s\nwant %s", res.body, tc.want)
			}
		})
	}
}

// A request in flight counts in lanesInUse, and the status takes no lane:
// it answers while the key's only lane is busy.
func TestGateKeyStatusCountsLanesInUse(t *testing.T) {
	f := newGateFixture(t, 0)
	started, release := make(chan struct{}, 1), make(chan struct{})
	done := make(chan result, 1)
	go func() { done <- f.do(t, chatPath, tKey, chatBody, blockingNext(started, release)) }()
	<-started
	res := f.get(t, http.MethodGet, "/v1/key", tKey)
	if res.status != http.StatusOK || gjson.Get(res.body, "data.lanesInUse").Int() != 1 || gjson.Get(res.body, "data.lanes").Int() != 1 {
		t.Fatalf("while a request is in flight: %d %s", res.status, res.body)
	}
	// Another key's request is not this key's.
	if res := f.get(t, http.MethodGet, "/v1/key", tCombined); gjson.Get(res.body, "data.lanesInUse").Int() != 0 {
		t.Errorf("another key: %s", res.body)
	}
	if n := f.inUse("key_1"); n != 1 {
		t.Errorf("%d lanes in use after the status, want the request's 1", n)
	}
	close(release)
	if r := <-done; r.status != http.StatusOK {
		t.Fatalf("the request in flight: %d %s", r.status, r.body)
	}
	if res := f.get(t, http.MethodGet, "/v1/key", tKey); gjson.Get(res.body, "data.lanesInUse").Int() != 0 {
		t.Errorf("after the request ended: %s", res.body)
	}
}

// Refusals are the gate's usual ones, in the OpenAI error shape (the
// messages shape under /compat/ or with anthropic-version).
func TestGateKeyStatusRefusals(t *testing.T) {
	f := newGateFixture(t, 0)
	cases := []struct {
		method, key string
		status      int
		kind, msg   string
	}{
		{"GET", "", 401, "authentication_error", "no API key"},
		{"GET", tUnknown, 401, "authentication_error", "invalid API key"},
		{"GET", tRevoked, 401, "authentication_error", "revoked"},
		{"GET", tPastDue, 403, "permission_error", "payment past due"},
		{"GET", "mk_0123456789abcdef0123456789abcdef", 401, "authentication_error", "management keys"},
		{"POST", tKey, 405, "invalid_request_error", "POST is not allowed on /v1/key; use GET or HEAD"},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.msg, func(t *testing.T) {
			res := f.get(t, tc.method, "/v1/key", tc.key)
			if res.status != tc.status {
				t.Fatalf("%d %s, want %d", res.status, res.body, tc.status)
			}
			assertErrorBody(t, chatPath, res.body, tc.kind, tc.msg)
		})
	}
	if res := f.get(t, http.MethodPut, "/v1/key", tKey); res.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("PUT: Allow %q", res.header.Get("Allow"))
	}
}
