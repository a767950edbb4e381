package api_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/timeblock/timeblock/accounts"
)

var managementRowFields = []string{"id", "name", "keyPrefix", "isActive", "lastUsedAt", "createdAt"}

func TestManagementKeysHTTP(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)
		_, tok := e.user("ada@example.com", "")
		_, eveTok := e.user("eve@example.com", "")

		if rows := e.call("GET", "/api/keys/management", tok, "").want(t, 200).array(t); len(rows) != 0 {
			t.Errorf("fresh user lists %d management keys", len(rows))
		}
		created := e.call("POST", "/api/keys/management", tok, `{"name":"ci"}`).want(t, 201).
			object(t, "id", "name", "keyPrefix", "apiKey")
		prefix, full := created["keyPrefix"].(string), created["apiKey"].(string)
		if created["name"] != "ci" || !regexp.MustCompile(`^mk_[a-z0-9]{8}$`).MatchString(prefix) ||
			!strings.HasPrefix(full, prefix+"_") || len(full) != len(prefix)+1+43 {
			t.Errorf("created = %v", created)
		}

		// The management key authenticates /api/* for its user.
		e.call("GET", "/api/keys", full, "").want(t, 200)
		e.call("GET", "/api/meta-keys", full, "").want(t, 200)

		rows := e.call("GET", "/api/keys/management", full, "").want(t, 200).array(t)
		if len(rows) != 1 {
			t.Fatalf("%d rows", len(rows))
		}
		exactFields(t, rows[0], managementRowFields...)
		if r := rows[0]; r["id"] != created["id"] || r["name"] != "ci" || r["keyPrefix"] != prefix || r["isActive"] != true || r["lastUsedAt"] != nil {
			t.Errorf("row = %v", r)
		}
		if got := asTime(t, rows[0]["createdAt"]); !got.Equal(envStart) {
			t.Errorf("createdAt = %v", got)
		}
		// Uses are recorded in batches: after a flush, lastUsedAt is set.
		if err := e.svc.FlushUsage(e.ctx); err != nil {
			t.Fatal(err)
		}
		rows = e.call("GET", "/api/keys/management", tok, "").array(t)
		if rows[0]["lastUsedAt"] == nil || !asTime(t, rows[0]["lastUsedAt"]).Equal(envStart) {
			t.Errorf("lastUsedAt after flush = %v", rows[0]["lastUsedAt"])
		}

		// Stored only as a hash.
		raw := dumpStore(t, st)
		if bytes.Contains(raw, []byte(full)) || bytes.Contains(raw, []byte(strings.TrimPrefix(full, prefix+"_"))) {
			t.Error("the store holds the management key in the clear")
		}
		if !bytes.Contains(raw, []byte(accounts.HashKey(full))) {
			t.Error("the store does not hold the management key's hash (is the dump complete?)")
		}

		e.call("POST", "/api/keys/management", tok, `{}`).want(t, 400, "name is required")
		e.call("POST", "/api/keys/management", tok, `{"name":"  "}`).want(t, 400, "name is required")
		e.call("POST", "/api/keys/management", tok, ``).want(t, 400, "empty")
		e.call("POST", "/api/keys/management", tok, `{"name":7}`).want(t, 400, "name", "string")
		e.call("POST", "/api/keys/management", tok, `{"name":"x"`).want(t, 400, "not valid JSON")
		e.call("POST", "/api/keys/management", tok, `{"name":"`+strings.Repeat("x", 2000)+`"}`).want(t, 413)

		path := "/api/keys/management/" + created["id"].(string)
		e.call("DELETE", path, eveTok, "").want(t, 404, "not found")
		e.call("DELETE", "/api/keys/management/nope", tok, "").want(t, 404)
		del := e.call("DELETE", path, tok, "").want(t, 200).object(t, "deleted")
		if del["deleted"] != true {
			t.Errorf("delete = %v", del)
		}
		e.call("GET", "/api/keys", full, "").want(t, 401)
		e.call("DELETE", path, tok, "").want(t, 404)
	})
}
