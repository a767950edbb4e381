package api_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/api"
	"github.com/timeblock/timeblock/accounts/billing"
	"github.com/timeblock/timeblock/accounts/ledger"
)

var chargeFields = []string{"id", "number", "kind", "amount", "currency", "status", "refundedAmount", "subscriptionId",
	"poolId", "description", "createdAt"}

// withLedger rebuilds the environment's /api handler with a ledger whose
// receipts print seller.
func (e *httpEnv) withLedger(seller ledger.Seller) {
	e.api = api.New(e.svc, api.Options{Ledger: ledger.New(e.st, seller, e.clock)})
}

// chargesPage is the envelope of GET /api/billing/charges.
type chargesPage struct {
	Success    bool             `json:"success"`
	Data       []map[string]any `json:"data"`
	NextCursor *string          `json:"nextCursor"`
}

func (e *httpEnv) charges(token, query string) chargesPage {
	e.t.Helper()
	req := httptest.NewRequest("GET", "/api/billing/charges"+query, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	e.api.ServeHTTP(rec, req)
	var page chargesPage
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || rec.Code != 200 || !page.Success || page.Data == nil {
		e.t.Fatalf("GET /api/billing/charges%s: %d %s: want 200 with data an array", query, rec.Code, rec.Body)
	}
	return page
}

// receipt fetches a receipt page as the browser does.
func (e *httpEnv) receipt(token, id string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", "/api/billing/charges/"+id+"/receipt", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	e.api.ServeHTTP(rec, req)
	return rec
}

// The list: the caller's charges only, newest first, with the SPEC's
// fields; paged by limit and the opaque cursor beside data.
func TestChargesListPagesNewestFirst(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		e.withLedger(ledger.Seller{})
		e.pool("alpha", accounts.PoolActive, 3, false)
		_, ann := e.user("ann@example.test", billing.TestCardVisa)
		_, bob := e.user("bob@example.test", billing.TestCardVisa)
		if page := e.charges(ann, ""); len(page.Data) != 0 || page.NextCursor != nil {
			t.Fatalf("before any purchase: %+v", page)
		}
		var bought, paid []string
		for _, body := range []string{`{"blocks":["asia"]}`, `{"blocks":["europe"],"quantity":2}`, `{"blocks":["americas"],"billingCycle":"year"}`} {
			m := e.call("POST", "/api/pools/alpha/subscribe", ann, body).want(t, 201).object(t, subscribeFields...)
			bought, paid = append(bought, m["id"].(string)), append(paid, m["amountCharged"].(string))
			e.advance(time.Minute)
		}
		e.call("POST", "/api/pools/alpha/subscribe", bob, `{"blocks":["asia"]}`).want(t, 201)

		all := e.charges(ann, "")
		if len(all.Data) != 3 || all.NextCursor != nil {
			t.Fatalf("ann's charges: %d, cursor %v; want her 3, no next page", len(all.Data), all.NextCursor)
		}
		for i, c := range all.Data {
			exactFields(t, c, chargeFields...)
			if c["subscriptionId"] != bought[2-i] || c["amount"] != paid[2-i] || c["kind"] != "purchase" ||
				c["status"] != "succeeded" || c["refundedAmount"] != "0" || c["currency"] != "usd" {
				t.Errorf("charge %d: %v, want the purchase of %s for %s", i, c, bought[2-i], paid[2-i])
			}
		}
		if d := all.Data[1]["description"].(string); !strings.Contains(d, "alpha") || !strings.Contains(d, "europe") || !strings.Contains(d, "2 seats") {
			t.Errorf("description %q: want the pool, the block and the quantity", d)
		}

		first := e.charges(ann, "?limit=2")
		if len(first.Data) != 2 || first.NextCursor == nil || first.Data[0]["id"] != all.Data[0]["id"] {
			t.Fatalf("first page %+v", first)
		}
		second := e.charges(ann, "?limit=2&before="+*first.NextCursor)
		if len(second.Data) != 1 || second.NextCursor != nil || second.Data[0]["id"] != all.Data[2]["id"] {
			t.Fatalf("second page %+v", second)
		}
		e.call("GET", "/api/billing/charges?limit=201", ann, "").want(t, 400, "limit")
		e.call("GET", "/api/billing/charges?limit=0", ann, "").want(t, 400, "limit")
		e.call("GET", "/api/billing/charges?before=12", ann, "").want(t, 400, "nextCursor")
		e.call("GET", "/api/billing/charges", "", "").want(t, 401)

		// Another user's charge is not found, as a missing one is.
		bobs := e.charges(bob, "")
		if len(bobs.Data) != 1 {
			t.Fatalf("bob's charges %v", bobs.Data)
		}
		if rec := e.receipt(ann, bobs.Data[0]["id"].(string)); rec.Code != 404 {
			t.Errorf("ann reading bob's receipt: %d, want 404", rec.Code)
		}
		if rec := e.receipt(ann, "no-such-charge"); rec.Code != 404 {
			t.Errorf("a missing receipt: %d, want 404", rec.Code)
		}
	})
}

