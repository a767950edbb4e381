package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

var keyRowFields = []string{"id", "name", "keyPlan", "keyType", "apiKey", "isActive", "subscriptionId",
	"subscriptionStatus", "subscriptionExpiresAt", "createdAt", "lastUsedAt"}

func TestKeysHTTP(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)
		uid, tok := e.user("ada@example.com", "")
		_, eveTok := e.user("eve@example.com", "")
		alpha := e.pool("alpha", accounts.PoolActive, 10, false)
		sub := e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockEurope)
		latest := e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockAsia)

		e.call("GET", "/api/keys", tok, "").want(t, 200)
		if rows := e.call("GET", "/api/keys", tok, "").array(t); len(rows) != 0 {
			t.Errorf("fresh user lists %d keys", len(rows))
		}

		// Create: empty body = most recent active subscription.
		created := e.call("POST", "/api/keys/subscription", tok, "").want(t, 201).object(t, keyRowFields...)
		if created["subscriptionId"] != latest.ID || created["isActive"] != true ||
			!regexp.MustCompile(`^sk_pool_[A-Za-z0-9_-]{43}$`).MatchString(created["apiKey"].(string)) {
			t.Errorf("created = %v", created)
		}
		// With subscriptionId and name (a moment later: lists are in creation order).
		e.advance(time.Second)
		named := e.call("POST", "/api/keys/subscription", tok, fmt.Sprintf(`{"subscriptionId":%q,"name":"laptop"}`, sub.ID)).
			want(t, 201).object(t, keyRowFields...)
		if named["name"] != "laptop" || named["subscriptionId"] != sub.ID {
			t.Errorf("named = %v", named)
		}

		rows := e.call("GET", "/api/keys", tok, "").want(t, 200).array(t)
		if len(rows) != 2 {
			t.Fatalf("%d rows", len(rows))
		}
		row := rows[1]
		exactFields(t, row, keyRowFields...)
		if row["id"] != named["id"] || row["name"] != "laptop" || row["keyPlan"] != "pool" || row["keyType"] != "subscription" ||
			row["apiKey"] != named["apiKey"] || row["isActive"] != true || row["subscriptionId"] != sub.ID ||
			row["subscriptionStatus"] != "active" || row["lastUsedAt"] != nil {
			t.Errorf("row = %v", row)
		}
		if got := asTime(t, row["subscriptionExpiresAt"]); !got.Equal(sub.CurrentPeriodEnd) {
			t.Errorf("subscriptionExpiresAt = %v, want %v", got, sub.CurrentPeriodEnd)
		}
		if got := asTime(t, row["createdAt"]); got.IsZero() {
			t.Errorf("createdAt = %v", got)
		}

		// The list holds the full key; the store holds only ciphertext and hash.
		apiKey := row["apiKey"].(string)
		raw := dumpStore(t, st)
		for _, secret := range []string{apiKey, strings.TrimPrefix(apiKey, "sk_pool_"), created["apiKey"].(string), tok} {
			if bytes.Contains(raw, []byte(secret)) {
				t.Errorf("the store holds %q in the clear", secret)
			}
		}
		if !bytes.Contains(raw, []byte(accounts.HashKey(apiKey))) {
			t.Error("the store does not hold the key's hash (is the dump complete?)")
		}

		// Errors on create.
		e.call("POST", "/api/keys/subscription", tok, fmt.Sprintf(`{"subscriptionId":%q}`, sub.ID)).want(t, 409, "already has a key")
		e.call("POST", "/api/keys/subscription", eveTok, fmt.Sprintf(`{"subscriptionId":%q}`, sub.ID)).want(t, 404, "not found")
		e.call("POST", "/api/keys/subscription", eveTok, "{}").want(t, 404, "no active subscription")
		e.call("POST", "/api/keys/subscription", tok, `{"subscriptionId":5}`).want(t, 400, "subscriptionId", "string")
		e.call("POST", "/api/keys/subscription", tok, `{"subscriptionId":`).want(t, 400, "not valid JSON")
		e.call("POST", "/api/keys/subscription", tok, `{"name":"`+strings.Repeat("x", 2000)+`"}`).want(t, 413)
		pending := e.sub(uid, alpha, accounts.SubPendingKey, 1, accounts.BlockAmericas)
		e.call("POST", "/api/keys/subscription", tok, fmt.Sprintf(`{"subscriptionId":%q}`, pending.ID)).want(t, 409, "pending_key")

		// Update returns the row, same shape as GET.
		path := "/api/keys/" + named["id"].(string)
		upd := e.call("PUT", path, tok, `{"name":"desk","isActive":false}`).want(t, 200).object(t, keyRowFields...)
		if upd["name"] != "desk" || upd["isActive"] != false || upd["apiKey"] != named["apiKey"] {
			t.Errorf("updated = %v", upd)
		}
		upd = e.call("PUT", path, tok, `{"isActive":true}`).want(t, 200).object(t, keyRowFields...)
		if upd["name"] != "desk" || upd["isActive"] != true {
			t.Errorf("reactivated = %v", upd)
		}
		e.call("PUT", path, tok, `{}`).want(t, 400, "nothing to update")
		e.call("PUT", path, tok, ``).want(t, 400, "empty")
		e.call("PUT", path, tok, `{"isActive":"no"}`).want(t, 400, "isActive", "bool")
		e.call("PUT", path, tok, `{"name":["a"]}`).want(t, 400, "name")
		e.call("PUT", path, tok, `[`).want(t, 400)
		e.call("PUT", path, tok, `{"name":"`+strings.Repeat("x", 2000)+`"}`).want(t, 413)
		e.call("PUT", path, eveTok, `{"name":"mine"}`).want(t, 404, "not found")
		e.call("PUT", "/api/keys/no-such-key", tok, `{"name":"x"}`).want(t, 404)

		// Delete.
		e.call("DELETE", path, eveTok, "").want(t, 404)
		del := e.call("DELETE", path, tok, "").want(t, 200).object(t, "deleted")
		if del["deleted"] != true {
			t.Errorf("delete = %v", del)
		}
		e.call("DELETE", path, tok, "").want(t, 404)
		if rows := e.call("GET", "/api/keys", tok, "").array(t); len(rows) != 1 || rows[0]["id"] != created["id"] {
			t.Errorf("after delete: %v", rows)
		}
	})
}

