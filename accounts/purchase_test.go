package accounts_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// lossyProcessor wraps the test processor like a network between Timeblock
// and a real one: it can lose the answer of a charge the processor made,
// and hold a charge in flight until released.
type lossyProcessor struct {
	*billing.TestProcessor

	mu       sync.Mutex
	loseNext int                      // answers to lose
	hold     map[string]chan struct{} // user id → released when closed
	started  chan string              // user ids whose charge reached the processor
	byUser   map[string]int           // Charge calls per user
}

func (p *lossyProcessor) Charge(ctx context.Context, req billing.ChargeRequest) (string, error) {
	p.mu.Lock()
	p.byUser[req.UserID]++
	gate := p.hold[req.UserID]
	p.mu.Unlock()
	if p.started != nil {
		p.started <- req.UserID
	}
	if gate != nil {
		<-gate
	}
	ref, err := p.TestProcessor.Charge(ctx, req)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil && p.loseNext > 0 {
		p.loseNext--
		return "", errors.New("read tcp: connection reset by peer")
	}
	return ref, err
}

func (p *lossyProcessor) calls(userID string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byUser[userID]
}

// withLossyProcessor replaces the environment's service with one whose
// processor is a lossyProcessor over the environment's test processor.
func (e *env) withLossyProcessor() *lossyProcessor {
	e.t.Helper()
	fp := &lossyProcessor{TestProcessor: e.proc, hold: map[string]chan struct{}{}, byUser: map[string]int{}}
	svc, err := accounts.NewService(accounts.Config{
		Store: e.st, Secret: envSecret, TermsVersion: envTerms, Processor: fp,
		Notifier: e.notifier, GracePeriod: 7 * 24 * time.Hour, Now: e.clock.Now,
	})
	e.must(err)
	e.svc = svc
	return fp
}

// succeeded counts the ledger's charges that were not refunded.
func (e *env) succeeded() (kept, refunded int) {
	for _, c := range e.proc.Ledger() {
		if c.Refunded {
			refunded++
		} else {
			kept++
		}
	}
	return kept, refunded
}

// A charge whose answer is lost (the processor charged, the user got 502)
// and a retry under the same Idempotency-Key: one purchase, one charge —
// the retry charges under the same processor key and gets the replay.
func TestRetryAfterLostChargeAnswerChargesOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		fp := e.withLossyProcessor()
		p := e.pool("lost", accounts.PoolActive, 2, false)
		u, _ := e.user("lost@example.com", billing.TestCardVisa)
		q := 1
		req := accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: &q}

		start, err := e.svc.BeginIdempotent(e.ctx, u.ID, "k", "fp")
		e.must(err)
		fp.loseNext = 1
		_, err = e.svc.SubscribeAs(e.ctx, u.ID, p.Slug, req, start.PurchaseID)
		wantStatus(t, err, 502, "same Idempotency-Key")
		e.must(e.svc.FinishIdempotent(e.ctx, u.ID, "k", "fp", 502, []byte(`{}`)))
		if n := len(e.taken(p.ID)); n != 8 {
			t.Fatalf("%d seats held after the lost answer, want the reservation's 8", n)
		}
		// Another purchase on the pool meanwhile is told to finish this one.
		_, err = e.svc.Subscribe(e.ctx, u.ID, p.Slug, req)
		wantStatus(t, err, 409, "being processed", "Idempotency-Key")

		again, err := e.svc.BeginIdempotent(e.ctx, u.ID, "k", "fp")
		e.must(err)
		if again.Replay != nil || again.PurchaseID != start.PurchaseID {
			t.Fatalf("retry after a 502: %+v, want purchase %s carried on", again, start.PurchaseID)
		}
		res, err := e.svc.SubscribeAs(e.ctx, u.ID, p.Slug, req, again.PurchaseID)
		e.must(err)
		if res.ID != start.PurchaseID || res.Status != accounts.SubActive || res.AmountCharged != "80" {
			t.Fatalf("retry: %+v", res)
		}
		if kept, refunded := e.succeeded(); kept != 1 || refunded != 0 {
			t.Fatalf("ledger: %d kept, %d refunded; want exactly one charge", kept, refunded)
		}
		e.clock.Advance(time.Hour)
		if rep, err := e.svc.SettleIntents(e.ctx); err != nil || rep.Acted() {
			t.Fatalf("settlement after the retry: %+v %v; want nothing to settle", rep, err)
		}
		if kept, _ := e.succeeded(); kept != 1 || len(e.charges(res.ID)) != 1 {
			t.Fatalf("after settlement: %d charges kept, %d recorded", kept, len(e.charges(res.ID)))
		}
	})
}

