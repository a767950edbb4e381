package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

var (
	poolFields = []string{"id", "slug", "modelId", "modelName", "description", "status", "totalSlots", "seatsPerHour",
		"minPricePerDay", "manualProvisioning", "annualDiscount", "maxOutputTokens", "blocks",
		"fundingGoal", "fundingPledged", "fundingDeadline", "pledgedSlots"}
	poolDetailFields   = append(append([]string{}, poolFields...), "hourSlots")
	hourSlotFields     = []string{"id", "hour", "slotIndex", "pricePerDay", "status"}
	blockFields        = []string{"block", "startHour", "endHour", "monthlyPrice", "pricePerDay"}
	subscriptionFields = []string{"id", "poolId", "poolSlug", "status", "blocks", "quantity", "monthlyPrice", "billingCycle",
		"cancelAtPeriodEnd", "currentPeriodEnd", "hours", "key", "createdAt", "periodAmount", "nextChargeAt"}
	subscribeFields = append(append([]string{}, subscriptionFields...), "amountCharged", "windowOpen", "opensAt")
	seatFields      = []string{"hour", "slotIndex", "pricePerDay"}
	subKeyFields    = []string{"id", "apiKey", "isActive"}
)

func TestDisclosureIsPublic(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)
		for _, token := range []string{"", "garbage", "sk_pool_whatever"} {
			m := e.call("GET", "/api/pools/disclosure", token, "").want(t, 200).object(t, "version", "bullets", "checkboxLabel", "termsUrl")
			if m["version"] != envTerms || m["checkboxLabel"] == "" || !strings.HasPrefix(m["termsUrl"].(string), "/") {
				t.Errorf("terms %v", m)
			}
			bullets, ok := m["bullets"].([]any)
			if !ok || len(bullets) == 0 {
				t.Fatalf("bullets %v", m["bullets"])
			}
			for _, b := range bullets {
				if s, ok := b.(string); !ok || s == "" {
					t.Errorf("bullet %v", b)
				}
			}
		}
	})
}

