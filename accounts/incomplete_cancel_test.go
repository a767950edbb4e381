package accounts_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// cancelProcessor is the test processor with an unreachable CancelPayment
// or Refund on demand; it notes every refund's idempotency key.
type cancelProcessor struct {
	*billing.TestProcessor
	cancelDown, refundDown atomic.Bool

	mu      sync.Mutex
	refunds map[string][]string // ref → idempotency keys, one per call
}

func (p *cancelProcessor) CancelPayment(ctx context.Context, ref, key string) (string, error) {
	if p.cancelDown.Load() {
		return "", errors.New("processor unreachable")
	}
	return p.TestProcessor.CancelPayment(ctx, ref, key)
}

func (p *cancelProcessor) Refund(ctx context.Context, ref, key string) error {
	if p.refundDown.Load() {
		return errors.New("processor unreachable")
	}
	p.mu.Lock()
	if p.refunds == nil {
		p.refunds = make(map[string][]string)
	}
	p.refunds[ref] = append(p.refunds[ref], key)
	p.mu.Unlock()
	return p.TestProcessor.Refund(ctx, ref, key)
}

// refundKeys returns the distinct idempotency keys ref was refunded under:
// the processor refunds once per key.
func (p *cancelProcessor) refundKeys(ref string) map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make(map[string]bool)
	for _, k := range p.refunds[ref] {
		keys[k] = true
	}
	return keys
}

// withCancelProcessor makes the environment's service use a cancelProcessor
// over its test processor.
func (e *env) withCancelProcessor() *cancelProcessor {
	e.t.Helper()
	p := &cancelProcessor{TestProcessor: e.proc}
	svc, err := accounts.NewService(accounts.Config{Store: e.st, Secret: envSecret, TermsVersion: envTerms,
		Processor: p, Notifier: e.notifier, GracePeriod: 7 * 24 * time.Hour, Now: e.clock.Now})
	e.must(err)
	e.svc = svc
	return p
}

func paymentRef(data accounts.IncompleteData) string {
	return data.ClientSecret[:len(data.ClientSecret)-len("_secret_test")]
}

// wantCanceledAtOnce checks an unpaid purchase ended by its buyer: canceled,
// no seat held, nothing left for settlement or the expiry.
func (e *env) wantCanceledAtOnce(p *accounts.Pool, subID string) {
	e.t.Helper()
	sub := e.getSub(subID)
	if sub.Status != accounts.SubCanceled || len(sub.Seats) != 0 || len(e.taken(p.ID)) != 0 {
		e.t.Fatalf("after the cancel: %s, %d seats, %d taken on the pool", sub.Status, len(sub.Seats), len(e.taken(p.ID)))
	}
	if len(e.charges(subID)) != 0 {
		e.t.Fatalf("charges recorded for a canceled purchase: %+v", e.charges(subID))
	}
	e.clock.Advance(accounts.IncompleteHold + time.Hour)
	if rep := e.lifecycle(); rep.Incomplete != 0 {
		e.t.Errorf("the expiry acted on a canceled purchase: %+v", rep)
	}
	if rep, err := e.svc.SettleIntents(e.ctx); err != nil || rep.Acted() {
		e.t.Errorf("settlement after the cancel: %+v %v", rep, err)
	}
}

