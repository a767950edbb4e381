package accounts_test

// Funding follows the pledges (a pool activating by its goal falls back to
// funding when pledges are withdrawn under it; the deadline applies to
// activating pools too), one user cannot pledge every seat of a pool, and
// a pledge declined at activation gives its seats back at once.

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// poolMove is one move a FundingMetrics was told of.
type poolMove struct{ pool, from, to, reason string }

// recordingFundingMetrics records the pool moves it is told of.
type recordingFundingMetrics struct {
	mu    sync.Mutex
	moves []poolMove
}

func (m *recordingFundingMetrics) PoolMoved(p *accounts.Pool, from, to, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.moves = append(m.moves, poolMove{p.Slug, from, to, reason})
}

func (m *recordingFundingMetrics) PledgeCharged(*accounts.Pool, string) {}

func (m *recordingFundingMetrics) count(want poolMove) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, mv := range m.moves {
		if mv == want {
			n++
		}
	}
	return n
}

// withFundingMetrics replaces the env's service by one that counts pool
// moves (same store, processor, notifier and clock).
func (e *env) withFundingMetrics() *recordingFundingMetrics {
	e.t.Helper()
	m := &recordingFundingMetrics{}
	svc, err := accounts.NewService(accounts.Config{Store: e.st, Secret: envSecret, TermsVersion: envTerms,
		Processor: e.proc, Notifier: e.notifier, GracePeriod: 7 * 24 * time.Hour, Now: e.clock.Now, FundingMetrics: m})
	e.must(err)
	e.svc = svc
	return m
}

// storedPool reads a pool straight from the store.
func (e *env) storedPool(id string) *accounts.Pool {
	e.t.Helper()
	return read(e, func(tx accounts.Tx) (*accounts.Pool, error) { return tx.GetPool(id) })
}

// pledgedSeats counts the seats the user's pledges hold on the pool.
func (e *env) pledgedSeats(userID, poolID string) int {
	e.t.Helper()
	n := 0
	for _, sub := range e.userSubs(userID) {
		if sub.PoolID == poolID && sub.Status == accounts.SubPledged {
			n += len(sub.Seats)
		}
	}
	return n
}

