package stripe_test

// Saving a card makes an off-session SetupIntent: a plain card is set up
// and saved at once, a card whose bank asks for 3-D Secure is saved only
// once the SetupIntent succeeded and the page called back, a declined setup
// saves nothing.

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/api"
	"github.com/timeblock/timeblock/accounts/billing"
	"github.com/timeblock/timeblock/accounts/billing/stripe"
)

func TestSaveMethodSetsTheCardUpOffSession(t *testing.T) {
	fake := newFakeStripe(t)
	st := newStore(t)
	p := newProcessor(t, fake.URL(), st)
	pm, err := p.SaveMethod(t.Context(), "user-1", "pm_card_visa")
	if err != nil || pm.Last4 != "4242" {
		t.Fatalf("SaveMethod = %+v, %v", pm, err)
	}
	var cust string
	st.View(t.Context(), func(tx accounts.Tx) (err error) {
		cust, err = tx.GetProcessorCustomer("stripe", "user-1")
		return err
	})
	calls := fake.calls("POST", "/v1/setup_intents")
	if len(calls) != 1 {
		t.Fatalf("%d SetupIntents, want 1", len(calls))
	}
	want := map[string]string{"customer": cust, "payment_method": pm.ID, "usage": "off_session", "confirm": "true",
		"payment_method_types[0]": "card", "metadata[timeblock_user_id]": "user-1"}
	for k, v := range want {
		if calls[0].Form[k] != v {
			t.Errorf("SetupIntent %s = %q, want %q", k, calls[0].Form[k], v)
		}
	}
	if si := fake.setupIntent("seti_fake3"); si == nil || si.Status != "succeeded" {
		t.Errorf("SetupIntent = %+v, want succeeded", si)
	}
	if updates := fake.calls("POST", "/v1/customers/"+cust); len(updates) != 1 || updates[0].Form["invoice_settings[default_payment_method]"] != pm.ID {
		t.Errorf("default payment method updates = %+v", updates)
	}
}

func TestSetupDeclinedSavesNothing(t *testing.T) {
	fake := newFakeStripe(t)
	p := newProcessor(t, fake.URL(), newStore(t))
	for token, reason := range map[string]string{
		"pm_card_visa_chargeDeclined": "Your card was declined.", // card_declined on confirm
		"pm_card_fake_setupFails":     "Your card has expired.",  // requires_payment_method
	} {
		_, err := p.SaveMethod(t.Context(), "user-1", token)
		if !errors.Is(err, billing.ErrDeclined) || billing.DeclineReason(err) != reason {
			t.Errorf("SaveMethod(%s) = %v, want a decline saying %q", token, err, reason)
		}
	}
	for _, c := range fake.calls("POST", "/v1/customers/") {
		if c.Form["invoice_settings[default_payment_method]"] != "" {
			t.Errorf("a declined card was made the default: %+v", c)
		}
	}
	if _, err := p.FinishSetup(t.Context(), "user-1", "seti_nobody"); !isStatus(err, 404) {
		t.Errorf("FinishSetup of an unknown SetupIntent = %v, want a 404", err)
	}
	if _, err := p.FinishSetup(t.Context(), "user-1", "pi_1"); !isStatus(err, 400) {
		t.Errorf("FinishSetup of a non-SetupIntent id = %v, want a 400", err)
	}
}

func isStatus(err error, status int) bool {
	ae, ok := errors.AsType[*accounts.Error](err)
	return ok && ae.Status == status
}

// billingStatusView is the data of GET /api/billing/status.
type billingStatusView struct {
	HasPaymentMethod bool `json:"hasPaymentMethod"`
	PaymentMethod    *struct {
		ID    string `json:"id"`
		Last4 string `json:"last4"`
	} `json:"paymentMethod"`
	PastDue []string `json:"pastDue"`
}

func (s *site) billingStatus() billingStatusView {
	s.t.Helper()
	var v billingStatusView
	if code := s.call("GET", "/api/billing/status", nil, nil, &v); code != 200 {
		s.t.Fatalf("billing status: %d", code)
	}
	return v
}

