package api_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/api"
	"github.com/timeblock/timeblock/accounts/billing"
)

// The operator revokes a buyer's consumption key: the buyer's key list
// says isActive false, the key admits nothing, the gates are told, the
// action is audited once; again is a no-op 200, an unknown key a 404.
func TestOperatorRevokesKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		e.withOperators(nil)
		e.pool("alpha", accounts.PoolActive, 3, false)
		annID, ann := e.user("ann@example.test", billing.TestCardVisa)
		_, ops := e.user(opsEmail, "")
		sub := e.call("POST", "/api/pools/alpha/subscribe", ann, `{"blocks":["europe"]}`).want(t, 201).object(t, subscribeFields...)["id"].(string)
		created := dataOf(t, e.call("POST", "/api/keys/subscription", ann, fmt.Sprintf(`{"subscriptionId":%q}`, sub)).want(t, 201))
		keyID, full := created["id"].(string), created["apiKey"].(string)

		var mu sync.Mutex
		var told []string
		cancel := st.OnInvalidation(func(userID string) { mu.Lock(); told = append(told, userID); mu.Unlock() })
		defer cancel()

		e.call("POST", "/api/operator/keys/nope/revoke", ops, "").want(t, 404, "no key nope")
		hdr := map[string]string{"Authorization": "Bearer " + ops, api.IdempotencyHeader: "op-revoke-1"}
		r1 := do(e.api, "POST", "/api/operator/keys/"+keyID+"/revoke", "", hdr)
		r2 := do(e.api, "POST", "/api/operator/keys/"+keyID+"/revoke", "", hdr)
		if r1.Code != 200 || r2.Code != 200 || r2.Header().Get(api.ReplayHeader) != "true" || r1.Body.String() != r2.Body.String() {
			t.Fatalf("revoke under one key: %d %s / %d %s", r1.Code, r1.Body, r2.Code, r2.Body)
		}
		again := e.call("POST", "/api/operator/keys/"+keyID+"/revoke", ops, "").want(t, 200).object(t, "keyId", "subscriptionId", "isActive", "changed")
		if again["changed"] != false || again["isActive"] != false || again["subscriptionId"] != sub {
			t.Errorf("revoking a revoked key: %v, want a no-op", again)
		}

		for _, k := range e.call("GET", "/api/keys", ann, "").want(t, 200).array(t) {
			if k["id"] == keyID && k["isActive"] != false {
				t.Errorf("the buyer's key list after the revocation: %v", k)
			}
		}
		for _, row := range e.call("GET", "/api/operator/subscriptions?email=ann@example.test", ops, "").want(t, 200).array(t) {
			if row["id"] == sub && (row["keyId"] != keyID || row["keyActive"] != false || row["status"] != "active") {
				t.Errorf("the operator's row after the revocation: %v, want the key inactive, the subscription active", row)
			}
		}
		ent, err := e.svc.Entitlement(e.ctx, accounts.HashKey(full))
		if err != nil || ent.Denied == "" {
			t.Errorf("entitlement of the revoked key: %+v, %v; want denied", ent, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			n := len(told)
			mu.Unlock()
			if n > 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		mu.Lock()
		if len(told) == 0 || told[0] != annID {
			t.Errorf("invalidations published: %v, want ann's", told)
		}
		mu.Unlock()

		var audit []string
		for _, row := range e.call("GET", "/api/operator/audit", ops, "").want(t, 200).array(t) {
			audit = append(audit, fmt.Sprintf("%s %s %s", row["actor"], row["action"], row["target"]))
		}
		if want := []string{opsEmail + " key.revoke " + keyID}; fmt.Sprint(audit) != fmt.Sprint(want) {
			t.Errorf("audit log %v, want %v (one row: the second call did nothing)", audit, want)
		}
	})
}

// servedPerHour counts the requests admitted through the pool's keys in
// each UTC hour of today, from the hourly usage rows: not yesterday's, not
// refusals, not another pool's.
func TestOperatorPoolsServedPerHour(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		e.withOperators(nil)
		e.setClock(time.Date(2034, 7, 2, 15, 30, 0, 0, time.UTC))
		e.pool("alpha", accounts.PoolActive, 3, false)
		e.pool("beta", accounts.PoolActive, 3, false)
		_, ann := e.user("ann@example.test", billing.TestCardVisa)
		_, ops := e.user(opsEmail, "")
		keyOf := func(pool, body string) string {
			sub := e.call("POST", "/api/pools/"+pool+"/subscribe", ann, body).want(t, 201).object(t, subscribeFields...)["id"].(string)
			k := dataOf(t, e.call("POST", "/api/keys/subscription", ann, fmt.Sprintf(`{"subscriptionId":%q}`, sub)).want(t, 201))
			return k["id"].(string)
		}
		a1, a2 := keyOf("alpha", `{"blocks":["europe"]}`), keyOf("alpha", `{"blocks":["asia"]}`)
		b1 := keyOf("beta", `{"blocks":["europe"]}`)
		day := time.Date(2034, 7, 2, 0, 0, 0, 0, time.UTC)
		rows := []accounts.KeyUsage{
			{KeyID: a1, Hour: day.Add(9 * time.Hour), Admitted: 3, Refused: map[string]int64{"lanes_full": 4}},
			{KeyID: a2, Hour: day.Add(9 * time.Hour), Admitted: 2},
			{KeyID: a2, Hour: day.Add(15 * time.Hour), Admitted: 5},
			{KeyID: a1, Hour: day.Add(-time.Hour), Admitted: 7}, // yesterday
			{KeyID: b1, Hour: day.Add(9 * time.Hour), Admitted: 11},
		}
		if err := accounts.AddKeyUsage(e.ctx, st, rows); err != nil {
			t.Fatal(err)
		}
		// A revoked key's requests were served all the same.
		e.call("POST", "/api/operator/keys/"+a2+"/revoke", ops, "").want(t, 200)

		var want [24]float64
		want[9], want[15] = 5, 5
		var wantBeta [24]float64
		wantBeta[9] = 11
		for _, p := range e.call("GET", "/api/operator/pools", ops, "").want(t, 200).array(t) {
			w := want
			if p["slug"] == "beta" {
				w = wantBeta
			}
			if got := fmt.Sprint(p["servedPerHour"]); got != fmt.Sprint(w[:]) {
				t.Errorf("%s servedPerHour %s, want %v", p["slug"], got, w)
			}
		}
	})
}

// dataOf decodes a reply's data as an object, whatever its fields.
func dataOf(t *testing.T, r *reply) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Data, &m); err != nil {
		t.Fatalf("data %s is not an object: %v", r.Data, err)
	}
	return m
}
