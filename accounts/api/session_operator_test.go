package api_test

import (
	"net/http"
	"testing"

	"github.com/timeblock/timeblock/accounts"
)

// GET /api/auth/session says whether the signed-in user is an operator, so
// that the account page shows its Operator tab only to operators: true for
// an operator's session, false for a buyer's, for an operator's management
// key (which never reaches /api/operator/*) and on a site without operators.
func TestSessionSaysOperator(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		plain := e.api
		e.withOperators(nil)
		_, ann := e.user("ann@example.test", "")
		_, ops := e.user(opsEmail, "")
		opsMK := e.call("POST", "/api/keys/management", ops, `{"name":"ci"}`).want(t, 201).object(t, "apiKey", "id", "keyPrefix", "name")["apiKey"].(string)

		for _, c := range []struct {
			name  string
			h     http.Handler
			token string
			want  bool
		}{
			{"operator's session", e.api, ops, true},
			{"buyer's session", e.api, ann, false},
			{"operator's management key", e.api, opsMK, false},
			{"operator's session on a site without operators", plain, ops, false},
		} {
			got := e.serve(c.h, "GET", "/api/auth/session", c.token, "").want(t, 200).object(t, "user", "via", "expiresAt", "operator")
			if got["operator"] != c.want {
				t.Errorf("%s: GET /api/auth/session says operator %v, want %v", c.name, got["operator"], c.want)
			}
		}
	})
}
