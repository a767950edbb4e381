package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/api"
	"github.com/timeblock/timeblock/accounts/billing"
	"github.com/timeblock/timeblock/accounts/operator"
)

const opsEmail = "ops@example.test"

// withOperators rebuilds the environment's handlers with an operator
// service naming opsEmail (in another case, as the Caddyfile may), whose
// lanes in use are lanes(keyID, poolIDs).
func (e *httpEnv) withOperators(lanes operator.LanesInUse) api.Options {
	opSvc := operator.New(operator.Config{Store: e.st, Accounts: e.svc, Operators: []string{"OPS@example.test"},
		Now: e.clock, LanesInUse: lanes})
	opts := api.Options{Operator: opSvc}
	e.api = api.New(e.svc, opts)
	e.op = api.NewOperator(e.svc, opts)
	return opts
}

// operatorRoutes are every /api/operator/* endpoint, with a body their
// handler accepts.
var operatorRoutes = []struct{ method, path, body string }{
	{"GET", "/api/operator/pools", ""},
	{"GET", "/api/operator/subscriptions?status=active", ""},
	{"POST", "/api/operator/subscriptions/SUB/deliver", ""},
	{"POST", "/api/operator/subscriptions/SUB/cancel", `{"atPeriodEnd":false}`},
	{"POST", "/api/operator/pools/alpha/status", `{"status":"paused"}`},
	{"GET", "/api/operator/audit", ""},
	{"GET", "/api/operator/charges?format=csv", ""},
	{"POST", "/api/operator/charges/CHARGE/refund", `{"amount":"1"}`},
	{"POST", "/api/operator/keys/KEY/revoke", ""},
}

// Only an operator's session reaches /api/operator/*: no credentials, a
// buyer's session, a management key (the operator's own included) and an
// operator's session older than 12 hours get exactly what an unknown
// endpoint answers — and nothing happens.
func TestOperatorEndpointsHiddenFromOthers(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		e.withOperators(nil)
		plain := api.New(e.svc, api.Options{}) // no operator routes at all
		p := e.pool("alpha", accounts.PoolActive, 3, false)
		annID, ann := e.user("ann@example.test", billing.TestCardVisa)
		_, ops := e.user(opsEmail, "")
		sub := e.sub(annID, p, accounts.SubActive, 1, accounts.BlockEurope)
		annMK := e.call("POST", "/api/keys/management", ann, `{"name":"ci"}`).want(t, 201).object(t, "apiKey", "id", "keyPrefix", "name")["apiKey"].(string)
		opsMK := e.call("POST", "/api/keys/management", ops, `{"name":"ci"}`).want(t, 201).object(t, "apiKey", "id", "keyPrefix", "name")["apiKey"].(string)

		for _, rt := range operatorRoutes {
			path := strings.ReplaceAll(rt.path, "SUB", sub.ID)
			for _, who := range []struct{ name, token string }{{"no credentials", ""}, {"buyer", ann},
				{"buyer's management key", annMK}, {"operator's management key", opsMK}, {"bad token", "st_nope"}} {
				for _, method := range []string{rt.method, "PUT"} {
					got := do(e.api, method, path, rt.body, bearer(who.token))
					want := do(plain, method, path, rt.body, bearer(who.token))
					if got.Code != 404 || got.Body.String() != want.Body.String() {
						t.Errorf("%s %s as %s: %d %s; want the unknown endpoint's 404 %s", method, path, who.name, got.Code, got.Body, want.Body)
					}
				}
			}
		}
		if got := e.subscriptionsOf(annID)[0]; got.Status != accounts.SubActive {
			t.Fatalf("after the refused calls, ann's subscription is %s", got.Status)
		}
		if got, _ := e.svc.ListPools(e.ctx); got[0].Status != accounts.PoolActive {
			t.Fatalf("after the refused calls, the pool is %s", got[0].Status)
		}
		e.call("GET", "/api/operator/audit", ops, "").want(t, 200)
		if n := len(e.call("GET", "/api/operator/audit", ops, "").array(t)); n != 0 {
			t.Fatalf("audit rows after refused calls: %d", n)
		}

		// Operator sessions last 12 hours from sign-in; the rest of /api
		// keeps taking them.
		e.advance(operator.SessionMaxAge)
		e.call("GET", "/api/operator/pools", ops, "").want(t, 401, "operator sessions last 12h0m0s from sign-in", "sign in again")
		e.call("GET", "/api/keys", ops, "").want(t, 200)
	})
}

