package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/embedded"
)

// Requests no endpoint takes answer in the envelope, as JSON: 404 for an
// unknown path, 405 with Allow for a known path and the wrong method, and
// neither needs credentials.
func TestUnknownEndpoints(t *testing.T) {
	st, err := embedded.Open(t.TempDir() + "/t.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := newHTTPEnv(t, st, 1<<10)
	_, tok := e.user("ada@example.com", "")

	for _, tc := range []struct {
		method, path, token string
		status              int
		allow, fragment     string
	}{
		{"GET", "/api", "", 404, "", "no such endpoint: GET /api "},
		{"GET", "/api/", tok, 404, "", "no such endpoint"},
		{"GET", "/api/nope", tok, 404, "", "/api/keys, /api/keys/management, /api/meta-keys"},
		{"GET", "/api/keys/", tok, 404, "", "no such endpoint"},
		{"POST", "/api/keys", tok, 405, "GET, HEAD", "method POST is not allowed on /api/keys; use GET or HEAD"},
		{"PATCH", "/api/meta-keys", "", 405, "GET, HEAD, POST", "use GET or HEAD or POST"},
		{"POST", "/api/pools/disclosure", "", 405, "GET, HEAD", "not allowed"},
		{"GET", "/api/pools/alpha/subscribe", tok, 405, "POST", "use POST"},
		{"PUT", "/api/billing/status", tok, 405, "GET, HEAD", "use GET"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			e.call(tc.method, tc.path, tc.token, "").want(t, tc.status, tc.fragment)
			if tc.allow != "" {
				rec := httptest.NewRecorder()
				e.api.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
				if got := rec.Header().Get("Allow"); got != tc.allow {
					t.Errorf("Allow = %q, want %q", got, tc.allow)
				}
			}
		})
	}
	// Known endpoints are untouched: still authenticated, still routed.
	e.call("GET", "/api/keys", "", "").want(t, http.StatusUnauthorized)
	e.call("GET", "/api/pools/disclosure", "", "").want(t, http.StatusOK)
	e.call("GET", "/api/keys", tok, "").want(t, http.StatusOK)
}

func TestBadJSONSaysWhere(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		_, tok := e.user("ada@example.com", "")
		e.call("POST", "/api/keys/management", tok, "{\n  \"name\": \"ci\",\n  oops\n}").want(t, 400, "line 3, column 3")
	})
}
