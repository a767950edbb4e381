package accounts_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
	"github.com/timeblock/timeblock/accounts/ledger"
)

// ledgerOf reads the user's ledger charges, newest first.
func (e *env) ledgerOf(userID string) []*accounts.LedgerCharge {
	e.t.Helper()
	return read(e, func(tx accounts.Tx) ([]*accounts.LedgerCharge, error) { return tx.ListLedgerCharges(userID, 0, 0) })
}

// wantLedger checks the user's ledger, newest first: kind and amount of
// each, every one succeeded, in usd, with a processor reference that the
// test processor charged and did not refund.
func (e *env) wantLedger(userID string, want ...string) []*accounts.LedgerCharge {
	e.t.Helper()
	got := e.ledgerOf(userID)
	var have []string
	for _, c := range got {
		have = append(have, c.Kind+" "+c.Amount)
	}
	if fmt.Sprint(have) != fmt.Sprint(want) {
		e.t.Fatalf("ledger of %s: %v, want %v", userID, have, want)
	}
	refs := map[string]bool{}
	for _, tc := range e.proc.Ledger() {
		if !tc.Declined && !tc.Refunded {
			refs[tc.Ref] = true
		}
	}
	for _, c := range got {
		if c.Status() != accounts.LedgerSucceeded || c.Currency != "usd" || c.RefundedAmount != "0" || !refs[c.ProcessorRef] || c.Number <= 0 {
			e.t.Errorf("ledger charge %+v: want succeeded, usd, nothing refunded, a processor reference the processor charged, a number", c)
		}
	}
	return got
}

// Each way money is taken — a purchase, a renewal, a past-due recovery and
// a pledge charged at activation — writes exactly one ledger charge of its
// kind and amount; declines write none.
func TestLedgerRecordsEachChargeOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.pool("led", accounts.PoolActive, 4, false)
		ann, _ := e.user("ann@example.test", billing.TestCardVisa)
		dee, _ := e.user("dee@example.test", billing.TestCardDeclined)

		res := e.subscribe(ann, "led", 1, "europe")
		bought := e.wantLedger(ann.ID, "purchase 96")
		if c := bought[0]; c.SubscriptionID != res.ID || c.PoolID != res.PoolID || c.Description == "" {
			t.Errorf("purchase %+v, want subscription %s of pool %s, described", c, res.ID, res.PoolID)
		}
		_, err := e.svc.Subscribe(e.ctx, dee.ID, "led", accounts.SubscribeRequest{Blocks: []string{"asia"}})
		wantStatus(t, err, 402)
		e.wantLedger(dee.ID)

		// A renewal, then a declined renewal (nothing), then its recovery
		// with a new card.
		e.clock.Set(res.CurrentPeriodEnd.Add(time.Minute))
		e.lifecycle()
		e.wantLedger(ann.ID, "renewal 96", "purchase 96")
		_, err = e.svc.SetupIntent(e.ctx, ann.ID, billing.TestCardDeclined)
		e.must(err)
		e.clock.Set(e.getSub(res.ID).CurrentPeriodEnd.Add(time.Minute))
		e.lifecycle()
		if s := e.getSub(res.ID); s.Status != accounts.SubPastDue {
			t.Fatalf("after a declined renewal: %s, want past_due", s.Status)
		}
		e.wantLedger(ann.ID, "renewal 96", "purchase 96")
		_, err = e.svc.SetupIntent(e.ctx, ann.ID, billing.TestCardVisa)
		e.must(err)
		got := e.wantLedger(ann.ID, "recovery 96", "renewal 96", "purchase 96")
		if !(got[0].Number > got[1].Number && got[1].Number > got[2].Number) {
			t.Errorf("numbers %d, %d, %d: want increasing in the order charged", got[2].Number, got[1].Number, got[0].Number)
		}
		if again := e.lifecycle(); again.Renewed != 0 {
			t.Errorf("a lifecycle pass after the recovery renewed %d", again.Renewed)
		}
		e.wantLedger(ann.ID, "recovery 96", "renewal 96", "purchase 96")

		// A pledge is charged when its pool activates; a declined one is not
		// a charge.
		e.fundingPool("fund", "100", 4)
		bob, _ := e.user("bob@example.test", billing.TestCardVisa)
		cat, _ := e.user("cat@example.test", billing.TestCardVisa)
		e.pledge(bob, "fund", 1, "americas")
		e.pledge(cat, "fund", 1, "asia")
		_, err = e.svc.SetupIntent(e.ctx, cat.ID, billing.TestCardDeclined)
		e.must(err)
		e.wantLedger(bob.ID)
		_, err = e.svc.SetPoolStatus(e.ctx, "fund", accounts.PoolActive)
		e.must(err)
		e.funding()
		e.wantLedger(bob.ID, "pledge 120")
		e.wantLedger(cat.ID)
	})
}

// ledgerFailingStore fails CreateLedgerCharge while fail is set, as a store
// that breaks in the middle of the recording transaction.
type ledgerFailingStore struct {
	accounts.Store
	fail atomic.Bool
}

type ledgerFailingTx struct {
	accounts.Tx
	s *ledgerFailingStore
}

var errLedgerWrite = errors.New("injected: ledger write failed")

func (s *ledgerFailingStore) Update(ctx context.Context, fn func(tx accounts.Tx) error) error {
	return s.Store.Update(ctx, func(tx accounts.Tx) error { return fn(ledgerFailingTx{Tx: tx, s: s}) })
}

func (t ledgerFailingTx) CreateLedgerCharge(c *accounts.LedgerCharge) error {
	if t.s.fail.Load() {
		return errLedgerWrite
	}
	return t.Tx.CreateLedgerCharge(c)
}

