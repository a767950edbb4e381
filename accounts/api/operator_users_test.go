package api_test

import (
	"strings"
	"testing"

	"github.com/timeblock/timeblock/accounts"
)

func TestOperatorUsers(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)

		m := e.operator("POST", "/timeblock/users", `{"email":" Ada@Example.com ","name":"Ada"}`).
			want(t, 201).object(t, "id", "email", "sessionToken")
		id, token := m["id"].(string), m["sessionToken"].(string)
		if m["email"] != "ada@example.com" || id == "" || !strings.HasPrefix(token, "st_") || len(token) != 46 {
			t.Errorf("created user = %v", m)
		}
		// The session works on /api.
		e.call("GET", "/api/keys", token, "").want(t, 200)

		// name is optional.
		e.operator("POST", "/timeblock/users", `{"email":"bob@example.com"}`).want(t, 201)

		e.operator("POST", "/timeblock/users", `{"email":"ADA@example.com"}`).want(t, 409, "already exists")
		e.operator("POST", "/timeblock/users", `{"email":"nope"}`).want(t, 400, "not a valid address")
		e.operator("POST", "/timeblock/users", `{"name":"no email"}`).want(t, 400, "email is required")
		e.operator("POST", "/timeblock/users", `{"email":`).want(t, 400, "not valid JSON")
		e.operator("POST", "/timeblock/users", `{"email":42}`).want(t, 400, `"email"`, "string")
		e.operator("POST", "/timeblock/users", ``).want(t, 400, "empty")
		e.operator("POST", "/timeblock/users", `{"email":"big@example.com","name":"`+strings.Repeat("x", 2000)+`"}`).want(t, 413)

		s := e.operator("POST", "/timeblock/users/"+id+"/sessions", "").want(t, 201).object(t, "sessionToken")
		second := s["sessionToken"].(string)
		if !strings.HasPrefix(second, "st_") || second == token {
			t.Errorf("second session %q", second)
		}
		e.call("GET", "/api/keys", second, "").want(t, 200)
		e.operator("POST", "/timeblock/users/no-such-user/sessions", "").want(t, 404, "not found")
		e.operator("GET", "/timeblock/users", "").want(t, 405, "use POST")
	})
}
