package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/api"
	"github.com/timeblock/timeblock/accounts/billing"
)

// buyWaiting subscribes with a card that asks for 3-D Secure and returns the
// 402's data.
func (e *httpEnv) buyWaiting(token, pool string) map[string]any {
	e.t.Helper()
	r := e.call("POST", "/api/pools/"+pool+"/subscribe", token, `{"blocks":["europe"]}`).want(e.t, 402, "3-D Secure")
	data := r.fields(e.t)
	if data["status"] != "incomplete" {
		e.t.Fatalf("402 data = %v, want incomplete", data)
	}
	return data
}

// POST /api/subscriptions/:id/cancel on an unpaid purchase cancels it at
// once and frees its seats; on a paid one it still cancels at period end.
func TestCancelUnpaidPurchase(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		_, tok := e.user("ada@example.com", billing.TestCardAuthentication)
		_, bobTok := e.user("bob@example.com", billing.TestCardVisa)
		e.pool("alpha", accounts.PoolActive, 1, false)
		data := e.buyWaiting(tok, "alpha")
		id := data["subscriptionId"].(string)

		// The row says what it waits for, and until when.
		rows := e.call("GET", "/api/subscriptions", tok, "").want(t, 200).array(t)
		if len(rows) != 1 || rows[0]["status"] != "incomplete" || rows[0]["holdExpiresAt"] != data["holdExpiresAt"] {
			t.Fatalf("incomplete row = %v, want holdExpiresAt %v", rows, data["holdExpiresAt"])
		}
		// Held: nobody else can buy, and the buyer may not buy twice.
		e.call("POST", "/api/pools/alpha/subscribe", bobTok, `{"blocks":["europe"]}`).want(t, 409, "sold out")

		e.call("POST", "/api/subscriptions/"+id+"/cancel", bobTok, "").want(t, 404)
		m := e.call("POST", "/api/subscriptions/"+id+"/cancel", tok, "").want(t, 200).object(t, "canceled", "subscriptionId", "currentPeriodEnd", "withdrawn")
		if m["canceled"] != true || m["withdrawn"] != true || m["subscriptionId"] != id || m["refunded"] != nil {
			t.Fatalf("cancel = %v", m)
		}
		rows = e.call("GET", "/api/subscriptions", tok, "").want(t, 200).array(t)
		if rows[0]["status"] != "canceled" || len(rows[0]["hours"].([]any)) != 0 || rows[0]["holdExpiresAt"] != nil {
			t.Fatalf("after the cancel: %v", rows[0])
		}
		if st, _ := e.proc.PaymentStatus(e.ctx, data["paymentRef"].(string)); st != billing.PaymentFailed {
			t.Fatalf("payment = %s, want canceled", st)
		}
		// Twice: nothing left to cancel.
		e.call("POST", "/api/subscriptions/"+id+"/cancel", tok, "").want(t, 409, "canceled")
		// The seat sells again at once.
		sub := e.call("POST", "/api/pools/alpha/subscribe", bobTok, `{"blocks":["europe"]}`).want(t, 201).fields(t)
		if sub["status"] != "active" {
			t.Fatalf("bought again: %v", sub)
		}
		// A paid subscription: the same endpoint cancels at period end.
		m = e.call("POST", "/api/subscriptions/"+sub["id"].(string)+"/cancel", bobTok, "").want(t, 200).object(t, "canceled", "subscriptionId", "currentPeriodEnd")
		if m["withdrawn"] != nil {
			t.Fatalf("a paid subscription was withdrawn: %v", m)
		}
		rows = e.call("GET", "/api/subscriptions", bobTok, "").want(t, 200).array(t)
		if rows[0]["status"] != "active" || rows[0]["cancelAtPeriodEnd"] != true {
			t.Fatalf("paid subscription after cancel: %v", rows[0])
		}
	})
}