// The ledger charge is written in the transaction that records what it
// paid for: when writing it fails, neither the purchase's nor the renewal's
// state change is recorded (the charge is settled as unrecorded).
func TestLedgerWrittenWithTheStateChange(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		fs := &ledgerFailingStore{Store: st}
		e := newEnv(t, fs)
		e.pool("led", accounts.PoolActive, 4, false)
		ann, _ := e.user("ann@example.test", billing.TestCardVisa)

		fs.fail.Store(true)
		_, err := e.svc.Subscribe(e.ctx, ann.ID, "led", accounts.SubscribeRequest{Blocks: []string{"europe"}})
		if err == nil {
			t.Fatal("the purchase succeeded although its ledger charge could not be written")
		}
		for _, sub := range e.userSubs(ann.ID) {
			if sub.Status == accounts.SubActive {
				t.Errorf("subscription %s is active without its ledger charge", sub.ID)
			}
			for _, c := range e.charges(sub.ID) {
				if c.Status == accounts.ChargeSucceeded {
					t.Errorf("charge %s recorded succeeded without its ledger charge", c.ID)
				}
			}
		}
		e.wantLedger(ann.ID)

		fs.fail.Store(false)
		res := e.subscribe(ann, "led", 1, "europe")
		e.wantLedger(ann.ID, "purchase 96")
		fs.fail.Store(true)
		end := res.CurrentPeriodEnd
		e.clock.Set(end.Add(time.Minute))
		_, _ = e.svc.RunLifecycle(e.ctx)
		if s := e.getSub(res.ID); !s.CurrentPeriodEnd.Equal(end) || s.Status != accounts.SubActive {
			t.Errorf("renewal recorded without its ledger charge: %s until %s", s.Status, s.CurrentPeriodEnd)
		}
		for _, c := range e.charges(res.ID) {
			if c.PeriodStart.Equal(end) && c.Status == accounts.ChargeSucceeded {
				t.Errorf("renewal charge %s recorded succeeded without its ledger charge", c.ID)
			}
		}
		e.wantLedger(ann.ID, "purchase 96")
		// Once the store works again, the pending claim is taken over and
		// recorded with its ledger charge, under the same processor key.
		fs.fail.Store(false)
		e.clock.Set(end.Add(time.Hour))
		e.lifecycle()
		e.wantLedger(ann.ID, "renewal 96", "purchase 96")
	})
}

// Receipt numbers are unique on the site when purchases are recorded at
// once on two nodes (and none of them fails on contention).
func TestReceiptNumbersUniqueAcrossNodes(t *testing.T) {
	forEachStoreNodes(t, 2, func(t *testing.T, nodes []accounts.Store) {
		e := newEnv(t, nodes[0])
		e.pool("led", accounts.PoolActive, 20, false)
		services := []*accounts.Service{e.newServiceOn(nodes[0]), e.newServiceOn(nodes[1])}
		const buyers = 12
		users := make([]*accounts.User, buyers)
		for i := range users {
			users[i], _ = e.user(fmt.Sprintf("buyer%d@example.test", i), billing.TestCardVisa)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, buyers)
		for i, u := range users {
			wg.Add(1)
			go func(svc *accounts.Service, u *accounts.User) {
				defer wg.Done()
				<-start
				q := 1
				_, err := svc.Subscribe(e.ctx, u.ID, "led", accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: &q})
				errs <- err
			}(services[i%2], u)
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			e.must(err)
		}
		var numbers []int64
		for _, u := range users {
			for _, c := range e.wantLedger(u.ID, "purchase 80") {
				numbers = append(numbers, c.Number)
			}
		}
		sort.Slice(numbers, func(i, j int) bool { return numbers[i] < numbers[j] })
		for i := 1; i < len(numbers); i++ {
			if numbers[i] == numbers[i-1] {
				t.Fatalf("receipt numbers %v: %d handed out twice", numbers, numbers[i])
			}
		}
		if len(numbers) != buyers || numbers[0] < 1 {
			t.Fatalf("receipt numbers %v: want %d positive numbers", numbers, buyers)
		}
	})
}

// A refund the processor reports is reconciled by its reference: the
// ledger charge shows it refunded, and its receipt says so.
func TestLedgerRefundEventReconciles(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.pool("led", accounts.PoolActive, 4, false)
		ann, _ := e.user("ann@example.test", billing.TestCardVisa)
		res := e.subscribe(ann, "led", 1, "europe")
		c := e.wantLedger(ann.ID, "purchase 96")[0]
		var key string
		for _, tc := range e.proc.Ledger() {
			if tc.Ref == c.ProcessorRef {
				key = tc.IdempotencyKey
			}
		}
		_, err := e.svc.ApplyProcessorEvent(e.ctx, accounts.ProcessorEvent{ID: "evt_refund", Type: "charge.refunded",
			Kind: accounts.EventChargeRefunded, IdempotencyKey: key, Ref: c.ProcessorRef})
		e.must(err)
		got := e.ledgerOf(ann.ID)
		if len(got) != 1 || got[0].Status() != accounts.LedgerRefunded || got[0].RefundedAmount != "96" {
			t.Fatalf("after the refund event: %+v, want the purchase refunded in full", got)
		}
		page, err := ledger.New(st, ledger.Seller{}, e.clock.Now).List(e.ctx, ann.ID, 0, "")
		e.must(err)
		if len(page.Charges) != 1 || page.Charges[0].Status != "refunded" || page.Charges[0].SubscriptionID != res.ID {
			t.Errorf("list %+v", page.Charges)
		}
	})
}
