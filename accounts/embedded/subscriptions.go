package embedded

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// seatKey is the key of a seat in the seats bucket: the pool, then hour and
// slot index as fixed-width integers, so that a pool's seats share a prefix.
func seatKey(poolID string, hour, slot int) []byte {
	k := compositeKey(poolID)
	k = binary.BigEndian.AppendUint32(k, uint32(int32(hour)))
	return binary.BigEndian.AppendUint32(k, uint32(int32(slot)))
}

// checkSeats reports ErrConflict when a seat of s is held by another
// subscription or listed twice.
func (t *tx) checkSeats(s *accounts.Subscription) error {
	seats := t.bucket(bucketSeats)
	seen := make(map[accounts.Seat]bool, len(s.Seats))
	for _, seat := range s.Seats {
		if seen[seat] {
			return fmt.Errorf("seat (hour %d, slot %d) listed twice: %w", seat.Hour, seat.SlotIndex, accounts.ErrConflict)
		}
		seen[seat] = true
		if holder := seats.Get(seatKey(s.PoolID, seat.Hour, seat.SlotIndex)); holder != nil && string(holder) != s.ID {
			return fmt.Errorf("seat (hour %d, slot %d) is held by another subscription: %w", seat.Hour, seat.SlotIndex, accounts.ErrConflict)
		}
	}
	return nil
}

