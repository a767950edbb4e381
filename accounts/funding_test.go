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

// fundingPool creates a funding pool with a goal (and no deadline).
func (e *env) fundingPool(slug, goal string, slots int) *accounts.Pool {
	e.t.Helper()
	p := e.pool(slug, accounts.PoolFunding, slots, false)
	p.FundingGoal = goal
	e.update(func(tx accounts.Tx) error { return tx.UpsertPool(p) })
	return p
}

// pledge pledges and fails the test unless a pledge is recorded.
func (e *env) pledge(u *accounts.User, pool string, q int, blocks ...string) *accounts.SubscribeResult {
	e.t.Helper()
	res := e.subscribe(u, pool, q, blocks...)
	if res.Status != accounts.SubPledged || res.Key != nil || res.AmountCharged != "0" || res.WindowOpen {
		e.t.Fatalf("pledge answer %+v", res)
	}
	return res
}

// poolNow reads a pool as GET /api/pools/:id shows it (drafts: nil).
func (e *env) poolNow(slug string) *accounts.PoolDetail {
	e.t.Helper()
	d, err := e.svc.GetPool(e.ctx, slug)
	if err != nil {
		var ae *accounts.Error
		if errors.As(err, &ae) && ae.Status == 404 {
			return nil
		}
		e.t.Fatal(err)
	}
	return d
}

// funding runs one funding pass and fails on error.
func (e *env) funding() accounts.FundingReport {
	e.t.Helper()
	rep, err := e.svc.RunFunding(e.ctx)
	e.must(err)
	return rep
}

