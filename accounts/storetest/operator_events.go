package storetest

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// opEvent is a pending operator event created at d after the fixtures' epoch.
func opEvent(id string, d time.Duration) *accounts.OperatorEvent {
	return &accounts.OperatorEvent{ID: id, Type: accounts.OpChargeFailed, CreatedAt: at(d),
		Data:   json.RawMessage(`{"subscriptionId":"s1","amount":"12.50","poolSlug":"p"}`),
		Status: accounts.OpEventPending, NextAttemptAt: at(d)}
}

// testOperatorEvents checks the outbox: create, get, update, the due list
// (pending only, by next attempt, limited) and pruning (finished only).
func testOperatorEvents(t *testing.T, s accounts.Store) {
	a, b, c := opEvent("evt_a", 0), opEvent("evt_b", time.Minute), opEvent("evt_c", 2*time.Minute)
	update(t, s, func(tx accounts.Tx) error {
		for _, e := range []*accounts.OperatorEvent{c, a, b} {
			if err := tx.CreateOperatorEvent(e); err != nil {
				return err
			}
		}
		return nil
	})
	expect(t, s, "GetOperatorEvent", a, func(tx accounts.Tx) (*accounts.OperatorEvent, error) { return tx.GetOperatorEvent(a.ID) })
	expectErr(t, s, "CreateOperatorEvent with a used id", accounts.ErrConflict, func(tx accounts.Tx) error {
		return tx.CreateOperatorEvent(opEvent(a.ID, time.Hour))
	})
	expectErr(t, s, "GetOperatorEvent of a missing id", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetOperatorEvent("evt_missing")
		return err
	})
	expectErr(t, s, "UpdateOperatorEvent of a missing id", accounts.ErrNotFound, func(tx accounts.Tx) error {
		return tx.UpdateOperatorEvent(opEvent("evt_missing", 0))
	})
	due := func(t time.Time, limit int) func(tx accounts.Tx) ([]*accounts.OperatorEvent, error) {
		return func(tx accounts.Tx) ([]*accounts.OperatorEvent, error) { return tx.ListOperatorEventsDue(t, limit) }
	}
	expect(t, s, "ListOperatorEventsDue", []*accounts.OperatorEvent{a, b}, due(at(time.Minute), 10))
	expect(t, s, "ListOperatorEventsDue limited", []*accounts.OperatorEvent{a}, due(at(time.Hour), 1))

	// a is claimed (its next attempt a lease ahead), b delivered: c comes
	// first, then a; b is no longer due.
	a.NextAttemptAt, a.Attempts, a.LastError = at(10*time.Minute), 1, "webhook answered 500"
	b.Status, b.Attempts, b.FinishedAt = accounts.OpEventDelivered, 1, at(3*time.Minute)
	update(t, s, func(tx accounts.Tx) error {
		if err := tx.UpdateOperatorEvent(a); err != nil {
			return err
		}
		return tx.UpdateOperatorEvent(b)
	})
	expect(t, s, "GetOperatorEvent after update", b, func(tx accounts.Tx) (*accounts.OperatorEvent, error) { return tx.GetOperatorEvent(b.ID) })
	expect(t, s, "ListOperatorEventsDue after updates", []*accounts.OperatorEvent{c, a}, due(at(time.Hour), 10))
	expect(t, s, "ListOperatorEventsDue before the lease ends", []*accounts.OperatorEvent{c}, due(at(5*time.Minute), 10))

	// Pruning deletes finished events created before t, never pending ones.
	c.Status, c.FinishedAt = accounts.OpEventFailed, at(time.Hour)
	update(t, s, func(tx accounts.Tx) error { return tx.UpdateOperatorEvent(c) })
	var n int
	update(t, s, func(tx accounts.Tx) (err error) {
		n, err = tx.DeleteOperatorEventsBefore(at(2 * time.Minute))
		return err
	})
	if n != 1 {
		t.Errorf("DeleteOperatorEventsBefore deleted %d events, want 1 (the delivered one created before t)", n)
	}
	expectErr(t, s, "GetOperatorEvent of a pruned event", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetOperatorEvent(b.ID)
		return err
	})
	update(t, s, func(tx accounts.Tx) (err error) {
		n, err = tx.DeleteOperatorEventsBefore(at(24 * time.Hour))
		return err
	})
	if n != 1 {
		t.Errorf("second DeleteOperatorEventsBefore deleted %d events, want 1 (the failed one; the pending one stays)", n)
	}
	expect(t, s, "pending event after pruning", a, func(tx accounts.Tx) (*accounts.OperatorEvent, error) { return tx.GetOperatorEvent(a.ID) })
}

// testConcurrentOperatorEventClaims has workers claim the due events the
// way the delivery pass does (list the due ones, move each a lease ahead, in
// one transaction): each event is claimed exactly once.
func testConcurrentOperatorEventClaims(t *testing.T, s accounts.Store) {
	const workers, events = 6, 3
	update(t, s, func(tx accounts.Tx) error {
		for i := range events {
			if err := tx.CreateOperatorEvent(opEvent("evt_"+string(rune('a'+i)), time.Duration(i)*time.Second)); err != nil {
				return err
			}
		}
		return nil
	})
	var (
		claims sync.Map // event id → *atomic.Int32
		wg     sync.WaitGroup
		g      = newGate(workers)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []string
			err := s.Update(t.Context(), func(tx accounts.Tx) error {
				mine = mine[:0]
				due, err := tx.ListOperatorEventsDue(at(time.Minute), 10)
				if err != nil {
					return err
				}
				g.wait()
				for _, e := range due {
					e.NextAttemptAt = at(time.Hour)
					if err := tx.UpdateOperatorEvent(e); err != nil {
						return err
					}
					mine = append(mine, e.ID)
				}
				return nil
			})
			if err != nil {
				t.Errorf("claim: %v", err)
			}
			for _, id := range mine {
				n, _ := claims.LoadOrStore(id, new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
			}
		}()
	}
	wg.Wait()
	for i := range events {
		id := "evt_" + string(rune('a'+i))
		n, ok := claims.Load(id)
		if !ok || n.(*atomic.Int32).Load() != 1 {
			got := int32(0)
			if ok {
				got = n.(*atomic.Int32).Load()
			}
			t.Errorf("event %s claimed %d times, want exactly once", id, got)
		}
	}
}