func TestPoolsHTTP(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)
		alpha := e.pool("alpha", accounts.PoolActive, 2, false)
		e.pool("beta", accounts.PoolActive, 1, true)
		e.pool("fund", accounts.PoolFunding, 1, false)
		e.pool("secret", accounts.PoolDraft, 1, false)
		_, tok := e.user("pat@example.test", billing.TestCardVisa)

		// Credentials: the pool endpoints need a session or management key.
		e.call("GET", "/api/pools", "", "").want(t, 401)
		e.call("GET", "/api/pools/alpha", "st_unknown", "").want(t, 401)
		e.call("GET", "/api/pools", "sk_pool_"+strings.Repeat("a", 43), "").want(t, 401, "inference only")
		mk := e.call("POST", "/api/keys/management", tok, `{"name":"script"}`).want(t, 201)
		var mkey struct {
			APIKey string `json:"apiKey"`
		}
		mustJSON(t, mk.Data, &mkey)

		for _, token := range []string{tok, mkey.APIKey} {
			pools := e.call("GET", "/api/pools", token, "").want(t, 200).array(t)
			// Funding pools are listed (pledges), drafts never.
			if len(pools) != 3 || pools[0]["slug"] != "alpha" || pools[1]["slug"] != "beta" || pools[2]["slug"] != "fund" {
				t.Fatalf("pools %v", pools)
			}
		}
		pools := e.call("GET", "/api/pools", tok, "").want(t, 200).array(t)
		a := pools[0]
		exactFields(t, a, poolFields...)
		if a["id"] != alpha.ID || a["modelId"] != "model-alpha" || a["modelName"] != "Model alpha" || a["description"] != "the alpha pool" ||
			a["status"] != "active" || a["totalSlots"] != 48.0 || a["seatsPerHour"] != 2.0 || a["minPricePerDay"] != "80" ||
			a["manualProvisioning"] != false || a["annualDiscount"] != 0.2 || a["maxOutputTokens"] != 4096.0 {
			t.Errorf("pool row %v", a)
		}
		if pools[1]["manualProvisioning"] != true {
			t.Errorf("beta %v", pools[1])
		}
		blocks := a["blocks"].([]any)
		if len(blocks) != 3 {
			t.Fatalf("blocks %v", blocks)
		}
		am := asObj(t, blocks[2], blockFields...)
		if am["block"] != "americas" || am["startHour"] != 16.0 || am["endHour"] != 23.0 || am["monthlyPrice"] != "120.5" || am["pricePerDay"] != "15.0625" {
			t.Errorf("americas %v", am)
		}

		// Detail by slug and by UUID, with hour slots; a taken seat shows.
		_, tok2 := e.user("quin@example.test", billing.TestCardVisa)
		e.call("POST", "/api/pools/alpha/subscribe", tok2, `{"blocks":["americas"]}`).want(t, 201)
		for _, id := range []string{"alpha", alpha.ID} {
			d := e.call("GET", "/api/pools/"+id, tok, "").want(t, 200).object(t, poolDetailFields...)
			slots := d["hourSlots"].([]any)
			if len(slots) != 48 {
				t.Fatalf("%d hour slots", len(slots))
			}
			taken := 0
			for i, s := range slots {
				m := asObj(t, s, hourSlotFields...)
				wantHour, wantIdx := float64(i/2), float64(i%2)
				if m["hour"] != wantHour || m["slotIndex"] != wantIdx || m["id"] == "" {
					t.Errorf("slot %d: %v", i, m)
				}
				switch m["status"] {
				case "taken":
					taken++
					if m["hour"].(float64) < 16 || m["slotIndex"] != 0.0 || m["pricePerDay"] != "15.0625" {
						t.Errorf("taken slot %v", m)
					}
				case "available":
				default:
					t.Errorf("slot status %v", m["status"])
				}
				if m["hour"] == 8.0 && m["pricePerDay"] != "12" {
					t.Errorf("europe slot price %v", m["pricePerDay"])
				}
			}
			if taken != 8 {
				t.Errorf("%d slots taken, want 8", taken)
			}
		}
		// A funding pool is visible by id; a draft pool and unknown ids are not.
		e.call("GET", "/api/pools/fund", tok, "").want(t, 200)
		e.call("GET", "/api/pools/secret", tok, "").want(t, 404, "secret")
		e.call("GET", "/api/pools/nope", tok, "").want(t, 404, "GET /api/pools")
	})
}

func mustJSON(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
}