// waitFundingNotices waits for n funding notices of kind (they are sent in
// the background) and returns them.
func (e *env) waitFundingNotices(kind string, n int) []fundingNoticeSeen {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var got []fundingNoticeSeen
		for _, fn := range e.notifier.FundingNotices() {
			if fn.notice.Kind == kind {
				got = append(got, fn)
			}
		}
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) != n {
				e.t.Fatalf("%d %q notices, want %d: %+v", len(got), kind, n, got)
			}
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFundingPledgesGoalActivation(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.fundingPool("fund", "400", 4)
		p.MaxPledgeSeats = 3 // over the default (2 of 4): bob pledges 3
		e.update(func(tx accounts.Tx) error { return tx.UpsertPool(p) })
		ann, _ := e.user("ann@example.test", billing.TestCardVisa)
		bob, _ := e.user("bob@example.test", billing.TestCardVisa)
		cat, _ := e.user("cat@example.test", billing.TestCardDeclined)
		dan, _ := e.user("dan@example.test", "")
		calls := e.proc.Calls()

		// A pledge needs a card (activation charges it) and charges nothing.
		_, err := e.svc.Subscribe(e.ctx, dan.ID, "fund", accounts.SubscribeRequest{Blocks: []string{"asia"}})
		wantStatus(t, err, 400, accounts.MsgNoPaymentMethod)
		a := e.pledge(ann, "fund", 1, "asia")
		if a.AmountDue != "80" {
			t.Errorf("amount due %q, want 80", a.AmountDue)
		}
		b := e.pledge(bob, "fund", 2, "europe")
		c := e.pledge(cat, "fund", 1, "americas")
		if e.proc.Calls() != calls {
			t.Fatal("a pledge called the processor")
		}
		d := e.poolNow("fund")
		if d.Status != accounts.PoolFunding || d.FundingGoal != "400" || d.FundingPledged != "392" || d.PledgedSlots != 32 || d.FundingDeadline != nil {
			t.Fatalf("pool %+v", d.PoolView)
		}
		if list, err := e.svc.ListPools(e.ctx); err != nil || len(list) != 1 || list[0].FundingPledged != "392" {
			t.Fatalf("list %+v %v", list, err)
		}
		// No key before the pool is live.
		_, err = e.svc.CreateKey(e.ctx, ann.ID, a.ID, "")
		wantStatus(t, err, 409, "pledge", "not live")

		// Withdrawn at once: seats freed, nothing charged.
		res, err := e.svc.CancelPledge(e.ctx, bob.ID, "fund")
		e.must(err)
		if !res.Withdrawn || res.SubscriptionID != b.ID || e.getSub(b.ID).Status != accounts.SubCanceled {
			t.Fatalf("withdraw %+v, sub %+v", res, e.getSub(b.ID))
		}
		if d := e.poolNow("fund"); d.FundingPledged != "200" || d.PledgedSlots != 16 {
			t.Fatalf("after withdrawing: pledged %s, %d slots", d.FundingPledged, d.PledgedSlots)
		}
		e.waitFundingNotices(accounts.NoticePledgeReleased, 1)

		// Reaching the goal moves the pool to activating by itself.
		b = e.pledge(bob, "fund", 3, "europe")
		if d := e.poolNow("fund"); d.Status != accounts.PoolActivating || d.FundingPledged != "488" {
			t.Fatalf("after the goal: %+v", d.PoolView)
		}
		if got := e.waitFundingNotices(accounts.NoticeGoalReached, 1); got[0].to != "operator" || got[0].notice.Amount != "488" {
			t.Errorf("goal notice %+v", got)
		}
		e.waitFundingNotices(accounts.NoticePledgeRecorded, 4)
		if rep := e.funding(); rep.Charged+rep.Declined != 0 || e.proc.Calls() != calls {
			t.Fatalf("an activating pool was charged: %+v", rep)
		}

		// The operator: refused moves say why; active charges every pledge.
		_, err = e.svc.SetPoolStatus(e.ctx, "fund", accounts.PoolPaused)
		wantStatus(t, err, 409, "only an active pool can be paused")
		_, err = e.svc.SetPoolStatus(e.ctx, "nope", accounts.PoolActive)
		wantStatus(t, err, 404, "nope")
		_, err = e.svc.SetPoolStatus(e.ctx, "fund", "live")
		wantStatus(t, err, 400, "draft, funding, activating, active or paused")
		e.clock.Advance(time.Hour)
		live := e.clock.Now()
		moved, err := e.svc.SetPoolStatus(e.ctx, "fund", accounts.PoolActive)
		e.must(err)
		if !moved.Changed || moved.PreviousStatus != accounts.PoolActivating || moved.Status != accounts.PoolActive {
			t.Fatalf("moved %+v", moved)
		}
		rep := e.funding()
		if rep.Charged != 2 || rep.Declined != 1 || rep.Failed != 0 {
			t.Fatalf("activation %+v", rep)
		}
		for id, want := range map[string]int{a.ID: 1, b.ID: 1, c.ID: 0} { // cat's card declines: nothing in the ledger
			if n := len(e.chargesFor(id)); n != want {
				t.Errorf("pledge %s: %d processor charges, want %d", id, n, want)
			}
		}
		sa := e.getSub(a.ID)
		if sa.Status != accounts.SubActive || !sa.CurrentPeriodStart.Equal(live) || !sa.CurrentPeriodEnd.Equal(live.AddDate(0, 1, 0)) {
			t.Fatalf("ann's subscription %+v", sa)
		}
		if got := e.charges(a.ID); len(got) != 1 || got[0].Status != accounts.ChargeSucceeded || got[0].Amount != "80" {
			t.Errorf("ann's charges %+v", got)
		}
		if sc := e.getSub(c.ID); sc.Status != accounts.SubCanceled || len(sc.Seats) != 0 {
			t.Fatalf("cat's subscription %+v, want canceled (released) at once", sc)
		}
		key, err := e.svc.CreateKey(e.ctx, ann.ID, a.ID, "")
		e.must(err)
		if ent := e.entitlement(key.APIKey); ent.Denied != "" || ent.At(live.Truncate(24*time.Hour).Add(26*time.Hour), "model-fund").Lanes != 1 {
			t.Fatalf("ann's key: %+v", ent)
		}
		e.waitFundingNotices(accounts.NoticePoolLive, 2)
		if got := e.waitFundingNotices(accounts.NoticeChargeFailed, 1); got[0].to != cat.ID || got[0].notice.Reason == "" {
			t.Errorf("charge failed notice %+v", got)
		}

		// Another pass charges nobody again; a pledge on a live pool is a purchase.
		before := e.proc.Calls()
		if rep := e.funding(); rep.Acted() || e.proc.Calls() != before {
			t.Fatalf("second pass %+v", rep)
		}

		// Cat's released pledge stays released through the grace period.
		e.clock.Advance(8 * 24 * time.Hour)
		e.lifecycle()
		if sc := e.getSub(c.ID); sc.Status != accounts.SubCanceled || len(sc.Seats) != 0 {
			t.Fatalf("cat's subscription after the grace period %+v", sc)
		}
	})
}

