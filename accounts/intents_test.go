package accounts_test

// Charge intents and settlement: a node that dies between charging a card
// and recording the charge leaves a pending intent, and settlement (on any
// node, after the grace) refunds the charge, or marks the intent done when
// the record exists. The processor is the built-in one with its ledger in
// the store, as in production, so a "restarted" node sees what was charged.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// errCrash is what a simulated crash panics with.
var errCrash = errors.New("simulated crash after the charge")

// crashProcessor wraps a processor: it can panic right after a successful
// charge (the node dies before recording it), run a hook after each charge,
// fail FindCharge (processor unreachable), and counts refunds.
type crashProcessor struct {
	billing.Processor
	crash       atomic.Bool
	findFails   atomic.Bool
	chargeFails atomic.Bool // fails before charging (processor unreachable)
	afterCharge func()
	refunds     atomic.Int32
}

var errUnreachable = errors.New("processor unreachable")

func (p *crashProcessor) Charge(ctx context.Context, req billing.ChargeRequest) (string, error) {
	if p.chargeFails.Load() {
		return "", errUnreachable
	}
	ref, err := p.Processor.Charge(ctx, req)
	if p.afterCharge != nil {
		p.afterCharge()
	}
	if err == nil && p.crash.Load() {
		panic(errCrash)
	}
	return ref, err
}

func (p *crashProcessor) FindCharge(ctx context.Context, key string) (string, bool, error) {
	if p.findFails.Load() {
		return "", false, errUnreachable
	}
	return p.Processor.FindCharge(ctx, key)
}

func (p *crashProcessor) Refund(ctx context.Context, ref, key string) error {
	p.refunds.Add(1)
	return p.Processor.Refund(ctx, ref, key)
}

// node builds a service ("a node", or the same node after a restart) on st
// with the given processor and the environment's clock.
func (e *env) node(st accounts.Store, p billing.Processor) *accounts.Service {
	e.t.Helper()
	svc, err := accounts.NewService(accounts.Config{
		Store: st, Secret: envSecret, TermsVersion: envTerms, Processor: p,
		Notifier: e.notifier, GracePeriod: 7 * 24 * time.Hour, Now: e.clock.Now,
	})
	e.must(err)
	return svc
}

// crashed runs fn and reports whether it panicked with errCrash.
func crashed(fn func()) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			if r != errCrash {
				panic(r)
			}
			ok = true
		}
	}()
	fn()
	return false
}

// openIntents lists every intent still pending or settling.
func (e *env) openIntents() []*accounts.ChargeIntent {
	e.t.Helper()
	far := e.clock.Now().AddDate(10, 0, 0)
	return read(e, func(tx accounts.Tx) ([]*accounts.ChargeIntent, error) { return tx.ListOpenChargeIntents(far) })
}

func (e *env) intent(id string) *accounts.ChargeIntent {
	e.t.Helper()
	return read(e, func(tx accounts.Tx) (*accounts.ChargeIntent, error) { return tx.GetChargeIntent(id) })
}