// Without a retry, settlement refunds the charge whose answer was lost and
// releases the seats; the key then answers with that outcome at once —
// also while the request that died still looks as if it were running.
func TestSettledPurchaseAnswersItsKey(t *testing.T) {
	t.Setenv(accounts.SettleGraceEnv, "1m")
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		fp := e.withLossyProcessor()
		p := e.pool("settled", accounts.PoolActive, 1, false)
		u, _ := e.user("settled@example.com", billing.TestCardVisa)
		q := 1
		req := accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: &q}
		start, err := e.svc.BeginIdempotent(e.ctx, u.ID, "k", "fp")
		e.must(err)
		fp.loseNext = 1
		_, err = e.svc.SubscribeAs(e.ctx, u.ID, p.Slug, req, start.PurchaseID)
		wantStatus(t, err, 502)
		// The node dies before recording the answer: the key stays running.
		e.clock.Advance(2 * time.Minute)
		rep, err := e.svc.SettleIntents(e.ctx)
		e.must(err)
		if rep.Refunded != 1 {
			t.Fatalf("settlement: %+v, want the lost charge refunded", rep)
		}
		if n := len(e.taken(p.ID)); n != 0 {
			t.Fatalf("%d seats still held after settlement", n)
		}
		again, err := e.svc.BeginIdempotent(e.ctx, u.ID, "k", "fp")
		e.must(err) // within the lease, yet answered: the purchase has ended
		_, err = e.svc.SubscribeAs(e.ctx, u.ID, p.Slug, req, again.PurchaseID)
		wantStatus(t, err, 409, "refunded", "new Idempotency-Key")
		if kept, refunded := e.succeeded(); kept != 0 || refunded != 1 {
			t.Fatalf("ledger: %d kept, %d refunded", kept, refunded)
		}
		if len(e.userSubs(u.ID)) != 0 {
			t.Fatalf("subscriptions left: %+v", e.userSubs(u.ID))
		}
	})
}

// Two buyers for one seat: the one who loses the race is refused before
// the card is charged.
func TestSeatRaceLoserIsNotCharged(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		fp := e.withLossyProcessor()
		p := e.pool("one-seat", accounts.PoolActive, 1, false)
		a, _ := e.user("a@example.com", billing.TestCardVisa)
		b, _ := e.user("b@example.com", billing.TestCardVisa)
		gate := make(chan struct{})
		fp.hold[a.ID] = gate
		fp.started = make(chan string, 4)
		q := 1
		req := accounts.SubscribeRequest{Blocks: []string{"europe"}, Quantity: &q}
		done := make(chan error, 1)
		go func() { _, err := e.svc.Subscribe(e.ctx, a.ID, p.Slug, req); done <- err }()
		<-fp.started // a's seats are reserved and its card is being charged
		_, err := e.svc.Subscribe(e.ctx, b.ID, p.Slug, req)
		wantStatus(t, err, 409, "sold out")
		close(gate)
		e.must(<-done)
		if n := fp.calls(b.ID); n != 0 {
			t.Fatalf("the buyer who lost the race was charged %d time(s)", n)
		}
		if kept, refunded := e.succeeded(); kept != 1 || refunded != 0 {
			t.Fatalf("ledger: %d kept, %d refunded; want a's charge only", kept, refunded)
		}
	})
}

// A declined card leaves nothing: no subscription, no seat held.
func TestDeclineReleasesTheReservation(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("declined", accounts.PoolActive, 1, false)
		u, _ := e.user("declined@example.com", billing.TestCardDeclined)
		q := 1
		_, err := e.svc.Subscribe(e.ctx, u.ID, p.Slug, accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: &q})
		wantStatus(t, err, 402, "declined", "no seat is held")
		if len(e.userSubs(u.ID)) != 0 || len(e.taken(p.ID)) != 0 {
			t.Fatalf("after a decline: %d subscriptions, %d seats held", len(e.userSubs(u.ID)), len(e.taken(p.ID)))
		}
		e.clock.Advance(time.Hour)
		if rep, err := e.svc.SettleIntents(e.ctx); err != nil || rep.Acted() {
			t.Fatalf("settlement after a decline: %+v %v", rep, err)
		}
	})
}

