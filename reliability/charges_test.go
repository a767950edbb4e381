//go:build reliability

package reliability

// A charge is the request first made (accounts/charge_fixed.go), under the
// two faults that once left money taken and nothing delivered: the
// processor's answer is lost, and then
//
//   - card change: the buyer saves another card before anything retries
//     (Stripe refuses the key with another card: a pledge stayed charged
//     and pledged for good);
//   - key expiry: nothing retries for more than a day, and the processor
//     forgets the key (a re-send then charges again: twice for one
//     subscription).
//
// Each of the three charges that can lose an answer — a purchase (retried
// by the buyer under the same Idempotency-Key), a pledge charged at
// activation, a renewal — is driven through both faults on both stores (two
// nodes on PostgreSQL, passing concurrently), with the built-in processor
// keeping Stripe's idempotency rules over its durable ledger, the clock
// driven by the test, and every first answer lost. Then the ledger is laid
// against the subscriptions:
//
//   - charges per kept subscription: = 1 (each subscription the buyer has
//     paid for holds exactly one kept charge for the period);
//   - charges kept for nothing: = 0 (a charge not refunded whose
//     subscription is not live, or that no record names);
//   - stuck after the passes: = 0 (open charge intents, renewal claims
//     pending, pledges on a live pool, purchases still incomplete).
//
// These run in-process on accounts.Service (no Caddy): the clock is the
// test's, and nothing for tests goes into the binary.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
	"github.com/timeblock/timeblock/accounts/embedded"
	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
)

// chargeScenarioPasses bounds the passes each scenario may take to settle.
const chargeScenarioPasses = 30

func TestChargesUnderLostAnswers(t *testing.T) {
	buyers := scale(6, 40)
	for _, kind := range []string{"purchase", "pledge", "renewal"} {
		for _, fault := range []string{"card change", "key expiry"} {
			t.Run(kind+"/"+fault, func(t *testing.T) {
				t.Run("embedded", func(t *testing.T) {
					st, err := embedded.Open(filepath.Join(t.TempDir(), "accounts.db"))
					if err != nil {
						t.Fatal(err)
					}
					defer st.Close()
					runChargeScenario(t, kind, fault, "embedded", []accounts.Store{st}, buyers)
				})
				t.Run("postgres", func(t *testing.T) {
					dsn := pgtest.DSN(t)
					nodes := []accounts.Store{openPostgres(t, dsn), openPostgres(t, dsn)}
					runChargeScenario(t, kind, fault, "postgres, 2 nodes", nodes, buyers)
				})
			})
		}
	}
}

// scenarioClock is the test's clock, shared by the nodes and the processor.
type scenarioClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *scenarioClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *scenarioClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// firstAnswerLost makes each charge and loses the answer of the first call
// under every idempotency key while on: the charge is in the ledger, the
// caller sees a transport error.
type firstAnswerLost struct {
	billing.Processor
	mu   sync.Mutex
	on   bool
	lost map[string]bool
	n    int
}

func (p *firstAnswerLost) Charge(ctx context.Context, req billing.ChargeRequest) (string, error) {
	ref, err := p.Processor.Charge(ctx, req)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil && p.on && !p.lost[req.IdempotencyKey] {
		p.lost[req.IdempotencyKey] = true
		p.n++
		return "", errors.New("read tcp: connection reset by peer (the charge's answer was lost)")
	}
	return ref, err
}

func (p *firstAnswerLost) set(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = on
}

func (p *firstAnswerLost) lostCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// chargeScenario is one run: its nodes, processor, clock and buyers.
type chargeScenario struct {
	t     *testing.T
	ctx   context.Context
	nodes []*accounts.Service
	proc  *billing.TestProcessor
	lossy *firstAnswerLost
	clock *scenarioClock
	users []*accounts.User
	subs  []string // the subscriptions the buyers were meant to get
}

