package accounts_test

import (
	"errors"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// incompleteSubscribe subscribes u (whose card asks for 3-D Secure) to one
// europe seat and returns the 402's data, checking the held subscription.
func (e *env) incompleteSubscribe(u *accounts.User, pool *accounts.Pool) accounts.IncompleteData {
	e.t.Helper()
	q := 1
	_, err := e.svc.Subscribe(e.ctx, u.ID, pool.Slug, accounts.SubscribeRequest{Blocks: []string{"europe"}, Quantity: &q})
	if errors.Is(err, billing.ErrDeclined) {
		e.t.Fatalf("a payment waiting for the customer is not a decline: %v", err)
	}
	ae := wantStatus(e.t, err, 402, "3-D Secure", "/confirm")
	data, ok := ae.Data.(accounts.IncompleteData)
	if !ok {
		e.t.Fatalf("402 data = %#v, want IncompleteData", ae.Data)
	}
	if data.Status != accounts.SubIncomplete || data.ClientSecret == "" || data.Amount != "96.00" && data.Amount != "96" {
		e.t.Fatalf("402 data = %+v", data)
	}
	if want := e.clock.Now().Add(accounts.IncompleteHold); !data.HoldExpiresAt.Equal(want) {
		e.t.Errorf("holdExpiresAt = %v, want %v", data.HoldExpiresAt, want)
	}
	sub := e.getSub(data.SubscriptionID)
	if sub.Status != accounts.SubIncomplete || len(sub.Seats) != accounts.HoursPerBlock {
		e.t.Fatalf("held subscription = %s with %d seats, want incomplete with %d", sub.Status, len(sub.Seats), accounts.HoursPerBlock)
	}
	if len(e.chargesFor(sub.ID)) != 0 || len(e.charges(sub.ID)) != 0 {
		e.t.Fatalf("money moved before the customer authenticated: ledger %v, charges %v", e.chargesFor(sub.ID), e.charges(sub.ID))
	}
	// No key while incomplete.
	_, err = e.svc.CreateKey(e.ctx, u.ID, sub.ID, "k")
	wantStatus(e.t, err, 409, "incomplete")
	return data
}

// wantActive checks a subscription activated by its payment: active, one
// succeeded charge, the intent settled done (settlement finds nothing to
// refund), a key creatable.
func (e *env) wantActive(u *accounts.User, subID string) {
	e.t.Helper()
	sub := e.getSub(subID)
	if sub.Status != accounts.SubActive {
		e.t.Fatalf("status = %s, want active", sub.Status)
	}
	ch := e.charges(subID)
	if len(ch) != 1 || ch[0].Status != accounts.ChargeSucceeded || ch[0].ProcessorRef == "" {
		e.t.Fatalf("charges = %+v, want one succeeded", ch)
	}
	ledger := e.chargesFor(subID)
	if len(ledger) != 1 || ledger[0].Refunded || ledger[0].Ref != ch[0].ProcessorRef {
		e.t.Fatalf("ledger = %+v, want the one charge, not refunded", ledger)
	}
	e.clock.Advance(time.Hour) // past the settlement grace
	rep, err := e.svc.SettleIntents(e.ctx)
	e.must(err)
	if rep.Acted() {
		e.t.Errorf("settlement acted on an activated subscribe: %+v", rep)
	}
	if e.chargesFor(subID)[0].Refunded {
		e.t.Fatal("settlement refunded the charge of an active subscription")
	}
	row, err := e.svc.CreateKey(e.ctx, u.ID, subID, "k")
	e.must(err)
	if row.APIKey == "" {
		e.t.Fatal("no key created")
	}
}

// 3-D Secure completed, activation by the processor's webhook; the
// webhook delivered twice and a confirm afterwards change nothing more.
func TestIncompleteActivatedByWebhook(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("sca-hook", accounts.PoolActive, 1, false)
		u, _ := e.user("hook@example.com", billing.TestCardAuthentication)
		data := e.incompleteSubscribe(u, p)

		// Held: a second buyer finds the seat taken.
		other, _ := e.user("other@example.com", billing.TestCardVisa)
		q := 1
		_, err := e.svc.Subscribe(e.ctx, other.ID, p.Slug, accounts.SubscribeRequest{Blocks: []string{"europe"}, Quantity: &q})
		wantStatus(t, err, 409, "sold out")

		// Settlement leaves the intent of a live incomplete subscription alone.
		e.clock.Advance(20 * time.Minute)
		rep, err := e.svc.SettleIntents(e.ctx)
		e.must(err)
		if rep.Acted() {
			t.Fatalf("settlement acted on an incomplete subscription's intent: %+v", rep)
		}

		ref := data.ClientSecret[:len(data.ClientSecret)-len("_secret_test")]
		e.must(e.proc.Authenticate(e.ctx, ref))
		ev := accounts.ProcessorEvent{ID: "evt_sca_1", Type: "payment_intent.succeeded", Kind: accounts.EventChargeSucceeded,
			IdempotencyKey: "subscribe:" + data.SubscriptionID, Ref: ref}
		res, err := e.svc.ApplyProcessorEvent(e.ctx, ev)
		e.must(err)
		if res.Effect != accounts.SubActive {
			t.Fatalf("effect = %q, want active", res.Effect)
		}
		ev.ID = "evt_sca_2"
		res, err = e.svc.ApplyProcessorEvent(e.ctx, ev)
		e.must(err)
		if res.Effect != "" {
			t.Fatalf("a second success changed %q", res.Effect)
		}
		got, err := e.svc.ConfirmSubscription(e.ctx, u.ID, data.SubscriptionID)
		e.must(err)
		if got.Status != accounts.SubActive {
			t.Fatalf("confirm after the webhook = %s", got.Status)
		}
		if sub := e.getSub(data.SubscriptionID); !sub.CurrentPeriodStart.Equal(e.clock.Now()) {
			t.Errorf("period starts %v, want at the payment (%v)", sub.CurrentPeriodStart, e.clock.Now())
		}
		e.wantActive(u, data.SubscriptionID)
		if n := e.lifecycle().Incomplete; n != 0 {
			t.Errorf("lifecycle ended %d incomplete subscriptions after activation", n)
		}
	})
}