// ledgerOf returns the test processor's ledger entries whose idempotency key
// has the prefix.
func ledgerOf(p *billing.TestProcessor, prefix string) []billing.TestCharge {
	var out []billing.TestCharge
	for _, c := range p.Ledger() {
		if strings.HasPrefix(c.IdempotencyKey, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// pastGrace moves the clock beyond the settlement grace.
func (e *env) pastGrace() { e.clock.Advance(16 * time.Minute) }

func TestSubscribeCrashAfterChargeIsRefundedBySettlement(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("crash", accounts.PoolActive, 2, false)
		u, _ := e.user("hal@example.test", billing.TestCardVisa)

		// The node charges the card and dies before the subscription commits.
		proc := &crashProcessor{Processor: billing.NewTestProcessorOn(accounts.TestLedger(st))}
		proc.crash.Store(true)
		node := e.node(st, proc)
		if !crashed(func() {
			node.Subscribe(e.ctx, u.ID, "crash", accounts.SubscribeRequest{Blocks: []string{"europe"}})
		}) {
			t.Fatal("the subscribe did not reach the simulated crash")
		}
		open := e.openIntents()
		if len(open) != 1 || open[0].Status != accounts.IntentPending || open[0].Kind != accounts.IntentSubscribe || open[0].UserID != u.ID {
			t.Fatalf("open intents after the crash: %+v, want one pending subscribe intent", open)
		}
		in := open[0]
		if !strings.HasPrefix(in.IdempotencyKey, "subscribe:"+in.SubscriptionID) || in.Amount == "" {
			t.Errorf("intent %+v", in)
		}

		// The restarted node: a fresh processor on the same ledger.
		ledger := billing.NewTestProcessorOn(accounts.TestLedger(st))
		if l := ledgerOf(ledger, "subscribe:"); len(l) != 1 || l[0].Refunded {
			t.Fatalf("ledger after the crash: %+v, want one charge, not refunded", l)
		}
		restarted := e.node(st, ledger)

		// Within the grace nothing is settled: the caller may still be waiting.
		rep, err := restarted.SettleIntents(e.ctx)
		e.must(err)
		if rep.Acted() {
			t.Errorf("settled within the grace: %+v", rep)
		}
		e.pastGrace()
		rep, err = restarted.SettleIntents(e.ctx)
		e.must(err)
		if rep != (accounts.SettlementReport{Refunded: 1}) {
			t.Errorf("settlement: %+v, want one refund", rep)
		}
		if got := e.intent(in.ID); got.Status != accounts.IntentRefunded || got.ProcessorRef == "" {
			t.Errorf("intent after settlement: %+v", got)
		}
		if l := ledgerOf(ledger, "subscribe:"); len(l) != 1 || !l[0].Refunded {
			t.Errorf("ledger after settlement: %+v, want the charge refunded", l)
		}
		if subs := e.userSubs(u.ID); len(subs) != 0 {
			t.Errorf("subscriptions: %+v", subs)
		}
		if n := len(e.taken(p.ID)); n != 0 {
			t.Errorf("%d seats held", n)
		}
		// Settled intents are not taken again.
		rep, err = restarted.SettleIntents(e.ctx)
		e.must(err)
		if rep.Acted() || len(e.openIntents()) != 0 {
			t.Errorf("second pass: %+v, open %+v", rep, e.openIntents())
		}
	})
}

func TestSubscribeMarksIntentDone(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.pool("fine", accounts.PoolActive, 2, false)
		u, _ := e.user("ida@example.test", billing.TestCardVisa)
		proc := billing.NewTestProcessorOn(accounts.TestLedger(st))
		res, err := e.node(st, proc).Subscribe(e.ctx, u.ID, "fine", accounts.SubscribeRequest{Blocks: []string{"europe"}})
		e.must(err)
		if open := e.openIntents(); len(open) != 0 {
			t.Errorf("open intents after a subscribe: %+v", open)
		}
		e.pastGrace()
		rep, err := e.node(st, proc).SettleIntents(e.ctx)
		e.must(err)
		if rep.Acted() {
			t.Errorf("settlement acted on a recorded subscribe: %+v", rep)
		}
		if l := ledgerOf(proc, "subscribe:"+res.ID); len(l) != 1 || l[0].Refunded {
			t.Errorf("ledger: %+v", l)
		}

		// A declined card leaves a void intent and no charge.
		d, _ := e.user("ivy@example.test", billing.TestCardDeclined)
		_, err = e.node(st, proc).Subscribe(e.ctx, d.ID, "fine", accounts.SubscribeRequest{Blocks: []string{"europe"}})
		wantStatus(t, err, 402)
		if open := e.openIntents(); len(open) != 0 {
			t.Errorf("open intents after a decline: %+v", open)
		}
	})
}

// The processor does not answer the charge: the caller cannot know whether
// it charged. The intent stays pending and settlement finds nothing to refund.
func TestUnansweredChargeIsSettledVoid(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.pool("mute", accounts.PoolActive, 2, false)
		u, _ := e.user("jo@example.test", billing.TestCardVisa)
		proc := &crashProcessor{Processor: billing.NewTestProcessorOn(accounts.TestLedger(st))}
		proc.chargeFails.Store(true)
		_, err := e.node(st, proc).Subscribe(e.ctx, u.ID, "mute", accounts.SubscribeRequest{Blocks: []string{"europe"}})
		wantStatus(t, err, 502, "nothing was created", "refunded")
		open := e.openIntents()
		if len(open) != 1 {
			t.Fatalf("open intents: %+v", open)
		}
		e.pastGrace()
		rep, err := e.node(st, proc).SettleIntents(e.ctx)
		e.must(err)
		if rep != (accounts.SettlementReport{Void: 1}) || proc.refunds.Load() != 0 {
			t.Errorf("settlement %+v with %d refunds, want one void and none", rep, proc.refunds.Load())
		}
		if got := e.intent(open[0].ID); got.Status != accounts.IntentVoid {
			t.Errorf("intent %+v", got)
		}
	})
}

