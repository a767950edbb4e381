package accounts_test

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

// Several nodes (Services) run the lifecycle at the same moment on one
// store: every period end is charged exactly once.
func TestLifecycleExactlyOnceAcrossNodes(t *testing.T) {
	forEachStoreNodes(t, 4, func(t *testing.T, nodes []accounts.Store) {
		e := newEnv(t, nodes[0])
		e.pool("multi", accounts.PoolActive, 20, false)
		const good, bad, canceling = 6, 3, 2
		var subs []*accounts.SubscribeResult
		var badUsers []*accounts.User
		for i := 0; i < good+bad+canceling; i++ {
			u, _ := e.user(envID()+"@example.test", billing.TestCardVisa)
			subs = append(subs, e.subscribe(u, "multi", 1, "europe"))
			switch {
			case i >= good+bad:
				_, err := e.svc.CancelPledge(e.ctx, u.ID, "multi")
				e.must(err)
			case i >= good:
				badUsers = append(badUsers, u)
			}
		}
		for _, u := range badUsers {
			_, err := e.svc.SetupIntent(e.ctx, u.ID, billing.TestCardDeclined)
			e.must(err)
		}
		services := make([]*accounts.Service, 0, len(nodes))
		for _, st := range nodes {
			services = append(services, e.newServiceOn(st))
		}
		e.clock.Set(subs[0].CurrentPeriodEnd.Add(time.Minute))
		calls := e.proc.Calls()

		var (
			mu    sync.Mutex
			total accounts.LifecycleReport
			wg    sync.WaitGroup
		)
		start := make(chan struct{})
		for _, svc := range services {
			for pass := 0; pass < 2; pass++ {
				wg.Add(1)
				go func(svc *accounts.Service) {
					defer wg.Done()
					<-start
					rep, err := svc.RunLifecycle(context.Background())
					if err != nil {
						t.Errorf("lifecycle: %v", err)
					}
					mu.Lock()
					total.Renewed += rep.Renewed
					total.PastDue += rep.PastDue
					total.Canceled += rep.Canceled
					total.Expired += rep.Expired
					total.Failed += rep.Failed
					mu.Unlock()
				}(svc)
			}
		}
		close(start)
		wg.Wait()

		if total.Renewed != good || total.PastDue != bad || total.Canceled != canceling || total.Expired != 0 || total.Failed != 0 {
			t.Errorf("all nodes together: %+v, want %d renewed, %d past due, %d canceled", total, good, bad, canceling)
		}
		if got := e.proc.Calls() - calls; got != good+bad {
			t.Errorf("%d processor calls for %d renewals", got, good+bad)
		}
		for i, res := range subs {
			sub := e.getSub(res.ID)
			cs := e.charges(res.ID)
			switch {
			case i < good:
				if sub.Status != accounts.SubActive || !sub.CurrentPeriodEnd.Equal(res.CurrentPeriodEnd.AddDate(0, 1, 0)) {
					t.Errorf("renewed %d: %s until %v", i, sub.Status, sub.CurrentPeriodEnd)
				}
				if len(cs) != 2 || cs[1].Status != accounts.ChargeSucceeded {
					t.Errorf("renewed %d: charges %+v", i, cs)
				}
				if n := len(e.chargesFor("renew:" + res.ID)); n != 1 {
					t.Errorf("renewed %d: %d renewal charges in the ledger", i, n)
				}
			case i < good+bad:
				if sub.Status != accounts.SubPastDue || len(cs) != 2 || cs[1].Status != accounts.ChargeFailed {
					t.Errorf("declined %d: %s, charges %+v", i, sub.Status, cs)
				}
			default:
				if sub.Status != accounts.SubCanceled || len(cs) != 1 {
					t.Errorf("canceled %d: %s, charges %+v", i, sub.Status, cs)
				}
			}
		}
	})
}

// flakyProcessor fails charges (not a decline: the processor is unreachable)
// while down is set.
type flakyProcessor struct {
	*billing.TestProcessor
	down atomic.Bool
}

func (p *flakyProcessor) Charge(ctx context.Context, req billing.ChargeRequest) (string, error) {
	if p.down.Load() {
		return "", errors.New("processor unreachable")
	}
	return p.TestProcessor.Charge(ctx, req)
}