func TestFundingFallsBackWhenWithdrawalsTakeItUnderTheGoal(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		metrics := e.withFundingMetrics()
		p := e.fundingPool("fund", "400", 4)
		ann, _ := e.user("ann@example.test", billing.TestCardVisa)
		bob, _ := e.user("bob@example.test", billing.TestCardVisa)
		e.pledge(ann, "fund", 2, "europe")        // 192
		b := e.pledge(bob, "fund", 2, "americas") // 240: 432 in all, the goal reached
		if got := e.storedPool(p.ID); got.Status != accounts.PoolActivating || got.StatusReason != accounts.StatusByGoal {
			t.Fatalf("after the goal: %s (%s)", got.Status, got.StatusReason)
		}

		// Bob withdraws: 192 is under the goal, so the pool is funding again
		// in the withdrawal itself, and the operator is told.
		res, err := e.svc.CancelPledge(e.ctx, bob.ID, "fund")
		e.must(err)
		if !res.Withdrawn || res.SubscriptionID != b.ID {
			t.Fatalf("withdraw %+v", res)
		}
		got := e.storedPool(p.ID)
		if got.Status != accounts.PoolFunding || got.StatusReason != accounts.StatusByWithdrawal {
			t.Fatalf("after the withdrawal the pool is %s (%s), want funding (%s)", got.Status, got.StatusReason, accounts.StatusByWithdrawal)
		}
		if d := e.poolNow("fund"); d.Status != accounts.PoolFunding || d.FundingPledged != "192" {
			t.Fatalf("pool view %+v", d.PoolView)
		}
		if n := e.waitFundingNotices(accounts.NoticeGoalLost, 1); n[0].to != "operator" || n[0].notice.Amount != "192" {
			t.Errorf("goal lost notice %+v", n)
		}
		if n := metrics.count(poolMove{"fund", accounts.PoolActivating, accounts.PoolFunding, accounts.StatusByWithdrawal}); n != 1 {
			t.Errorf("%d activating → funding moves counted, want 1: %+v", n, metrics.moves)
		}
		// Reaching the goal again moves it to activating again; a withdrawal
		// through POST /api/subscriptions/:id/cancel falls back the same way.
		b = e.pledge(bob, "fund", 2, "americas")
		if got := e.storedPool(p.ID); got.Status != accounts.PoolActivating {
			t.Fatalf("goal reached again: %s", got.Status)
		}
		_, err = e.svc.SetCancelAtPeriodEnd(e.ctx, bob.ID, b.ID, true)
		e.must(err)
		if got := e.storedPool(p.ID); got.Status != accounts.PoolFunding {
			t.Fatalf("after a cancel of the pledge the pool is %s, want funding", got.Status)
		}
		e.waitFundingNotices(accounts.NoticeGoalLost, 2)

		// A withdrawal that committed without moving the pool (a crash, an
		// older node) is finished by the funding pass.
		e.pledge(bob, "fund", 2, "americas")
		if got := e.storedPool(p.ID); got.Status != accounts.PoolActivating {
			t.Fatalf("goal reached a third time: %s", got.Status)
		}
		for _, sub := range e.userSubs(bob.ID) {
			if sub.Status == accounts.SubPledged {
				e.setStatus(sub.ID, accounts.SubCanceled)
			}
		}
		rep := e.funding()
		if rep.FellBack != 1 || !rep.Acted() {
			t.Fatalf("funding pass %+v, want one pool fallen back", rep)
		}
		if got := e.storedPool(p.ID); got.Status != accounts.PoolFunding || got.StatusReason != accounts.StatusByWithdrawal {
			t.Fatalf("after the pass: %s (%s)", got.Status, got.StatusReason)
		}
		if rep := e.funding(); rep.Acted() {
			t.Fatalf("a second pass acted: %+v", rep)
		}
		if n := metrics.count(poolMove{"fund", accounts.PoolActivating, accounts.PoolFunding, accounts.StatusByWithdrawal}); n != 3 {
			t.Errorf("%d activating → funding moves counted, want 3", n)
		}
	})
}

func TestFundingOperatorActivatingStaysUnderTheGoal(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.fundingPool("fund", "1000", 4)
		ann, _ := e.user("ann@example.test", billing.TestCardVisa)
		bob, _ := e.user("bob@example.test", billing.TestCardVisa)
		e.pledge(ann, "fund", 2, "europe")
		e.pledge(bob, "fund", 1, "asia")
		_, err := e.svc.SetPoolStatus(e.ctx, "fund", accounts.PoolActivating)
		e.must(err)
		_, err = e.svc.CancelPledge(e.ctx, bob.ID, "fund")
		e.must(err)
		if rep := e.funding(); rep.FellBack != 0 {
			t.Fatalf("funding pass %+v", rep)
		}
		if got := e.storedPool(p.ID); got.Status != accounts.PoolActivating || got.StatusReason != accounts.StatusByOperator {
			t.Fatalf("the operator's activating pool is %s (%s)", got.Status, got.StatusReason)
		}
	})
}