func bearer(token string) map[string]string {
	if token == "" {
		return nil
	}
	return map[string]string{"Authorization": "Bearer " + token}
}

// An identity provider's user is an operator by the header's value.
func TestOperatorByIdentityHeader(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		opts := e.withOperators(nil)
		opts.IdentityHeader = "X-Forwarded-Email"
		h := api.New(e.svc, opts)
		e.pool("alpha", accounts.PoolDraft, 3, false)
		rec := do(h, "GET", "/api/operator/pools", "", map[string]string{"X-Forwarded-Email": "Ops@Example.test"})
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"slug":"alpha"`) {
			t.Fatalf("operator through the identity header: %d %s", rec.Code, rec.Body)
		}
		rec = do(h, "GET", "/api/operator/pools", "", map[string]string{"X-Forwarded-Email": "ann@example.test"})
		if rec.Code != 404 || !strings.Contains(rec.Body.String(), "no such endpoint: GET /api/operator/pools") {
			t.Fatalf("buyer through the identity header: %d %s", rec.Code, rec.Body)
		}
	})
}

// The operator sees every pool, drafts included, with the seats sold per
// UTC hour, the lanes in use, this month's revenue (refunds out), the
// monthly recurring revenue and the funding progress, right after known
// purchases.
func TestOperatorPoolsFigures(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		var alpha *accounts.Pool
		e.withOperators(func(_ context.Context, keyID string, pools []string) (int, error) {
			if len(pools) == 1 && pools[0] == alpha.ID {
				return 1, nil // one request in flight per key
			}
			return 0, nil
		})
		alpha = e.pool("alpha", accounts.PoolActive, 3, false)
		e.pool("beta", accounts.PoolDraft, 2, false)
		gamma := e.pool("gamma", accounts.PoolFunding, 4, false)
		e.update(func(tx accounts.Tx) error {
			gamma.FundingGoal = "500"
			return tx.UpsertPool(gamma)
		})
		annID, ann := e.user("ann@example.test", billing.TestCardVisa)
		_, bob := e.user("bob@example.test", billing.TestCardVisa)
		_, ops := e.user(opsEmail, "")

		// Last month: bob's purchase (not this month's revenue), which he
		// then sets to cancel (not recurring).
		bobSub := e.call("POST", "/api/pools/alpha/subscribe", bob, `{"blocks":["asia"]}`).want(t, 201).object(t, subscribeFields...)
		e.keyFor(bob, bobSub["id"].(string))
		e.call("POST", "/api/subscriptions/"+bobSub["id"].(string)+"/cancel", bob, "").want(t, 200)
		e.setClock(time.Date(2034, 7, 2, 9, 0, 0, 0, time.UTC))
		ops = e.session(e.userID(opsEmail))
		revenue := new(big.Rat)
		for _, body := range []string{`{"blocks":["europe"],"quantity":2}`, `{"blocks":["asia"]}`, `{"blocks":["americas"],"billingCycle":"year"}`} {
			m := e.call("POST", "/api/pools/alpha/subscribe", ann, body).want(t, 201).object(t, subscribeFields...)
			r, _ := new(big.Rat).SetString(m["amountCharged"].(string))
			revenue.Add(revenue, r)
			e.keyFor(ann, m["id"].(string))
		}
		e.sub(annID, gamma, accounts.SubPledged, 1, accounts.BlockEurope) // monthly price 96
		e.sub(annID, alpha, accounts.SubIncomplete, 1, accounts.BlockAmericas)

		pools := e.call("GET", "/api/operator/pools", ops, "").want(t, 200).array(t)
		if len(pools) != 3 {
			t.Fatalf("pools: %d, want alpha, the draft beta and gamma", len(pools))
		}
		bySlug := map[string]map[string]any{}
		for _, p := range pools {
			exactFields(t, p, "id", "slug", "name", "status", "seatsPerHour", "soldPerHour", "servedPerHour", "lanesInUse",
				"revenueThisMonth", "monthlyRecurring", "fundingGoal", "fundingPledged")
			bySlug[p["slug"].(string)] = p
		}
		a := bySlug["alpha"]
		var want [24]float64
		for block, n := range map[accounts.Block]float64{accounts.BlockEurope: 2, accounts.BlockAsia: 2, accounts.BlockAmericas: 1} {
			for _, h := range accounts.MaskOf([]accounts.Block{block}).Hours() {
				want[h] += n
			}
		}
		if got := fmt.Sprint(a["soldPerHour"]); got != fmt.Sprint(want[:]) {
			t.Errorf("alpha soldPerHour %s, want %v (active subscriptions, not the unpaid purchase)", got, want)
		}
		if a["id"] != alpha.ID || a["name"] != "Model alpha" || a["status"] != "active" || a["seatsPerHour"] != 3.0 {
			t.Errorf("alpha: %v", a)
		}
		if a["monthlyRecurring"] != "368.4" { // 2×96 + 80 + 96.40 (the yearly one, per month); bob's cancels
			t.Errorf("alpha monthlyRecurring %v, want 368.4", a["monthlyRecurring"])
		}
		if got, want := a["revenueThisMonth"], revenue.FloatString(1); got != want {
			t.Errorf("alpha revenueThisMonth %v, want %s (July's three purchases, not bob's June one)", got, want)
		}
		if a["lanesInUse"] != 4.0 {
			t.Errorf("alpha lanesInUse %v, want 4 (one per key)", a["lanesInUse"])
		}
		if b := bySlug["beta"]; b["status"] != "draft" || b["monthlyRecurring"] != "0" || b["revenueThisMonth"] != "0" || b["lanesInUse"] != 0.0 {
			t.Errorf("beta: %v", b)
		}
		if g := bySlug["gamma"]; g["fundingGoal"] != "500" || g["fundingPledged"] != "96" || fmt.Sprint(g["soldPerHour"]) != fmt.Sprint(make([]float64, 24)) {
			t.Errorf("gamma: %v, want goal 500, pledged 96 and no seat sold", g)
		}
	})
}

// keyFor creates the consumption key of the buyer's subscription.
func (e *httpEnv) keyFor(token, subID string) {
	e.t.Helper()
	e.call("POST", "/api/keys/subscription", token, fmt.Sprintf(`{"subscriptionId":%q}`, subID)).want(e.t, 201)
}

func (e *httpEnv) userID(email string) string {
	e.t.Helper()
	var id string
	e.update(func(tx accounts.Tx) error {
		u, err := tx.GetUserByEmail(email)
		if err == nil {
			id = u.ID
		}
		return err
	})
	return id
}

// The subscriptions list filters by pool, status and e-mail, pages newest
// first by cursor, and shows the key's id, never the key.
func TestOperatorSubscriptionsFilters(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		e.withOperators(nil)
		e.pool("alpha", accounts.PoolActive, 3, false)
		beta := e.pool("beta", accounts.PoolActive, 3, true)
		annID, ann := e.user("ann@example.test", billing.TestCardVisa)
		_, bob := e.user("bob@example.test", billing.TestCardVisa)
		_, ops := e.user(opsEmail, "")
		a1 := e.call("POST", "/api/pools/alpha/subscribe", ann, `{"blocks":["asia"]}`).want(t, 201).object(t, subscribeFields...)["id"].(string)
		e.advance(time.Second)
		b1 := e.call("POST", "/api/pools/alpha/subscribe", bob, `{"blocks":["europe"],"quantity":2}`).want(t, 201).object(t, subscribeFields...)["id"].(string)
		e.keyFor(bob, b1)
		e.advance(time.Second)
		a2 := e.call("POST", "/api/pools/beta/subscribe", ann, `{"blocks":["europe"]}`).want(t, 201).object(t, subscribeFields...)["id"].(string)
		e.advance(time.Second)
		a3 := e.sub(annID, beta, accounts.SubPledged, 1, accounts.BlockAsia).ID

		ids := func(query string) []string {
			t.Helper()
			var out []string
			for _, row := range e.call("GET", "/api/operator/subscriptions"+query, ops, "").want(t, 200).array(t) {
				out = append(out, row["id"].(string))
			}
			return out
		}
		check := func(query string, want ...string) {
			t.Helper()
			if got := ids(query); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("subscriptions%s: %v, want %v", query, got, want)
			}
		}
		check("", a3, a2, b1, a1)
		check("?pool=alpha", b1, a1)
		check("?pool="+beta.ID, a3, a2)
		check("?status=pending_key", a2)
		check("?email=ANN@example.test", a3, a2, a1)
		check("?email=ann@example.test&pool=alpha", a1)
		check("?email=nobody@example.test")
		check("?pool=nope")
		e.call("GET", "/api/operator/subscriptions?status=gone", ops, "").want(t, 400, "status must be one of active, pending_key")
		e.call("GET", "/api/operator/subscriptions?before=zzz", ops, "").want(t, 400, "nextCursor")

		// Pages of 3, then the rest.
		page := e.pageOf("/api/operator/subscriptions?limit=3", ops)
		if len(page.Data) != 3 || page.NextCursor == nil {
			t.Fatalf("first page: %d rows, cursor %v", len(page.Data), page.NextCursor)
		}
		rest := e.pageOf("/api/operator/subscriptions?limit=3&before="+url.QueryEscape(*page.NextCursor), ops)
		if len(rest.Data) != 1 || rest.Data[0]["id"] != a1 || rest.NextCursor != nil {
			t.Fatalf("second page: %v, cursor %v; want a1 alone and no cursor", rest.Data, rest.NextCursor)
		}

		row := page.Data[2] // b1
		exactFields(t, row, "id", "email", "userId", "poolId", "pool", "status", "blocks", "quantity", "billingCycle",
			"monthlyPrice", "periodAmount", "currentPeriodEnd", "cancelAtPeriodEnd", "keyId", "keyActive", "createdAt")
		if row["id"] != b1 || row["email"] != "bob@example.test" || row["pool"] != "alpha" || row["status"] != "active" ||
			row["quantity"] != 2.0 || row["periodAmount"] != "192" || row["keyId"] == nil || row["keyActive"] != true || row["cancelAtPeriodEnd"] != false {
			t.Errorf("bob's row: %v", row)
		}
		if pending := page.Data[1]; pending["keyId"] != nil || pending["keyActive"] != false || pending["status"] != "pending_key" {
			t.Errorf("the order waiting for its key: %v, want keyId null", pending)
		}
		if pledge := page.Data[0]; pledge["currentPeriodEnd"] == nil && pledge["status"] != "pledged" {
			t.Errorf("the pledge: %v", pledge)
		}
	})
}

func (e *httpEnv) pageOf(path, token string) chargesPage {
	e.t.Helper()
	rec := do(e.api, "GET", path, "", bearer(token))
	var page chargesPage
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || rec.Code != 200 || page.Data == nil {
		e.t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	return page
}

// Deliver, cancel (at period end, and now) and pool status do what they
// say and each writes one audit row (actor, action, target) with its
// effect; a refused action writes none; a repeated Idempotency-Key acts
// once; a cross-origin POST is refused; the admin API's actions are
// audited as "admin API".
func TestOperatorActionsAreAudited(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		e.withOperators(nil)
		alpha := e.pool("alpha", accounts.PoolActive, 3, false)
		e.pool("hand", accounts.PoolActive, 3, true)
		annID, ann := e.user("ann@example.test", billing.TestCardVisa)
		_, ops := e.user(opsEmail, "")
		pending := e.call("POST", "/api/pools/hand/subscribe", ann, `{"blocks":["asia"]}`).want(t, 201).object(t, subscribeFields...)["id"].(string)
		later := e.call("POST", "/api/pools/alpha/subscribe", ann, `{"blocks":["asia"]}`).want(t, 201).object(t, subscribeFields...)["id"].(string)
		now := e.call("POST", "/api/pools/alpha/subscribe", ann, `{"blocks":["europe"]}`).want(t, 201).object(t, subscribeFields...)["id"].(string)
		second := e.call("POST", "/api/pools/hand/subscribe", ann, `{"blocks":["europe"]}`).want(t, 201).object(t, subscribeFields...)["id"].(string)
		e.keyFor(ann, now)

		// Deliver: active with a key, the key not in the answer.
		d := e.call("POST", "/api/operator/subscriptions/"+pending+"/deliver", ops, "").want(t, 200).object(t, "subscriptionId", "status", "keyId", "noticeSent")
		if d["status"] != "active" || d["keyId"] == "" {
			t.Fatalf("deliver: %v", d)
		}
		e.call("POST", "/api/operator/subscriptions/"+pending+"/deliver", ops, "").want(t, 409, "only pending_key")

		e.advance(time.Second)
		// Cancel at period end: scheduled, the key still works.
		e.call("POST", "/api/operator/subscriptions/"+later+"/cancel", ops, `{}`).want(t, 400, "atPeriodEnd is required")
		c := e.call("POST", "/api/operator/subscriptions/"+later+"/cancel", ops, `{"atPeriodEnd":true}`).want(t, 200).object(t, "canceled", "subscriptionId", "currentPeriodEnd")
		if c["canceled"] != true {
			t.Fatalf("cancel at period end: %v", c)
		}
		e.advance(time.Second)
		// Cancel now, twice with one Idempotency-Key: canceled once, seats
		// freed, key revoked.
		hdr := map[string]string{"Authorization": "Bearer " + ops, api.IdempotencyHeader: "op-cancel-1"}
		r1 := do(e.api, "POST", "/api/operator/subscriptions/"+now+"/cancel", `{"atPeriodEnd":false}`, hdr)
		r2 := do(e.api, "POST", "/api/operator/subscriptions/"+now+"/cancel", `{"atPeriodEnd":false}`, hdr)
		if r1.Code != 200 || r2.Code != 200 || r2.Header().Get(api.ReplayHeader) != "true" || r1.Body.String() != r2.Body.String() {
			t.Fatalf("cancel now under one key: %d %s / %d %s (replayed %q)", r1.Code, r1.Body, r2.Code, r2.Body, r2.Header().Get(api.ReplayHeader))
		}
		// A cross-origin POST with the operator's cookie is refused, as
		// elsewhere on /api.
		rec := do(e.api, "POST", "http://localhost:8080/api/operator/subscriptions/"+second+"/deliver", "",
			map[string]string{"Cookie": api.SessionCookie + "=" + ops, "Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"})
		if rec.Code != 403 || !strings.Contains(rec.Body.String(), "cross-origin") {
			t.Fatalf("cross-site deliver: %d %s", rec.Code, rec.Body)
		}
		e.advance(time.Second)
		// Pool status, by slug.
		e.call("POST", "/api/operator/pools/alpha/status", ops, `{"status":"paused"}`).want(t, 200)
		e.advance(time.Second)
		// The admin API's action is audited too.
		e.operator("POST", "/timeblock/subscriptions/"+second+"/deliver", "").want(t, 200)

		subs := map[string]*accounts.Subscription{}
		for _, s := range e.subscriptionsOf(annID) {
			subs[s.ID] = s
		}
		if s := subs[pending]; s.Status != accounts.SubActive {
			t.Errorf("delivered subscription is %s", s.Status)
		}
		if s := subs[later]; s.Status != accounts.SubActive || !s.CancelAtPeriodEnd {
			t.Errorf("canceled at period end: %s, cancelAtPeriodEnd %v", s.Status, s.CancelAtPeriodEnd)
		}
		if s := subs[now]; s.Status != accounts.SubCanceled || len(s.Seats) != 0 {
			t.Errorf("canceled now: %s with %d seats", s.Status, len(s.Seats))
		}
		e.update(func(tx accounts.Tx) error {
			k, err := tx.GetKeyBySubscription(now)
			if err != nil || k.Active {
				t.Errorf("key of the subscription canceled now: %+v, %v; want revoked", k, err)
			}
			taken, err := tx.TakenSeats(alpha.ID)
			for _, holder := range taken {
				if holder == now {
					t.Errorf("the canceled subscription still holds a seat")
				}
			}
			return err
		})
		e.update(func(tx accounts.Tx) error {
			p, err := tx.GetPool(alpha.ID)
			if err == nil && p.Status != accounts.PoolPaused {
				t.Errorf("alpha is %s after the operator paused it", p.Status)
			}
			return err
		})

		var got []string
		for _, row := range e.call("GET", "/api/operator/audit", ops, "").want(t, 200).array(t) {
			exactFields(t, row, "id", "at", "actor", "action", "target", "detail")
			got = append(got, fmt.Sprintf("%s %s %s", row["actor"], row["action"], row["target"]))
		}
		want := []string{
			"admin API subscription.deliver " + second,
			opsEmail + " pool.status " + alpha.ID,
			opsEmail + " subscription.cancel " + now,
			opsEmail + " subscription.cancel " + later,
			opsEmail + " subscription.deliver " + pending,
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("audit log:\n%s\nwant (newest first, one row per action that took effect):\n%s",
				strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		page := e.pageOf("/api/operator/audit?limit=2", ops)
		if len(page.Data) != 2 || page.NextCursor == nil {
			t.Fatalf("audit page of 2: %d rows, cursor %v", len(page.Data), page.NextCursor)
		}
		next := e.pageOf("/api/operator/audit?limit=2&before="+url.QueryEscape(*page.NextCursor), ops)
		if len(next.Data) != 2 || next.Data[0]["target"] != now {
			t.Errorf("audit page 2: %v", next.Data)
		}
	})
}

// The admin API lists pools (drafts too) and subscriptions with the same
// filters, for scripts.
func TestAdminLists(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		e.withOperators(nil)
		e.pool("alpha", accounts.PoolActive, 3, false)
		e.pool("beta", accounts.PoolDraft, 3, false)
		_, ann := e.user("ann@example.test", billing.TestCardVisa)
		id := e.call("POST", "/api/pools/alpha/subscribe", ann, `{"blocks":["asia"]}`).want(t, 201).object(t, subscribeFields...)["id"].(string)

		pools := e.operator("GET", "/timeblock/pools", "").want(t, 200).array(t)
		if len(pools) != 2 || pools[0]["slug"] == pools[1]["slug"] {
			t.Fatalf("admin pools: %v", pools)
		}
		subs := e.operator("GET", "/timeblock/subscriptions?email=ann@example.test&status=active", "").want(t, 200).array(t)
		if len(subs) != 1 || subs[0]["id"] != id || subs[0]["email"] != "ann@example.test" {
			t.Fatalf("admin subscriptions: %v", subs)
		}
		if n := len(e.operator("GET", "/timeblock/subscriptions?pool=beta", "").want(t, 200).array(t)); n != 0 {
			t.Fatalf("admin subscriptions of beta: %d", n)
		}
		e.operator("GET", "/timeblock/audit", "").want(t, 200)
		e.operator("POST", "/timeblock/pools", "").want(t, 405, "use GET")
	})
}

// The site's ledger for the operator: every buyer's charges newest first,
// by time range, paged, and as CSV; the same on the admin API.
func TestOperatorCharges(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		e.withOperators(nil)
		e.pool("alpha", accounts.PoolActive, 3, false)
		_, ann := e.user("ann@example.test", billing.TestCardVisa)
		_, bob := e.user("=bob@example.test", billing.TestCardVisa)
		first := e.call("POST", "/api/pools/alpha/subscribe", ann, `{"blocks":["asia"]}`).want(t, 201).object(t, subscribeFields...)["id"].(string)
		e.setClock(time.Date(2034, 7, 2, 9, 0, 0, 0, time.UTC))
		_, ops := e.user(opsEmail, "")
		second := e.call("POST", "/api/pools/alpha/subscribe", bob, `{"blocks":["europe"]}`).want(t, 201).object(t, subscribeFields...)["id"].(string)
		e.advance(time.Minute)
		third := e.call("POST", "/api/pools/alpha/subscribe", ann, `{"blocks":["americas"],"quantity":2}`).want(t, 201).object(t, subscribeFields...)["id"].(string)

		all := e.pageOf("/api/operator/charges", ops)
		if len(all.Data) != 3 || all.NextCursor != nil {
			t.Fatalf("charges: %v, cursor %v", all.Data, all.NextCursor)
		}
		for i, want := range []struct{ sub, email, amount string }{{third, "ann@example.test", "241"}, {second, "=bob@example.test", "96"}, {first, "ann@example.test", "80"}} {
			c := all.Data[i]
			exactFields(t, c, "id", "number", "kind", "amount", "currency", "status", "refundedAmount", "subscriptionId",
				"poolId", "description", "createdAt", "userId", "email", "processorRef")
			if c["subscriptionId"] != want.sub || c["email"] != want.email || c["amount"] != want.amount || c["kind"] != "purchase" || c["processorRef"] == "" {
				t.Errorf("charge %d: %v, want %+v", i, c, want)
			}
		}
		july := e.pageOf("/api/operator/charges?from=2034-07-01T00:00:00Z&limit=1", ops)
		if len(july.Data) != 1 || july.Data[0]["subscriptionId"] != third || july.NextCursor == nil {
			t.Fatalf("July, first page: %v, cursor %v", july.Data, july.NextCursor)
		}
		july = e.pageOf("/api/operator/charges?from=2034-07-01T00:00:00Z&limit=1&before="+*july.NextCursor, ops)
		if len(july.Data) != 1 || july.Data[0]["subscriptionId"] != second || july.NextCursor != nil {
			t.Fatalf("July, second page: %v, cursor %v", july.Data, july.NextCursor)
		}
		june := e.pageOf("/api/operator/charges?to=2034-07-01T00:00:00Z", ops)
		if len(june.Data) != 1 || june.Data[0]["subscriptionId"] != first {
			t.Fatalf("June: %v", june.Data)
		}
		e.call("GET", "/api/operator/charges?from=yesterday", ops, "").want(t, 400, "RFC 3339")
		e.call("GET", "/api/operator/charges?from=2034-07-01T00:00:00Z&to=2034-06-01T00:00:00Z", ops, "").want(t, 400, "from must be before to")

		rec := do(e.api, "GET", "/api/operator/charges?format=csv&from=2034-07-01T00:00:00Z", "", bearer(ops))
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/csv") {
			t.Fatalf("csv: %d %s %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
		lines := strings.Split(strings.TrimSpace(rec.Body.String()), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "number,id,createdAt,email,") ||
			!strings.Contains(lines[1], ",ann@example.test,purchase,") || !strings.Contains(lines[2], ",'=bob@example.test,") {
			t.Fatalf("csv:\n%s\nwant a header, ann's then bob's charge (his address kept as text)", rec.Body)
		}
		if rec := do(e.api, "GET", "/api/operator/charges?format=csv", "", bearer(ann)); rec.Code != 404 {
			t.Fatalf("a buyer's csv: %d %s", rec.Code, rec.Body)
		}
		if n := len(e.operator("GET", "/timeblock/charges?from=2034-07-01T00:00:00Z", "").want(t, 200).array(t)); n != 2 {
			t.Fatalf("admin charges in July: %d", n)
		}
	})
}

// losingRefunds refunds at the processor and loses the answer of the next
// lose refunds, as a timeout after the processor acted.
type losingRefunds struct {
	billing.Processor
	lose int
}

func (p *losingRefunds) RefundAmount(ctx context.Context, ref, amount, key string) (string, error) {
	total, err := p.Processor.RefundAmount(ctx, ref, amount, key)
	if err == nil && p.lose > 0 {
		p.lose--
		return "", fmt.Errorf("the processor's answer was lost")
	}
	return total, err
}

// An operator refunds a charge in part and then the rest through the
// processor (succeeded → partially_refunded → refunded), each once however
// often it is retried under one Idempotency-Key or its answer lost; amounts
// that are not positive, have three decimals or exceed what remains are a
// 400, a refunded charge a 409, an unknown one a 404, a buyer gets the
// unknown endpoint's 404; the subscription stays active; each refund is
// audited once.
func TestOperatorRefunds(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		lossy := &losingRefunds{Processor: e.proc}
		svc, err := accounts.NewService(accounts.Config{Store: st, Secret: "account http test secret",
			TermsVersion: envTerms, Processor: lossy, Now: e.clock})
		if err != nil {
			t.Fatal(err)
		}
		e.svc = svc
		e.withOperators(nil)
		e.pool("alpha", accounts.PoolActive, 3, false)
		annID, ann := e.user("ann@example.test", billing.TestCardVisa)
		_, ops := e.user(opsEmail, "")
		sub := e.call("POST", "/api/pools/alpha/subscribe", ann, `{"blocks":["asia"]}`).want(t, 201).object(t, subscribeFields...)["id"].(string)
		charges := e.pageOf("/api/operator/charges", ops).Data
		if len(charges) != 1 || charges[0]["amount"] != "80" {
			t.Fatalf("charges: %v", charges)
		}
		id := charges[0]["id"].(string)
		path := "/api/operator/charges/" + id + "/refund"
		refunded := func() string {
			t.Helper()
			var total []string
			for _, c := range e.proc.Ledger() {
				total = append(total, c.RefundedAmount())
			}
			return strings.Join(total, ",")
		}

		e.call("POST", path, ops, `{"amount":"0"}`).want(t, 400, "more than 0")
		e.call("POST", path, ops, `{"amount":"1.005"}`).want(t, 400, "at most two decimals")
		e.call("POST", path, ops, `{"amount":"80.01"}`).want(t, 400, "more than what remains")
		e.call("POST", "/api/operator/charges/nope/refund", ops, `{}`).want(t, 404, "no charge nope")
		if rec := do(e.api, "POST", path, `{"amount":"1"}`, bearer(ann)); rec.Code != 404 {
			t.Fatalf("a buyer's refund: %d %s", rec.Code, rec.Body)
		}
		if got := refunded(); got != "0" {
			t.Fatalf("refunded at the processor after refused requests: %s", got)
		}

		// 12.50, twice under one key: refunded once, the answer replayed.
		hdr := map[string]string{"Authorization": "Bearer " + ops, api.IdempotencyHeader: "refund-1"}
		e.advance(time.Second)
		r1 := do(e.api, "POST", path, `{"amount":"12.50"}`, hdr)
		r2 := do(e.api, "POST", path, `{"amount":"12.50"}`, hdr)
		if r1.Code != 200 || r2.Code != 200 || r1.Body.String() != r2.Body.String() {
			t.Fatalf("refund under one key: %d %s / %d %s", r1.Code, r1.Body, r2.Code, r2.Body)
		}
		var got struct{ Data map[string]any }
		if err := json.Unmarshal(r1.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if got.Data["refundedAmount"] != "12.5" || got.Data["status"] != "partially_refunded" || got.Data["email"] != "ann@example.test" {
			t.Fatalf("after refunding 12.50: %v", got.Data)
		}
		if got := refunded(); got != "12.5" {
			t.Fatalf("refunded at the processor: %s, want 12.5", got)
		}

		// 7.50 whose answer is lost, then retried under the same key:
		// refunded once.
		e.advance(time.Second)
		lossy.lose = 1
		hdr[api.IdempotencyHeader] = "refund-2"
		if rec := do(e.api, "POST", path, `{"amount":"7.50"}`, hdr); rec.Code != 500 {
			t.Fatalf("refund whose answer was lost: %d %s", rec.Code, rec.Body)
		}
		if rec := do(e.api, "POST", path, `{"amount":"7.50"}`, hdr); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"refundedAmount":"20"`) {
			t.Fatalf("retry of the lost refund: %d %s", rec.Code, rec.Body)
		}
		if got := refunded(); got != "20" {
			t.Fatalf("refunded at the processor after a lost answer and a retry: %s, want 20", got)
		}
		// Without a key, a lost answer and the same request again: once.
		e.advance(time.Second)
		lossy.lose = 1
		if rec := do(e.api, "POST", path, `{"amount":"5"}`, bearer(ops)); rec.Code != 500 {
			t.Fatalf("refund whose answer was lost: %d %s", rec.Code, rec.Body)
		}
		e.call("POST", path, ops, `{"amount":"5"}`).want(t, 200)
		if got := refunded(); got != "25" {
			t.Fatalf("refunded at the processor after a lost answer and a retry without a key: %s, want 25", got)
		}

		// The rest (no amount): refunded; then nothing remains.
		e.advance(time.Second)
		rest := e.call("POST", path, ops, "").want(t, 200).fields(t)
		if rest["refundedAmount"] != "80" || rest["status"] != "refunded" {
			t.Fatalf("after refunding the rest: %v", rest)
		}
		if got := refunded(); got != "80" {
			t.Fatalf("refunded at the processor: %s, want 80", got)
		}
		e.call("POST", path, ops, `{}`).want(t, 409, "refunded in full")
		e.operator("POST", "/timeblock/charges/"+id+"/refund", `{"amount":"1"}`).want(t, 409, "refunded in full")

		if s := e.subscriptionsOf(annID)[0]; s.ID != sub || s.Status != accounts.SubActive {
			t.Errorf("the subscription after its charge was refunded: %s %s, want active", s.ID, s.Status)
		}
		var audit []string
		for _, row := range e.call("GET", "/api/operator/audit", ops, "").want(t, 200).array(t) {
			audit = append(audit, fmt.Sprintf("%s %s %s", row["action"], row["target"], row["detail"]))
		}
		want := []string{
			"charge.refund " + id + " refunded the rest of the charge",
			"charge.refund " + id + " refunded 5 USD",
			"charge.refund " + id + " refunded 7.50 USD",
			"charge.refund " + id + " refunded 12.50 USD",
		}
		if fmt.Sprint(audit) != fmt.Sprint(want) {
			t.Errorf("audit log:\n%s\nwant:\n%s", strings.Join(audit, "\n"), strings.Join(want, "\n"))
		}
	})
}