// Settlement cannot ask the processor: the intent is left for the next pass,
// which (once the processor answers and the claim is older than the grace)
// refunds it.
func TestSettlementWaitsForAnUnreachableProcessor(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.pool("down", accounts.PoolActive, 2, false)
		u, _ := e.user("kim@example.test", billing.TestCardVisa)
		proc := &crashProcessor{Processor: billing.NewTestProcessorOn(accounts.TestLedger(st))}
		proc.crash.Store(true)
		node := e.node(st, proc)
		crashed(func() { node.Subscribe(e.ctx, u.ID, "down", accounts.SubscribeRequest{Blocks: []string{"europe"}}) })
		proc.crash.Store(false)
		proc.findFails.Store(true)
		e.pastGrace()
		rep, err := node.SettleIntents(e.ctx)
		if err == nil || rep != (accounts.SettlementReport{Left: 1}) {
			t.Fatalf("settlement with the processor down: %+v, %v; want one left and an error", rep, err)
		}
		open := e.openIntents()
		if len(open) != 1 || open[0].Status != accounts.IntentSettling {
			t.Fatalf("open intents: %+v, want one settling", open)
		}
		proc.findFails.Store(false)
		rep, err = node.SettleIntents(e.ctx)
		e.must(err)
		if rep.Acted() {
			t.Errorf("a fresh claim was taken again within the grace: %+v", rep)
		}
		e.pastGrace()
		rep, err = node.SettleIntents(e.ctx)
		e.must(err)
		if rep != (accounts.SettlementReport{Refunded: 1}) {
			t.Errorf("settlement after the processor came back: %+v", rep)
		}
	})
}

// A settler claims the intent while the subscribe is between its charge and
// its commit: the commit refuses, nothing is created, and the charge is
// refunded exactly once.
func TestSettlerWinsOverALateCommit(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("late", accounts.PoolActive, 2, false)
		u, _ := e.user("lee@example.test", billing.TestCardVisa)
		ledger := billing.NewTestProcessorOn(accounts.TestLedger(st))
		proc := &crashProcessor{Processor: ledger}
		settler := e.node(st, proc)
		var settled accounts.SettlementReport
		proc.afterCharge = func() {
			e.pastGrace() // the processor call took longer than the grace
			var err error
			settled, err = settler.SettleIntents(e.ctx)
			e.must(err)
		}
		_, err := e.node(st, proc).Subscribe(e.ctx, u.ID, "late", accounts.SubscribeRequest{Blocks: []string{"europe"}})
		wantStatus(t, err, 503, "refunded", "nothing was created")
		if settled != (accounts.SettlementReport{Refunded: 1}) {
			t.Errorf("settler: %+v", settled)
		}
		if subs := e.userSubs(u.ID); len(subs) != 0 {
			t.Errorf("subscriptions: %+v", subs)
		}
		if n := len(e.taken(p.ID)); n != 0 {
			t.Errorf("%d seats held", n)
		}
		if l := ledgerOf(ledger, "subscribe:"); len(l) != 1 || !l[0].Refunded {
			t.Errorf("ledger %+v, want one refunded charge", l)
		}
		if open := e.openIntents(); len(open) != 0 {
			t.Errorf("open intents: %+v", open)
		}
	})
}