func TestFundingDeadlineAppliesToActivating(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		metrics := e.withFundingMetrics()
		deadline := e.clock.Now().Add(time.Hour)
		// below: activating by the operator, under its goal; reached: activating by its goal.
		below := e.fundingPool("below", "1000", 4)
		reached := e.fundingPool("reached", "150", 4)
		for _, p := range []*accounts.Pool{below, reached} {
			p.FundingDeadline = deadline
			e.update(func(tx accounts.Tx) error { return tx.UpsertPool(p) })
		}
		ann, _ := e.user("ann@example.test", billing.TestCardVisa)
		a := e.pledge(ann, "below", 2, "europe")
		r := e.pledge(ann, "reached", 2, "europe")
		_, err := e.svc.SetPoolStatus(e.ctx, "below", accounts.PoolActivating)
		e.must(err)
		if got := e.storedPool(reached.ID); got.Status != accounts.PoolActivating || got.StatusReason != accounts.StatusByGoal {
			t.Fatalf("reached: %s (%s)", got.Status, got.StatusReason)
		}
		calls := e.proc.Calls()

		e.clock.Advance(2 * time.Hour)
		rep := e.funding()
		if rep.Expired != 1 || rep.Released != 1 {
			t.Fatalf("after the deadline %+v", rep)
		}
		if got := e.storedPool(below.ID); got.Status != accounts.PoolDraft || got.StatusReason != accounts.StatusByDeadline {
			t.Errorf("below: %s (%s), want draft (%s)", got.Status, got.StatusReason, accounts.StatusByDeadline)
		}
		if s := e.getSub(a.ID); s.Status != accounts.SubCanceled || len(s.Seats) != 0 || len(e.taken(below.ID)) != 0 {
			t.Errorf("the pledge on the expired pool %+v", s)
		}
		if n := e.waitFundingNotices(accounts.NoticePledgeReleased, 1); n[0].notice.SubscriptionID != a.ID {
			t.Errorf("release notice %+v", n)
		}
		if n := metrics.count(poolMove{"below", accounts.PoolActivating, accounts.PoolDraft, accounts.StatusByDeadline}); n != 1 {
			t.Errorf("%d activating → draft moves counted, want 1: %+v", n, metrics.moves)
		}
		// At its goal, an activating pool past its deadline stays: the operator decides.
		if got := e.storedPool(reached.ID); got.Status != accounts.PoolActivating {
			t.Errorf("reached: %s, want activating", got.Status)
		}
		if s := e.getSub(r.ID); s.Status != accounts.SubPledged {
			t.Errorf("the pledge on the pool at its goal %+v", s)
		}
		if e.proc.Calls() != calls {
			t.Error("the deadline charged someone")
		}
		// Withdrawn under its goal past the deadline, it falls back and the
		// pass returns it to draft.
		_, err = e.svc.CancelPledge(e.ctx, ann.ID, "reached")
		e.must(err)
		e.funding()
		if got := e.storedPool(reached.ID); got.Status != accounts.PoolDraft {
			t.Errorf("reached, emptied past its deadline: %s, want draft", got.Status)
		}
	})
}