// 3-D Secure completed, activation by the confirm endpoint (no webhook);
// confirming before the customer finished answers 402 and holds on; another
// user's subscription is a 404.
func TestIncompleteActivatedByConfirm(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("sca-confirm", accounts.PoolActive, 2, false)
		u, _ := e.user("confirm@example.com", billing.TestCardAuthentication)
		data := e.incompleteSubscribe(u, p)

		_, err := e.svc.ConfirmSubscription(e.ctx, u.ID, data.SubscriptionID)
		ae := wantStatus(t, err, 402, "still waits")
		if d, ok := ae.Data.(accounts.IncompleteData); !ok || d.ClientSecret != "" || d.SubscriptionID != data.SubscriptionID {
			t.Errorf("waiting confirm data = %#v", ae.Data)
		}
		stranger, _ := e.user("stranger@example.com", "")
		_, err = e.svc.ConfirmSubscription(e.ctx, stranger.ID, data.SubscriptionID)
		wantStatus(t, err, 404)

		ref := data.ClientSecret[:len(data.ClientSecret)-len("_secret_test")]
		e.must(e.proc.Authenticate(e.ctx, ref))
		res, err := e.svc.ConfirmSubscription(e.ctx, u.ID, data.SubscriptionID)
		e.must(err)
		if res.Status != accounts.SubActive || res.ID != data.SubscriptionID {
			t.Fatalf("confirm = %s %s", res.ID, res.Status)
		}
		if _, err := e.svc.ConfirmSubscription(e.ctx, u.ID, data.SubscriptionID); err != nil {
			t.Fatalf("a repeated confirm: %v", err)
		}
		e.wantActive(u, data.SubscriptionID)
	})
}

// A manual-provisioning pool: paid → pending_key, as a paid subscribe.
func TestIncompleteManualPoolPendingKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("sca-manual", accounts.PoolActive, 1, true)
		u, _ := e.user("manual@example.com", billing.TestCardAuthentication)
		data := e.incompleteSubscribe(u, p)
		ref := data.ClientSecret[:len(data.ClientSecret)-len("_secret_test")]
		e.must(e.proc.Authenticate(e.ctx, ref))
		res, err := e.svc.ConfirmSubscription(e.ctx, u.ID, data.SubscriptionID)
		e.must(err)
		if res.Status != accounts.SubPendingKey {
			t.Fatalf("status = %s, want pending_key", res.Status)
		}
	})
}