// setupAnswer posts to the setup-intent endpoint and returns the status,
// the 402's data, and the error message.
func (s *site) setupAnswer(body map[string]string) (int, accounts.SetupActionView, string) {
	s.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", s.srv.URL+"/api/billing/setup-intent", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Data  accounts.SetupActionView `json:"data"`
		Error string                   `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&env)
	return resp.StatusCode, env.Data, env.Error
}

// The bank asks for 3-D Secure on the setup: 402 requires_action with the
// SetupIntent's client secret and no card saved; asking again before the
// customer confirmed is the same 402; once the SetupIntent succeeded the
// follow-up saves the card.
func TestSaveCardWaitsForSetupAuthentication(t *testing.T) {
	s := newSite(t)
	code, v, msg := s.setupAnswer(map[string]string{"paymentMethod": "pm_card_authenticationRequiredSetupForOffSession"})
	if code != 402 || v.Status != "requires_action" || !strings.HasPrefix(v.SetupIntentID, "seti_") || v.ClientSecret != v.SetupIntentID+"_secret" {
		t.Fatalf("save = %d %+v, want 402 requires_action with the client secret", code, v)
	}
	if !strings.Contains(msg, "confirmCardSetup") || !strings.Contains(msg, v.SetupIntentID) {
		t.Errorf("message %q does not say what to do", msg)
	}
	if st := s.billingStatus(); st.HasPaymentMethod || st.PaymentMethod != nil {
		t.Fatalf("a card waiting for 3-D Secure was saved: %+v", st)
	}
	follow := map[string]string{"setupIntent": v.SetupIntentID}
	if code, again, _ := s.setupAnswer(follow); code != 402 || again != v {
		t.Fatalf("follow-up before authentication = %d %+v, want the same 402", code, again)
	}
	if st := s.billingStatus(); st.HasPaymentMethod {
		t.Fatalf("saved before authentication: %+v", st)
	}
	if code, _, _ := s.setupAnswer(map[string]string{"paymentMethod": "pm_card_visa", "setupIntent": v.SetupIntentID}); code != 400 {
		t.Errorf("both fields: %d, want 400", code)
	}

	s.fake.setSIStatus(v.SetupIntentID, "succeeded")
	var res struct {
		PaymentMethod struct{ ID, Brand, Last4 string } `json:"paymentMethod"`
		Recovered     []string                          `json:"recovered"`
		PastDue       []string                          `json:"pastDue"`
	}
	if code := s.call("POST", "/api/billing/setup-intent", follow, nil, &res); code != 200 || res.PaymentMethod.Last4 != "3155" || res.PaymentMethod.Brand != "visa" {
		t.Fatalf("follow-up after authentication = %d %+v", code, res)
	}
	if st := s.billingStatus(); !st.HasPaymentMethod || st.PaymentMethod.ID != res.PaymentMethod.ID {
		t.Fatalf("billing status after the setup: %+v", st)
	}
	if gets := s.fake.calls("GET", "/v1/setup_intents/"+v.SetupIntentID); len(gets) == 0 || gets[0].Form["expand[0]"] != "payment_method" {
		t.Errorf("SetupIntent reads = %+v, want its payment method expanded", gets)
	}

}

// A past-due subscription recovers when the set-up card is saved: the
// retry is off session, which the setup lets through.
func TestPastDueRecoveredBySetUpCard(t *testing.T) {
	s := newSite(t)
	s.saveCard("pm_card_visa")
	v := s.subscribe()
	s.saveCard("pm_card_chargeCustomerFail")
	s.now = s.now.AddDate(0, 1, 1)
	if _, err := s.svc.RunLifecycle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := s.status(v.ID); st != accounts.SubPastDue {
		t.Fatalf("after the declined renewal: %s", st)
	}
	token, err := s.svc.CreateSession(t.Context(), s.user) // the first one expired meanwhile
	if err != nil {
		t.Fatal(err)
	}
	s.token = token
	code, action, _ := s.setupAnswer(map[string]string{"paymentMethod": "pm_card_authenticationRequiredSetupForOffSession"})
	if code != 402 || s.status(v.ID) != accounts.SubPastDue {
		t.Fatalf("save = %d, status %s; want 402 and still past due", code, s.status(v.ID))
	}
	s.fake.setSIStatus(action.SetupIntentID, "succeeded")
	var res struct {
		Recovered []string `json:"recovered"`
	}
	if code := s.call("POST", "/api/billing/setup-intent", map[string]string{"setupIntent": action.SetupIntentID}, nil, &res); code != 200 || len(res.Recovered) != 1 || res.Recovered[0] != v.ID {
		t.Fatalf("follow-up = %d %+v, want %s recovered", code, res, v.ID)
	}
	if st := s.status(v.ID); st != accounts.SubActive {
		t.Fatalf("after the setup: %s", st)
	}
	// The next renewal, off session on the set-up card, goes through.
	s.now = s.now.AddDate(0, 1, 1)
	if _, err := s.svc.RunLifecycle(t.Context()); err != nil {
		t.Fatal(err)
	}
	calls := s.fake.calls("POST", "/v1/payment_intents")
	if last := calls[len(calls)-1]; last.Form["off_session"] != "true" || !strings.HasPrefix(last.Form["metadata[timeblock_idempotency_key]"], "renew:") {
		t.Fatalf("last payment intent %+v, want the off-session renewal", last.Form)
	} else if set := s.fake.setupIntent(action.SetupIntentID).PaymentMethod; last.Form["payment_method"] != set {
		t.Fatalf("the renewal charged %q, want %s, the card set up by %s", last.Form["payment_method"], set, action.SetupIntentID)
	}
	if st := s.status(v.ID); st != accounts.SubActive {
		t.Fatalf("after the renewal on the set-up card: %s", st)
	}
}

// A declined setup, or one that failed or was canceled after waiting, is a
// 402 that says the card was not saved; nothing is saved.
func TestSaveCardSetupDeclined(t *testing.T) {
	s := newSite(t)
	code, _, msg := s.setupAnswer(map[string]string{"paymentMethod": "pm_card_visa_chargeDeclined"})
	if code != 402 || !strings.Contains(msg, "not saved") || !strings.Contains(msg, "Your card was declined.") {
		t.Fatalf("declined setup = %d %q", code, msg)
	}
	if st := s.billingStatus(); st.HasPaymentMethod {
		t.Fatalf("a declined card was saved: %+v", st)
	}
	for _, status := range []string{"canceled", "requires_payment_method"} {
		code, v, _ := s.setupAnswer(map[string]string{"paymentMethod": "pm_card_authenticationRequiredSetupForOffSession"})
		if code != 402 {
			t.Fatalf("save: %d", code)
		}
		s.fake.setSIStatus(v.SetupIntentID, status)
		code, _, msg := s.setupAnswer(map[string]string{"setupIntent": v.SetupIntentID})
		if code != 402 || !strings.Contains(msg, "not saved") {
			t.Errorf("follow-up of a %s setup = %d %q", status, code, msg)
		}
	}
	if st := s.billingStatus(); st.HasPaymentMethod {
		t.Fatalf("a failed setup saved a card: %+v", st)
	}
	// Another user's SetupIntent is not found.
	_, token, err := s.svc.CreateUser(t.Context(), "eve@example.com", "Eve")
	if err != nil {
		t.Fatal(err)
	}
	_, v, _ := s.setupAnswer(map[string]string{"paymentMethod": "pm_card_authenticationRequiredSetupForOffSession"})
	s.fake.setSIStatus(v.SetupIntentID, "succeeded")
	s.token = token
	s.saveCard("pm_card_visa") // Eve has a Customer too
	if code, _, _ := s.setupAnswer(map[string]string{"setupIntent": v.SetupIntentID}); code != 404 {
		t.Errorf("another user's SetupIntent: %d, want 404", code)
	}
}

// The page confirmed the setup but never called back: the
// setup_intent.succeeded webhook saves the card and retries the past-due
// charge. A redelivery, the page's late call back, a setup that did not
// wait, and an older setup delivered after another card was saved change
// nothing.
func TestSetupSucceededWebhookSavesTheCard(t *testing.T) {
	s := newSite(t)
	s.saveCard("pm_card_visa")
	sub := s.subscribe()
	s.saveCard("pm_card_chargeCustomerFail")
	s.now = s.now.AddDate(0, 1, 1)
	if _, err := s.svc.RunLifecycle(t.Context()); err != nil {
		t.Fatal(err)
	}
	token, err := s.svc.CreateSession(t.Context(), s.user)
	if err != nil {
		t.Fatal(err)
	}
	s.token = token
	if st := s.status(sub.ID); st != accounts.SubPastDue {
		t.Fatalf("after the declined renewal: %s", st)
	}

	_, v, _ := s.setupAnswer(map[string]string{"paymentMethod": "pm_card_authenticationRequiredSetupForOffSession"})
	if si := s.fake.setupIntent(v.SetupIntentID); si == nil || si.Metadata[stripe.MetaWaited] != "true" {
		t.Fatalf("the waiting SetupIntent is not marked: %+v", si)
	}
	event := func(id, seti string) (int, api.WebhookResult) {
		t.Helper()
		return s.deliver(id, "setup_intent.succeeded", map[string]any{"id": seti, "object": "setup_intent"}, testWebhookSecret, time.Now())
	}
	// Read at delivery: a setup still waiting saves nothing.
	if code, res := event("evt_early", v.SetupIntentID); code != 200 || res.Effect != "" {
		t.Fatalf("event for a waiting setup = %d %+v", code, res)
	}
	if st := s.billingStatus(); st.PaymentMethod.Last4 != "0341" {
		t.Fatalf("a waiting setup replaced the card: %+v", st)
	}

	s.fake.setSIStatus(v.SetupIntentID, "succeeded")
	if code, res := event("evt_setup", v.SetupIntentID); code != 200 || res.Effect != accounts.EffectCardSaved || res.Duplicate {
		t.Fatalf("setup_intent.succeeded = %d %+v, want the card saved", code, res)
	}
	if st := s.billingStatus(); st.PaymentMethod == nil || st.PaymentMethod.Last4 != "3155" || len(st.PastDue) != 0 {
		t.Fatalf("billing status after the webhook: %+v", st)
	}
	if st := s.status(sub.ID); st != accounts.SubActive {
		t.Fatalf("the past-due charge was not retried on the webhook's card: %s", st)
	}
	retries := 0
	for _, c := range s.fake.calls("POST", "/v1/payment_intents") {
		if strings.HasPrefix(c.Form["metadata[timeblock_idempotency_key]"], "retry:") {
			retries++
		}
	}
	if code, res := event("evt_setup", v.SetupIntentID); code != 200 || !res.Duplicate || res.Effect != "" {
		t.Errorf("redelivery = %d %+v, want a duplicate", code, res)
	}
	var late struct {
		PaymentMethod struct{ Last4 string } `json:"paymentMethod"`
		Recovered     []string               `json:"recovered"`
	}
	if code := s.call("POST", "/api/billing/setup-intent", map[string]string{"setupIntent": v.SetupIntentID}, nil, &late); code != 200 || late.PaymentMethod.Last4 != "3155" || len(late.Recovered) != 0 {
		t.Errorf("the page's late call back = %d %+v", code, late)
	}
	n := 0
	for _, c := range s.fake.calls("POST", "/v1/payment_intents") {
		if strings.HasPrefix(c.Form["metadata[timeblock_idempotency_key]"], "retry:") {
			n++
		}
	}
	if retries != 1 || n != retries {
		t.Errorf("%d past-due retries after the webhook, %d after the redelivery and the call back; want 1 and 1", retries, n)
	}

	// An older setup delivered after another card was saved, and a setup
	// that succeeded at once (the request saved its card), are ignored.
	_, older, _ := s.setupAnswer(map[string]string{"paymentMethod": "pm_card_authenticationRequiredSetupForOffSession"})
	s.fake.setSIStatus(older.SetupIntentID, "succeeded")
	s.saveCard("pm_card_mastercard")
	if code, res := event("evt_older", older.SetupIntentID); code != 200 || res.Effect != "" {
		t.Errorf("an older setup's event = %d %+v, want ignored", code, res)
	}
	if st := s.billingStatus(); st.PaymentMethod == nil || st.PaymentMethod.Last4 != "4444" {
		t.Fatalf("an older setup replaced the newer card: %+v", st)
	}
	// The event of a setup that succeeded at once may arrive before its
	// request saved the card (here: pretend it has not yet).
	plain := s.fake.newestSetupIntent()
	err = s.store.Update(t.Context(), func(tx accounts.Tx) error {
		u, err := tx.GetUser(s.user)
		if err != nil {
			return err
		}
		u.PaymentMethod = &billing.PaymentMethod{ID: "pm_before", Brand: "visa", Last4: "0000"}
		return tx.UpdateUser(u)
	})
	if err != nil {
		t.Fatal(err)
	}
	if code, res := event("evt_plain", plain.ID); code != 200 || res.Effect != "" {
		t.Errorf("a setup that succeeded at once = %d %+v, want ignored (its request saves the card)", code, res)
	}
	if st := s.billingStatus(); st.PaymentMethod == nil || st.PaymentMethod.Last4 != "0000" {
		t.Fatalf("the webhook saved a card its request was saving: %+v", st)
	}
}
