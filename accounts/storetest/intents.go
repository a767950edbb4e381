package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

func (f *fixtures) intent(u *accounts.User, status string) *accounts.ChargeIntent {
	n, created := f.next()
	return &accounts.ChargeIntent{
		ID:             fmt.Sprintf("intent-%d", n),
		UserID:         u.ID,
		SubscriptionID: fmt.Sprintf("sub-not-yet-%d", n),
		Kind:           accounts.IntentSubscribe,
		Amount:         "96.00",
		MethodID:       billing.TestCardVisa,
		IdempotencyKey: fmt.Sprintf("subscribe:sub-not-yet-%d", n),
		Status:         status,
		CreatedAt:      created,
		UpdatedAt:      created,
	}
}

func (f *fixtures) testCharge() *billing.TestCharge {
	n, created := f.next()
	return &billing.TestCharge{
		Ref:            fmt.Sprintf("ch_test_%d", n),
		UserID:         fmt.Sprintf("user-%d", n),
		MethodID:       billing.TestCardVisa,
		Amount:         "96.00",
		IdempotencyKey: fmt.Sprintf("subscribe:%d", n),
		Description:    fmt.Sprintf("charge %d", n),
		CreatedAt:      created,
	}
}

func testChargeIntents(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u := f.user()
	f.create(u)
	pending := f.intent(u, accounts.IntentPending)
	settling := f.intent(u, accounts.IntentSettling)
	done := f.intent(u, accounts.IntentDone)
	retry := f.intent(u, accounts.IntentPending)
	retry.Kind, retry.ChargeID, retry.ProcessorRef = accounts.IntentRetry, "charge-1", "ch_1"
	update(t, s, func(tx accounts.Tx) error {
		for _, in := range []*accounts.ChargeIntent{retry, done, settling, pending} { // not in creation order
			if err := tx.CreateChargeIntent(in); err != nil {
				return err
			}
		}
		return nil
	})
	expect(t, s, "GetChargeIntent", retry, func(tx accounts.Tx) (*accounts.ChargeIntent, error) {
		return tx.GetChargeIntent(retry.ID)
	})
	all := at(time.Hour)
	expect(t, s, "ListOpenChargeIntents: pending and settling, by creation", []*accounts.ChargeIntent{pending, settling, retry},
		func(tx accounts.Tx) ([]*accounts.ChargeIntent, error) { return tx.ListOpenChargeIntents(all) })
	expect(t, s, "ListOpenChargeIntents: updated at or before t", []*accounts.ChargeIntent{pending, settling},
		func(tx accounts.Tx) ([]*accounts.ChargeIntent, error) {
			return tx.ListOpenChargeIntents(settling.UpdatedAt)
		})
	expect(t, s, "ListOpenChargeIntents before any", nil,
		func(tx accounts.Tx) ([]*accounts.ChargeIntent, error) { return tx.ListOpenChargeIntents(at(0)) })

	// Finishing an intent takes it off the open list; reopening puts it back.
	pending.Status, pending.ProcessorRef, pending.UpdatedAt = accounts.IntentDone, "ch_9", at(2*time.Hour)
	pending.MethodID = billing.TestCardMastercard
	update(t, s, func(tx accounts.Tx) error { return tx.UpdateChargeIntent(pending) })
	expect(t, s, "GetChargeIntent after update", pending, func(tx accounts.Tx) (*accounts.ChargeIntent, error) {
		return tx.GetChargeIntent(pending.ID)
	})
	expect(t, s, "ListOpenChargeIntents after done", []*accounts.ChargeIntent{settling, retry},
		func(tx accounts.Tx) ([]*accounts.ChargeIntent, error) {
			return tx.ListOpenChargeIntents(at(3 * time.Hour))
		})
	done.Status, done.UpdatedAt = accounts.IntentSettling, at(2*time.Hour)
	update(t, s, func(tx accounts.Tx) error { return tx.UpdateChargeIntent(done) })
	expect(t, s, "ListOpenChargeIntents after reopening", []*accounts.ChargeIntent{settling, done, retry},
		func(tx accounts.Tx) ([]*accounts.ChargeIntent, error) {
			return tx.ListOpenChargeIntents(at(3 * time.Hour))
		})

	// Uniqueness and references.
	dupID := f.intent(u, accounts.IntentPending)
	dupID.ID = retry.ID
	expectErr(t, s, "CreateChargeIntent with a used id", accounts.ErrConflict, func(tx accounts.Tx) error { return tx.CreateChargeIntent(dupID) })
	dupKey := f.intent(u, accounts.IntentPending)
	dupKey.IdempotencyKey = retry.IdempotencyKey
	expectErr(t, s, "CreateChargeIntent with a used idempotency key", accounts.ErrConflict, func(tx accounts.Tx) error { return tx.CreateChargeIntent(dupKey) })
	noUser := f.intent(&accounts.User{ID: "no-such-user"}, accounts.IntentPending)
	expectErr(t, s, "CreateChargeIntent for a missing user", accounts.ErrNotFound, func(tx accounts.Tx) error { return tx.CreateChargeIntent(noUser) })
	expectErr(t, s, "GetChargeIntent of a missing id", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetChargeIntent("no-such-intent")
		return err
	})
	expectErr(t, s, "UpdateChargeIntent of a missing id", accounts.ErrNotFound, func(tx accounts.Tx) error {
		return tx.UpdateChargeIntent(f.intent(u, accounts.IntentPending))
	})
	// A failed write leaves the transaction usable.
	update(t, s, func(tx accounts.Tx) error {
		if err := tx.CreateChargeIntent(dupKey); err == nil {
			return fmt.Errorf("duplicate key accepted")
		}
		dupKey.IdempotencyKey = "subscribe:fresh"
		return tx.CreateChargeIntent(dupKey)
	})
	expect(t, s, "intent created after a refused write", dupKey, func(tx accounts.Tx) (*accounts.ChargeIntent, error) {
		return tx.GetChargeIntent(dupKey.ID)
	})
}