func TestPledgeSeatLimit(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.fundingPool("fund", "100000", 10)
		p.MaxPledgeSeats = 3
		e.update(func(tx accounts.Tx) error { return tx.UpsertPool(p) })
		ann, _ := e.user("ann@example.test", billing.TestCardVisa)
		bob, _ := e.user("bob@example.test", billing.TestCardVisa)
		q := func(n int) *int { return &n }

		e.pledge(ann, "fund", 2, "europe")
		// 2 + 2 in europe is over 3: refused with the limit and what is left.
		_, err := e.svc.Subscribe(e.ctx, ann.ID, "fund", accounts.SubscribeRequest{Blocks: []string{"asia", "europe"}, Quantity: q(2)})
		wantStatus(t, err, 409, "at most 3 pledged seat(s) per block", "2 in europe", "1 more seat(s) per block can be pledged in asia, europe", "nothing was pledged")
		if n := e.pledgedSeats(ann.ID, p.ID); n != 2*8 {
			t.Fatalf("ann pledges %d seats after the refusal, want 16", n)
		}
		// The quantity alone over the limit is a 400.
		_, err = e.svc.Subscribe(e.ctx, ann.ID, "fund", accounts.SubscribeRequest{Blocks: []string{"americas"}, Quantity: q(4)})
		wantStatus(t, err, 400, "at most 3 pledged seat(s) per block", "pledge 3 or fewer")
		// Up to the limit is fine, in other blocks too; other users have their own.
		e.pledge(ann, "fund", 1, "asia", "europe")
		e.pledge(ann, "fund", 3, "americas")
		e.pledge(bob, "fund", 3, "europe")
		_, err = e.svc.Subscribe(e.ctx, ann.ID, "fund", accounts.SubscribeRequest{Blocks: []string{"europe"}, Quantity: q(1)})
		wantStatus(t, err, 409, "0 more seat(s) per block")
		// A withdrawal gives the room back.
		am, err := e.svc.Subscribe(e.ctx, ann.ID, "fund", accounts.SubscribeRequest{Blocks: []string{"americas"}, Quantity: q(1)})
		wantStatus(t, err, 409, "3 in americas")
		for _, sub := range e.userSubs(ann.ID) {
			if sub.Status == accounts.SubPledged && sub.Blocks[0] == accounts.BlockAmericas {
				_, err = e.svc.SetCancelAtPeriodEnd(e.ctx, ann.ID, sub.ID, true)
				e.must(err)
			}
		}
		if am, err = e.svc.Subscribe(e.ctx, ann.ID, "fund", accounts.SubscribeRequest{Blocks: []string{"americas"}, Quantity: q(3)}); err != nil || am.Status != accounts.SubPledged {
			t.Fatalf("pledge after the withdrawal: %+v %v", am, err)
		}

		// Pledges of one user racing: at most the limit gets through.
		cat, _ := e.user("cat@example.test", billing.TestCardVisa)
		var (
			wg sync.WaitGroup
			mu sync.Mutex
			ok int
		)
		for range 8 {
			wg.Go(func() {
				_, err := e.svc.Subscribe(e.ctx, cat.ID, "fund", accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: q(1)})
				mu.Lock()
				defer mu.Unlock()
				var ae *accounts.Error
				switch {
				case err == nil:
					ok++
				case !errors.As(err, &ae) || ae.Status != 409:
					t.Errorf("racing pledge: %v", err)
				}
			})
		}
		wg.Wait()
		if n := e.pledgedSeats(cat.ID, p.ID); ok == 0 || ok > 3 || n != ok*8 {
			t.Fatalf("racing pledges: %d got through holding %d seats, want 1 to 3 (the limit) holding 8 each", ok, n)
		}
	})
}

func TestPledgeSeatLimitDefault(t *testing.T) {
	for _, tc := range []struct{ slots, max, want int }{{1, 0, 1}, {2, 0, 1}, {5, 0, 2}, {320, 0, 160}, {5, 5, 5}, {5, 1, 1}} {
		if got := accounts.PledgeSeatLimit(&accounts.Pool{Slots: tc.slots, MaxPledgeSeats: tc.max}); got != tc.want {
			t.Errorf("slots %d, max_pledge_seats %d: limit %d, want %d", tc.slots, tc.max, got, tc.want)
		}
	}
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.fundingPool("fund", "100000", 5)
		ann, _ := e.user("ann@example.test", billing.TestCardVisa)
		bob, _ := e.user("bob@example.test", billing.TestCardVisa)
		// One account cannot squat the pool: half its seats (2 of 5) each.
		q := 5
		_, err := e.svc.Subscribe(e.ctx, ann.ID, "fund", accounts.SubscribeRequest{Blocks: []string{"asia", "europe", "americas"}, Quantity: &q})
		wantStatus(t, err, 400, "at most 2 pledged seat(s) per block")
		e.pledge(ann, "fund", 2, "asia", "europe", "americas")
		_, err = e.svc.Subscribe(e.ctx, ann.ID, "fund", accounts.SubscribeRequest{Blocks: []string{"asia"}})
		wantStatus(t, err, 409, "at most 2 pledged seat(s) per block", "0 more")
		// Honest buyers still find seats.
		e.pledge(bob, "fund", 2, "asia")
		if n := e.pledgedSeats(ann.ID, p.ID); n != 2*24 {
			t.Errorf("ann pledges %d seats, want 48", n)
		}
		// The limit is stored with the pool.
		p.MaxPledgeSeats = 4
		e.update(func(tx accounts.Tx) error { return tx.UpsertPool(p) })
		if got := e.storedPool(p.ID); got.MaxPledgeSeats != 4 {
			t.Fatalf("stored max_pledge_seats %d, want 4", got.MaxPledgeSeats)
		}
		e.pledge(ann, "fund", 2, "europe")
	})
}