// Unpaid holds (3-D Secure) are one per user and pool, and short.
func TestUnpaidHoldsAreBounded(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		small := e.pool("small", accounts.PoolActive, 2, false)
		other := e.pool("other", accounts.PoolActive, 2, false)
		u, _ := e.user("holder@example.com", billing.TestCardAuthentication)
		q := 1
		req := accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: &q}
		_, err := e.svc.Subscribe(e.ctx, u.ID, small.Slug, req)
		first := wantStatus(t, err, 402, "3-D Secure")
		if d := first.Data.(accounts.IncompleteData); d.Amount != "80" || !d.HoldExpiresAt.Equal(e.clock.Now().Add(accounts.IncompleteHold)) {
			t.Fatalf("hold: %+v", d)
		}
		_, err = e.svc.Subscribe(e.ctx, u.ID, small.Slug, req)
		wantStatus(t, err, 409, "unpaid purchase on pool small", "waiting for 3-D Secure", "One unpaid purchase per pool")
		if n := len(e.taken(small.ID)); n != 8 {
			t.Fatalf("%d seats held on the small pool, want one hold's 8", n)
		}
		_, err = e.svc.Subscribe(e.ctx, u.ID, other.Slug, req)
		wantStatus(t, err, 402, "3-D Secure")
		// Confirming while it waits says what is owed.
		_, err = e.svc.ConfirmSubscription(e.ctx, u.ID, first.Data.(accounts.IncompleteData).SubscriptionID)
		if d := wantStatus(t, err, 402, "still waits").Data.(accounts.IncompleteData); d.Amount != "80" {
			t.Fatalf("confirm while waiting: amount %q", d.Amount)
		}
		if accounts.IncompleteHold > 15*time.Minute {
			t.Fatalf("IncompleteHold is %v: unpaid holds must be short", accounts.IncompleteHold)
		}
		e.clock.Advance(accounts.IncompleteHold)
		if rep := e.lifecycle(); rep.Incomplete != 2 {
			t.Fatalf("lifecycle = %+v, want both holds ended", rep)
		}
		_, err = e.svc.Subscribe(e.ctx, u.ID, small.Slug, req)
		wantStatus(t, err, 402, "3-D Secure") // a new hold once the old one ended
	})
}

// A processor event about a reservation's charge that arrives while the
// subscribe is still charging (a webhook faster than the charge's answer)
// is answered 503, to be delivered again, and changes nothing: the
// subscribe records its own outcome.
func TestEventDuringReservationWaits(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		fp := e.withLossyProcessor()
		p := e.pool("webhook-race", accounts.PoolActive, 1, false)
		u, _ := e.user("race@example.com", billing.TestCardVisa)
		gate := make(chan struct{})
		fp.hold[u.ID] = gate
		fp.started = make(chan string, 1)
		start, err := e.svc.BeginIdempotent(e.ctx, u.ID, "k", "fp")
		e.must(err)
		q := 1
		done := make(chan error, 1)
		go func() {
			_, err := e.svc.SubscribeAs(e.ctx, u.ID, p.Slug, accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: &q}, start.PurchaseID)
			done <- err
		}()
		<-fp.started
		for _, kind := range []accounts.ProcessorEventKind{accounts.EventChargeSucceeded, accounts.EventChargeFailed} {
			_, err = e.svc.ApplyProcessorEvent(e.ctx, accounts.ProcessorEvent{ID: "evt-" + start.PurchaseID + string(rune('a'+kind)),
				Type: "payment_intent", Kind: kind, IdempotencyKey: "subscribe:" + start.PurchaseID, Ref: "ch_early"})
			wantStatus(t, err, 503, "still being recorded")
		}
		close(gate)
		e.must(<-done)
		sub := e.getSub(start.PurchaseID)
		if sub.Status != accounts.SubActive || len(e.charges(sub.ID)) != 1 {
			t.Fatalf("after the charge: %s with %d charges, want active with one", sub.Status, len(e.charges(sub.ID)))
		}
	})
}