// Never authenticated: the hold runs out, the lifecycle cancels the
// payment, the subscription is canceled and the seats are free again; a
// success reported afterwards is refunded.
func TestIncompleteExpires(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("sca-expiry", accounts.PoolActive, 1, false)
		u, _ := e.user("expiry@example.com", billing.TestCardAuthentication)
		data := e.incompleteSubscribe(u, p)
		ref := data.ClientSecret[:len(data.ClientSecret)-len("_secret_test")]

		e.clock.Advance(accounts.IncompleteHold - time.Second)
		if rep := e.lifecycle(); rep.Incomplete != 0 {
			t.Fatalf("ended before its hold: %+v", rep)
		}
		if len(e.taken(p.ID)) != accounts.HoursPerBlock {
			t.Fatal("seats released before the hold ran out")
		}
		e.clock.Advance(time.Second)
		if rep := e.lifecycle(); rep.Incomplete != 1 {
			t.Fatalf("lifecycle = %+v, want one incomplete ended", rep)
		}
		sub := e.getSub(data.SubscriptionID)
		if sub.Status != accounts.SubCanceled || len(sub.Seats) != 0 || len(e.taken(p.ID)) != 0 {
			t.Fatalf("after expiry: %s, %d seats, %d taken", sub.Status, len(sub.Seats), len(e.taken(p.ID)))
		}
		if st, err := e.proc.PaymentStatus(e.ctx, ref); err != nil || st != billing.PaymentFailed {
			t.Fatalf("payment after expiry = %q %v, want canceled (failed)", st, err)
		}
		if err := e.proc.Authenticate(e.ctx, ref); err == nil {
			t.Fatal("a canceled payment could still be authenticated")
		}
		// The seat sells again.
		buyer, _ := e.user("buyer@example.com", billing.TestCardVisa)
		e.subscribe(buyer, p.Slug, 1, "europe")
		// The confirm page comes back too late.
		_, err := e.svc.ConfirmSubscription(e.ctx, u.ID, data.SubscriptionID)
		if err != nil {
			t.Fatalf("confirm of an ended subscription: %v", err)
		}
		if e.lifecycle().Incomplete != 0 {
			t.Fatal("expired twice")
		}

		// A processor reporting a success for it anyway: refunded.
		late, err := e.proc.Charge(e.ctx, billing.ChargeRequest{UserID: u.ID, MethodID: billing.TestCardVisa,
			Amount: data.Amount, IdempotencyKey: "subscribe:" + data.SubscriptionID})
		e.must(err)
		if late != ref {
			t.Fatalf("late charge %s, want the payment %s", late, ref)
		}
		res, err := e.svc.ApplyProcessorEvent(e.ctx, accounts.ProcessorEvent{ID: "evt_late", Type: "payment_intent.succeeded",
			Kind: accounts.EventChargeSucceeded, IdempotencyKey: "subscribe:" + data.SubscriptionID, Ref: ref})
		e.must(err)
		if res.Effect != "" || e.getSub(data.SubscriptionID).Status != accounts.SubCanceled {
			t.Fatalf("a late success revived an expired subscription: %+v", res)
		}
		ledger := e.chargesFor(data.SubscriptionID)
		if len(ledger) != 1 || !ledger[0].Refunded {
			t.Fatalf("late success ledger = %+v, want it refunded", ledger)
		}
	})
}

// Authenticated but every activation missed (no webhook, no confirm): the
// expiry finds the payment succeeded and activates instead of canceling.
func TestIncompleteExpiryHonoursMissedSuccess(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("sca-missed", accounts.PoolActive, 1, false)
		u, _ := e.user("missed@example.com", billing.TestCardAuthentication)
		data := e.incompleteSubscribe(u, p)
		ref := data.ClientSecret[:len(data.ClientSecret)-len("_secret_test")]
		e.must(e.proc.Authenticate(e.ctx, ref))
		e.clock.Advance(accounts.IncompleteHold)
		if rep := e.lifecycle(); rep.Incomplete != 1 {
			t.Fatalf("lifecycle = %+v", rep)
		}
		e.wantActive(u, data.SubscriptionID)
	})
}

