package billing

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The in-memory test processor answers with billing's own errors: an
// unknown card is a *MethodError, an unknown setup a *SetupNotFoundError, a
// declined card ErrDeclined, and a repeated key the first outcome.
func TestTestProcessorErrors(t *testing.T) {
	ctx := context.Background()
	p := NewTestProcessor()
	if _, err := p.SaveMethod(ctx, "u1", "pm_card_bogus"); !errors.As(err, new(*MethodError)) {
		t.Errorf("SaveMethod(unknown) = %v, want a *MethodError", err)
	}
	if _, err := p.FinishSetup(ctx, "u1", "seti_test_unknown"); !errors.As(err, new(*SetupNotFoundError)) {
		t.Errorf("FinishSetup(unknown) = %v, want a *SetupNotFoundError", err)
	}
	if _, err := p.Charge(ctx, ChargeRequest{UserID: "u1", MethodID: TestCardDeclined, Amount: "1.00", IdempotencyKey: SubscribeKey("s1")}); !errors.Is(err, ErrDeclined) {
		t.Errorf("Charge(declined) = %v, want ErrDeclined", err)
	}
	req := ChargeRequest{UserID: "u1", MethodID: TestCardVisa, Amount: "1.00", IdempotencyKey: SubscribeKey("s2")}
	ref, err := p.Charge(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := p.Charge(ctx, req); err != nil || again != ref {
		t.Errorf("repeated charge = %q, %v, want %q", again, err, ref)
	}
	if l := p.Ledger(); len(l) != 1 || l[0].Ref != ref {
		t.Errorf("ledger = %+v, want the one charge %s", l, ref)
	}
}

// The test bank's side of a payment waiting for 3-D Secure: its user is
// known; failing it takes nothing and it can no longer be authenticated;
// an authenticated one cannot be failed.
func TestTestProcessorFailAndPaymentUser(t *testing.T) {
	ctx := context.Background()
	p := NewTestProcessor()
	wait := func(key string) string {
		_, err := p.Charge(ctx, ChargeRequest{UserID: "u1", MethodID: TestCardAuthentication, Amount: "96", IdempotencyKey: key})
		action, ok := errors.AsType[*ActionRequiredError](err)
		if !ok {
			t.Fatalf("charge = %v, want it waiting", err)
		}
		return action.Ref
	}
	ref := wait(SubscribeKey("s1"))
	if u, ok := p.PaymentUser(ref); !ok || u != "u1" {
		t.Fatalf("PaymentUser = %q %v", u, ok)
	}
	if _, ok := p.PaymentUser("ch_test_unknown"); ok {
		t.Fatal("an unknown payment has a user")
	}
	if err := p.Fail(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := p.Fail(ctx, ref); err != nil {
		t.Fatalf("failing again: %v", err)
	}
	if st, _ := p.PaymentStatus(ctx, ref); st != PaymentFailed {
		t.Fatalf("status = %s, want failed", st)
	}
	if p.Authenticate(ctx, ref) == nil || len(p.Ledger()) != 0 {
		t.Fatalf("a failed payment was authenticated: ledger %+v", p.Ledger())
	}
	ok := wait(SubscribeKey("s2"))
	if err := p.Authenticate(ctx, ok); err != nil {
		t.Fatal(err)
	}
	if p.Fail(ctx, ok) == nil {
		t.Fatal("an authenticated payment was failed")
	}
	if p.Fail(ctx, "ch_test_unknown") == nil {
		t.Fatal("an unknown payment was failed")
	}
}

// The test processor keeps Stripe's idempotency rules: a key names one
// request, and a key is forgotten after its lifetime.
func TestTestProcessorKeyRules(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2033, 1, 1, 0, 0, 0, 0, time.UTC)
	p := NewTestProcessor()
	p.SetClock(func() time.Time { return now })
	p.SetKeyLifetime(time.Hour)
	req := ChargeRequest{UserID: "u1", MethodID: TestCardVisa, Amount: "10.00", IdempotencyKey: RenewalKey("s1", now)}
	first, err := p.Charge(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*ChargeRequest){
		"another card":     func(r *ChargeRequest) { r.MethodID = TestCardMastercard },
		"another amount":   func(r *ChargeRequest) { r.Amount = "11.00" },
		"another customer": func(r *ChargeRequest) { r.UserID = "u2" },
	} {
		again := req
		change(&again)
		_, err := p.Charge(ctx, again)
		var ie *IdempotencyError
		if !errors.As(err, &ie) || ie.Key != req.IdempotencyKey || errors.Is(err, ErrDeclined) {
			t.Errorf("%s under the same key: %v, want an *IdempotencyError (not a decline)", name, err)
		}
	}
	if n := len(p.Ledger()); n != 1 {
		t.Fatalf("refused repeats charged: the ledger holds %d charges", n)
	}
	now = now.Add(59 * time.Minute)
	if ref, err := p.Charge(ctx, req); ref != first || err != nil {
		t.Fatalf("a repeat within the lifetime: %q, %v; want the first answer %q", ref, err, first)
	}
	now = now.Add(time.Minute) // the key is forgotten: a repeat is a new charge
	second, err := p.Charge(ctx, req)
	if err != nil || second == first {
		t.Fatalf("a repeat after the lifetime: %q, %v; want a new charge", second, err)
	}
	if len(p.Ledger()) != 2 {
		t.Fatalf("ledger %+v, want two charges", p.Ledger())
	}
	if ref, found, err := p.FindCharge(ctx, req.IdempotencyKey); err != nil || !found || ref != first {
		t.Fatalf("FindCharge after expiry: %q %v %v, want the first %q", ref, found, err, first)
	}
	if got := MetadataKey(p.Ledger()[1].IdempotencyKey); got != req.IdempotencyKey {
		t.Fatalf("MetadataKey of the second charge: %q, want %q", got, req.IdempotencyKey)
	}
}
