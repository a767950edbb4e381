package stripe_test

// The Stripe processor behind the account service and the account API:
// subscribing, declines, and webhook deliveries signed the way Stripe signs
// them, against the fake Stripe.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v85/webhook"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/api"
	"github.com/timeblock/timeblock/accounts/billing"
	"github.com/timeblock/timeblock/accounts/billing/stripe"
	"github.com/timeblock/timeblock/accounts/embedded"
)

const testWebhookSecret = "whsec_testsecret0123456789"

type site struct {
	t     *testing.T
	fake  *fakeStripe
	store accounts.Store
	svc   *accounts.Service
	proc  *stripe.Processor
	srv   *httptest.Server
	token string
	user  string
	now   time.Time // the service's clock
}

func newSite(t *testing.T) *site {
	t.Helper()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fake := newFakeStripe(t)
	proc, err := stripe.New(stripe.Config{SecretKey: testKey, WebhookSecret: testWebhookSecret, APIBase: fake.URL(), Store: st, MaxNetworkRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	s := &site{t: t, fake: fake, store: st, proc: proc, now: time.Now().UTC()}
	svc, err := accounts.NewService(accounts.Config{Store: st, Secret: "0123456789abcdef0123456789", Processor: proc,
		Now: func() time.Time { return s.now }})
	if err != nil {
		t.Fatal(err)
	}
	s.svc = svc
	err = st.Update(t.Context(), func(tx accounts.Tx) error {
		return tx.UpsertPool(&accounts.Pool{ID: "pool-1", Slug: "llama", ModelID: "m", ModelName: "M", Status: accounts.PoolActive,
			Slots: 2, BlockPrices: map[accounts.Block]string{accounts.BlockAsia: "40.85"}, AnnualDiscount: "0", UpdatedAt: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	u, token, err := svc.CreateUser(t.Context(), "ada@example.com", "Ada")
	if err != nil {
		t.Fatal(err)
	}
	s.token, s.user = token, u.ID
	s.srv = httptest.NewServer(api.New(svc, api.Options{Webhook: proc}))
	t.Cleanup(s.srv.Close)
	return s
}

// call makes an API request and decodes the envelope's data into out.
func (s *site) call(method, path string, body any, header map[string]string, out any) int {
	s.t.Helper()
	var rd *bytes.Reader
	switch b := body.(type) {
	case []byte:
		rd = bytes.NewReader(b)
	case nil:
		rd = bytes.NewReader(nil)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, s.srv.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Data  json.RawMessage `json:"data"`
		Error string          `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&env)
	if out != nil {
		if e, ok := out.(*string); ok {
			*e = env.Error
		} else if len(env.Data) > 0 {
			json.Unmarshal(env.Data, out)
		}
	}
	return resp.StatusCode
}

// saveCard saves a card through the API; a setup that waits for 3-D
// Secure is authenticated at the fake and finished, as the page does.
func (s *site) saveCard(token string) {
	s.t.Helper()
	var action accounts.SetupActionView
	code := s.call("POST", "/api/billing/setup-intent", map[string]string{"paymentMethod": token}, nil, &action)
	if code == 402 && action.Status == accounts.SetupRequiresAction {
		s.fake.setSIStatus(action.SetupIntentID, "succeeded")
		code = s.call("POST", "/api/billing/setup-intent", map[string]string{"setupIntent": action.SetupIntentID}, nil, nil)
	}
	if code != 200 {
		s.t.Fatalf("setup-intent %s: %d", token, code)
	}
}

type subView struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	AmountCharged string `json:"amountCharged"`
}

func (s *site) subscribe() subView {
	s.t.Helper()
	var v subView
	if code := s.call("POST", "/api/pools/llama/subscribe", map[string]any{"blocks": []string{"asia"}}, nil, &v); code != 201 {
		s.t.Fatalf("subscribe: %d", code)
	}
	return v
}

func (s *site) status(subID string) string {
	s.t.Helper()
	var st string
	s.store.View(s.t.Context(), func(tx accounts.Tx) error {
		sub, err := tx.GetSubscription(subID)
		if err == nil {
			st = sub.Status
		}
		return err
	})
	return st
}

// deliver posts an event signed with secret at time at; it returns the
// status and the answer's data.
func (s *site) deliver(id, typ string, object map[string]any, secret string, at time.Time) (int, api.WebhookResult) {
	s.t.Helper()
	payload, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "api_version": "2020-08-27",
		"created": at.Unix(), "data": map[string]any{"object": object}})
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: at})
	var res api.WebhookResult
	req, _ := http.NewRequest("POST", s.srv.URL+"/api/billing/webhook", bytes.NewReader(payload))
	req.Header.Set("Stripe-Signature", signed.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Data api.WebhookResult `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&env)
	res = env.Data
	return resp.StatusCode, res
}

func TestSubscribeWithStripe(t *testing.T) {
	s := newSite(t)
	s.saveCard("pm_card_visa")
	v := s.subscribe()
	if v.Status != accounts.SubActive || v.AmountCharged != "40.85" {
		t.Fatalf("subscription = %+v", v)
	}
	pis := s.fake.paymentIntents()
	if len(pis) != 1 || pis[0].Amount != 4085 || pis[0].Metadata[stripe.MetaIdempotencyKey] != "subscribe:"+v.ID {
		t.Fatalf("payment intents = %+v", pis)
	}
}

func TestDeclineSaysStripesReasonAndCreatesNothing(t *testing.T) {
	s := newSite(t)
	s.saveCard("pm_card_visa_chargeDeclinedInsufficientFunds")
	var msg string
	code := s.call("POST", "/api/pools/llama/subscribe", map[string]any{"blocks": []string{"asia"}}, nil, &msg)
	if code != 402 || !strings.Contains(msg, "insufficient funds") || !strings.Contains(msg, "nothing was created") {
		t.Fatalf("decline = %d %q, want 402 with Stripe's reason and that nothing was created", code, msg)
	}
	var subs []subView
	s.call("GET", "/api/pools/llama/my-subscriptions", nil, nil, &subs)
	if len(subs) != 0 {
		t.Errorf("subscriptions after declines: %+v", subs)
	}
	for _, pi := range s.fake.paymentIntents() {
		if pi.Status == "succeeded" || pi.Status == "requires_action" {
			t.Errorf("payment intent %s is %s after a decline", pi.ID, pi.Status)
		}
	}
}

// incompleteView is the data of the 402 of a subscribe waiting for 3-D Secure.
type incompleteView struct {
	SubscriptionID string    `json:"subscriptionId"`
	Status         string    `json:"status"`
	ClientSecret   string    `json:"clientSecret"`
	Amount         string    `json:"amount"`
	HoldExpiresAt  time.Time `json:"holdExpiresAt"`
}

// subscribeIncomplete subscribes with the 3-D Secure card and checks the 402.
func (s *site) subscribeIncomplete(header map[string]string) (incompleteView, *fakePI) {
	s.t.Helper()
	var v incompleteView
	code := s.call("POST", "/api/pools/llama/subscribe", map[string]any{"blocks": []string{"asia"}}, header, &v)
	if code != 402 || v.Status != accounts.SubIncomplete || v.SubscriptionID == "" || v.Amount != "40.85" {
		s.t.Fatalf("subscribe with 3-D Secure = %d %+v, want 402 incomplete", code, v)
	}
	var pi *fakePI
	for _, x := range s.fake.paymentIntents() {
		if x.Metadata[stripe.MetaIdempotencyKey] == "subscribe:"+v.SubscriptionID {
			pi = x
		}
	}
	if pi == nil || pi.Status != "requires_action" || v.ClientSecret != pi.ID+"_secret" {
		s.t.Fatalf("payment intent %+v, client secret %q", pi, v.ClientSecret)
	}
	if want := s.now.Add(accounts.IncompleteHold); !v.HoldExpiresAt.Equal(want.Truncate(time.Microsecond)) {
		s.t.Errorf("holdExpiresAt = %v, want %v", v.HoldExpiresAt, want)
	}
	if st := s.status(v.SubscriptionID); st != accounts.SubIncomplete {
		s.t.Fatalf("stored status %q", st)
	}
	return v, pi
}

// 3-D Secure through the API with Stripe: 402 with the client secret and an
// incomplete subscription; the Idempotency-Key replay gives the same answer
// without a second PaymentIntent; the webhook payment_intent.succeeded
// activates it and a key can be made.
func TestSubscribeWithAuthenticationActivatedByWebhook(t *testing.T) {
	s := newSite(t)
	s.saveCard("pm_card_authenticationRequired")
	hdr := map[string]string{"Idempotency-Key": "sca-1"}
	v, pi := s.subscribeIncomplete(hdr)
	if again, _ := s.subscribeIncomplete(hdr); again.SubscriptionID != v.SubscriptionID || len(s.fake.paymentIntents()) != 1 {
		t.Fatalf("replay = %+v, %d payment intents", again, len(s.fake.paymentIntents()))
	}
	var kr map[string]any
	if code := s.call("POST", "/api/keys/subscription", map[string]any{"subscriptionId": v.SubscriptionID}, nil, &kr); code != 409 {
		t.Fatalf("key for an incomplete subscription = %d", code)
	}
	s.fake.setPIStatus(pi.ID, "succeeded")
	code, res := s.deliver("evt_sca_ok", "payment_intent.succeeded", map[string]any{"id": pi.ID, "object": "payment_intent"}, testWebhookSecret, time.Now())
	if code != 200 || s.status(v.SubscriptionID) != accounts.SubActive {
		t.Fatalf("webhook = %d %+v, status %s", code, res, s.status(v.SubscriptionID))
	}
	if code := s.call("POST", "/api/keys/subscription", map[string]any{"subscriptionId": v.SubscriptionID}, nil, &kr); code != 201 {
		t.Fatalf("key after activation = %d", code)
	}
	var confirmed subView
	if code := s.call("POST", "/api/subscriptions/"+v.SubscriptionID+"/confirm", nil, nil, &confirmed); code != 200 || confirmed.Status != accounts.SubActive {
		t.Fatalf("confirm after the webhook = %d %+v", code, confirmed)
	}
	if pis := s.fake.paymentIntents(); pis[0].Refunded || pis[0].Status != "succeeded" {
		t.Fatalf("payment intent %+v", pis[0])
	}
}

// The page finishes with the confirm endpoint (no webhook); a failed
// authentication reported by webhook cancels another one and frees its seat;
// an expired one is canceled at Stripe.
func TestSubscribeWithAuthenticationConfirmFailAndExpiry(t *testing.T) {
	s := newSite(t)
	s.saveCard("pm_card_authenticationRequired")
	v, pi := s.subscribeIncomplete(nil)
	var msg string
	if code := s.call("POST", "/api/subscriptions/"+v.SubscriptionID+"/confirm", nil, nil, &msg); code != 402 || !strings.Contains(msg, "still waits") {
		t.Fatalf("confirm before authentication = %d %q", code, msg)
	}
	if code := s.call("POST", "/api/subscriptions/not-mine/confirm", nil, nil, nil); code != 404 {
		t.Fatalf("confirm of an unknown subscription = %d", code)
	}
	s.fake.setPIStatus(pi.ID, "succeeded")
	var confirmed subView
	if code := s.call("POST", "/api/subscriptions/"+v.SubscriptionID+"/confirm", nil, nil, &confirmed); code != 200 || confirmed.Status != accounts.SubActive || confirmed.ID != v.SubscriptionID {
		t.Fatalf("confirm = %d %+v", code, confirmed)
	}

	// Failed: the second seat is released.
	v2, pi2 := s.subscribeIncomplete(nil)
	s.fake.setPIStatus(pi2.ID, "requires_payment_method")
	code, _ := s.deliver("evt_sca_fail", "payment_intent.payment_failed", map[string]any{"id": pi2.ID, "object": "payment_intent"}, testWebhookSecret, time.Now())
	if code != 200 || s.status(v2.SubscriptionID) != accounts.SubCanceled {
		t.Fatalf("failed webhook = %d, status %s", code, s.status(v2.SubscriptionID))
	}
	for _, x := range s.fake.paymentIntents() {
		if x.ID == pi2.ID && x.Status != "canceled" {
			t.Fatalf("payment intent of a failed authentication is %s, want canceled for good", x.Status)
		}
	}

	// Expired: canceled at Stripe, canceled here, seat free for the next.
	v3, pi3 := s.subscribeIncomplete(nil)
	s.now = s.now.Add(accounts.IncompleteHold + time.Minute)
	rep, err := s.svc.RunLifecycle(t.Context())
	if err != nil || rep.Incomplete != 1 {
		t.Fatalf("lifecycle = %+v %v", rep, err)
	}
	if s.status(v3.SubscriptionID) != accounts.SubCanceled {
		t.Fatalf("expired status %s", s.status(v3.SubscriptionID))
	}
	for _, x := range s.fake.paymentIntents() {
		if x.ID == pi3.ID && x.Status != "canceled" {
			t.Fatalf("expired payment intent %s", x.Status)
		}
	}
	s.saveCard("pm_card_visa")
	if v := s.subscribe(); v.Status != accounts.SubActive {
		t.Fatalf("the released seat: %+v", v)
	}
}

func chargeObject(pi *fakePI, refunded bool, withMetadata bool) map[string]any {
	o := map[string]any{"id": "ch_" + pi.ID, "object": "charge", "payment_intent": pi.ID, "refunded": refunded, "metadata": map[string]string{}}
	if withMetadata {
		o["metadata"] = pi.Metadata
	}
	return o
}

func TestWebhookSignatures(t *testing.T) {
	s := newSite(t)
	now := time.Now()
	obj := map[string]any{"id": "ch_1", "object": "charge", "refunded": false}
	if code, _ := s.deliver("evt_ok", "charge.refunded", obj, testWebhookSecret, now); code != 200 {
		t.Fatalf("a signed delivery: %d", code)
	}
	if code, _ := s.deliver("evt_wrong", "charge.refunded", obj, "whsec_someoneelse0123456789", now); code != 400 {
		t.Errorf("wrong secret: %d, want 400", code)
	}
	if code, _ := s.deliver("evt_old", "charge.refunded", obj, testWebhookSecret, now.Add(-10*time.Minute)); code != 400 {
		t.Errorf("stale timestamp: %d, want 400", code)
	}
	if code, _ := s.deliver("evt_ahead", "charge.refunded", obj, testWebhookSecret, now.Add(time.Hour)); code != 400 {
		t.Errorf("timestamp an hour ahead: %d, want 400", code)
	}
	if code, _ := s.deliver("evt_skew", "charge.refunded", obj, testWebhookSecret, now.Add(time.Minute)); code != 200 {
		t.Errorf("timestamp a minute ahead (clock skew within the tolerance): %d, want 200", code)
	}
	for name, header := range map[string]string{"unsigned": "", "malformed": "garbage", "no v1": fmt.Sprintf("t=%d", now.Unix())} {
		req, _ := http.NewRequest("POST", s.srv.URL+"/api/billing/webhook", strings.NewReader(`{"id":"evt_x","type":"charge.refunded"}`))
		if header != "" {
			req.Header.Set("Stripe-Signature", header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("%s: %d, want 400", name, resp.StatusCode)
		}
	}
	// A refused delivery records nothing: the same event id, signed, is new.
	if code, res := s.deliver("evt_wrong", "charge.refunded", obj, testWebhookSecret, now); code != 200 || res.Duplicate {
		t.Errorf("evt_wrong signed after the refusal: %d %+v, want applied", code, res)
	}
}

func TestWebhookRefundDisputeAndDuplicates(t *testing.T) {
	s := newSite(t)
	s.saveCard("pm_card_visa")
	v := s.subscribe()
	pi := s.fake.paymentIntents()[0]
	now := time.Now()

	// The PaymentIntent's own success, late: nothing to do.
	if code, res := s.deliver("evt_pi", "payment_intent.succeeded", map[string]any{"id": pi.ID, "object": "payment_intent"}, testWebhookSecret, now); code != 200 || res.Effect != "" {
		t.Fatalf("payment_intent.succeeded: %d %+v", code, res)
	}
	// A partial refund changes nothing; a full one makes the period unpaid.
	if code, res := s.deliver("evt_partial", "charge.refunded", chargeObject(pi, false, true), testWebhookSecret, now); code != 200 || res.Effect != "" {
		t.Fatalf("partial refund: %d %+v", code, res)
	}
	if s.status(v.ID) != accounts.SubActive {
		t.Fatalf("after a partial refund: %s", s.status(v.ID))
	}
	code, res := s.deliver("evt_refund", "charge.refunded", chargeObject(pi, true, true), testWebhookSecret, now)
	if code != 200 || res.Effect != accounts.SubPastDue || s.status(v.ID) != accounts.SubPastDue {
		t.Fatalf("full refund: %d %+v, status %s; want past_due", code, res, s.status(v.ID))
	}
	// Redelivery: a no-op that says so.
	code, res = s.deliver("evt_refund", "charge.refunded", chargeObject(pi, true, true), testWebhookSecret, now)
	if code != 200 || !res.Duplicate {
		t.Fatalf("redelivery: %d %+v", code, res)
	}
	// The user pays again by saving a card: active, and a later copy of
	// the refund event (another id) does not undo it, the charge it
	// refunded being no longer the period's.
	s.saveCard("pm_card_mastercard")
	if st := s.status(v.ID); st != accounts.SubActive {
		t.Fatalf("after saving a card: %s", st)
	}
	if code, res := s.deliver("evt_refund_again", "charge.refunded", chargeObject(pi, true, false), testWebhookSecret, now); code != 200 || res.Effect != "" || s.status(v.ID) != accounts.SubActive {
		t.Fatalf("old refund after payment: %d %+v, status %s", code, res, s.status(v.ID))
	}
}

func TestWebhookDisputeInAnyOrder(t *testing.T) {
	s := newSite(t)
	s.saveCard("pm_card_visa")
	v := s.subscribe()
	pi := s.fake.paymentIntents()[0]
	now := time.Now()
	dispute := map[string]any{"id": "dp_1", "object": "dispute", "payment_intent": pi.ID, "status": "needs_response"}

	// Opened: the period is unpaid while the money is contested.
	s.fake.setDispute("dp_1", "needs_response", pi.ID)
	if code, res := s.deliver("evt_d1", "charge.dispute.created", dispute, testWebhookSecret, now); code != 200 || res.Effect != accounts.SubPastDue {
		t.Fatalf("dispute created: %d %+v", code, res)
	}
	// Won: active again.
	s.fake.setDispute("dp_1", "won", pi.ID)
	if code, res := s.deliver("evt_d3", "charge.dispute.closed", dispute, testWebhookSecret, now); code != 200 || res.Effect != accounts.SubActive {
		t.Fatalf("dispute won: %d %+v", code, res)
	}
	// A late delivery of an earlier event (updated, sent before closed)
	// reads the dispute as it is now: won, nothing changes.
	if code, res := s.deliver("evt_d2", "charge.dispute.updated", dispute, testWebhookSecret, now); code != 200 || res.Effect != "" {
		t.Fatalf("late dispute event: %d %+v", code, res)
	}
	if st := s.status(v.ID); st != accounts.SubActive {
		t.Fatalf("after the events in any order: %s", st)
	}
}

func TestWebhookLateFailureOfAPaymentThatWasProcessing(t *testing.T) {
	s := newSite(t)
	s.saveCard("pm_card_visa")
	v := s.subscribe()
	pi := s.fake.paymentIntents()[0]
	now := time.Now()
	// Delivered out of order: the failure first (the payment had been
	// processing, and failed), then the success event of another
	// PaymentIntent nobody knows.
	s.fake.setPIStatus(pi.ID, "requires_payment_method")
	code, res := s.deliver("evt_fail", "payment_intent.payment_failed", map[string]any{"id": pi.ID, "object": "payment_intent"}, testWebhookSecret, now)
	if code != 200 || res.Effect != accounts.SubPastDue {
		t.Fatalf("payment failed: %d %+v", code, res)
	}
	// The success event of the same PaymentIntent, delivered late, reads
	// the PaymentIntent as it is now (failed): still past due.
	code, res = s.deliver("evt_succ", "payment_intent.succeeded", map[string]any{"id": pi.ID, "object": "payment_intent"}, testWebhookSecret, now)
	if code != 200 || res.Effect != "" || s.status(v.ID) != accounts.SubPastDue {
		t.Fatalf("late success event: %d %+v, status %s", code, res, s.status(v.ID))
	}
}

func TestWebhookStripeUnreachableIsRetried(t *testing.T) {
	s := newSite(t)
	s.saveCard("pm_card_visa")
	v := s.subscribe()
	pi := s.fake.paymentIntents()[0]
	s.fake.setPIStatus(pi.ID, "requires_payment_method")
	now := time.Now()
	s.fake.mu.Lock()
	s.fake.failNext = 1
	s.fake.mu.Unlock()
	obj := map[string]any{"id": pi.ID, "object": "payment_intent"}
	if code, _ := s.deliver("evt_1", "payment_intent.payment_failed", obj, testWebhookSecret, now); code < 500 {
		t.Fatalf("with Stripe unreachable: %d, want a 5xx so that Stripe delivers again", code)
	}
	if st := s.status(v.ID); st != accounts.SubActive {
		t.Fatalf("after the failed delivery: %s", st)
	}
	// Nothing was recorded: the redelivery is applied, not a duplicate.
	code, res := s.deliver("evt_1", "payment_intent.payment_failed", obj, testWebhookSecret, now)
	if code != 200 || res.Duplicate || res.Effect != accounts.SubPastDue {
		t.Fatalf("redelivery: %d %+v", code, res)
	}
	// An event about an object Stripe does not know is recorded and ignored.
	code, res = s.deliver("evt_2", "payment_intent.succeeded", map[string]any{"id": "pi_nobody", "object": "payment_intent"}, testWebhookSecret, now)
	if code != 200 || res.Effect != "" {
		t.Fatalf("unknown PaymentIntent: %d %+v", code, res)
	}
}

// TestWebhookRenewalThatSucceededAfterAll: a renewal Stripe declined makes
// the subscription past due; when Stripe later reports that PaymentIntent
// succeeded, the subscription is active again for the new period.
func TestWebhookRenewalThatSucceededAfterAll(t *testing.T) {
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
	pis := s.fake.paymentIntents()
	renewal := pis[len(pis)-1]
	if !strings.HasPrefix(renewal.Metadata[stripe.MetaIdempotencyKey], "renew:"+v.ID+":") {
		t.Fatalf("last payment intent = %+v, want the renewal", renewal)
	}
	if calls := s.fake.calls("POST", "/v1/payment_intents"); calls[len(calls)-1].Form["off_session"] != "true" {
		t.Errorf("the renewal was not off session: %+v", calls[len(calls)-1].Form)
	}
	var before time.Time
	s.store.View(t.Context(), func(tx accounts.Tx) error {
		sub, err := tx.GetSubscription(v.ID)
		before = sub.CurrentPeriodEnd
		return err
	})
	s.fake.setPIStatus(renewal.ID, "succeeded")
	code, res := s.deliver("evt_renewed", "payment_intent.succeeded", map[string]any{"id": renewal.ID, "object": "payment_intent"}, testWebhookSecret, time.Now())
	if code != 200 || res.Effect != accounts.SubActive {
		t.Fatalf("renewal succeeded: %d %+v", code, res)
	}
	s.store.View(t.Context(), func(tx accounts.Tx) error {
		sub, err := tx.GetSubscription(v.ID)
		if err == nil && (sub.Status != accounts.SubActive || !sub.CurrentPeriodStart.Equal(before)) {
			t.Errorf("subscription = %s from %s, want active from %s", sub.Status, sub.CurrentPeriodStart, before)
		}
		return err
	})
}

// TestCrashBetweenChargeAndRecordIsRefunded: a node wrote its charge
// intent, Stripe charged, and the node died before the subscription was
// created. Settlement finds the charge by its idempotency key (the
// PaymentIntent's metadata) and refunds it: no money without a
// subscription. A declined attempt left behind is closed as void.
func TestCrashBetweenChargeAndRecordIsRefunded(t *testing.T) {
	s := newSite(t)
	s.saveCard("pm_card_visa")
	var pm string
	s.store.View(t.Context(), func(tx accounts.Tx) error {
		u, err := tx.GetUser(s.user)
		pm = u.PaymentMethod.ID
		return err
	})
	for _, id := range []string{"sub-charged", "sub-never-charged"} {
		err := s.store.Update(t.Context(), func(tx accounts.Tx) error {
			return tx.CreateChargeIntent(&accounts.ChargeIntent{ID: "intent-" + id, UserID: s.user, SubscriptionID: id,
				Kind: accounts.IntentSubscribe, Amount: "40.85", IdempotencyKey: "subscribe:" + id,
				Status: accounts.IntentPending, CreatedAt: s.now, UpdatedAt: s.now})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	ref, err := s.proc.Charge(t.Context(), billing.ChargeRequest{UserID: s.user, MethodID: pm, Amount: "40.85", IdempotencyKey: "subscribe:sub-charged"})
	if err != nil {
		t.Fatal(err)
	}
	// ... and the node dies here. Another node settles later.
	s.now = s.now.Add(time.Hour)
	if _, err := s.svc.SettleIntents(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, pi := range s.fake.paymentIntents() {
		if pi.ID == ref && !pi.Refunded {
			t.Errorf("the orphan charge %s was not refunded", ref)
		}
	}
	want := map[string]string{"intent-sub-charged": accounts.IntentRefunded, "intent-sub-never-charged": accounts.IntentVoid}
	for id, status := range want {
		s.store.View(t.Context(), func(tx accounts.Tx) error {
			in, err := tx.GetChargeIntent(id)
			if err == nil && in.Status != status {
				t.Errorf("intent %s is %s, want %s", id, in.Status, status)
			}
			return err
		})
	}
	if refunds := s.fake.calls("POST", "/v1/refunds"); len(refunds) != 1 {
		t.Errorf("%d refunds, want 1", len(refunds))
	}
}

// TestWebhookFailureBeforeTheSubscriptionIsRecorded: the failure of a
// subscribe's payment arrives while that subscribe is still running (its
// charge intent open, no subscription yet): 503, nothing recorded, and the
// redelivery after the subscription exists makes it past due.
func TestWebhookFailureBeforeTheSubscriptionIsRecorded(t *testing.T) {
	s := newSite(t)
	s.saveCard("pm_card_visa")
	var pm string
	s.store.View(t.Context(), func(tx accounts.Tx) error {
		u, err := tx.GetUser(s.user)
		pm = u.PaymentMethod.ID
		return err
	})
	err := s.store.Update(t.Context(), func(tx accounts.Tx) error {
		return tx.CreateChargeIntent(&accounts.ChargeIntent{ID: "intent-x", UserID: s.user, SubscriptionID: "sub-x",
			Kind: accounts.IntentSubscribe, Amount: "40.85", IdempotencyKey: "subscribe:sub-x",
			Status: accounts.IntentPending, CreatedAt: s.now, UpdatedAt: s.now})
	})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := s.proc.Charge(t.Context(), billing.ChargeRequest{UserID: s.user, MethodID: pm, Amount: "40.85", IdempotencyKey: "subscribe:sub-x"})
	if err != nil {
		t.Fatal(err)
	}
	s.fake.setPIStatus(ref, "requires_payment_method")
	obj := map[string]any{"id": ref, "object": "payment_intent"}
	if code, _ := s.deliver("evt_early", "payment_intent.payment_failed", obj, testWebhookSecret, time.Now()); code != 503 {
		t.Fatalf("failure while the subscribe runs: %d, want 503", code)
	}
	// The intent closes without a subscription (the subscribe failed): the
	// redelivery is recorded with no effect.
	err = s.store.Update(t.Context(), func(tx accounts.Tx) error {
		in, err := tx.GetChargeIntent("intent-x")
		if err != nil {
			return err
		}
		in.Status = accounts.IntentVoid
		return tx.UpdateChargeIntent(in)
	})
	if err != nil {
		t.Fatal(err)
	}
	if code, res := s.deliver("evt_early", "payment_intent.payment_failed", obj, testWebhookSecret, time.Now()); code != 200 || res.Duplicate || res.Effect != "" {
		t.Fatalf("redelivery after the intent closed: %d %+v", code, res)
	}
}

// TestPledgeChargeLostThenCardChangedAtStripe: the funding pass charges a
// pledge at Stripe, the answer is lost, and the buyer saves another card.
// Stripe refuses the key with the new card (idempotency_error), so the
// takeover must re-send the pledge's own card: one PaymentIntent, the
// pledge active. Before, every pass re-sent the new card and the pledge
// stayed charged and pledged for good.
func TestPledgeChargeLostThenCardChangedAtStripe(t *testing.T) {
	s := newSite(t)
	err := s.store.Update(t.Context(), func(tx accounts.Tx) error {
		return tx.UpsertPool(&accounts.Pool{ID: "pool-2", Slug: "fund", ModelID: "mf", ModelName: "F", Status: accounts.PoolFunding,
			Slots: 4, FundingGoal: "1000", BlockPrices: map[accounts.Block]string{accounts.BlockAsia: "40.85"}, AnnualDiscount: "0", UpdatedAt: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	s.saveCard("pm_card_visa")
	var v subView
	if code := s.call("POST", "/api/pools/fund/subscribe", map[string]any{"blocks": []string{"asia"}}, nil, &v); code != 201 || v.Status != accounts.SubPledged {
		t.Fatalf("pledge: %d %+v", code, v)
	}
	if _, err := s.svc.SetPoolStatus(t.Context(), "fund", accounts.PoolActive); err != nil {
		t.Fatal(err)
	}
	s.fake.loseNext = 1
	if _, err := s.svc.RunFunding(t.Context()); err == nil {
		t.Fatal("the funding pass reported no error for a lost answer")
	}
	if st := s.status(v.ID); st != accounts.SubPledged {
		t.Fatalf("after the lost answer the pledge is %s", st)
	}
	s.saveCard("pm_card_mastercard")
	s.now = s.now.Add(16 * time.Minute) // past the takeover grace
	if _, err := s.svc.RunFunding(t.Context()); err != nil {
		t.Fatalf("the takeover: %v", err)
	}
	if st := s.status(v.ID); st != accounts.SubActive {
		t.Fatalf("after the takeover the pledge is %s, want active", st)
	}
	var pledges []*fakePI
	for _, pi := range s.fake.paymentIntents() {
		if pi.Metadata[stripe.MetaIdempotencyKey] == billing.PledgeKey(v.ID) {
			pledges = append(pledges, pi)
		}
	}
	if len(pledges) != 1 || pledges[0].Status != "succeeded" {
		t.Fatalf("pledge PaymentIntents %+v, want one succeeded", pledges)
	}
	if _, err := s.svc.SettleIntents(t.Context()); err != nil {
		t.Fatal(err)
	}
	if refunds := s.fake.calls("POST", "/v1/refunds"); len(refunds) != 0 {
		t.Fatalf("settlement refunded the kept pledge: %+v", refunds)
	}
}