func runChargeScenario(t *testing.T, kind, fault, label string, stores []accounts.Store, buyers int) {
	ctx := t.Context()
	clock := &scenarioClock{t: time.Date(2033, 5, 1, 9, 0, 0, 0, time.UTC)}
	proc := billing.NewTestProcessorOn(accounts.TestLedger(stores[0]))
	proc.SetClock(clock.Now)
	sc := &chargeScenario{t: t, ctx: ctx, proc: proc, clock: clock,
		lossy: &firstAnswerLost{Processor: proc, lost: map[string]bool{}}}
	for _, st := range stores {
		svc, err := accounts.NewService(accounts.Config{Store: st, Secret: "reliability charges secret",
			Processor: sc.lossy, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		sc.nodes = append(sc.nodes, svc)
	}
	svc := sc.nodes[0]
	status := accounts.PoolActive
	if kind == "pledge" {
		status = accounts.PoolFunding
	}
	pool := &accounts.Pool{ID: "0c4a2e5e-0000-4000-8000-000000000001", Slug: "money", ModelID: "m-money", ModelName: "Money",
		Status: status, Slots: buyers, FundingGoal: "100000", MaxPledgeSeats: 1,
		BlockPrices: map[accounts.Block]string{accounts.BlockAsia: "40"}, AnnualDiscount: "0", UpdatedAt: clock.Now()}
	if _, err := accounts.SyncConfiguredPools(ctx, stores[0], []*accounts.Pool{pool}, clock.Now()); err != nil {
		t.Fatal(err)
	}
	for i := range buyers {
		u, _, err := svc.CreateUser(ctx, fmt.Sprintf("buyer%d@example.test", i), "Buyer")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.SetupIntent(ctx, u.ID, billing.TestCardVisa); err != nil {
			t.Fatal(err)
		}
		sc.users = append(sc.users, u)
	}

	switch kind {
	case "purchase":
		sc.purchases(fault)
	case "pledge":
		sc.pledges(fault)
	case "renewal":
		sc.renewals(fault)
	}
	sc.figures(kind, fault, label)
}

// breakThenFault loses the answers of what charge does, then applies the
// fault: every buyer saves another card, or the clock moves past the
// processor's key lifetime.
func (sc *chargeScenario) breakThenFault(fault string, charge func()) {
	sc.lossy.set(true)
	charge()
	sc.lossy.set(false)
	if sc.lossy.lostCount() != len(sc.users) {
		sc.t.Fatalf("%d answers lost, want one per buyer (%d)", sc.lossy.lostCount(), len(sc.users))
	}
	switch fault {
	case "card change":
		for _, u := range sc.users {
			if _, err := sc.nodes[0].SetupIntent(sc.ctx, u.ID, billing.TestCardMastercard); err != nil {
				sc.t.Fatal(err)
			}
		}
	case "key expiry":
		sc.clock.Advance(billing.KeyLifetime + time.Hour)
	}
}

// passes runs the background passes on every node at once, a minute apart,
// until nothing is left open or the bound is reached. A pass may fail
// (the processor's answers were lost): the next one carries on.
func (sc *chargeScenario) passes(extra func()) {
	sc.clock.Advance(16 * time.Minute) // past the settle grace and the claim timeout
	for range chargeScenarioPasses {
		var wg sync.WaitGroup
		for _, svc := range sc.nodes {
			wg.Go(func() {
				_, _ = svc.RunLifecycle(sc.ctx)
				_, _ = svc.SettleIntents(sc.ctx)
				_, _ = svc.RunFunding(sc.ctx)
			})
		}
		wg.Wait()
		if extra != nil {
			extra()
		}
		if sc.stuck() == 0 {
			return
		}
		sc.clock.Advance(time.Minute)
	}
}

func (sc *chargeScenario) purchases(fault string) {
	q := 1
	req := accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: &q}
	ids := make([]string, len(sc.users))
	sc.breakThenFault(fault, func() {
		for i, u := range sc.users {
			ids[i] = fmt.Sprintf("0c4a2e5e-0000-4000-9000-%012d", i)
			if _, err := sc.nodes[0].SubscribeAs(sc.ctx, u.ID, "money", req, ids[i]); err == nil {
				sc.t.Fatal("a purchase whose charge answer was lost reported success")
			}
		}
	})
	// The buyer's client retries under the same Idempotency-Key: at once
	// (after the card change), or a day later (key expiry), when the
	// purchase was settled (refunded) meanwhile and the buyer buys again.
	var mu sync.Mutex
	bought := map[int]bool{}
	retry := func() {
		var wg sync.WaitGroup
		for i, u := range sc.users {
			mu.Lock()
			done := bought[i]
			mu.Unlock()
			if done {
				continue
			}
			svc := sc.nodes[i%len(sc.nodes)]
			wg.Go(func() {
				res, err := svc.SubscribeAs(sc.ctx, u.ID, "money", req, ids[i])
				if err == nil && res.Status == accounts.SubActive {
					mu.Lock()
					bought[i] = true
					mu.Unlock()
					return
				}
				if err == nil || isClientError(err) {
					// The first purchase ended with nothing bought: a new one.
					res, err = svc.Subscribe(sc.ctx, u.ID, "money", req)
					if err == nil && res.Status == accounts.SubActive {
						mu.Lock()
						bought[i] = true
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
	}
	if fault == "card change" {
		retry()
		if len(bought) != len(sc.users) {
			sc.t.Errorf("%d of %d purchases carried on after the card change, want all", len(bought), len(sc.users))
		}
	}
	sc.passes(retry)
	if len(bought) != len(sc.users) {
		sc.t.Errorf("%d of %d buyers hold a subscription after the passes", len(bought), len(sc.users))
	}
}

// isClientError reports an *accounts.Error below 500: the purchase's final
// answer, not a fault to retry.
func isClientError(err error) bool {
	ae, ok := errors.AsType[*accounts.Error](err)
	return ok && ae.Status < 500
}

func (sc *chargeScenario) pledges(fault string) {
	q := 1
	for _, u := range sc.users {
		res, err := sc.nodes[0].Subscribe(sc.ctx, u.ID, "money", accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: &q})
		if err != nil {
			sc.t.Fatal(err)
		}
		sc.subs = append(sc.subs, res.ID)
	}
	if _, err := sc.nodes[0].SetPoolStatus(sc.ctx, "money", accounts.PoolActive); err != nil {
		sc.t.Fatal(err)
	}
	sc.breakThenFault(fault, func() { _, _ = sc.nodes[0].RunFunding(sc.ctx) })
	sc.passes(nil)
}

func (sc *chargeScenario) renewals(fault string) {
	q := 1
	var end time.Time
	for _, u := range sc.users {
		res, err := sc.nodes[0].Subscribe(sc.ctx, u.ID, "money", accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: &q})
		if err != nil {
			sc.t.Fatal(err)
		}
		sc.subs = append(sc.subs, res.ID)
		end = res.CurrentPeriodEnd
	}
	sc.clock.Advance(end.Sub(sc.clock.Now()) + time.Minute)
	sc.breakThenFault(fault, func() { _, _ = sc.nodes[0].RunLifecycle(sc.ctx) })
	sc.passes(nil)
	for _, id := range sc.subs {
		if sub := sc.sub(id); !sub.CurrentPeriodStart.Equal(end) {
			sc.t.Errorf("subscription %s pays the period from %s, want the renewed one from %s", id, sub.CurrentPeriodStart, end)
		}
	}
}

func (sc *chargeScenario) sub(id string) *accounts.Subscription {
	var sub *accounts.Subscription
	err := sc.nodes[0].Store().View(sc.ctx, func(tx accounts.Tx) error {
		var err error
		sub, err = tx.GetSubscription(id)
		return err
	})
	if err != nil {
		sc.t.Fatal(err)
	}
	return sub
}

// stuck counts what the passes have not finished: open charge intents,
// renewal claims pending, pledges on the live pool, purchases incomplete.
func (sc *chargeScenario) stuck() int {
	n := 0
	far := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	err := sc.nodes[0].Store().View(sc.ctx, func(tx accounts.Tx) error {
		n = 0
		open, err := tx.ListOpenChargeIntents(far)
		if err != nil {
			return err
		}
		claims, err := tx.ListPendingCharges(far)
		if err != nil {
			return err
		}
		n += len(open) + len(claims)
		pool, err := tx.GetPoolBySlug("money")
		if err != nil {
			return err
		}
		for _, st := range []string{accounts.SubIncomplete, accounts.SubPledged} {
			subs, err := tx.ListSubscriptionsByPool(pool.ID, st)
			if err != nil {
				return err
			}
			if st == accounts.SubPledged && pool.Status != accounts.PoolActive {
				continue
			}
			n += len(subs)
		}
		return nil
	})
	if err != nil {
		sc.t.Fatal(err)
	}
	return n
}

// figures lays the processor's ledger against the store.
func (sc *chargeScenario) figures(kind, fault, label string) {
	type seen struct {
		kept, refunded int
	}
	bySub := map[string]*seen{}
	forNothing := 0
	err := sc.nodes[0].Store().View(sc.ctx, func(tx accounts.Tx) error {
		for _, c := range sc.proc.Ledger() {
			ck, subID, _ := billing.ParseKey(billing.MetadataKey(c.IdempotencyKey))
			if (kind == "renewal") != (ck == billing.ChargeRenewal) {
				continue // the first periods of the renewal scenario
			}
			s := bySub[subID]
			if s == nil {
				s = &seen{}
				bySub[subID] = s
			}
			if c.Refunded {
				s.refunded++
				continue
			}
			s.kept++
			sub, err := tx.GetSubscription(subID)
			if errors.Is(err, accounts.ErrNotFound) {
				forNothing++
				continue
			}
			if err != nil {
				return err
			}
			recorded := false
			charges, err := tx.ListCharges(subID)
			if err != nil {
				return err
			}
			for _, r := range charges {
				recorded = recorded || (r.ProcessorRef == c.Ref && r.Status == accounts.ChargeSucceeded)
			}
			if !recorded || (sub.Status != accounts.SubActive && sub.Status != accounts.SubPendingKey) {
				forNothing++
			}
		}
		return nil
	})
	if err != nil {
		sc.t.Fatal(err)
	}
	keptSubs, keptCharges, refunds := 0, 0, 0
	for _, s := range bySub {
		if s.kept > 0 {
			keptSubs++
			keptCharges += s.kept
		}
		refunds += s.refunded
	}
	ratio := 0.0
	if keptSubs > 0 {
		ratio = float64(keptCharges) / float64(keptSubs)
	}
	name := fmt.Sprintf("%s, lost answer + %s (%s)", kind, fault, label)
	Info(sc.t, "answers lost: "+name, float64(sc.lossy.lostCount()), "charges")
	Exactly(sc.t, "charges per kept subscription: "+name, ratio, 1, "charges")
	AtLeast(sc.t, "subscriptions kept: "+name, float64(keptSubs), float64(len(sc.users)), "subs")
	Zero(sc.t, "charges kept for nothing: "+name, forNothing, "charges")
	Zero(sc.t, "stuck after the passes: "+name, sc.stuck(), "records")
	Info(sc.t, "charges refunded: "+name, float64(refunds), "charges")
}
