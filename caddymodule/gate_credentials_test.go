package caddymodule

import (
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// The gate removes the client's credentials before it calls next, on every
// route it lets through (inference and token counts alike), wherever the key
// came: the model server behind reverse_proxy never sees the user's key.
func TestGateStripsCredentials(t *testing.T) {
	f := newGateFixture(t, 0)
	bodies := map[string]string{
		chatPath:        chatBody,
		messagesPath:    messagesBody,
		"/v1/responses": `{"model":"qwen3-32b","input":"hi","max_output_tokens":100}`,
		countPath:       messagesBody,
	}
	for path, body := range bodies {
		for _, tc := range []struct {
			name    string
			headers []string
		}{
			{"x-api-key", []string{"X-Api-Key", tKey}},
			{"bearer", []string{"Authorization", "Bearer " + tKey}},
			{"combined key", []string{"Authorization", "Bearer " + tCombined}},
			// The key in x-api-key and something else in Authorization:
			// Authorization goes too, whatever it holds.
			{"both", []string{"X-Api-Key", tKey, "Authorization", "Basic dXNlcjpwYXNz"}},
		} {
			t.Run(strings.TrimPrefix(path, "/")+"/"+tc.name, func(t *testing.T) {
				r := f.request(path, "", body)
				for i := 0; i < len(tc.headers); i += 2 {
					r.Header.Set(tc.headers[i], tc.headers[i+1])
				}
				r.Header.Set("X-Other", "kept")
				var got http.Header
				next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
					got = r.Header.Clone()
					w.WriteHeader(http.StatusOK)
					return nil
				})
				res := f.doRequest(t, r, next)
				if res.status != http.StatusOK || got == nil {
					t.Fatalf("not admitted: %d %s", res.status, res.body)
				}
				for _, h := range []string{"X-Api-Key", "Authorization"} {
					if v, ok := got[h]; ok {
						t.Errorf("next saw %s: %q", h, v)
					}
				}
				for k, v := range got {
					if s := strings.Join(v, " "); strings.Contains(s, tKey) || strings.Contains(s, tCombined) {
						t.Errorf("next saw the key in %s", k)
					}
				}
				if got.Get("X-Other") != "kept" {
					t.Errorf("other headers must stay: %v", got)
				}
			})
		}
	}
}