// A renewal claimed by a node that died (or whose processor call failed)
// stays pending; after the claim timeout another pass takes it over with the
// same idempotency key, so the processor is never asked to charge twice.
func TestLifecycleReclaimsAbandonedRenewals(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.pool("re", accounts.PoolActive, 5, false)
		u, _ := e.user("lou@example.test", billing.TestCardVisa)
		res := e.subscribe(u, "re", 1, "asia")

		flaky := &flakyProcessor{TestProcessor: e.proc}
		svc, err := accounts.NewService(accounts.Config{Store: st, Secret: envSecret, Processor: flaky, Now: e.clock.Now})
		e.must(err)
		flaky.down.Store(true)
		e.clock.Set(res.CurrentPeriodEnd)
		rep, err := svc.RunLifecycle(e.ctx)
		if err == nil || rep.Failed != 1 || !strings.Contains(err.Error(), "unreachable") {
			t.Fatalf("pass with the processor down: %+v, %v", rep, err)
		}
		cs := e.charges(res.ID)
		if len(cs) != 2 || cs[1].Status != accounts.ChargePending {
			t.Fatalf("charges %+v", cs)
		}
		flaky.down.Store(false)
		// A fresh claim belongs to the node that made it.
		e.clock.Advance(5 * time.Minute)
		if rep, err := svc.RunLifecycle(e.ctx); err != nil || rep.Skipped != 1 || rep.Acted() {
			t.Fatalf("pass during the claim: %+v, %v", rep, err)
		}
		// After the timeout it is taken over.
		e.clock.Advance(10 * time.Minute)
		if rep, err := svc.RunLifecycle(e.ctx); err != nil || rep.Renewed != 1 {
			t.Fatalf("takeover pass: %+v, %v", rep, err)
		}
		cs = e.charges(res.ID)
		if len(cs) != 2 || cs[1].Status != accounts.ChargeSucceeded {
			t.Fatalf("charges after the takeover %+v", cs)
		}
		if s := e.getSub(res.ID); !s.CurrentPeriodEnd.Equal(res.CurrentPeriodEnd.AddDate(0, 1, 0)) {
			t.Errorf("period end %v", s.CurrentPeriodEnd)
		}

		// A node died after charging but before recording: the takeover gets
		// the first outcome back from the processor, not a second charge.
		sub := e.getSub(res.ID)
		periodStart := sub.CurrentPeriodEnd
		e.clock.Set(periodStart.Add(time.Minute))
		ref, err := e.proc.Charge(e.ctx, billing.ChargeRequest{
			UserID: u.ID, MethodID: billing.TestCardVisa, Amount: "80",
			IdempotencyKey: "renew:" + res.ID + ":" + periodStart.UTC().Format(time.RFC3339Nano),
		})
		e.must(err)
		e.must(st.Update(e.ctx, func(tx accounts.Tx) error {
			return tx.CreateCharge(&accounts.Charge{
				ID: envID(), UserID: u.ID, SubscriptionID: res.ID, PeriodStart: periodStart,
				Amount: "80", Status: accounts.ChargePending, CreatedAt: periodStart,
			})
		}))
		e.clock.Set(periodStart.Add(11 * time.Minute))
		before := len(e.chargesFor("renew:" + res.ID))
		if rep := e.lifecycle(); rep.Renewed != 1 {
			t.Fatalf("takeover after a crash: %+v", rep)
		}
		if after := len(e.chargesFor("renew:" + res.ID)); after != before {
			t.Errorf("the processor charged again: %d → %d ledger entries", before, after)
		}
		if cs := e.charges(res.ID); cs[len(cs)-1].ProcessorRef != ref || cs[len(cs)-1].Status != accounts.ChargeSucceeded {
			t.Errorf("recorded %+v, want ref %s", cs[len(cs)-1], ref)
		}
	})
}

// RunWorker runs passes until its context ends.
func TestRunWorker(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.pool("w", accounts.PoolActive, 5, false)
		u, _ := e.user("max@example.test", billing.TestCardVisa)
		res := e.subscribe(u, "w", 1, "asia")
		e.clock.Set(res.CurrentPeriodEnd)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			e.svc.RunWorker(ctx, 10*time.Millisecond)
			close(done)
		}()
		deadline := time.Now().Add(5 * time.Second)
		for len(e.charges(res.ID)) < 2 || e.charges(res.ID)[1].Status != accounts.ChargeSucceeded {
			if time.Now().After(deadline) {
				t.Fatal("the worker did not renew the subscription")
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the worker did not stop with its context")
		}
	})
}

// A member of a combined key that is canceled at its period end stays a
// member but contributes nothing; the combined key keeps working through the
// other members, and the cancellation is announced to the gates.
func TestLifecycleCombinedKeyMembers(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.pool("co", accounts.PoolActive, 4, false)
		u, _ := e.user("yan@example.test", billing.TestCardVisa)
		eu := e.subscribe(u, "co", 1, "europe")
		e.clock.Advance(time.Second)
		eu2 := e.subscribe(u, "co", 2, "europe")
		ck, err := e.svc.CreateCombinedKey(e.ctx, u.ID, []string{eu.ID, eu2.ID}, "both", nil)
		e.must(err)
		if a := e.entitlement(ck.Token).At(e.clock.Now(), "model-co"); a.Lanes != 3 {
			t.Fatalf("combined key: %+v", a)
		}
		// Cancel the most recent (eu2) at its period end; eu renews.
		cr, err := e.svc.CancelPledge(e.ctx, u.ID, "co")
		e.must(err)
		if cr.SubscriptionID != eu2.ID {
			t.Fatalf("canceled %s", cr.SubscriptionID)
		}
		inv := e.invalidationsOf(u.ID, 0)
		e.clock.Set(eu2.CurrentPeriodEnd)
		if rep := e.lifecycle(); rep.Canceled != 1 || rep.Renewed != 1 {
			t.Fatalf("%+v", rep)
		}
		if e.invalidationsOf(u.ID, inv+2) < inv+2 {
			t.Error("the renewal and the cancellation were not both announced")
		}
		if s := e.getSub(eu2.ID); s.Status != accounts.SubCanceled || len(s.Seats) != 0 {
			t.Errorf("member after its end: %s, %d seats", s.Status, len(s.Seats))
		}
		rows, err := e.svc.ListCombinedKeys(e.ctx, u.ID)
		e.must(err)
		if len(rows) != 1 || len(rows[0].Members) != 2 {
			t.Fatalf("combined keys %+v", rows)
		}
		ent := e.entitlement(ck.Token)
		if ent.Denied != "" {
			t.Fatalf("combined key denied: %s", ent.Denied)
		}
		if a := ent.At(e.clock.Now(), "model-co"); a.Lanes != 1 {
			t.Errorf("after one member ended: %+v, want the other's single lane", a)
		}
	})
}
