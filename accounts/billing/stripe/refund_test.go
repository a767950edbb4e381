package stripe_test

import (
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/operator"
)

// An operator's refunds at (a fake) Stripe are made once however the
// request goes: an outage before Stripe acted, an answer lost after it
// acted, a retry of a refund the ledger already recorded; the rest
// refunds the charge in full, and Stripe's charge.refunded event about it
// then counts nothing twice and leaves the subscription active.
func TestOperatorRefundsAtStripeOnce(t *testing.T) {
	s := newSite(t)
	s.saveCard("pm_card_visa")
	v := s.subscribe()
	op := operator.New(operator.Config{Store: s.store, Accounts: s.svc, Operators: []string{"ops@example.test"}})
	page, err := op.Charges(t.Context(), operator.ChargeRange{})
	if err != nil || len(page.Charges) != 1 {
		t.Fatalf("charges: %+v, %v", page, err)
	}
	id := page.Charges[0].ID
	pi := func() (refunds int, cents int64) {
		p := s.fake.paymentIntents()[0]
		return p.Refunds, p.AmountRefunded
	}

	s.fake.failNext = 1 // Stripe answers 500 before doing anything
	if _, err := op.Refund(t.Context(), "ops@example.test", id, "10", "k1"); err == nil {
		t.Fatal("a refund Stripe failed: no error")
	}
	s.fake.loseRefunds = 1 // Stripe refunds, the answer is lost
	if _, err := op.Refund(t.Context(), "ops@example.test", id, "10", "k1"); err == nil {
		t.Fatal("a refund whose answer was lost: no error")
	}
	c, err := op.Refund(t.Context(), "ops@example.test", id, "10", "k1")
	if err != nil || c.RefundedAmount != "10" || c.Status != accounts.LedgerPartiallyRefunded {
		t.Fatalf("the retry: %+v, %v; want 10 refunded", c, err)
	}
	// The same request once more (its answer lost after the ledger had it).
	if c, err = op.Refund(t.Context(), "ops@example.test", id, "10", "k1"); err != nil || c.RefundedAmount != "10" {
		t.Fatalf("a repeat: %+v, %v; want 10 refunded still", c, err)
	}
	if n, cents := pi(); n != 1 || cents != 1000 {
		t.Fatalf("at Stripe: %d refunds of %d cents in all; want 1 of 1000", n, cents)
	}
	// The rest, without a key, its answer lost and the request retried.
	s.fake.loseRefunds = 1
	if _, err := op.Refund(t.Context(), "ops@example.test", id, "", ""); err == nil {
		t.Fatal("a refund whose answer was lost: no error")
	}
	if c, err = op.Refund(t.Context(), "ops@example.test", id, "", ""); err != nil || c.RefundedAmount != "40.85" || c.Status != accounts.LedgerRefunded {
		t.Fatalf("the rest: %+v, %v; want 40.85 refunded", c, err)
	}
	if n, cents := pi(); n != 2 || cents != 4085 {
		t.Fatalf("at Stripe: %d refunds of %d cents in all; want 2, 4085", n, cents)
	}
	if _, err := op.Refund(t.Context(), "ops@example.test", id, "", ""); err == nil {
		t.Fatal("refunding a refunded charge: no error")
	}

	// Stripe reports the charge refunded: counted once, the subscription
	// stays active (the operator cancels it separately).
	code, res := s.deliver("evt_refunded", "charge.refunded", chargeObject(s.fake.paymentIntents()[0], true, true), testWebhookSecret, time.Now())
	if code != 200 || res.Effect != "" || s.status(v.ID) != accounts.SubActive {
		t.Fatalf("charge.refunded after the operator's refund: %d %+v, status %s; want no effect, active", code, res, s.status(v.ID))
	}
	page, _ = op.Charges(t.Context(), operator.ChargeRange{})
	if got := page.Charges[0]; got.RefundedAmount != "40.85" || got.Status != accounts.LedgerRefunded {
		t.Fatalf("ledger after the event: %+v", got.Charge)
	}
}