// answerLosingProcessor charges, then loses the answer of its first `lose`
// charges, as a processor whose answer never came back (or a node that
// died after the charge).
type answerLosingProcessor struct {
	billing.Processor
	lose atomic.Int32
}

func (p *answerLosingProcessor) Charge(ctx context.Context, req billing.ChargeRequest) (string, error) {
	ref, err := p.Processor.Charge(ctx, req)
	if err == nil && p.lose.Add(-1) >= 0 {
		return "", errors.New("connection reset by peer")
	}
	return ref, err
}

func TestFundingChargeLostIsFinishedOnceNotRefunded(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.fundingPool("fund", "1000", 2)
		ann, _ := e.user("ann@example.test", billing.TestCardVisa)
		bob, _ := e.user("bob@example.test", billing.TestCardVisa)
		a := e.pledge(ann, "fund", 1, "asia")
		b := e.pledge(bob, "fund", 1, "europe")
		lossy := &answerLosingProcessor{Processor: e.proc}
		lossy.lose.Store(1)
		svc, err := accounts.NewService(accounts.Config{Store: st, Secret: envSecret, TermsVersion: envTerms,
			Processor: lossy, Notifier: e.notifier, Now: e.clock.Now})
		e.must(err)
		_, err = svc.SetPoolStatus(e.ctx, "fund", accounts.PoolActive)
		e.must(err)

		// One answer is lost: that pledge stays pledged, its charge open.
		rep, err := svc.RunFunding(e.ctx)
		if err == nil || rep.Charged != 1 || rep.Failed != 1 {
			t.Fatalf("first pass %+v, %v", rep, err)
		}
		lost := a.ID
		if e.getSub(a.ID).Status == accounts.SubActive {
			lost = b.ID
		}
		if e.getSub(lost).Status != accounts.SubPledged || len(e.chargesFor(lost)) != 1 {
			t.Fatalf("lost pledge %+v, ledger %+v", e.getSub(lost), e.chargesFor(lost))
		}
		// Within the grace nobody takes it over, and it cannot be withdrawn.
		if rep := e.funding(); rep.Charged+rep.Declined != 0 || rep.Skipped != 1 {
			t.Fatalf("second pass %+v", rep)
		}
		_, err = e.svc.SetCancelAtPeriodEnd(e.ctx, e.getSub(lost).UserID, lost, true)
		wantStatus(t, err, 409, "being charged")

		// After it, settlement leaves it alone (no refund) and the funding
		// pass finishes it under the same key: charged once, recorded.
		e.clock.Advance(20 * time.Minute)
		srep, err := e.svc.SettleIntents(e.ctx)
		e.must(err)
		if srep.Refunded+srep.Void != 0 {
			t.Fatalf("settlement touched the pledge charge: %+v", srep)
		}
		if rep := e.funding(); rep.Charged != 1 || rep.Failed != 0 {
			t.Fatalf("takeover %+v", rep)
		}
		if got := e.chargesFor(lost); len(got) != 1 || got[0].Refunded {
			t.Fatalf("ledger for the lost pledge %+v", got)
		}
		if s := e.getSub(lost); s.Status != accounts.SubActive || len(e.charges(lost)) != 1 {
			t.Fatalf("lost pledge after the takeover %+v, charges %+v", s, e.charges(lost))
		}
	})
}

func TestFundingDeadlineReleasesPledges(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.fundingPool("fund", "1000", 2)
		p.FundingDeadline = e.clock.Now().Add(time.Hour)
		p.MaxPledgeSeats = 2 // every seat: the default would be 1
		e.update(func(tx accounts.Tx) error { return tx.UpsertPool(p) })
		ann, _ := e.user("ann@example.test", billing.TestCardVisa)
		a := e.pledge(ann, "fund", 2, "asia")
		if d := e.poolNow("fund"); d.FundingDeadline == nil || !d.FundingDeadline.Equal(p.FundingDeadline) {
			t.Fatalf("deadline %v", d.FundingDeadline)
		}
		if rep := e.funding(); rep.Acted() {
			t.Fatalf("before the deadline %+v", rep)
		}
		calls := e.proc.Calls()
		e.clock.Advance(2 * time.Hour)
		rep := e.funding()
		if rep.Expired != 1 || rep.Released != 1 {
			t.Fatalf("after the deadline %+v", rep)
		}
		if e.poolNow("fund") != nil {
			t.Fatal("the pool is still listed after its deadline")
		}
		if s := e.getSub(a.ID); s.Status != accounts.SubCanceled || len(s.Seats) != 0 || len(e.taken(p.ID)) != 0 {
			t.Fatalf("pledge after the deadline %+v", s)
		}
		if e.proc.Calls() != calls || len(e.chargesFor(a.ID)) != 0 {
			t.Fatal("a released pledge was charged")
		}
		if got := e.waitFundingNotices(accounts.NoticePledgeReleased, 1); got[0].to != ann.ID {
			t.Errorf("release notice %+v", got)
		}
		stored := read(e, func(tx accounts.Tx) (*accounts.Pool, error) { return tx.GetPool(p.ID) })
		if stored.Status != accounts.PoolDraft || stored.StatusReason != accounts.StatusByDeadline {
			t.Errorf("stored pool %+v", stored)
		}
	})
}

