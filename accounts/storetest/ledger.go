package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// ledgerCharge is a ledger charge of sub paid by ref, created at d.
func ledgerCharge(id string, sub *accounts.Subscription, ref string, d time.Duration) *accounts.LedgerCharge {
	return &accounts.LedgerCharge{ID: id, UserID: sub.UserID, SubscriptionID: sub.ID, PoolID: sub.PoolID, ChargeID: "c-" + id,
		Kind: accounts.LedgerPurchase, Amount: "96", Currency: "usd", RefundedAmount: "0", ProcessorRef: ref,
		Description: "pool · asia · 1 seat · 1 month from 2026-01-01", CreatedAt: at(d)}
}

// testLedger checks the ledger: numbers assigned in order, get by id and
// by processor reference, update of the refunded amount, the conflicts,
// and the paged list (newest first, per user).
func testLedger(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u, p, sub := f.basics(2)
	other := f.user()
	otherSub := f.subscription(other, p, seats(accounts.BlockAsia, 1, 1))
	f.create(other, otherSub)

	a, b, c := ledgerCharge("l-a", sub, "ch_a", 0), ledgerCharge("l-b", otherSub, "ch_b", time.Minute), ledgerCharge("l-c", sub, "", 2*time.Minute)
	update(t, s, func(tx accounts.Tx) error {
		for _, lc := range []*accounts.LedgerCharge{a, b, c} {
			if err := tx.CreateLedgerCharge(lc); err != nil {
				return err
			}
		}
		return nil
	})
	if a.Number < 1 || b.Number <= a.Number || c.Number <= b.Number {
		t.Fatalf("numbers %d, %d, %d: want positive and increasing in the order assigned", a.Number, b.Number, c.Number)
	}
	expect(t, s, "GetLedgerCharge", a, func(tx accounts.Tx) (*accounts.LedgerCharge, error) { return tx.GetLedgerCharge(a.ID) })
	expect(t, s, "GetLedgerChargeByRef", b, func(tx accounts.Tx) (*accounts.LedgerCharge, error) { return tx.GetLedgerChargeByRef("ch_b") })
	expectErr(t, s, "GetLedgerChargeByRef of an unknown reference", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetLedgerChargeByRef("ch_missing")
		return err
	})
	expectErr(t, s, "GetLedgerChargeByRef of no reference", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetLedgerChargeByRef("")
		return err
	})
	expectErr(t, s, "GetLedgerCharge of a missing id", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetLedgerCharge("l-missing")
		return err
	})
	expectErr(t, s, "CreateLedgerCharge with a used id", accounts.ErrConflict, func(tx accounts.Tx) error {
		return tx.CreateLedgerCharge(ledgerCharge(a.ID, sub, "ch_new", 0))
	})
	expectErr(t, s, "CreateLedgerCharge with a recorded processor reference", accounts.ErrConflict, func(tx accounts.Tx) error {
		return tx.CreateLedgerCharge(ledgerCharge("l-dup", sub, "ch_a", 0))
	})
	expectErr(t, s, "CreateLedgerCharge of a missing user", accounts.ErrNotFound, func(tx accounts.Tx) error {
		lc := ledgerCharge("l-nouser", sub, "ch_nouser", 0)
		lc.UserID = "u-missing"
		return tx.CreateLedgerCharge(lc)
	})
	expectErr(t, s, "UpdateLedgerCharge of a missing id", accounts.ErrNotFound, func(tx accounts.Tx) error {
		return tx.UpdateLedgerCharge(ledgerCharge("l-missing", sub, "", 0))
	})
	// After the failed creations above, numbers still increase (a store may
	// skip the numbers of rolled-back transactions: LedgerCharge.Number).
	d := ledgerCharge("l-d", sub, "ch_d", 3*time.Minute)
	update(t, s, func(tx accounts.Tx) error { return tx.CreateLedgerCharge(d) })
	if d.Number <= c.Number {
		t.Errorf("number after rolled-back creations %d, want more than %d", d.Number, c.Number)
	}

	a.RefundedAmount = "40"
	update(t, s, func(tx accounts.Tx) error { return tx.UpdateLedgerCharge(a) })
	expect(t, s, "GetLedgerCharge after update", a, func(tx accounts.Tx) (*accounts.LedgerCharge, error) { return tx.GetLedgerCharge(a.ID) })
	if got := read(t, s, func(tx accounts.Tx) (*accounts.LedgerCharge, error) { return tx.GetLedgerCharge(a.ID) }); got.Status() != accounts.LedgerPartiallyRefunded {
		t.Errorf("status after a partial refund %s", got.Status())
	}

	list := func(userID string, before int64, limit int) func(tx accounts.Tx) ([]*accounts.LedgerCharge, error) {
		return func(tx accounts.Tx) ([]*accounts.LedgerCharge, error) {
			return tx.ListLedgerCharges(userID, before, limit)
		}
	}
	expect(t, s, "ListLedgerCharges", []*accounts.LedgerCharge{d, c, a}, list(u.ID, 0, 0))
	expect(t, s, "ListLedgerCharges limited", []*accounts.LedgerCharge{d, c}, list(u.ID, 0, 2))
	expect(t, s, "ListLedgerCharges before a number", []*accounts.LedgerCharge{c, a}, list(u.ID, d.Number, 10))
	expect(t, s, "ListLedgerCharges before the first", []*accounts.LedgerCharge{}, list(u.ID, a.Number, 10))
	expect(t, s, "ListLedgerCharges of the other user", []*accounts.LedgerCharge{b}, list(other.ID, 0, 10))
	expect(t, s, "ListLedgerCharges of nobody", []*accounts.LedgerCharge{}, list("u-nobody", 0, 10))
}

// testConcurrentLedgerNumbers creates ledger charges from many transactions
// at once, none gives up on contention, and every number is handed out once.
func testConcurrentLedgerNumbers(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	_, _, sub := f.basics(1)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	numbers := make(chan int64, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lc := ledgerCharge(fmt.Sprintf("l-%d", i), sub, fmt.Sprintf("ch_%d", i), 0)
			err := s.Update(t.Context(), func(tx accounts.Tx) error { return tx.CreateLedgerCharge(lc) })
			if errors.Is(err, accounts.ErrConflict) {
				err = fmt.Errorf("charge %d gave up on contention: %w", i, err)
			}
			errs <- err
			numbers <- lc.Number
		}()
	}
	wg.Wait()
	close(errs)
	close(numbers)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int64]bool{}
	for num := range numbers {
		if num < 1 || seen[num] {
			t.Fatalf("number %d handed out twice, or not positive", num)
		}
		seen[num] = true
	}
}