func TestFundingDeclinedPledgeIsReleasedAtOnce(t *testing.T) {
	for _, manual := range []bool{false, true} {
		t.Run(fmt.Sprintf("manual=%t", manual), func(t *testing.T) {
			forEachStore(t, func(t *testing.T, st accounts.Store) {
				e := newEnv(t, st)
				p := e.pool("fund", accounts.PoolFunding, 2, manual)
				p.FundingGoal = "100000"
				e.update(func(tx accounts.Tx) error { return tx.UpsertPool(p) })
				ann, _ := e.user("ann@example.test", billing.TestCardVisa)
				cat, _ := e.user("cat@example.test", billing.TestCardDeclined)
				dan, _ := e.user("dan@example.test", billing.TestCardVisa)
				a := e.pledge(ann, "fund", 1, "asia")
				c := e.pledge(cat, "fund", 1, "asia") // asia is full now
				_, err := e.svc.SetPoolStatus(e.ctx, "fund", accounts.PoolActive)
				e.must(err)

				rep := e.funding()
				if rep.Charged != 1 || rep.Declined != 1 || rep.Failed != 0 {
					t.Fatalf("activation %+v", rep)
				}
				sc := e.getSub(c.ID)
				if sc.Status != accounts.SubCanceled || len(sc.Seats) != 0 || !sc.PastDueSince.IsZero() {
					t.Fatalf("the declined pledge %+v, want canceled with no seats", sc)
				}
				if got := e.charges(c.ID); len(got) != 1 || got[0].Status != accounts.ChargeFailed {
					t.Errorf("the declined pledge's charges %+v, want one failed", got)
				}
				if len(e.chargesFor(c.ID)) != 0 {
					t.Error("the declined pledge was charged")
				}
				for seat, subID := range e.taken(p.ID) {
					if subID == c.ID {
						t.Errorf("seat %+v still held by the declined pledge", seat)
					}
				}
				n := e.waitFundingNotices(accounts.NoticeChargeFailed, 1)
				if n[0].to != cat.ID || n[0].notice.SubscriptionID != c.ID || n[0].notice.Reason == "" {
					t.Errorf("declined notice %+v", n)
				}
				// Its seat is free at once: another buyer gets it.
				if res := e.subscribe(dan, "fund", 1, "asia"); res.Status != accounts.SubActive && res.Status != accounts.SubPendingKey {
					t.Fatalf("dan's purchase %+v", res)
				}
				// A working card saved later revives nothing; cat buys like anyone.
				_, err = e.svc.SetupIntent(e.ctx, cat.ID, billing.TestCardVisa)
				e.must(err)
				if s := e.getSub(c.ID); s.Status != accounts.SubCanceled {
					t.Errorf("after a new card the released pledge is %s", s.Status)
				}
				if s := e.getSub(a.ID); s.Status == accounts.SubPledged || s.Status == accounts.SubCanceled {
					t.Errorf("ann's paid pledge %+v", s)
				}
				e.clock.Advance(8 * 24 * time.Hour)
				e.lifecycle()
				if s := e.getSub(c.ID); s.Status != accounts.SubCanceled {
					t.Errorf("after the grace period the released pledge is %s", s.Status)
				}
			})
		})
	}
}