func TestSubscribeHTTP(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)
		alpha := e.pool("alpha", accounts.PoolActive, 2, false)
		e.pool("fund", accounts.PoolFunding, 2, false)
		uid, tok := e.user("ray@example.test", "")
		otherID, other := e.user("sam@example.test", billing.TestCardVisa)
		path := "/api/pools/alpha/subscribe"

		e.call("POST", path, "", `{"blocks":["europe"]}`).want(t, 401)
		if r := e.call("POST", path, tok, `{"blocks":["europe"]}`).want(t, 400); r.Error != "No payment method found - add a card first" {
			t.Errorf("no card: %q", r.Error)
		}
		e.call("POST", "/api/billing/setup-intent", tok, `{"paymentMethod":"pm_card_visa"}`).want(t, 200)

		// Malformed and oversized bodies.
		e.call("POST", path, tok, "").want(t, 400, "empty")
		e.call("POST", path, tok, `{"blocks":["europe"]`).want(t, 400, "not valid JSON")
		e.call("POST", path, tok, `["europe"]`).want(t, 400)
		e.call("POST", path, tok, `{"blocks":"europe"}`).want(t, 400, "blocks")
		e.call("POST", path, tok, `{"blocks":["europe"],"quantity":1.5}`).want(t, 400, "quantity")
		e.call("POST", path, tok, `{"blocks":["europe"],"quantity":"2"}`).want(t, 400, "quantity")
		e.call("POST", path, tok, `{"blocks":["europe"],"acknowledgment":"v1"}`).want(t, 400, "acknowledgment")
		e.call("POST", path, tok, `{"blocks":["europe"],"pad":"`+strings.Repeat("x", 2<<10)+`"}`).want(t, 413)
		// Validation.
		e.call("POST", path, tok, `{}`).want(t, 400, "blocks is required")
		e.call("POST", path, tok, `{"blocks":["moon"]}`).want(t, 400, `unknown block "moon"`)
		e.call("POST", path, tok, `{"blocks":["asia","asia"]}`).want(t, 400, "listed twice")
		e.call("POST", path, tok, `{"blocks":["asia"],"quantity":0}`).want(t, 400, "between 1 and 20")
		e.call("POST", path, tok, `{"blocks":["asia"],"quantity":21}`).want(t, 400, "between 1 and 20")
		e.call("POST", path, tok, `{"blocks":["asia"],"billingCycle":"weekly"}`).want(t, 400, "billingCycle")
		e.call("POST", "/api/pools/nope/subscribe", tok, `{"blocks":["asia"]}`).want(t, 404)
		e.call("POST", "/api/pools/secret/subscribe", tok, `{"blocks":["asia"]}`).want(t, 404)
		stale := e.call("POST", path, tok, `{"blocks":["asia"],"acknowledgment":{"version":"2001"}}`).want(t, 409, "2001")
		if m := stale.object(t, "version"); m["version"] != envTerms {
			t.Errorf("stale terms data %v", m)
		}
		e.call("POST", path, tok, `{"blocks":["asia"],"quantity":3}`).want(t, 409, "sold out")

		// Success: every field.
		m := e.call("POST", path, tok, fmt.Sprintf(`{"blocks":["americas","europe"],"quantity":2,"billingCycle":"year","acknowledgment":{"version":%q}}`, envTerms)).
			want(t, 201).object(t, subscribeFields...)
		if m["poolId"] != alpha.ID || m["poolSlug"] != "alpha" || m["status"] != "active" || m["quantity"] != 2.0 ||
			m["monthlyPrice"] != "433" || m["amountCharged"] != "4156.8" || m["billingCycle"] != "year" ||
			m["cancelAtPeriodEnd"] != false || m["key"] != nil || fmt.Sprint(m["blocks"]) != "[europe americas]" {
			t.Errorf("subscription %v", m)
		}
		if end := asTime(t, m["currentPeriodEnd"]); !end.Equal(envStart.AddDate(1, 0, 0)) {
			t.Errorf("currentPeriodEnd %v", end)
		}
		if c := asTime(t, m["createdAt"]); !c.Equal(envStart) {
			t.Errorf("createdAt %v", c)
		}
		// Bought at 09:00 UTC, europe is open now.
		if m["windowOpen"] != true || m["opensAt"] != nil {
			t.Errorf("europe bought at 09:00: windowOpen %v, opensAt %v", m["windowOpen"], m["opensAt"])
		}
		hours := m["hours"].([]any)
		if len(hours) != 32 {
			t.Fatalf("%d hours", len(hours))
		}
		first := asObj(t, hours[0], seatFields...)
		last := asObj(t, hours[31], seatFields...)
		if first["hour"] != 8.0 || first["slotIndex"] != 0.0 || first["pricePerDay"] != "12" ||
			last["hour"] != 23.0 || last["slotIndex"] != 1.0 || last["pricePerDay"] != "15.0625" {
			t.Errorf("hours %v … %v", first, last)
		}
		subID := m["id"].(string)

		// A block that is closed now says when it opens: asia, at the next midnight.
		_, lee := e.user("lee@example.test", "pm_card_visa")
		asia := e.call("POST", path, lee, `{"blocks":["asia"]}`).want(t, 201).object(t, subscribeFields...)
		if opens := asTime(t, asia["opensAt"]); asia["windowOpen"] != false || !opens.Equal(envStart.Truncate(24*time.Hour).Add(24*time.Hour)) {
			t.Errorf("asia bought at 09:00: windowOpen %v, opensAt %v", asia["windowOpen"], opens)
		}

		// Declined card: 402, nothing created.
		_, poor := e.user("tia@example.test", billing.TestCardDeclined)
		e.call("POST", path, poor, `{"blocks":["asia"]}`).want(t, 402, "declined")
		if subs := e.call("GET", "/api/pools/alpha/my-subscriptions", poor, "").want(t, 200).array(t); len(subs) != 0 {
			t.Errorf("subscriptions after a decline %v", subs)
		}

		// my-subscriptions: key null, then the key object once created.
		subs := e.call("GET", "/api/pools/alpha/my-subscriptions", tok, "").want(t, 200).array(t)
		if len(subs) != 1 {
			t.Fatalf("my subscriptions %v", subs)
		}
		exactFields(t, subs[0], subscriptionFields...)
		if subs[0]["id"] != subID || subs[0]["key"] != nil || subs[0]["monthlyPrice"] != "433" {
			t.Errorf("my subscription %v", subs[0])
		}
		if rows := e.call("GET", "/api/pools/alpha/my-keys", tok, "").want(t, 200).array(t); len(rows) != 0 {
			t.Errorf("my keys before any %v", rows)
		}
		e.call("POST", "/api/keys/subscription", tok, fmt.Sprintf(`{"subscriptionId":%q,"name":"box"}`, subID)).want(t, 201)
		subs = e.call("GET", "/api/pools/"+alpha.ID+"/my-subscriptions", tok, "").want(t, 200).array(t)
		key := asObj(t, subs[0]["key"], subKeyFields...)
		if !strings.HasPrefix(key["apiKey"].(string), "sk_pool_") || key["isActive"] != true {
			t.Errorf("key %v", key)
		}
		rows := e.call("GET", "/api/pools/alpha/my-keys", tok, "").want(t, 200).array(t)
		if len(rows) != 1 {
			t.Fatalf("my keys %v", rows)
		}
		exactFields(t, rows[0], keyRowFields...)
		if rows[0]["id"] != key["id"] || rows[0]["apiKey"] != key["apiKey"] || rows[0]["name"] != "box" || rows[0]["subscriptionId"] != subID {
			t.Errorf("my key row %v", rows[0])
		}
		// Other users see none of it.
		if s := e.call("GET", "/api/pools/alpha/my-subscriptions", other, "").want(t, 200).array(t); len(s) != 0 {
			t.Errorf("another user's subscriptions %v", s)
		}
		if k := e.call("GET", "/api/pools/alpha/my-keys", other, "").want(t, 200).array(t); len(k) != 0 {
			t.Errorf("another user's keys %v", k)
		}
		e.call("DELETE", "/api/pools/alpha/pledge", other, "").want(t, 404)
		e.call("GET", "/api/pools/nope/my-subscriptions", tok, "").want(t, 404)
		e.call("GET", "/api/pools/nope/my-keys", tok, "").want(t, 404)

		// Cancel at period end.
		c := e.call("DELETE", "/api/pools/alpha/pledge", tok, "").want(t, 200).object(t, "canceled", "subscriptionId", "currentPeriodEnd")
		if c["canceled"] != true || c["subscriptionId"] != subID {
			t.Errorf("cancel %v", c)
		}
		subs = e.call("GET", "/api/pools/alpha/my-subscriptions", tok, "").want(t, 200).array(t)
		if subs[0]["cancelAtPeriodEnd"] != true || subs[0]["status"] != "active" {
			t.Errorf("after cancel %v", subs[0])
		}
		e.call("DELETE", "/api/pools/alpha/pledge", tok, "").want(t, 404)

		// The period ends: canceled, key revoked, seats freed.
		e.setClock(envStart.AddDate(1, 0, 0))
		if rep, err := e.svc.RunLifecycle(e.ctx); err != nil || rep.Canceled != 1 {
			t.Fatalf("lifecycle %+v %v", rep, err)
		}
		// Sessions last 30 days: new ones for the year-later clock.
		tok = e.session(uid)
		other = e.session(otherID)
		subs = e.call("GET", "/api/pools/alpha/my-subscriptions", tok, "").want(t, 200).array(t)
		if subs[0]["status"] != "canceled" || len(subs[0]["hours"].([]any)) != 0 || asObj(t, subs[0]["key"], subKeyFields...)["isActive"] != false {
			t.Errorf("after the period end %v", subs[0])
		}
		e.call("POST", path, other, `{"blocks":["europe"],"quantity":2}`).want(t, 201)
	})
}