// The buyer cancels an unpaid purchase: the seats are free at once, the
// payment is canceled at the processor, buying again works at once; another
// user's id is a 404, a paid subscription a 409 that says what to do.
func TestIncompleteCanceledByBuyer(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("sca-cancel", accounts.PoolActive, 1, false)
		u, _ := e.user("cancel@example.com", billing.TestCardAuthentication)
		data := e.incompleteSubscribe(u, p)
		ref := paymentRef(data)

		stranger, _ := e.user("stranger@example.com", billing.TestCardVisa)
		_, err := e.svc.CancelIncomplete(e.ctx, stranger.ID, data.SubscriptionID)
		wantStatus(t, err, 404)
		_, err = e.svc.CancelSubscription(e.ctx, stranger.ID, data.SubscriptionID)
		wantStatus(t, err, 404)
		if e.getSub(data.SubscriptionID).Status != accounts.SubIncomplete {
			t.Fatal("another user's cancel changed the purchase")
		}

		res, err := e.svc.CancelSubscription(e.ctx, u.ID, data.SubscriptionID)
		e.must(err)
		if !res.Canceled || !res.Withdrawn || res.Refunded || res.SubscriptionID != data.SubscriptionID || !res.CurrentPeriodEnd.Equal(e.clock.Now()) {
			t.Fatalf("cancel = %+v", res)
		}
		if sub := e.getSub(data.SubscriptionID); sub.Status != accounts.SubCanceled || len(e.taken(p.ID)) != 0 {
			t.Fatalf("after the cancel: %s, %d seats taken", sub.Status, len(e.taken(p.ID)))
		}
		if st, err := e.proc.PaymentStatus(e.ctx, ref); err != nil || st != billing.PaymentFailed {
			t.Fatalf("payment after the cancel = %q %v, want canceled", st, err)
		}
		if err := e.proc.Authenticate(e.ctx, ref); err == nil {
			t.Fatal("the payment of a canceled purchase could still be authenticated")
		}
		if len(e.proc.Ledger()) != 0 {
			t.Fatalf("money moved: %+v", e.proc.Ledger())
		}
		// A confirm coming back late says it failed; a second cancel says
		// there is nothing left to cancel.
		_, err = e.svc.ConfirmSubscription(e.ctx, u.ID, data.SubscriptionID)
		if err != nil && !errors.As(err, new(*accounts.Error)) {
			t.Fatalf("late confirm: %v", err)
		}
		_, err = e.svc.CancelIncomplete(e.ctx, u.ID, data.SubscriptionID)
		wantStatus(t, err, 409, "already ended")

		// The same buyer buys again at once (no "unpaid purchase" refusal)...
		again := e.incompleteSubscribe(u, p)
		_, err = e.svc.CancelIncomplete(e.ctx, u.ID, again.SubscriptionID)
		e.must(err)
		// ... and so does anyone else.
		bought := e.subscribe(stranger, p.Slug, 1, "europe")

		// A paid subscription is not an unpaid purchase.
		_, err = e.svc.CancelIncomplete(e.ctx, stranger.ID, bought.ID)
		ae := wantStatus(t, err, 409, "active", "not an unpaid purchase", "end of its period")
		if _, ok := errors.AsType[*accounts.NotIncompleteError](err); !ok || ae == nil {
			t.Fatalf("a paid subscription's error = %T, want *NotIncompleteError", err)
		}
		if sub := e.getSub(bought.ID); sub.Status != accounts.SubActive || sub.CancelAtPeriodEnd {
			t.Fatalf("CancelIncomplete changed a paid subscription: %s cancelAtPeriodEnd=%v", sub.Status, sub.CancelAtPeriodEnd)
		}
		// The endpoint's method sets it to cancel at period end instead.
		res, err = e.svc.CancelSubscription(e.ctx, stranger.ID, bought.ID)
		e.must(err)
		if res.Withdrawn || !e.getSub(bought.ID).CancelAtPeriodEnd || e.getSub(bought.ID).Status != accounts.SubActive {
			t.Fatalf("cancel of a paid subscription = %+v", res)
		}
		e.wantCanceledAtOnceAfter(p, data.SubscriptionID)
	})
}

// wantCanceledAtOnceAfter checks a canceled purchase once others bought on
// the pool: only that it stays canceled and unpaid.
func (e *env) wantCanceledAtOnceAfter(p *accounts.Pool, subID string) {
	e.t.Helper()
	sub := e.getSub(subID)
	if sub.Status != accounts.SubCanceled || len(sub.Seats) != 0 || len(e.charges(subID)) != 0 {
		e.t.Fatalf("canceled purchase: %s, %d seats, charges %+v", sub.Status, len(sub.Seats), e.charges(subID))
	}
}