func (t *tx) putSeats(r *subscriptionRecord) error {
	seats := t.bucket(bucketSeats)
	for _, seat := range r.Seats {
		if err := seats.Put(seatKey(r.PoolID, seat[0], seat[1]), []byte(r.ID)); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) CreateSubscription(s *accounts.Subscription) error {
	if t.exists(bucketSubs, s.ID) {
		return fmt.Errorf("create subscription %s: id already used: %w", s.ID, accounts.ErrConflict)
	}
	if err := t.checkSeats(s); err != nil {
		return fmt.Errorf("create subscription %s: %w", s.ID, err)
	}
	if err := t.refs(bucketUsers, s.UserID, bucketPools, s.PoolID); err != nil {
		return fmt.Errorf("create subscription %s: %w", s.ID, err)
	}
	r := newSubscriptionRecord(s)
	if err := t.save(bucketSubs, s.ID, r); err != nil {
		return fmt.Errorf("create subscription %s: %w", s.ID, err)
	}
	if err := t.putSeats(r); err != nil {
		return fmt.Errorf("create subscription %s: %w", s.ID, err)
	}
	return putOwned(t.bucket(bucketSubsByUser), s.UserID, s.ID)
}

func (t *tx) GetSubscription(id string) (*accounts.Subscription, error) {
	var r subscriptionRecord
	if err := t.mustLoad(bucketSubs, id, &r); err != nil {
		return nil, fmt.Errorf("get subscription %s: %w", id, err)
	}
	return r.subscription(), nil
}

func (t *tx) UpdateSubscription(s *accounts.Subscription) error {
	var old subscriptionRecord
	if err := t.mustLoad(bucketSubs, s.ID, &old); err != nil {
		return fmt.Errorf("update subscription %s: %w", s.ID, err)
	}
	if err := t.checkSeats(s); err != nil {
		return fmt.Errorf("update subscription %s: %w", s.ID, err)
	}
	if err := t.refs(bucketUsers, s.UserID, bucketPools, s.PoolID); err != nil {
		return fmt.Errorf("update subscription %s: %w", s.ID, err)
	}
	seats := t.bucket(bucketSeats)
	for _, seat := range old.Seats {
		if err := seats.Delete(seatKey(old.PoolID, seat[0], seat[1])); err != nil {
			return fmt.Errorf("update subscription %s: %w", s.ID, err)
		}
	}
	r := newSubscriptionRecord(s)
	if err := t.putSeats(r); err != nil {
		return fmt.Errorf("update subscription %s: %w", s.ID, err)
	}
	if err := t.save(bucketSubs, s.ID, r); err != nil {
		return fmt.Errorf("update subscription %s: %w", s.ID, err)
	}
	return moveOwned(t.bucket(bucketSubsByUser), old.UserID, s.UserID, s.ID)
}

func (t *tx) ListSubscriptionsByUser(userID string) ([]*accounts.Subscription, error) {
	records, err := loadAll[subscriptionRecord](t, bucketSubs, idsOf(t.bucket(bucketSubsByUser), userID))
	if err != nil {
		return nil, fmt.Errorf("list subscriptions of %s: %w", userID, err)
	}
	return subscriptions(records), nil
}

// ListSubscriptionsDue scans every subscription: the lifecycle worker calls
// it once a minute or so, and a single node holds few enough of them.
func (t *tx) ListSubscriptionsDue(due, pastDueBefore time.Time) ([]*accounts.Subscription, error) {
	records, err := scanAll[subscriptionRecord](t, bucketSubs)
	if err != nil {
		return nil, fmt.Errorf("list subscriptions due: %w", err)
	}
	due, pastDueBefore = ts(due), ts(pastDueBefore)
	var matched []*subscriptionRecord
	for _, r := range records {
		live := r.Status == accounts.SubActive || r.Status == accounts.SubPastDue
		periodOver := live && !r.CurrentPeriodEnd.After(due)
		graceOver := r.Status == accounts.SubPastDue && !r.PastDueSince.IsZero() && !r.PastDueSince.After(pastDueBefore)
		if periodOver || graceOver {
			matched = append(matched, r)
		}
	}
	return subscriptions(matched), nil
}

// ListSubscriptionsByPool scans every subscription, as ListSubscriptionsDue
// does: it serves the funding pass and the funding figures of a pool.
func (t *tx) ListSubscriptionsByPool(poolID, status string) ([]*accounts.Subscription, error) {
	records, err := scanAll[subscriptionRecord](t, bucketSubs)
	if err != nil {
		return nil, fmt.Errorf("list subscriptions of pool %s: %w", poolID, err)
	}
	records = slices.DeleteFunc(records, func(r *subscriptionRecord) bool { return r.PoolID != poolID || r.Status != status })
	return subscriptions(records), nil
}

func subscriptions(records []*subscriptionRecord) []*accounts.Subscription {
	subs := make([]*accounts.Subscription, len(records))
	for i, r := range records {
		subs[i] = r.subscription()
	}
	byCreation(subs, func(s *accounts.Subscription) (time.Time, string) { return s.CreatedAt, s.ID })
	return subs
}

func (t *tx) TakenSeats(poolID string) (map[accounts.Seat]string, error) {
	prefix := compositeKey(poolID)
	taken := make(map[accounts.Seat]string)
	c := t.bucket(bucketSeats).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		rest := k[len(prefix):]
		if len(rest) != 8 {
			return nil, fmt.Errorf("taken seats of %s: malformed seat key %x", poolID, k)
		}
		seat := accounts.Seat{
			Hour:      int(int32(binary.BigEndian.Uint32(rest[:4]))),
			SlotIndex: int(int32(binary.BigEndian.Uint32(rest[4:]))),
		}
		taken[seat] = string(v)
	}
	return taken, nil
}

func (t *tx) DeleteSubscription(id string) error {
	var r subscriptionRecord
	if err := t.mustLoad(bucketSubs, id, &r); err != nil {
		return fmt.Errorf("delete subscription %s: %w", id, err)
	}
	entries := []entry{{bucketSubs, []byte(id)}, {bucketSubsByUser, compositeKey(r.UserID, id)}}
	for _, seat := range r.Seats {
		entries = append(entries, entry{bucketSeats, seatKey(r.PoolID, seat[0], seat[1])})
	}
	if err := t.delete(entries...); err != nil {
		return fmt.Errorf("delete subscription %s: %w", id, err)
	}
	return nil
}
