package stripe_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
	"github.com/timeblock/timeblock/accounts/billing/stripe"
	"github.com/timeblock/timeblock/accounts/embedded"
)

const testKey = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"

// newStore returns an embedded store holding one user, "user-1".
func newStore(t *testing.T) accounts.Store {
	t.Helper()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	err = st.Update(t.Context(), func(tx accounts.Tx) error {
		return tx.CreateUser(&accounts.User{ID: "user-1", Email: "ada@example.com", Name: "Ada", CreatedAt: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func newProcessor(t *testing.T, base string, st accounts.Store) *stripe.Processor {
	t.Helper()
	p, err := stripe.New(stripe.Config{SecretKey: testKey, APIBase: base, Store: st, MaxNetworkRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSaveMethodCreatesTheCustomerOnce(t *testing.T) {
	fake := newFakeStripe(t)
	st := newStore(t)
	p := newProcessor(t, fake.URL(), st)

	pm, err := p.SaveMethod(t.Context(), "user-1", "pm_card_visa")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pm.ID, "pm_fake") || pm.Brand != "visa" || pm.Last4 != "4242" {
		t.Errorf("saved method = %+v, want the attached pm_fake... visa 4242", pm)
	}
	pm2, err := p.SaveMethod(t.Context(), "user-1", "pm_card_mastercard")
	if err != nil {
		t.Fatal(err)
	}
	if pm2.Brand != "mastercard" || pm2.ID == pm.ID {
		t.Errorf("second method = %+v", pm2)
	}
	creates := fake.calls("POST", "/v1/customers")
	var made []fakeRequest
	for _, c := range creates {
		if c.Path == "/v1/customers" {
			made = append(made, c)
		}
	}
	if len(made) != 1 {
		t.Fatalf("customers created: %d, want 1 (remembered after the first)", len(made))
	}
	if made[0].Form["email"] != "ada@example.com" || made[0].Form["metadata[timeblock_user_id]"] != "user-1" || made[0].IdempotencyKey == "" {
		t.Errorf("customer creation = %+v", made[0])
	}
	var cust string
	st.View(t.Context(), func(tx accounts.Tx) (err error) {
		cust, err = tx.GetProcessorCustomer("stripe", "user-1")
		return err
	})
	if !strings.HasPrefix(cust, "cus_fake") {
		t.Fatalf("stored customer = %q", cust)
	}
	updates := fake.calls("POST", "/v1/customers/"+cust)
	if len(updates) != 2 || updates[1].Form["invoice_settings[default_payment_method]"] != pm2.ID {
		t.Errorf("default payment method updates = %+v, want the last one %s", updates, pm2.ID)
	}
	attaches := fake.calls("POST", "/v1/payment_methods/pm_card_visa/attach")
	if len(attaches) != 1 || attaches[0].Form["customer"] != cust {
		t.Errorf("attach = %+v, want customer %s", attaches, cust)
	}
}

func TestSaveMethodRefusals(t *testing.T) {
	fake := newFakeStripe(t)
	p := newProcessor(t, fake.URL(), newStore(t))
	for _, method := range []string{"card_visa", "pm_no_such_method"} {
		_, err := p.SaveMethod(t.Context(), "user-1", method)
		var ae *accounts.Error
		if !errors.As(err, &ae) || ae.Status != 400 {
			t.Errorf("SaveMethod(%q) = %v, want a 400", method, err)
		}
	}
	_, err := p.SaveMethod(t.Context(), "no-such-user", "pm_card_visa")
	var ae *accounts.Error
	if !errors.As(err, &ae) || ae.Status != 404 {
		t.Errorf("SaveMethod of a missing user = %v, want a 404", err)
	}
}

// saved saves the card token for user-1 and returns the method id; a setup
// that waits for 3-D Secure is authenticated at the fake and finished.
func saved(t *testing.T, fake *fakeStripe, p *stripe.Processor, token string) string {
	t.Helper()
	pm, err := p.SaveMethod(t.Context(), "user-1", token)
	if action, ok := errors.AsType[*billing.SetupActionRequiredError](err); ok {
		fake.setSIStatus(action.SetupIntentID, "succeeded")
		pm, err = p.FinishSetup(t.Context(), "user-1", action.SetupIntentID)
	}
	if err != nil {
		t.Fatal(err)
	}
	return pm.ID
}

func TestChargeRequestAndIdempotentReplay(t *testing.T) {
	fake := newFakeStripe(t)
	p := newProcessor(t, fake.URL(), newStore(t))
	pm := saved(t, fake, p, "pm_card_visa")
	req := billing.ChargeRequest{UserID: "user-1", MethodID: pm, Amount: "40.85", IdempotencyKey: "subscribe:sub-1", Description: "Timeblock pool"}
	ref, err := p.Charge(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.Charge(t.Context(), req)
	if err != nil || again != ref {
		t.Fatalf("repeated charge = %q, %v; want the first one %q", again, err, ref)
	}
	pis := fake.paymentIntents()
	if len(pis) != 1 || pis[0].Amount != 4085 || pis[0].Status != "succeeded" {
		t.Fatalf("payment intents = %+v, want one of 4085 cents, succeeded", pis)
	}
	calls := fake.calls("POST", "/v1/payment_intents")
	f := calls[0].Form
	want := map[string]string{
		"amount": "4085", "currency": "usd", "confirm": "true", "payment_method": pm,
		"metadata[timeblock_idempotency_key]": "subscribe:sub-1", "metadata[timeblock_user_id]": "user-1",
		"description": "Timeblock pool",
	}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("payment intent %s = %q, want %q", k, f[k], v)
		}
	}
	if f["off_session"] != "" {
		t.Errorf("a subscribe charge is on session, got off_session=%q", f["off_session"])
	}
	if f["error_on_requires_action"] != "" {
		t.Errorf("a subscribe charge may wait for 3-D Secure, got error_on_requires_action=%q", f["error_on_requires_action"])
	}
	// A past-due retry is off session: no page can run 3-D Secure for it.
	if _, err := p.Charge(t.Context(), billing.ChargeRequest{UserID: "user-1", MethodID: pm, Amount: "12", IdempotencyKey: "retry:sub-1:c:pm"}); err != nil {
		t.Fatal(err)
	}
	calls = fake.calls("POST", "/v1/payment_intents")
	if f := calls[len(calls)-1].Form; f["off_session"] != "true" || f["error_on_requires_action"] != "" {
		t.Errorf("retry payment intent = %+v, want off session (exempt under the card's setup)", f)
	}
	if calls[0].IdempotencyKey != "subscribe:sub-1" {
		t.Errorf("Idempotency-Key = %q", calls[0].IdempotencyKey)
	}

	// A renewal is off session.
	if _, err := p.Charge(t.Context(), billing.ChargeRequest{UserID: "user-1", MethodID: pm, Amount: "12", IdempotencyKey: "renew:sub-1:x"}); err != nil {
		t.Fatal(err)
	}
	calls = fake.calls("POST", "/v1/payment_intents")
	if f := calls[len(calls)-1].Form; f["off_session"] != "true" || f["amount"] != "1200" || f["error_on_requires_action"] != "" {
		t.Errorf("renewal payment intent = %+v, want off_session, 1200 cents", f)
	}
}

func TestStatementDescriptor(t *testing.T) {
	fake := newFakeStripe(t)
	st := newStore(t)
	p, err := stripe.New(stripe.Config{SecretKey: testKey, APIBase: fake.URL(), Store: st, StatementDescriptorSuffix: "TIMEBLOCK", MaxNetworkRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	pm := saved(t, fake, p, "pm_card_visa")
	if _, err := p.Charge(t.Context(), billing.ChargeRequest{UserID: "user-1", MethodID: pm, Amount: "1", IdempotencyKey: "subscribe:s"}); err != nil {
		t.Fatal(err)
	}
	if f := fake.calls("POST", "/v1/payment_intents")[0].Form; f["statement_descriptor_suffix"] != "TIMEBLOCK" {
		t.Errorf("statement_descriptor_suffix = %q", f["statement_descriptor_suffix"])
	}
	if _, err := stripe.New(stripe.Config{SecretKey: testKey, Store: st, StatementDescriptorSuffix: strings.Repeat("X", 23)}); err == nil {
		t.Error("a 23-character descriptor suffix was accepted")
	}
}

func TestChargeDeclines(t *testing.T) {
	fake := newFakeStripe(t)
	p := newProcessor(t, fake.URL(), newStore(t))
	tests := []struct {
		token, key, reason string
	}{
		{"pm_card_visa_chargeDeclinedInsufficientFunds", "subscribe:a", "Your card has insufficient funds."},
		{"pm_card_chargeCustomerFail", "renew:b:1", "Your card was declined."},
		{"pm_card_authenticationRequired", "retry:c:x:y", "3-D Secure"},
		{"pm_card_authenticationRequired", "renew:d:1", "3-D Secure"},
	}
	for _, tt := range tests {
		pm := saved(t, fake, p, tt.token)
		_, err := p.Charge(t.Context(), billing.ChargeRequest{UserID: "user-1", MethodID: pm, Amount: "10", IdempotencyKey: tt.key})
		if !errors.Is(err, billing.ErrDeclined) {
			t.Errorf("%s (%s): got %v, want a decline", tt.token, tt.key, err)
			continue
		}
		if r := billing.DeclineReason(err); !strings.Contains(r, tt.reason) {
			t.Errorf("%s (%s): reason %q, want it to say %q", tt.token, tt.key, r, tt.reason)
		}
		// A repeat gets the same decline, and no second PaymentIntent.
		n := len(fake.paymentIntents())
		_, err = p.Charge(t.Context(), billing.ChargeRequest{UserID: "user-1", MethodID: pm, Amount: "10", IdempotencyKey: tt.key})
		if !errors.Is(err, billing.ErrDeclined) || len(fake.paymentIntents()) != n {
			t.Errorf("%s repeated: %v, %d payment intents (was %d)", tt.token, err, len(fake.paymentIntents()), n)
		}
		ref, found, err := p.FindCharge(t.Context(), tt.key)
		if err != nil || found {
			t.Errorf("FindCharge(%s) after a decline = %q, %v, %v; want not found", tt.key, ref, found, err)
		}
	}
}

// A subscribe whose bank asks for 3-D Secure: the PaymentIntent is left
// waiting and its client secret returned (not a decline); PaymentStatus
// follows it; CancelPayment cancels a waiting one and leaves a paid one.
func TestSubscribeWaitsForAuthentication(t *testing.T) {
	fake := newFakeStripe(t)
	p := newProcessor(t, fake.URL(), newStore(t))
	pm := saved(t, fake, p, "pm_card_authenticationRequired")
	charge := func(key string) *billing.ActionRequiredError {
		t.Helper()
		_, err := p.Charge(t.Context(), billing.ChargeRequest{UserID: "user-1", MethodID: pm, Amount: "10", IdempotencyKey: key})
		if errors.Is(err, billing.ErrDeclined) {
			t.Fatalf("%s: a payment waiting for the customer is a decline: %v", key, err)
		}
		action, ok := errors.AsType[*billing.ActionRequiredError](err)
		if !ok || action.Ref == "" || action.ClientSecret != action.Ref+"_secret" {
			t.Fatalf("%s: got %v, want an ActionRequiredError with the client secret", key, err)
		}
		return action
	}
	a := charge("subscribe:a")
	if again := charge("subscribe:a"); again.Ref != a.Ref || len(fake.paymentIntents()) != 1 {
		t.Fatalf("a repeat made %s (first %s), %d payment intents", again.Ref, a.Ref, len(fake.paymentIntents()))
	}
	if pis := fake.paymentIntents(); pis[0].Status != "requires_action" {
		t.Fatalf("payment intent %s, want it left requires_action", pis[0].Status)
	}
	if st, err := p.PaymentStatus(t.Context(), a.Ref); err != nil || st != billing.PaymentWaiting {
		t.Fatalf("status = %q %v, want waiting", st, err)
	}
	if _, found, err := p.FindCharge(t.Context(), "subscribe:a"); err != nil || found {
		t.Fatalf("FindCharge of a waiting payment = %v %v, want not found", found, err)
	}
	fake.setPIStatus(a.Ref, "succeeded") // the customer authenticated
	if st, err := p.PaymentStatus(t.Context(), a.Ref); err != nil || st != billing.PaymentSucceeded {
		t.Fatalf("status = %q %v, want succeeded", st, err)
	}
	if st, err := p.CancelPayment(t.Context(), a.Ref, "cancel:subscribe:a"); err != nil || st != billing.PaymentSucceeded {
		t.Fatalf("cancel of a paid one = %q %v, want succeeded", st, err)
	}
	if pis := fake.paymentIntents(); pis[0].Status != "succeeded" {
		t.Fatalf("a paid payment intent was canceled: %s", pis[0].Status)
	}

	b := charge("subscribe:b")
	if st, err := p.CancelPayment(t.Context(), b.Ref, "cancel:subscribe:b"); err != nil || st != billing.PaymentFailed {
		t.Fatalf("cancel of a waiting one = %q %v, want failed", st, err)
	}
	if pis := fake.paymentIntents(); pis[1].Status != "canceled" {
		t.Fatalf("payment intent %s after cancel, want canceled", pis[1].Status)
	}
	if st, err := p.CancelPayment(t.Context(), b.Ref, "cancel:subscribe:b"); err != nil || st != billing.PaymentFailed {
		t.Fatalf("a second cancel = %q %v", st, err)
	}
	if st, err := p.PaymentStatus(t.Context(), "pi_missing"); err != nil || st != billing.PaymentFailed {
		t.Fatalf("status of an unknown payment = %q %v, want failed", st, err)
	}
}

func TestChargeOutageIsNotADecline(t *testing.T) {
	fake := newFakeStripe(t)
	p := newProcessor(t, fake.URL(), newStore(t))
	pm := saved(t, fake, p, "pm_card_visa")
	fake.mu.Lock()
	fake.failNext = 1
	fake.mu.Unlock()
	_, err := p.Charge(t.Context(), billing.ChargeRequest{UserID: "user-1", MethodID: pm, Amount: "10", IdempotencyKey: "subscribe:x"})
	if err == nil || errors.Is(err, billing.ErrDeclined) {
		t.Fatalf("charge during an outage = %v, want an error that is not a decline", err)
	}
	// Retrying with the same key charges once.
	ref, err := p.Charge(t.Context(), billing.ChargeRequest{UserID: "user-1", MethodID: pm, Amount: "10", IdempotencyKey: "subscribe:x"})
	if err != nil || ref == "" {
		t.Fatalf("retry = %q, %v", ref, err)
	}
}

func TestRefundAndFindCharge(t *testing.T) {
	fake := newFakeStripe(t)
	p := newProcessor(t, fake.URL(), newStore(t))
	pm := saved(t, fake, p, "pm_card_visa")
	ref, err := p.Charge(t.Context(), billing.ChargeRequest{UserID: "user-1", MethodID: pm, Amount: "5.5", IdempotencyKey: "subscribe:it's"})
	if err != nil {
		t.Fatal(err)
	}
	got, found, err := p.FindCharge(t.Context(), "subscribe:it's")
	if err != nil || !found || got != ref {
		t.Fatalf("FindCharge = %q, %v, %v; want %q", got, found, err, ref)
	}
	if _, found, err := p.FindCharge(t.Context(), "subscribe:other"); err != nil || found {
		t.Errorf("FindCharge of an unknown key = %v, %v", found, err)
	}
	if err := p.Refund(t.Context(), ref, "refund:subscribe:it's"); err != nil {
		t.Fatal(err)
	}
	if err := p.Refund(t.Context(), ref, "refund:other"); err != nil {
		t.Errorf("refunding a refunded charge again: %v, want no error", err)
	}
	refunds := fake.calls("POST", "/v1/refunds")
	if len(refunds) != 2 || refunds[0].Form["payment_intent"] != ref || refunds[0].IdempotencyKey != "refund:subscribe:it's" {
		t.Errorf("refund requests = %+v", refunds)
	}
	if pis := fake.paymentIntents(); !pis[0].Refunded {
		t.Errorf("payment intent not refunded: %+v", pis[0])
	}
}

func TestCents(t *testing.T) {
	good := map[string]int64{"0": 0, "40": 4000, "40.8": 4080, "40.85": 4085, "0.05": 5, "1234567.01": 123456701}
	for in, want := range good {
		if got, err := stripe.Cents(in); err != nil || got != want {
			t.Errorf("Cents(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", ".5", "5.", "5.123", "-1", "1e3", "4 0", "1,5", "9999999999999"} {
		if got, err := stripe.Cents(in); err == nil {
			t.Errorf("Cents(%q) = %d, want an error", in, got)
		}
	}
}

func TestValidateKeys(t *testing.T) {
	for _, k := range []string{testKey, "sk_live_abcdefgh12345678", "rk_test_abcdefgh12345678", "rk_live_abcdefgh"} {
		if err := stripe.ValidateSecretKey(k); err != nil {
			t.Errorf("ValidateSecretKey(%s): %v", k, err)
		}
	}
	bad := map[string]string{
		"":                        "missing",
		"pk_test_abcdefgh1234":    "publishable",
		"whsec_abcdefgh1234":      "webhook_secret",
		"sk_test_":                "malformed",
		"sk_test_abc def ghijkl":  "malformed",
		"sk_abcdefgh12345678":     "malformed",
		"{env.STRIPE_SECRET_KEY}": "malformed",
	}
	for k, want := range bad {
		err := stripe.ValidateSecretKey(k)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "secret_key") {
			t.Errorf("ValidateSecretKey(%q) = %v, want an error about secret_key saying %q", k, err, want)
		}
		if err != nil && len(k) > 12 && strings.Contains(err.Error(), k) {
			t.Errorf("the error echoes the key: %v", err)
		}
	}
	if err := stripe.ValidateWebhookSecret("whsec_abcdefgh12345678"); err != nil {
		t.Error(err)
	}
	for _, s := range []string{"", "sk_test_abcdefgh12345678", "whsec_", "whsec_abc"} {
		if err := stripe.ValidateWebhookSecret(s); err == nil || !strings.Contains(err.Error(), "webhook_secret") {
			t.Errorf("ValidateWebhookSecret(%q) = %v", s, err)
		}
	}
}