// The customer completed the payment before the cancel reached it: the
// charge is refunded, exactly once whatever reports it later, and the seats
// are free.
func TestIncompleteCancelRefundsCompletedPayment(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		proc := e.withCancelProcessor()
		p := e.pool("sca-cancel-paid", accounts.PoolActive, 1, false)
		u, _ := e.user("paid@example.com", billing.TestCardAuthentication)
		data := e.incompleteSubscribe(u, p)
		ref := paymentRef(data)
		e.must(e.proc.Authenticate(e.ctx, ref))

		res, err := e.svc.CancelIncomplete(e.ctx, u.ID, data.SubscriptionID)
		e.must(err)
		if !res.Canceled || !res.Withdrawn || !res.Refunded {
			t.Fatalf("cancel of a completed payment = %+v, want refunded", res)
		}
		ledger := e.chargesFor(data.SubscriptionID)
		if len(ledger) != 1 || ledger[0].Ref != ref || !ledger[0].Refunded {
			t.Fatalf("ledger = %+v, want the payment refunded", ledger)
		}
		// The webhook of the success arrives afterwards, twice, and a
		// confirm: nothing revives it, nothing is refunded under another key.
		for _, id := range []string{"evt_paid_1", "evt_paid_2"} {
			r, err := e.svc.ApplyProcessorEvent(e.ctx, accounts.ProcessorEvent{ID: id, Type: "payment_intent.succeeded",
				Kind: accounts.EventChargeSucceeded, IdempotencyKey: "subscribe:" + data.SubscriptionID, Ref: ref})
			e.must(err)
			if r.Effect != "" {
				t.Fatalf("a late success changed %q", r.Effect)
			}
		}
		if _, err := e.svc.ConfirmSubscription(e.ctx, u.ID, data.SubscriptionID); err != nil && !errors.As(err, new(*accounts.Error)) {
			t.Fatalf("late confirm: %v", err)
		}
		want := billing.RefundKey("subscribe:" + data.SubscriptionID)
		if keys := proc.refundKeys(ref); len(keys) != 1 || !keys[want] {
			t.Fatalf("refunded under %v, want once under %s", keys, want)
		}
		e.wantCanceledAtOnce(p, data.SubscriptionID)
		if keys := proc.refundKeys(ref); len(keys) != 1 {
			t.Fatalf("refunded under %v after settlement", keys)
		}
	})
}