// POST /api/billing/test-bank/:ref plays the customer's 3-D Secure at the
// built-in test processor: fail → the confirm answers 402 and the purchase
// is canceled; approve → the confirm activates it. Only the payment's own
// user reaches it; with another processor there is no such endpoint.
func TestTestBankStep(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		_, tok := e.user("ada@example.com", billing.TestCardAuthentication)
		_, bobTok := e.user("bob@example.com", billing.TestCardAuthentication)
		e.pool("alpha", accounts.PoolActive, 1, false)

		data := e.buyWaiting(tok, "alpha")
		id, ref := data["subscriptionId"].(string), data["paymentRef"]
		if ref == nil || ref == "" || !strings.HasPrefix(data["clientSecret"].(string), ref.(string)+"_secret_") {
			t.Fatalf("402 data = %v, want the paymentRef the client secret is of", data)
		}
		e.call("POST", "/api/billing/test-bank/"+ref.(string), bobTok, `{"approve":true}`).want(t, 404)
		e.call("POST", "/api/billing/test-bank/ch_test_nothing", tok, `{"approve":true}`).want(t, 404)
		e.call("POST", "/api/billing/test-bank/"+ref.(string), tok, `{}`).want(t, 400, "approve")
		e.call("POST", "/api/billing/test-bank/"+ref.(string), "", `{"approve":true}`).want(t, 401)
		if st, _ := e.proc.PaymentStatus(e.ctx, ref.(string)); st != billing.PaymentWaiting {
			t.Fatalf("payment = %s after refused bank calls, want waiting", st)
		}

		m := e.call("POST", "/api/billing/test-bank/"+ref.(string), tok, `{"approve":false}`).want(t, 200).object(t, "ref", "status")
		if m["status"] != billing.PaymentFailed {
			t.Fatalf("failed bank = %v", m)
		}
		e.call("POST", "/api/billing/test-bank/"+ref.(string), tok, `{"approve":true}`).want(t, 409, "no longer waits")
		e.call("POST", "/api/subscriptions/"+id+"/confirm", tok, "").want(t, 402, "not confirmed")
		if len(e.proc.Ledger()) != 0 {
			t.Fatalf("a failed check charged: %+v", e.proc.Ledger())
		}

		// Buying again works at once; approved, the purchase is paid.
		data = e.buyWaiting(tok, "alpha")
		id, ref = data["subscriptionId"].(string), data["paymentRef"]
		m = e.call("POST", "/api/billing/test-bank/"+ref.(string), tok, `{"approve":true}`).want(t, 200).object(t, "ref", "status")
		if m["status"] != billing.PaymentSucceeded {
			t.Fatalf("approved bank = %v", m)
		}
		sub := e.call("POST", "/api/subscriptions/"+id+"/confirm", tok, "").want(t, 200).fields(t)
		if sub["status"] != "active" {
			t.Fatalf("confirmed = %v", sub)
		}
		e.call("POST", "/api/keys/subscription", tok, `{"subscriptionId":"`+id+`"}`).want(t, 201)

		// Another processor: no test bank.
		svc, err := accounts.NewService(accounts.Config{Store: st, Secret: "account http test secret", TermsVersion: envTerms,
			Processor: plainProcessor{e.proc}, Now: e.clock})
		if err != nil {
			t.Fatal(err)
		}
		other := api.New(svc, api.Options{})
		r := e.serve(other, "POST", "/api/billing/test-bank/"+ref.(string), tok, `{"approve":true}`).want(t, 404)
		if !strings.Contains(r.Error, "no such endpoint") {
			t.Fatalf("without the test processor: %q", r.Error)
		}
		if _, err := svc.AnswerTestBank(e.ctx, "someone", ref.(string), true); err == nil {
			t.Fatal("AnswerTestBank without the test processor succeeded")
		}
	})
}

// plainProcessor hides every method of the test processor but billing.Processor's, as a real processor has.
type plainProcessor struct{ billing.Processor }

// fields decodes the answer's data object, whatever its fields.
func (r *reply) fields(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Data, &m); err != nil {
		t.Fatalf("data is not an object: %v: %s", err, r.Data)
	}
	return m
}