func TestBillingHTTP(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)
		e.pool("alpha", accounts.PoolActive, 2, false)
		_, tok := e.user("uma@example.test", "")

		e.call("GET", "/api/billing/status", "", "").want(t, 401)
		e.call("POST", "/api/billing/setup-intent", "", `{"paymentMethod":"pm_card_visa"}`).want(t, 401)
		s := e.call("GET", "/api/billing/status", tok, "").want(t, 200).object(t, "hasPaymentMethod", "paymentMethod", "processor", "pastDue")
		if s["hasPaymentMethod"] != false || s["paymentMethod"] != nil || s["processor"] != "test" || fmt.Sprint(s["pastDue"]) != "[]" {
			t.Errorf("status without a card %v", s)
		}

		e.call("POST", "/api/billing/setup-intent", tok, "").want(t, 400, "empty")
		e.call("POST", "/api/billing/setup-intent", tok, `{}`).want(t, 400, "paymentMethod is required")
		e.call("POST", "/api/billing/setup-intent", tok, `{"paymentMethod":"pm_card_amex_fake"}`).want(t, 400, "pm_card_visa")
		e.call("POST", "/api/billing/setup-intent", tok, `{"paymentMethod":42}`).want(t, 400, "paymentMethod")
		e.call("POST", "/api/billing/setup-intent", tok, `{"paymentMethod":`).want(t, 400)
		e.call("POST", "/api/billing/setup-intent", tok, `{"paymentMethod":"`+strings.Repeat("p", 2<<10)+`"}`).want(t, 413)

		cards := map[string][3]string{
			"pm_card_visa":               {"pm_card_visa", "visa", "4242"},
			"pm_card_mastercard":         {"pm_card_mastercard", "mastercard", "4444"},
			"pm_card_chargeCustomerFail": {"pm_card_chargeCustomerFail", "visa", "0341"},
		}
		for method, want := range cards {
			r := e.call("POST", "/api/billing/setup-intent", tok, fmt.Sprintf(`{"paymentMethod":%q}`, method)).want(t, 200).object(t, "paymentMethod", "recovered", "pastDue")
			pm := asObj(t, r["paymentMethod"], "id", "brand", "last4")
			if pm["id"] != want[0] || pm["brand"] != want[1] || pm["last4"] != want[2] || fmt.Sprint(r["recovered"]) != "[]" || fmt.Sprint(r["pastDue"]) != "[]" {
				t.Errorf("%s: %v", method, r)
			}
			s := e.call("GET", "/api/billing/status", tok, "").want(t, 200).object(t, "hasPaymentMethod", "paymentMethod", "processor", "pastDue")
			if s["hasPaymentMethod"] != true || asObj(t, s["paymentMethod"], "id", "brand", "last4")["last4"] != want[2] {
				t.Errorf("status with %s: %v", method, s)
			}
		}
	})
}