// The processor cannot be reached: the cancel says to retry and changes
// nothing (the seats stay held); a refund that fails keeps the seats held
// and the payment claimed (a success reported meanwhile does not activate
// it), and the retry, or the expiry, finishes the cancel.
func TestIncompleteCancelProcessorDown(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		proc := e.withCancelProcessor()
		p := e.pool("sca-cancel-down", accounts.PoolActive, 2, false)
		u, _ := e.user("down@example.com", billing.TestCardAuthentication)

		// CancelPayment unreachable.
		data := e.incompleteSubscribe(u, p)
		proc.cancelDown.Store(true)
		_, err := e.svc.CancelIncomplete(e.ctx, u.ID, data.SubscriptionID)
		wantStatus(t, err, 502, "Try again", "seats stay held")
		if sub := e.getSub(data.SubscriptionID); sub.Status != accounts.SubIncomplete || len(e.taken(p.ID)) != accounts.HoursPerBlock {
			t.Fatalf("after a failed cancel: %s, %d taken", sub.Status, len(e.taken(p.ID)))
		}
		if st, _ := e.proc.PaymentStatus(e.ctx, paymentRef(data)); st != billing.PaymentWaiting {
			t.Fatalf("payment = %s, want still waiting", st)
		}
		proc.cancelDown.Store(false)
		_, err = e.svc.CancelIncomplete(e.ctx, u.ID, data.SubscriptionID)
		e.must(err)
		if len(e.taken(p.ID)) != 0 {
			t.Fatal("seats held after the retried cancel")
		}

		// Completed first, and the refund unreachable: retried by the buyer.
		data = e.incompleteSubscribe(u, p)
		ref := paymentRef(data)
		e.must(e.proc.Authenticate(e.ctx, ref))
		proc.refundDown.Store(true)
		_, err = e.svc.CancelIncomplete(e.ctx, u.ID, data.SubscriptionID)
		wantStatus(t, err, 502, "refund", "seats stay held")
		if sub := e.getSub(data.SubscriptionID); sub.Status != accounts.SubIncomplete || len(e.taken(p.ID)) != accounts.HoursPerBlock {
			t.Fatalf("seats freed while the charge is unrefunded: %s, %d taken", sub.Status, len(e.taken(p.ID)))
		}
		r, err := e.svc.ApplyProcessorEvent(e.ctx, accounts.ProcessorEvent{ID: "evt_down", Type: "payment_intent.succeeded",
			Kind: accounts.EventChargeSucceeded, IdempotencyKey: "subscribe:" + data.SubscriptionID, Ref: ref})
		e.must(err)
		if r.Effect != "" || e.getSub(data.SubscriptionID).Status != accounts.SubIncomplete {
			t.Fatalf("a success during the cancel activated it: %+v", r)
		}
		if _, err := e.svc.ConfirmSubscription(e.ctx, u.ID, data.SubscriptionID); err == nil || e.getSub(data.SubscriptionID).Status != accounts.SubIncomplete {
			t.Fatalf("a confirm during the cancel: %v, %s", err, e.getSub(data.SubscriptionID).Status)
		}
		proc.refundDown.Store(false)
		res, err := e.svc.CancelIncomplete(e.ctx, u.ID, data.SubscriptionID)
		e.must(err)
		if !res.Refunded || !e.chargesFor(data.SubscriptionID)[0].Refunded || len(e.taken(p.ID)) != 0 {
			t.Fatalf("retried cancel = %+v, ledger %+v", res, e.chargesFor(data.SubscriptionID))
		}

		// Completed first, the refund unreachable, and the buyer gone: the
		// expiry finishes the cancel once the hold has run out.
		data = e.incompleteSubscribe(u, p)
		ref = paymentRef(data)
		e.must(e.proc.Authenticate(e.ctx, ref))
		proc.refundDown.Store(true)
		_, err = e.svc.CancelIncomplete(e.ctx, u.ID, data.SubscriptionID)
		wantStatus(t, err, 502)
		e.clock.Advance(accounts.IncompleteHold)
		if rep, _ := e.svc.RunLifecycle(e.ctx); e.getSub(data.SubscriptionID).Status != accounts.SubIncomplete {
			t.Fatalf("the expiry ended it with the refund unreachable: %+v", rep)
		}
		proc.refundDown.Store(false)
		rep, err := e.svc.RunLifecycle(e.ctx)
		e.must(err)
		if rep.Incomplete != 1 {
			t.Fatalf("lifecycle = %+v, want the cancel finished", rep)
		}
		if sub := e.getSub(data.SubscriptionID); sub.Status != accounts.SubCanceled || len(e.taken(p.ID)) != 0 || !e.chargesFor(data.SubscriptionID)[0].Refunded {
			t.Fatalf("after the expiry: %s, %d taken, ledger %+v", sub.Status, len(e.taken(p.ID)), e.chargesFor(data.SubscriptionID))
		}
		if keys := proc.refundKeys(ref); len(keys) != 1 {
			t.Fatalf("refunded under %v", keys)
		}
		e.wantCanceledAtOnce(p, data.SubscriptionID)
	})
}
