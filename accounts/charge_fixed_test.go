package accounts_test

// A charge is the request first made (charge_fixed.go): the processor's
// answer is lost, then the buyer saves another card or the processor
// forgets the key, and every kind of charge — a purchase, a pledge at
// activation, a renewal — still ends with exactly one charge, on the card
// it was first made with, kept by the subscription it paid for.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// losingProcessor makes every charge but loses the answer of the first
// call under each idempotency key while lose is set: the charge is in the
// ledger, the caller sees a network error.
type losingProcessor struct {
	billing.Processor
	mu   sync.Mutex
	lose bool
	lost map[string]bool
}

func (p *losingProcessor) Charge(ctx context.Context, req billing.ChargeRequest) (string, error) {
	ref, err := p.Processor.Charge(ctx, req)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil && p.lose && !p.lost[req.IdempotencyKey] {
		p.lost[req.IdempotencyKey] = true
		return "", errors.New("connection reset: the answer of the charge was lost")
	}
	return ref, err
}

func (p *losingProcessor) setLose(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lose = on
}

// losing gives the environment a service whose processor loses answers
// (none until setLose), and moves the processor's clock with the test's.
func (e *env) losing() *losingProcessor {
	e.t.Helper()
	e.proc.SetClock(e.clock.Now)
	lp := &losingProcessor{Processor: e.proc, lost: map[string]bool{}}
	svc, err := accounts.NewService(accounts.Config{
		Store: e.st, Secret: envSecret, TermsVersion: envTerms, Processor: lp, Notifier: e.notifier,
		GracePeriod: 7 * 24 * time.Hour, Now: e.clock.Now,
	})
	e.must(err)
	e.svc = svc
	return lp
}

// oneCharge checks that the ledger holds exactly one charge under keys
// mentioning id, on method, not refunded.
func (e *env) oneCharge(id, method string) billing.TestCharge {
	e.t.Helper()
	got := e.chargesFor(id)
	if len(got) != 1 {
		e.t.Fatalf("%d charges for %s, want 1: %+v", len(got), id, got)
	}
	if got[0].MethodID != method || got[0].Refunded {
		e.t.Fatalf("charge for %s: %+v, want one on %s, not refunded", id, got[0], method)
	}
	return got[0]
}

// saveCard saves another card for u.
func (e *env) saveCard(u *accounts.User, card string) {
	e.t.Helper()
	_, err := e.svc.SetupIntent(e.ctx, u.ID, card)
	e.must(err)
}

// activePledge pledges one asia seat of a new funding pool for u and
// makes the pool active: the next funding pass charges it.
func (e *env) activePledge(u *accounts.User) string {
	e.t.Helper()
	e.fundingPool("fund", "1000", 4)
	res := e.pledge(u, "fund", 1, "asia")
	_, err := e.svc.SetPoolStatus(e.ctx, "fund", accounts.PoolActive)
	e.must(err)
	return res.ID
}

// lostPledgeCharge pledges for a new user with a visa card, makes the pool
// active, and runs the funding pass that charges the pledge and loses the
// answer. It returns the user and the pledge.
func (e *env) lostPledgeCharge(lp *losingProcessor) (*accounts.User, string) {
	e.t.Helper()
	ann, _ := e.user("ann@example.test", billing.TestCardVisa)
	subID := e.activePledge(ann)
	lp.setLose(true)
	if _, err := e.svc.RunFunding(e.ctx); err == nil {
		e.t.Fatal("the funding pass reported no error for a charge whose answer was lost")
	}
	lp.setLose(false)
	if st := e.getSub(subID).Status; st != accounts.SubPledged {
		e.t.Fatalf("after a lost answer the pledge is %s, want still pledged", st)
	}
	return ann, subID
}

// fundingUntil runs funding and settlement passes (errors are expected
// while answers are lost) until the subscription leaves pledged, at most n.
func (e *env) fundingUntil(subID string, n int) *accounts.Subscription {
	e.t.Helper()
	var sub *accounts.Subscription
	for range n {
		_, _ = e.svc.RunFunding(e.ctx)
		_, _ = e.svc.SettleIntents(e.ctx)
		if sub = e.getSub(subID); sub.Status != accounts.SubPledged {
			break
		}
		e.clock.Advance(time.Minute)
	}
	return sub
}