func TestFundingActivationRunsOnceOnTwoNodes(t *testing.T) {
	forEachStoreNodes(t, 2, func(t *testing.T, nodes []accounts.Store) {
		e := newEnv(t, nodes[0])
		e.fundingPool("fund", "100000", 20)
		var pledges []string
		for i := range 10 {
			u, _ := e.user(envID()+"@example.test", billing.TestCardVisa)
			pledges = append(pledges, e.pledge(u, "fund", 1, []string{"asia", "europe", "americas"}[i%3]).ID)
		}
		_, err := e.svc.SetPoolStatus(e.ctx, "fund", accounts.PoolActive)
		e.must(err)
		svcs := []*accounts.Service{e.svc, e.newServiceOn(nodes[1])}
		var (
			wg      sync.WaitGroup
			charged atomic.Int32
		)
		for round := 0; round < 3; round++ {
			for _, svc := range svcs {
				wg.Go(func() {
					rep, err := svc.RunFunding(e.ctx)
					if err != nil {
						t.Error(err)
					}
					charged.Add(int32(rep.Charged))
				})
			}
		}
		wg.Wait()
		if charged.Load() != 10 {
			t.Errorf("%d pledges charged, want 10", charged.Load())
		}
		for _, id := range pledges {
			if n := len(e.chargesFor(id)); n != 1 || e.getSub(id).Status != accounts.SubActive {
				t.Errorf("pledge %s: %d processor charges, status %s", id, n, e.getSub(id).Status)
			}
		}
	})
}

func TestPoolStatusTransitions(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		ann, _ := e.user("ann@example.test", billing.TestCardVisa)
		cases := []struct {
			from, to string
			live     bool // the pool has an active subscription
			status   int  // 0: allowed
			frag     string
		}{
			{accounts.PoolDraft, accounts.PoolFunding, false, 0, ""},
			{accounts.PoolDraft, accounts.PoolActive, false, 0, ""},
			{accounts.PoolDraft, accounts.PoolActivating, false, 409, "only a funding pool"},
			{accounts.PoolDraft, accounts.PoolPaused, false, 409, "only an active pool"},
			{accounts.PoolFunding, accounts.PoolActivating, false, 0, ""},
			{accounts.PoolFunding, accounts.PoolDraft, false, 0, ""},
			{accounts.PoolActivating, accounts.PoolFunding, false, 0, ""},
			{accounts.PoolActive, accounts.PoolPaused, true, 0, ""},
			{accounts.PoolPaused, accounts.PoolActive, true, 0, ""},
			{accounts.PoolActive, accounts.PoolFunding, false, 409, "only a draft or activating pool"},
			{accounts.PoolActive, accounts.PoolDraft, true, 409, "Pause it instead"},
			{accounts.PoolActive, accounts.PoolDraft, false, 0, ""},
			{accounts.PoolPaused, accounts.PoolDraft, true, 409, "while they are live. It already takes no new subscriptions, so keep it paused; move it to draft once every subscription has been canceled or has ended"},
		}
		for i, c := range cases {
			slug := "p" + string(rune('a'+i))
			p := e.pool(slug, c.from, 1, false)
			if c.live {
				e.sub(ann, p, accounts.SubActive, 1, accounts.BlockAsia)
			}
			res, err := e.svc.SetPoolStatus(e.ctx, slug, c.to)
			if c.status != 0 {
				wantStatus(t, err, c.status, c.frag)
				if got := read(e, func(tx accounts.Tx) (*accounts.Pool, error) { return tx.GetPool(p.ID) }); got.Status != c.from {
					t.Errorf("%s → %s refused but the pool is %s", c.from, c.to, got.Status)
				}
				continue
			}
			if err != nil || !res.Changed || res.Status != c.to {
				t.Errorf("%s → %s: %+v %v", c.from, c.to, res, err)
			}
		}
		// The same status again is a no-op.
		res, err := e.svc.SetPoolStatus(e.ctx, "pa", accounts.PoolFunding)
		if err != nil || res.Changed {
			t.Errorf("no-op move %+v %v", res, err)
		}
		// A paused pool refuses sales with a reason; its keys keep working.
		_, err = e.svc.Subscribe(e.ctx, ann.ID, "ph", accounts.SubscribeRequest{Blocks: []string{"europe"}})
		wantStatus(t, err, 409, "paused")
	})
}

