package embedded

// The outbox of operator events (accounts.OperatorEventTx). Like the billing
// records, its buckets are created by the first write, so an older file
// needs no format migration. bucketOpEventsPending holds the ids of the
// pending events, so a delivery pass never scans the delivered ones.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

const (
	bucketOpEvents        = "operator_events"         // event id → record
	bucketOpEventsPending = "operator_events_pending" // event id → nothing, while pending
)

type opEventRecord struct {
	ID            string          `json:"id"`
	Type          string          `json:"type"`
	CreatedAt     time.Time       `json:"created_at"`
	Data          json.RawMessage `json:"data"`
	Status        string          `json:"status"`
	Attempts      int             `json:"attempts"`
	NextAttemptAt time.Time       `json:"next_attempt_at"`
	FinishedAt    time.Time       `json:"finished_at"`
	LastError     string          `json:"last_error,omitempty"`
}

func newOpEventRecord(e *accounts.OperatorEvent) *opEventRecord {
	return &opEventRecord{ID: e.ID, Type: e.Type, CreatedAt: ts(e.CreatedAt), Data: e.Data, Status: e.Status,
		Attempts: e.Attempts, NextAttemptAt: ts(e.NextAttemptAt), FinishedAt: ts(e.FinishedAt), LastError: e.LastError}
}

func (r *opEventRecord) event() *accounts.OperatorEvent {
	return &accounts.OperatorEvent{ID: r.ID, Type: r.Type, CreatedAt: r.CreatedAt.UTC(), Data: r.Data, Status: r.Status,
		Attempts: r.Attempts, NextAttemptAt: r.NextAttemptAt.UTC(), FinishedAt: utcOrZero(r.FinishedAt), LastError: r.LastError}
}

func utcOrZero(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// putOpEvent writes the record and keeps the pending index in step.
func (t *tx) putOpEvent(e *accounts.OperatorEvent) error {
	events, err := t.optBucket(bucketOpEvents)
	if err != nil {
		return err
	}
	pending, err := t.optBucket(bucketOpEventsPending)
	if err != nil {
		return err
	}
	v, err := json.Marshal(newOpEventRecord(e))
	if err != nil {
		return fmt.Errorf("encode operator event %s: %w", e.ID, err)
	}
	if err := events.Put([]byte(e.ID), v); err != nil {
		return err
	}
	if e.Status == accounts.OpEventPending {
		return pending.Put([]byte(e.ID), []byte{})
	}
	return pending.Delete([]byte(e.ID))
}

// getOpEvent reads one record; ok is false when there is none.
func (t *tx) getOpEvent(id string) (*opEventRecord, bool, error) {
	b, err := t.optBucket(bucketOpEvents)
	if err != nil || b == nil {
		return nil, false, err
	}
	v := b.Get([]byte(id))
	if v == nil {
		return nil, false, nil
	}
	var r opEventRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, false, fmt.Errorf("decode operator event %s: %w", id, err)
	}
	return &r, true, nil
}

func (t *tx) CreateOperatorEvent(e *accounts.OperatorEvent) error {
	_, ok, err := t.getOpEvent(e.ID)
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("create operator event %s: id already used: %w", e.ID, accounts.ErrConflict)
	}
	return t.putOpEvent(e)
}

func (t *tx) GetOperatorEvent(id string) (*accounts.OperatorEvent, error) {
	r, ok, err := t.getOpEvent(id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("get operator event %s: %w", id, accounts.ErrNotFound)
	}
	return r.event(), nil
}

func (t *tx) UpdateOperatorEvent(e *accounts.OperatorEvent) error {
	_, ok, err := t.getOpEvent(e.ID)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("update operator event %s: %w", e.ID, accounts.ErrNotFound)
	}
	return t.putOpEvent(e)
}

func (t *tx) ListOperatorEventsDue(before time.Time, limit int) ([]*accounts.OperatorEvent, error) {
	pending, err := t.optBucket(bucketOpEventsPending)
	if err != nil || pending == nil {
		return nil, err
	}
	var out []*accounts.OperatorEvent
	err = pending.ForEach(func(k, _ []byte) error {
		r, ok, err := t.getOpEvent(string(k))
		if err != nil {
			return err
		}
		if ok && r.Status == accounts.OpEventPending && !r.NextAttemptAt.After(ts(before)) {
			out = append(out, r.event())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list due operator events: %w", err)
	}
	slices.SortFunc(out, func(a, b *accounts.OperatorEvent) int {
		return cmp.Or(a.NextAttemptAt.Compare(b.NextAttemptAt), a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (t *tx) DeleteOperatorEventsBefore(before time.Time) (int, error) {
	events, err := t.optBucket(bucketOpEvents)
	if err != nil || events == nil {
		return 0, err
	}
	var old [][]byte
	err = events.ForEach(func(k, v []byte) error {
		var r opEventRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("decode operator event %s: %w", k, err)
		}
		if r.Status != accounts.OpEventPending && r.CreatedAt.Before(ts(before)) {
			old = append(old, slices.Clone(k))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, k := range old {
		if err := events.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(old), nil
}