func TestOperatorSubscriptionsHTTP(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)
		e.pool("hand", accounts.PoolActive, 2, true)
		_, tok := e.user("val@example.test", billing.TestCardVisa)
		sub := e.call("POST", "/api/pools/hand/subscribe", tok, `{"blocks":["europe"]}`).want(t, 201).object(t, subscribeFields...)
		if sub["status"] != "pending_key" || sub["key"] != nil {
			t.Fatalf("manual subscription %v", sub)
		}
		id := sub["id"].(string)

		e.operator("POST", "/timeblock/subscriptions/"+envID()+"/deliver", "").want(t, 404)
		e.operator("POST", "/timeblock/subscriptions/"+id+"/payment-failed", "").want(t, 409, "pending_key")
		d := e.operator("POST", "/timeblock/subscriptions/"+id+"/deliver", "").want(t, 200).object(t, "subscription", "key", "noticeSent")
		ds := asObj(t, d["subscription"], subscriptionFields...)
		k := asObj(t, d["key"], subKeyFields...)
		if ds["status"] != "active" || ds["id"] != id || d["noticeSent"] != true || k["isActive"] != true ||
			!strings.HasPrefix(k["apiKey"].(string), "sk_pool_") || asObj(t, ds["key"], subKeyFields...)["id"] != k["id"] {
			t.Errorf("delivery %v", d)
		}
		e.operator("POST", "/timeblock/subscriptions/"+id+"/deliver", "").want(t, 409, "active")
		rows := e.call("GET", "/api/keys", tok, "").want(t, 200).array(t)
		if len(rows) != 1 || rows[0]["apiKey"] != k["apiKey"] {
			t.Errorf("keys after delivery %v", rows)
		}

		pf := e.operator("POST", "/timeblock/subscriptions/"+id+"/payment-failed", "").want(t, 200).object(t, "subscription")
		if asObj(t, pf["subscription"], subscriptionFields...)["status"] != "past_due" {
			t.Errorf("payment failed %v", pf)
		}
		e.operator("POST", "/timeblock/subscriptions/"+id+"/payment-failed", "").want(t, 409, "past_due")
		e.operator("POST", "/timeblock/subscriptions/"+envID()+"/payment-failed", "").want(t, 404)
		ent, err := e.svc.Entitlement(e.ctx, accounts.HashKey(k["apiKey"].(string)))
		if err != nil || ent.DeniedStatus != http.StatusForbidden {
			t.Errorf("suspended key %+v %v", ent, err)
		}
		s := e.call("GET", "/api/billing/status", tok, "").want(t, 200).object(t, "hasPaymentMethod", "paymentMethod", "processor", "pastDue")
		if fmt.Sprint(s["pastDue"]) != "["+id+"]" {
			t.Errorf("status %v", s)
		}
		r := e.call("POST", "/api/billing/setup-intent", tok, `{"paymentMethod":"pm_card_mastercard"}`).want(t, 200).object(t, "paymentMethod", "recovered", "pastDue")
		if fmt.Sprint(r["recovered"]) != "["+id+"]" || fmt.Sprint(r["pastDue"]) != "[]" {
			t.Errorf("recovery %v", r)
		}
		if ent, err := e.svc.Entitlement(e.ctx, accounts.HashKey(k["apiKey"].(string))); err != nil || ent.Denied != "" {
			t.Errorf("restored key %+v %v", ent, err)
		}
		// Wrong methods and unknown operator paths answer in the envelope.
		e.operator("GET", "/timeblock/subscriptions/"+id+"/deliver", "").want(t, 405, "use POST")
		e.operator("POST", "/timeblock/nothing", "").want(t, 404)
	})
}

// Many users race for the last seats through HTTP: never oversold.
func TestSubscribeRaceHTTP(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)
		e.pool("race", accounts.PoolActive, 2, false)
		const racers = 8
		tokens := make([]string, racers)
		for i := range tokens {
			_, tokens[i] = e.user(fmt.Sprintf("racer%d@example.test", i), billing.TestCardVisa)
		}
		statuses := make([]int, racers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range tokens {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				statuses[i] = e.call("POST", "/api/pools/race/subscribe", tokens[i], `{"blocks":["asia"]}`).Status
			}(i)
		}
		close(start)
		wg.Wait()
		won := 0
		for i, s := range statuses {
			switch s {
			case 201:
				won++
			case 409:
			default:
				t.Errorf("racer %d: status %d", i, s)
			}
		}
		if won != 2 {
			t.Errorf("%d subscriptions for 2 seats", won)
		}
		d := e.call("GET", "/api/pools/race", tokens[0], "").want(t, 200).object(t, poolDetailFields...)
		taken := 0
		for _, s := range d["hourSlots"].([]any) {
			if s.(map[string]any)["status"] == "taken" {
				taken++
			}
		}
		if taken != 16 {
			t.Errorf("%d hour slots taken, want 16", taken)
		}
	})
}