// testConcurrentIntentClaims has several workers claim one pending intent
// the way settlement does (read it, move it to settling when pending): exactly
// one claim may succeed.
func testConcurrentIntentClaims(t *testing.T, s accounts.Store) {
	const workers = 8
	f := newFixtures(t, s)
	u := f.user()
	in := f.intent(u, accounts.IntentPending)
	f.create(u)
	update(t, s, func(tx accounts.Tx) error { return tx.CreateChargeIntent(in) })
	var (
		claims atomic.Int32
		wg     sync.WaitGroup
		g      = newGate(workers)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var won bool
			err := s.Update(t.Context(), func(tx accounts.Tx) error {
				won = false
				cur, err := tx.GetChargeIntent(in.ID)
				if err != nil {
					return err
				}
				g.wait()
				if cur.Status != accounts.IntentPending {
					return nil
				}
				cur.Status = accounts.IntentSettling
				won = true
				return tx.UpdateChargeIntent(cur)
			})
			if err != nil {
				t.Errorf("claim: %v", err)
			}
			if won {
				claims.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := claims.Load(); n != 1 {
		t.Errorf("%d workers claimed the intent, want exactly 1", n)
	}
}

func testTestCharges(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	a, b, c := f.testCharge(), f.testCharge(), f.testCharge()
	b.Declined = true
	f.create(c, a, b)
	expect(t, s, "GetTestCharge", b, func(tx accounts.Tx) (*billing.TestCharge, error) {
		return tx.(accounts.TestLedgerTx).GetTestCharge(b.IdempotencyKey)
	})
	expect(t, s, "GetTestChargeByRef", a, func(tx accounts.Tx) (*billing.TestCharge, error) {
		return tx.(accounts.TestLedgerTx).GetTestChargeByRef(a.Ref)
	})
	expect(t, s, "ListTestCharges", []*billing.TestCharge{a, b, c}, func(tx accounts.Tx) ([]*billing.TestCharge, error) {
		return tx.(accounts.TestLedgerTx).ListTestCharges()
	})

	a.Refunded = true
	a.Refunds = map[string]string{"oprefund:x:1": "12.5", "oprefund:x:2": "83.5"}
	update(t, s, func(tx accounts.Tx) error { return tx.(accounts.TestLedgerTx).UpdateTestCharge(a) })
	expect(t, s, "GetTestCharge after update", a, func(tx accounts.Tx) (*billing.TestCharge, error) {
		return tx.(accounts.TestLedgerTx).GetTestCharge(a.IdempotencyKey)
	})

	dupKey := f.testCharge()
	dupKey.IdempotencyKey = a.IdempotencyKey
	expectErr(t, s, "CreateTestCharge with a used idempotency key", accounts.ErrConflict, func(tx accounts.Tx) error { return tx.(accounts.TestLedgerTx).CreateTestCharge(dupKey) })
	dupRef := f.testCharge()
	dupRef.Ref = a.Ref
	expectErr(t, s, "CreateTestCharge with a used ref", accounts.ErrConflict, func(tx accounts.Tx) error { return tx.(accounts.TestLedgerTx).CreateTestCharge(dupRef) })
	expectErr(t, s, "GetTestCharge of a missing key", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.(accounts.TestLedgerTx).GetTestCharge("no-such-key")
		return err
	})
	expectErr(t, s, "GetTestChargeByRef of a missing ref", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.(accounts.TestLedgerTx).GetTestChargeByRef("ch_none")
		return err
	})
	expectErr(t, s, "UpdateTestCharge of a missing key", accounts.ErrNotFound, func(tx accounts.Tx) error {
		return tx.(accounts.TestLedgerTx).UpdateTestCharge(f.testCharge())
	})
}

func testPendingCharges(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	_, _, sub := f.basics(1)
	paid := f.charge(sub, sub.CurrentPeriodStart)
	paid.Status = accounts.ChargeSucceeded
	old := f.charge(sub, sub.CurrentPeriodEnd)
	young := f.charge(sub, sub.CurrentPeriodEnd.AddDate(0, 1, 0))
	f.create(young, paid, old)
	expect(t, s, "ListPendingCharges", []*accounts.Charge{old, young}, func(tx accounts.Tx) ([]*accounts.Charge, error) {
		return tx.ListPendingCharges(young.CreatedAt)
	})
	expect(t, s, "ListPendingCharges created before t", []*accounts.Charge{old}, func(tx accounts.Tx) ([]*accounts.Charge, error) {
		return tx.ListPendingCharges(old.CreatedAt)
	})
	old.Status = accounts.ChargeVoid
	update(t, s, func(tx accounts.Tx) error { return tx.UpdateCharge(old) })
	paid.Status = accounts.ChargePending
	update(t, s, func(tx accounts.Tx) error { return tx.UpdateCharge(paid) })
	expect(t, s, "ListPendingCharges after updates", []*accounts.Charge{paid, young}, func(tx accounts.Tx) ([]*accounts.Charge, error) {
		return tx.ListPendingCharges(at(time.Hour))
	})
}