// The receipt: a self-contained HTML page with the seller block on top,
// the receipt number, the buyer, the description and amount, the
// processor's reference; everything escaped.
func TestChargeReceipt(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		e.withLedger(ledger.Seller{Name: `Seats <b>& Co</b>`, Address: "1 Main St\nSpringfield", Email: "billing@seats.example", TaxID: "EU123"})
		p := e.pool("alpha", accounts.PoolActive, 3, false)
		p.ModelName = `<script>alert(1)</script>`
		e.update(func(tx accounts.Tx) error { return tx.UpsertPool(p) })
		_, ann := e.user("ann@example.test", billing.TestCardVisa)
		e.call("POST", "/api/pools/alpha/subscribe", ann, `{"blocks":["europe"]}`).want(t, 201)
		c := e.charges(ann, "").Data[0]

		rec := e.receipt(ann, c["id"].(string))
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
			t.Fatalf("receipt: %d %s", rec.Code, rec.Header().Get("Content-Type"))
		}
		body := rec.Body.String()
		var ref string
		for _, tc := range e.proc.Ledger() {
			if !tc.Declined {
				ref = tc.Ref
			}
		}
		for _, want := range []string{"Seats &lt;b&gt;&amp; Co&lt;/b&gt;", "<p>1 Main St</p><p>Springfield</p>", "billing@seats.example",
			"Tax ID: EU123", c["number"].(string), "ann@example.test", "$96.00", ref, "&lt;script&gt;alert(1)&lt;/script&gt;",
			asTime(t, c["createdAt"]).UTC().Format("2006-01-02")} {
			if !strings.Contains(body, want) {
				t.Errorf("receipt lacks %q:\n%s", want, body)
			}
		}
		if strings.Contains(body, "<script>") || strings.Contains(body, "<b>") || strings.Contains(body, "src=") {
			t.Errorf("receipt has unescaped markup or loads something:\n%s", body)
		}
		if !strings.HasPrefix(c["number"].(string), "TB-") {
			t.Errorf("receipt number %v: want TB-000123", c["number"])
		}

		// No seller block: the receipt still works, and says so.
		e.withLedger(ledger.Seller{})
		if body := e.receipt(ann, c["id"].(string)).Body.String(); !strings.Contains(body, "seller has not filled in their details") {
			t.Errorf("receipt without a seller block:\n%s", body)
		}
	})
}

// Subscription rows say what each period charges and when the next charge
// is: the period end of an active subscription that renews; null once it
// is cancelled at period end.
func TestSubscriptionRowsShowNextCharge(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		e.pool("alpha", accounts.PoolActive, 3, false)
		_, ann := e.user("ann@example.test", billing.TestCardVisa)
		y := e.call("POST", "/api/pools/alpha/subscribe", ann, `{"blocks":["europe"],"billingCycle":"year"}`).want(t, 201).object(t, subscribeFields...)
		m := e.call("POST", "/api/pools/alpha/subscribe", ann, `{"blocks":["asia"]}`).want(t, 201).object(t, subscribeFields...)
		e.call("POST", fmt.Sprintf("/api/subscriptions/%s/cancel", m["id"]), ann, `{}`).want(t, 200)

		rows := e.call("GET", "/api/subscriptions", ann, "").want(t, 200).array(t)
		byID := map[any]map[string]any{}
		for _, r := range rows {
			byID[r["id"]] = r
		}
		yr, mo := byID[y["id"]], byID[m["id"]]
		if yr["periodAmount"] != y["amountCharged"] || y["amountCharged"] == "96" || asTime(t, yr["nextChargeAt"]) != asTime(t, yr["currentPeriodEnd"]) {
			t.Errorf("yearly row %v: want periodAmount %v (what the year was charged), next charge at its period end", yr, y["amountCharged"])
		}
		if mo["periodAmount"] != m["amountCharged"] || mo["nextChargeAt"] != nil || mo["cancelAtPeriodEnd"] != true {
			t.Errorf("monthly row cancelled at period end %v: want periodAmount %v, no next charge", mo, m["amountCharged"])
		}
		pool := e.call("GET", "/api/pools/alpha/my-subscriptions", ann, "").want(t, 200).array(t)
		for _, r := range pool {
			if r["periodAmount"] != byID[r["id"]]["periodAmount"] || fmt.Sprint(r["nextChargeAt"]) != fmt.Sprint(byID[r["id"]]["nextChargeAt"]) {
				t.Errorf("pool row %v differs from %v", r, byID[r["id"]])
			}
		}
	})
}