func TestPledgeChargeLostThenCardChanged(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		ann, subID := e.lostPledgeCharge(e.losing())
		e.saveCard(ann, billing.TestCardMastercard)

		// The takeover comes after the settle grace; the processor still
		// remembers the key, which it refuses with another card.
		e.clock.Advance(16 * time.Minute)
		sub := e.fundingUntil(subID, 20)
		if sub.Status != accounts.SubActive {
			t.Fatalf("pledge charged at the processor is %s after the passes, want active", sub.Status)
		}
		e.oneCharge(subID, billing.TestCardVisa)
		if open := e.openIntents(); len(open) != 0 {
			t.Fatalf("open charge intents left: %+v", open)
		}
		// Settlement long after keeps it: nothing refunded.
		e.clock.Advance(48 * time.Hour)
		_, err := e.svc.SettleIntents(e.ctx)
		e.must(err)
		e.oneCharge(subID, billing.TestCardVisa)
	})
}

func TestPledgeChargeLostThenKeyForgotten(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		_, subID := e.lostPledgeCharge(e.losing())
		// No pass ran for a day (the processor was down, say): the
		// processor has forgotten the key; a re-send would charge again.
		e.clock.Advance(25 * time.Hour)
		sub := e.fundingUntil(subID, 5)
		if sub.Status != accounts.SubActive {
			t.Fatalf("pledge is %s, want active", sub.Status)
		}
		e.oneCharge(subID, billing.TestCardVisa)
	})
}

func TestPledgeChargeCompletedByProcessorEvent(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		_, subID := e.lostPledgeCharge(e.losing())
		ch := e.oneCharge(subID, billing.TestCardVisa)

		// payment_intent.succeeded arrives before any takeover.
		res, err := e.svc.ApplyProcessorEvent(e.ctx, accounts.ProcessorEvent{ID: "evt_pledge", Type: "payment_intent.succeeded",
			Kind: accounts.EventChargeSucceeded, IdempotencyKey: billing.PledgeKey(subID), Ref: ch.Ref})
		e.must(err)
		if res.Duplicate {
			t.Fatal("the first delivery was taken for a duplicate")
		}
		if st := e.getSub(subID).Status; st != accounts.SubActive {
			t.Fatalf("after the processor's event the pledge is %s, want active", st)
		}
		if open := e.openIntents(); len(open) != 0 {
			t.Fatalf("open charge intents left after the event: %+v", open)
		}
		// Later passes neither charge again nor refund.
		e.clock.Advance(20 * time.Minute)
		_, err = e.svc.RunFunding(e.ctx)
		e.must(err)
		_, err = e.svc.SettleIntents(e.ctx)
		e.must(err)
		e.oneCharge(subID, billing.TestCardVisa)
	})
}

// lostRenewal subscribes a new user with a visa card, moves the clock past
// the period's end and runs the lifecycle pass whose renewal charge loses
// its answer. It returns the user and the subscription as it was before.
func (e *env) lostRenewal(lp *losingProcessor) (*accounts.User, *accounts.Subscription) {
	e.t.Helper()
	ann, _ := e.user("ann@example.test", billing.TestCardVisa)
	sub := e.renewalDue(ann)
	lp.setLose(true)
	_, _ = e.svc.RunLifecycle(e.ctx)
	lp.setLose(false)
	return ann, sub
}

// renewalDue subscribes u to a new active pool with the card it has, and
// moves the clock past the end of the first period.
func (e *env) renewalDue(u *accounts.User) *accounts.Subscription {
	e.t.Helper()
	e.pool("live", accounts.PoolActive, 4, false)
	res := e.subscribe(u, "live", 1, "asia")
	sub := e.getSub(res.ID)
	e.clock.Set(sub.CurrentPeriodEnd.Add(time.Minute))
	return sub
}

// renewalCharges returns the ledger's renewal charges of a subscription.
func (e *env) renewalCharges(subID string) []billing.TestCharge {
	var out []billing.TestCharge
	for _, c := range e.chargesFor(subID) {
		if billing.ChargeKind(billing.MetadataKey(c.IdempotencyKey)) == billing.ChargeRenewal {
			out = append(out, c)
		}
	}
	return out
}

func TestRenewalLostThenCardChanged(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		ann, sub := e.lostRenewal(e.losing())
		e.saveCard(ann, billing.TestCardMastercard)
		e.clock.Advance(11 * time.Minute) // past the claim timeout: a takeover
		for range 5 {
			_, _ = e.svc.RunLifecycle(e.ctx)
			_, _ = e.svc.SettleIntents(e.ctx)
		}
		now := e.getSub(sub.ID)
		if now.Status != accounts.SubActive || !now.CurrentPeriodStart.Equal(sub.CurrentPeriodEnd) {
			t.Fatalf("after the takeover the subscription is %s for the period from %s, want active from %s",
				now.Status, now.CurrentPeriodStart, sub.CurrentPeriodEnd)
		}
		renewals := e.renewalCharges(sub.ID)
		if len(renewals) != 1 || renewals[0].MethodID != billing.TestCardVisa || renewals[0].Refunded {
			t.Fatalf("renewal charges %+v, want one on the claim's card, kept", renewals)
		}
		var recorded []*accounts.Charge
		for _, c := range e.charges(sub.ID) {
			if c.Status == accounts.ChargeSucceeded && c.PeriodStart.Equal(sub.CurrentPeriodEnd) {
				recorded = append(recorded, c)
			}
		}
		if len(recorded) != 1 || recorded[0].ProcessorRef != renewals[0].Ref || recorded[0].MethodID != billing.TestCardVisa {
			t.Fatalf("recorded renewal %+v, want the processor's charge %s on visa", recorded, renewals[0].Ref)
		}
	})
}