func TestSyncConfiguredPoolsKeepsRunTimeStatus(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		cfg := func(slug, status string) *accounts.Pool {
			return &accounts.Pool{ID: "cfg-" + slug, Slug: slug, ModelID: "m-" + slug, Status: status, Slots: 1,
				BlockPrices: map[accounts.Block]string{accounts.BlockAsia: "80"}, AnnualDiscount: "0", FundingGoal: "400"}
		}
		sync := func(pools ...*accounts.Pool) map[string]accounts.PoolSync {
			got, err := accounts.SyncConfiguredPools(e.ctx, st, pools, e.clock.Now())
			e.must(err)
			m := map[string]accounts.PoolSync{}
			for _, s := range got {
				m[s.Slug] = s
			}
			return m
		}
		if got := sync(cfg("fund", accounts.PoolFunding), cfg("plain", accounts.PoolActive)); !got["fund"].New || got["fund"].Status != accounts.PoolFunding {
			t.Fatalf("first sync %+v", got)
		}
		// Until a pool moves at run time, the configuration sets its status.
		if got := sync(cfg("fund", accounts.PoolFunding), cfg("plain", accounts.PoolPaused)); got["plain"].Status != accounts.PoolPaused || got["plain"].Kept {
			t.Fatalf("config change %+v", got["plain"])
		}
		// Once it moved, a reload still saying funding leaves it active.
		_, err := e.svc.SetPoolStatus(e.ctx, "fund", accounts.PoolActive)
		e.must(err)
		got := sync(cfg("fund", accounts.PoolFunding), cfg("plain", accounts.PoolPaused))
		if s := got["fund"]; s.Status != accounts.PoolActive || !s.Kept || s.ConfigSays != accounts.PoolFunding {
			t.Fatalf("reload after the activation %+v", s)
		}
		p := read(e, func(tx accounts.Tx) (*accounts.Pool, error) { return tx.GetPoolBySlug("fund") })
		if p.Status != accounts.PoolActive || p.ConfigStatus != accounts.PoolFunding || p.StatusReason != accounts.StatusByOperator || p.FundingGoal != "400" {
			t.Fatalf("stored %+v", p)
		}
	})
}

// Before declined pledges were released at once, a pledge declined at
// activation went past_due; one left so in a store by an earlier version,
// paid later, still waits for the operator's key on a manual pool.
func TestFundingPastDuePledgeOnManualPoolWaitsForTheOperatorKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("hand", accounts.PoolActive, 1, true)
		p.FundingGoal = "1000"
		e.update(func(tx accounts.Tx) error { return tx.UpsertPool(p) })
		u, _ := e.user("una@example.test", billing.TestCardDeclined)
		pl := e.sub(u, p, accounts.SubPastDue, 1, accounts.BlockAsia)
		e.update(func(tx accounts.Tx) error {
			return tx.CreateCharge(&accounts.Charge{ID: envID(), UserID: u.ID, SubscriptionID: pl.ID, PeriodStart: pl.CurrentPeriodStart,
				Amount: "80", Status: accounts.ChargeFailed, CreatedAt: e.clock.Now()})
		})
		// A working card pays it: the operator still delivers the key.
		_, err := e.svc.SetupIntent(e.ctx, u.ID, billing.TestCardVisa)
		e.must(err)
		if s := e.getSub(pl.ID); s.Status != accounts.SubPendingKey {
			t.Fatalf("after paying, the pledge on a manual pool is %s, want pending_key", s.Status)
		}
		_, err = e.svc.CreateKey(e.ctx, u.ID, pl.ID, "")
		wantStatus(t, err, 409, "pending_key")
	})
}