// The other order: the subscription is committed first, or an intent is
// still pending while its subscription exists. Settlement keeps the money.
func TestSettlementKeepsARecordedCharge(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("kept", accounts.PoolActive, 2, false)
		u, _ := e.user("max@example.test", billing.TestCardVisa)
		sub := e.sub(u, p, accounts.SubActive, 1, accounts.BlockEurope)
		ledger := billing.NewTestProcessorOn(accounts.TestLedger(st))
		_, err := ledger.Charge(e.ctx, billing.ChargeRequest{UserID: u.ID, MethodID: billing.TestCardVisa, Amount: "96.00", IdempotencyKey: "subscribe:" + sub.ID})
		e.must(err)
		now := e.clock.Now()
		in := &accounts.ChargeIntent{ID: envID(), UserID: u.ID, SubscriptionID: sub.ID, Kind: accounts.IntentSubscribe,
			Amount: "96.00", IdempotencyKey: "subscribe:" + sub.ID, Status: accounts.IntentPending, CreatedAt: now, UpdatedAt: now}
		e.update(func(tx accounts.Tx) error { return tx.CreateChargeIntent(in) })
		e.pastGrace()
		proc := &crashProcessor{Processor: ledger}
		rep, err := e.node(st, proc).SettleIntents(e.ctx)
		e.must(err)
		if rep != (accounts.SettlementReport{Done: 1}) || proc.refunds.Load() != 0 {
			t.Errorf("settlement %+v with %d refunds, want done and none", rep, proc.refunds.Load())
		}
		if got := e.intent(in.ID); got.Status != accounts.IntentDone {
			t.Errorf("intent %+v", got)
		}
		if l := ledgerOf(ledger, "subscribe:"); len(l) != 1 || l[0].Refunded {
			t.Errorf("ledger %+v", l)
		}
	})
}

// Several nodes settle at once: each intent is refunded by one of them.
func TestSettlementOncePerIntentAcrossNodes(t *testing.T) {
	forEachStoreNodes(t, 3, func(t *testing.T, nodes []accounts.Store) {
		e := newEnv(t, nodes[0])
		e.pool("many", accounts.PoolActive, 20, false)
		ledger := billing.NewTestProcessorOn(accounts.TestLedger(nodes[0]))
		proc := &crashProcessor{Processor: ledger}
		proc.crash.Store(true)
		const crashes = 4
		for i := 0; i < crashes; i++ {
			u, _ := e.user(envID()+"@example.test", billing.TestCardVisa)
			node := e.node(nodes[0], proc)
			crashed(func() { node.Subscribe(e.ctx, u.ID, "many", accounts.SubscribeRequest{Blocks: []string{"europe"}}) })
		}
		proc.crash.Store(false)
		e.pastGrace()
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total accounts.SettlementReport
		)
		start := make(chan struct{})
		for _, st := range nodes {
			svc := e.node(st, proc)
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					rep, err := svc.SettleIntents(context.Background())
					if err != nil {
						t.Errorf("settle: %v", err)
					}
					mu.Lock()
					total.Done += rep.Done
					total.Refunded += rep.Refunded
					total.Void += rep.Void
					total.Left += rep.Left
					mu.Unlock()
				}()
			}
		}
		close(start)
		wg.Wait()
		if total != (accounts.SettlementReport{Refunded: crashes}) || proc.refunds.Load() != crashes {
			t.Errorf("all nodes: %+v with %d refund calls, want %d refunds", total, proc.refunds.Load(), crashes)
		}
		for _, c := range ledgerOf(ledger, "subscribe:") {
			if !c.Refunded {
				t.Errorf("charge %s not refunded", c.Ref)
			}
		}
	})
}