// TestKeyEndpointsRefuseBadCredentials covers every endpoint of the key side
// with each kind of credential that must be refused.
func TestKeyEndpointsRefuseBadCredentials(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)
		uid, tok := e.user("ada@example.com", "")
		alpha := e.pool("alpha", accounts.PoolActive, 10, false)
		e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockEurope)
		key := e.call("POST", "/api/keys/subscription", tok, "").want(t, 201).object(t, keyRowFields...)["apiKey"].(string)
		a := e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockAsia)
		b := e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockAsia)
		combined := e.call("POST", "/api/meta-keys", tok, fmt.Sprintf(`{"pledgeIds":[%q,%q]}`, a.ID, b.ID)).want(t, 201).
			object(t, "id", "token", "label", "createdAt")["token"].(string)
		mk := e.call("POST", "/api/keys/management", tok, `{"name":"gone"}`).want(t, 201).object(t, "id", "name", "keyPrefix", "apiKey")
		e.call("DELETE", "/api/keys/management/"+mk["id"].(string), tok, "").want(t, 200)
		expiring := e.session(uid)
		e.advance(31 * 24 * time.Hour) // every session issued so far has expired
		fresh := e.session(uid)

		endpoints := []struct{ method, path, body string }{
			{"GET", "/api/keys", ""},
			{"POST", "/api/keys/subscription", "{}"},
			{"PUT", "/api/keys/x", `{"name":"y"}`},
			{"DELETE", "/api/keys/x", ""},
			{"GET", "/api/keys/management", ""},
			{"POST", "/api/keys/management", `{"name":"y"}`},
			{"DELETE", "/api/keys/management/x", ""},
			{"GET", "/api/meta-keys", ""},
			{"POST", "/api/meta-keys", `{"pledgeIds":["a","b"]}`},
			{"PATCH", "/api/meta-keys/x/member-roles", `{"roles":{}}`},
			{"PUT", "/api/meta-keys/x/members", `{"pledgeIds":["a","b"]}`},
			{"PATCH", "/api/meta-keys/x", `{"label":"y"}`},
			{"DELETE", "/api/meta-keys/x", ""},
		}
		creds := []struct{ name, token, fragment string }{
			{"none", "", "missing credentials"},
			{"unknown session", "st_" + strings.Repeat("Z", 43), "unknown session"},
			{"expired session", expiring, "session expired"},
			{"deleted management key", mk["apiKey"].(string), "management key"},
			{"consumption key", key, "for inference only"},
			{"combined key", combined, "for inference only"},
			{"garbage", "Basic abc", "unknown credentials"},
		}
		for _, ep := range endpoints {
			for _, c := range creds {
				t.Run(ep.method+" "+ep.path+" "+c.name, func(t *testing.T) {
					e.call(ep.method, ep.path, c.token, ep.body).want(t, http.StatusUnauthorized, c.fragment)
				})
			}
		}
		// A non-Bearer Authorization header counts as missing.
		req := httptest.NewRequest("GET", "/api/keys", nil)
		req.Header.Set("Authorization", "Basic "+fresh)
		rec := httptest.NewRecorder()
		e.api.ServeHTTP(rec, req)
		if rec.Code != 401 || !strings.Contains(rec.Body.String(), "missing credentials") {
			t.Errorf("Basic auth: %d %s", rec.Code, rec.Body)
		}
		// The fresh session passes the same gate.
		e.call("GET", "/api/keys", fresh, "").want(t, 200)
	})
}