func TestRenewalLostThenKeyForgotten(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		_, sub := e.lostRenewal(e.losing())
		e.clock.Advance(25 * time.Hour)
		_, _ = e.svc.RunLifecycle(e.ctx)
		if now := e.getSub(sub.ID); !now.CurrentPeriodStart.Equal(sub.CurrentPeriodEnd) {
			t.Fatalf("the renewal was not recorded: period from %s", now.CurrentPeriodStart)
		}
		if renewals := e.renewalCharges(sub.ID); len(renewals) != 1 {
			t.Fatalf("%d renewal charges after the processor forgot the key, want 1: %+v", len(renewals), renewals)
		}
	})
}

func TestRenewalCompletedByProcessorEvent(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		_, sub := e.lostRenewal(e.losing())
		renewals := e.renewalCharges(sub.ID)
		if len(renewals) != 1 {
			t.Fatalf("renewal charges %+v", renewals)
		}
		_, err := e.svc.ApplyProcessorEvent(e.ctx, accounts.ProcessorEvent{ID: "evt_renew", Type: "payment_intent.succeeded",
			Kind: accounts.EventChargeSucceeded, IdempotencyKey: renewals[0].IdempotencyKey, Ref: renewals[0].Ref})
		e.must(err)
		if now := e.getSub(sub.ID); !now.CurrentPeriodStart.Equal(sub.CurrentPeriodEnd) {
			t.Fatalf("after the processor's event the period starts %s, want %s", now.CurrentPeriodStart, sub.CurrentPeriodEnd)
		}
	})
}

func TestPurchaseResumedAfterCardChanged(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		lp := e.losing()
		e.pool("live", accounts.PoolActive, 4, false)
		ann, _ := e.user("ann@example.test", billing.TestCardVisa)
		q := 1
		req := accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: &q}
		purchase := envID()

		lp.setLose(true)
		_, err := e.svc.SubscribeAs(e.ctx, ann.ID, "live", req, purchase)
		wantStatus(t, err, 502, "retry with the same Idempotency-Key")
		lp.setLose(false)
		e.saveCard(ann, billing.TestCardMastercard)

		res, err := e.svc.SubscribeAs(e.ctx, ann.ID, "live", req, purchase)
		e.must(err)
		if res.Status != accounts.SubActive {
			t.Fatalf("resumed purchase is %s, want active", res.Status)
		}
		e.oneCharge(purchase, billing.TestCardVisa)
	})
}

// The built-in test processor holds Stripe's rules over a durable ledger
// too (the one the quick start and the reliability suite use).
func TestTestProcessorKeyRulesOnStores(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		now := time.Date(2033, 1, 1, 0, 0, 0, 0, time.UTC)
		p := billing.NewTestProcessorOn(accounts.TestLedger(st))
		p.SetClock(func() time.Time { return now })
		req := billing.ChargeRequest{UserID: "u1", MethodID: billing.TestCardVisa, Amount: "80", IdempotencyKey: billing.PledgeKey("s1")}
		first, err := p.Charge(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		other := req
		other.MethodID = billing.TestCardMastercard
		if _, err := p.Charge(t.Context(), other); !errors.As(err, new(*billing.IdempotencyError)) {
			t.Fatalf("same key, other card: %v, want an idempotency error", err)
		}
		if again, err := p.Charge(t.Context(), req); err != nil || again != first {
			t.Fatalf("same request again: %q, %v; want the first charge %q", again, err, first)
		}
		now = now.Add(billing.KeyLifetime)
		second, err := p.Charge(t.Context(), other)
		if err != nil || second == first {
			t.Fatalf("after the key lifetime: %q, %v; want a new charge", second, err)
		}
		if ref, found, err := p.FindCharge(t.Context(), req.IdempotencyKey); err != nil || !found || ref != first {
			t.Fatalf("FindCharge: %q %v %v, want the first charge %q", ref, found, err, first)
		}
		if n := len(p.Ledger()); n != 2 {
			t.Fatalf("ledger holds %d charges, want 2", n)
		}
	})
}