// A past-due retry that dies after the charge is refunded like a subscribe;
// the subscription stays past due.
func TestRetryCrashAfterChargeIsRefunded(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.pool("due", accounts.PoolActive, 2, false)
		u, _ := e.user("ned@example.test", billing.TestCardVisa)
		proc := &crashProcessor{Processor: billing.NewTestProcessorOn(accounts.TestLedger(st))}
		node := e.node(st, proc)
		res, err := node.Subscribe(e.ctx, u.ID, "due", accounts.SubscribeRequest{Blocks: []string{"europe"}})
		e.must(err)
		_, err = node.SetupIntent(e.ctx, u.ID, billing.TestCardDeclined)
		e.must(err)
		e.clock.Set(res.CurrentPeriodEnd.Add(time.Minute))
		if rep, err := node.RunLifecycle(e.ctx); err != nil || rep.PastDue != 1 {
			t.Fatalf("lifecycle %+v, %v; want one past due", rep, err)
		}
		proc.crash.Store(true)
		if !crashed(func() { node.SetupIntent(e.ctx, u.ID, billing.TestCardVisa) }) {
			t.Fatal("the retry did not reach the simulated crash")
		}
		open := e.openIntents()
		if len(open) != 1 || open[0].Kind != accounts.IntentRetry || open[0].SubscriptionID != res.ID || open[0].ChargeID == "" {
			t.Fatalf("open intents: %+v, want one retry intent", open)
		}
		proc.crash.Store(false)
		e.pastGrace()
		rep, err := e.node(st, proc).SettleIntents(e.ctx)
		e.must(err)
		if rep != (accounts.SettlementReport{Refunded: 1}) {
			t.Errorf("settlement %+v", rep)
		}
		if got := e.getSub(res.ID); got.Status != accounts.SubPastDue {
			t.Errorf("subscription %s, want past_due", got.Status)
		}
		retries := ledgerOf(proc.Processor.(*billing.TestProcessor), "retry:")
		if len(retries) != 1 || !retries[0].Refunded {
			t.Errorf("retry charges %+v, want one refunded", retries)
		}
	})
}

// A renewal that dies after the charge is recorded by the next pass after
// the claim timeout, with the same idempotency key: charged once, recorded once.
func TestRenewalCrashAfterChargeEndsConsistent(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.pool("renew", accounts.PoolActive, 2, false)
		u, _ := e.user("oda@example.test", billing.TestCardVisa)
		ledger := billing.NewTestProcessorOn(accounts.TestLedger(st))
		proc := &crashProcessor{Processor: ledger}
		res, err := e.node(st, proc).Subscribe(e.ctx, u.ID, "renew", accounts.SubscribeRequest{Blocks: []string{"europe"}})
		e.must(err)
		e.clock.Set(res.CurrentPeriodEnd.Add(time.Minute))
		proc.crash.Store(true)
		node := e.node(st, proc)
		if !crashed(func() { node.RunLifecycle(e.ctx) }) {
			t.Fatal("the renewal did not reach the simulated crash")
		}
		proc.crash.Store(false)
		restarted := e.node(st, billing.NewTestProcessorOn(accounts.TestLedger(st)))
		if rep, err := restarted.RunLifecycle(e.ctx); err != nil || rep.Renewed != 0 {
			t.Errorf("within the claim timeout: %+v, %v; want nothing renewed", rep, err)
		}
		e.pastGrace() // beyond the claim timeout too
		// Settlement leaves a claim the lifecycle will take over alone.
		if rep, err := restarted.SettleIntents(e.ctx); err != nil || rep.Acted() {
			t.Errorf("settlement touched a renewable claim: %+v, %v", rep, err)
		}
		if rep, err := restarted.RunLifecycle(e.ctx); err != nil || rep.Renewed != 1 {
			t.Fatalf("after the claim timeout: %+v, %v; want one renewal", rep, err)
		}
		renewals := ledgerOf(ledger, "renew:")
		if len(renewals) != 1 || renewals[0].Refunded {
			t.Fatalf("renewal charges %+v, want one", renewals)
		}
		charges := e.charges(res.ID)
		if len(charges) != 2 || charges[1].Status != accounts.ChargeSucceeded || charges[1].ProcessorRef != renewals[0].Ref {
			t.Errorf("charge records %+v, want the renewal recorded with ref %s", charges, renewals[0].Ref)
		}
		if got := e.getSub(res.ID); !got.CurrentPeriodStart.Equal(res.CurrentPeriodEnd) {
			t.Errorf("period starts %v, want %v", got.CurrentPeriodStart, res.CurrentPeriodEnd)
		}
	})
}