// The payment failed (payment_intent.payment_failed or .canceled):
// canceled, seats released, nothing charged.
func TestIncompleteFailedByWebhook(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("sca-failed", accounts.PoolActive, 1, false)
		u, _ := e.user("failed@example.com", billing.TestCardAuthentication)
		data := e.incompleteSubscribe(u, p)
		ref := data.ClientSecret[:len(data.ClientSecret)-len("_secret_test")]
		res, err := e.svc.ApplyProcessorEvent(e.ctx, accounts.ProcessorEvent{ID: "evt_fail", Type: "payment_intent.payment_failed",
			Kind: accounts.EventChargeFailed, IdempotencyKey: "subscribe:" + data.SubscriptionID, Ref: ref})
		e.must(err)
		if res.Effect != accounts.SubCanceled {
			t.Fatalf("effect = %q, want canceled", res.Effect)
		}
		if sub := e.getSub(data.SubscriptionID); sub.Status != accounts.SubCanceled || len(e.taken(p.ID)) != 0 {
			t.Fatalf("after failure: %s, %d seats taken", sub.Status, len(e.taken(p.ID)))
		}
		if len(e.chargesFor(data.SubscriptionID)) != 0 || len(e.charges(data.SubscriptionID)) != 0 {
			t.Fatal("charged for a failed payment")
		}
		if err := e.proc.Authenticate(e.ctx, ref); err == nil {
			t.Fatal("the payment of a failed authentication was not canceled")
		}
		e.clock.Advance(time.Hour)
		if rep, err := e.svc.SettleIntents(e.ctx); err != nil || rep.Acted() {
			t.Fatalf("settlement after a failed payment: %+v %v", rep, err)
		}
		if rep := e.lifecycle(); rep.Incomplete != 0 {
			t.Fatalf("lifecycle acted on a canceled subscription: %+v", rep)
		}
	})
}

// A request under an Idempotency-Key that died after creating an incomplete
// subscription: carried on, the purchase says so (402) instead of answering
// 201 with it; once the hold ended it unpaid, the key answers that nothing
// was bought, and never charges.
func TestIncompleteIdempotentTakeover(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("sca-takeover", accounts.PoolActive, 1, false)
		u, _ := e.user("takeover@example.com", billing.TestCardAuthentication)
		start, err := e.svc.BeginIdempotent(e.ctx, u.ID, "k-1", "fp")
		e.must(err)
		q := 1
		req := accounts.SubscribeRequest{Blocks: []string{"europe"}, Quantity: &q}
		_, err = e.svc.SubscribeAs(e.ctx, u.ID, p.Slug, req, start.PurchaseID)
		wantStatus(t, err, 402, "3-D Secure")
		// The node dies before recording the answer.
		e.clock.Advance(11 * time.Minute)
		again, err := e.svc.BeginIdempotent(e.ctx, u.ID, "k-1", "fp")
		e.must(err)
		if again.Replay != nil || again.PurchaseID != start.PurchaseID {
			t.Fatalf("after the lease: %+v, want the same purchase %s carried on", again, start.PurchaseID)
		}
		_, err = e.svc.SubscribeAs(e.ctx, u.ID, p.Slug, req, again.PurchaseID)
		ae := wantStatus(t, err, 402, "3-D Secure", start.PurchaseID)
		if d, ok := ae.Data.(accounts.IncompleteData); !ok || d.SubscriptionID != start.PurchaseID || d.Status != accounts.SubIncomplete || d.Amount == "" {
			t.Fatalf("carried-on data = %#v", ae.Data)
		}
		e.clock.Advance(accounts.IncompleteHold)
		if rep := e.lifecycle(); rep.Incomplete != 1 {
			t.Fatalf("lifecycle = %+v", rep)
		}
		last, err := e.svc.BeginIdempotent(e.ctx, u.ID, "k-1", "fp")
		e.must(err)
		_, err = e.svc.SubscribeAs(e.ctx, u.ID, p.Slug, req, last.PurchaseID)
		wantStatus(t, err, 409, "bought nothing", "new Idempotency-Key")
		if n := len(e.proc.Ledger()); n != 0 {
			t.Fatalf("%d charges for a purchase never authenticated", n)
		}
	})
}