// The test processor's ledger in the store answers a repeated idempotency key
// with the first outcome, across processor instances (a restart), and
// refuses the key with other parameters, as Stripe does.
func TestTestProcessorLedgerIsDurable(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		req := billing.ChargeRequest{UserID: "u1", MethodID: billing.TestCardVisa, Amount: "10.00", IdempotencyKey: "k1"}
		ref, err := billing.NewTestProcessorOn(accounts.TestLedger(st)).Charge(e.ctx, req)
		e.must(err)
		again := billing.NewTestProcessorOn(accounts.TestLedger(st))
		other := req
		other.Amount = "99.00"
		if _, err := again.Charge(e.ctx, other); !errors.As(err, new(*billing.IdempotencyError)) {
			t.Errorf("the key again with another amount: %v, want an idempotency error", err)
		}
		ref2, err := again.Charge(e.ctx, req)
		e.must(err)
		if ref2 != ref || len(again.Ledger()) != 1 {
			t.Errorf("repeat: %s vs %s, ledger %+v", ref2, ref, again.Ledger())
		}
		got, found, err := again.FindCharge(e.ctx, "k1")
		if err != nil || !found || got != ref {
			t.Errorf("FindCharge: %s %v %v", got, found, err)
		}
		e.must(again.Refund(e.ctx, ref, "refund:k1"))
		e.must(again.Refund(e.ctx, ref, "refund:k1"))
		if l := billing.NewTestProcessorOn(accounts.TestLedger(st)).Ledger(); len(l) != 1 || !l[0].Refunded {
			t.Errorf("ledger %+v", l)
		}
		decl := billing.ChargeRequest{UserID: "u1", MethodID: billing.TestCardDeclined, Amount: "10.00", IdempotencyKey: "k2"}
		if _, err := again.Charge(e.ctx, decl); !errors.Is(err, billing.ErrDeclined) {
			t.Errorf("declined card: %v", err)
		}
		if _, err := billing.NewTestProcessorOn(accounts.TestLedger(st)).Charge(e.ctx, decl); !errors.Is(err, billing.ErrDeclined) {
			t.Errorf("repeat of a declined key: %v, want the first outcome (declined)", err)
		}
		if _, found, _ := again.FindCharge(e.ctx, "k2"); found {
			t.Error("a declined attempt was found as a charge")
		}
	})
}

// A renewal dies after the charge and, before anything reclaims it, the
// subscriber cancels: the subscription ends at the period end it already
// passed, so no renewal will ever take the claim over. Settlement refunds
// the charge and voids the claim.
func TestAbandonedRenewalClaimIsRefunded(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.pool("gone", accounts.PoolActive, 2, false)
		u, _ := e.user("pia@example.test", billing.TestCardVisa)
		ledger := billing.NewTestProcessorOn(accounts.TestLedger(st))
		proc := &crashProcessor{Processor: ledger}
		node := e.node(st, proc)
		res, err := node.Subscribe(e.ctx, u.ID, "gone", accounts.SubscribeRequest{Blocks: []string{"europe"}})
		e.must(err)
		e.clock.Set(res.CurrentPeriodEnd.Add(time.Minute))
		proc.crash.Store(true)
		if !crashed(func() { node.RunLifecycle(e.ctx) }) {
			t.Fatal("the renewal did not reach the simulated crash")
		}
		proc.crash.Store(false)
		_, err = node.CancelPledge(e.ctx, u.ID, "gone")
		e.must(err)
		if rep, err := node.RunLifecycle(e.ctx); err != nil || rep.Canceled != 1 {
			t.Fatalf("lifecycle: %+v, %v; want the scheduled cancellation carried out", rep, err)
		}
		rep, err := node.SettleIntents(e.ctx)
		e.must(err)
		if rep.Acted() {
			t.Errorf("settled a claim younger than the claim timeout: %+v", rep)
		}
		e.pastGrace()
		rep, err = node.SettleIntents(e.ctx)
		e.must(err)
		if rep != (accounts.SettlementReport{Refunded: 1}) {
			t.Errorf("settlement: %+v, want one refund", rep)
		}
		renewals := ledgerOf(ledger, "renew:")
		if len(renewals) != 1 || !renewals[0].Refunded {
			t.Errorf("renewal charges %+v, want one, refunded", renewals)
		}
		charges := e.charges(res.ID)
		if len(charges) != 2 || charges[1].Status != accounts.ChargeVoid {
			t.Errorf("charge records %+v, want the renewal claim void", charges)
		}
		if open := e.openIntents(); len(open) != 0 {
			t.Errorf("open intents: %+v", open)
		}
		if got := e.getSub(res.ID); got.Status != accounts.SubCanceled {
			t.Errorf("subscription %s", got.Status)
		}
		rep, err = node.SettleIntents(e.ctx)
		e.must(err)
		if rep.Acted() {
			t.Errorf("second pass: %+v", rep)
		}
	})
}
