package embedded

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// periodKey is the unique key of a charge: its subscription and the
// microsecond its period starts, the precision both backends keep.
func periodKey(subscriptionID string, periodStart time.Time) []byte {
	return binary.BigEndian.AppendUint64(compositeKey(subscriptionID), uint64(ts(periodStart).UnixMicro()))
}

// checkCharge checks the constraints a charge must meet to be written.
func (t *tx) checkCharge(c *accounts.Charge) error {
	if holder := t.bucket(bucketChargesByPeriod).Get(periodKey(c.SubscriptionID, c.PeriodStart)); holder != nil && string(holder) != c.ID {
		return fmt.Errorf("subscription %s already has a charge for the period starting %s: %w",
			c.SubscriptionID, c.PeriodStart.UTC().Format(time.RFC3339Nano), accounts.ErrConflict)
	}
	return t.refs(bucketUsers, c.UserID, bucketSubs, c.SubscriptionID)
}

func (t *tx) CreateCharge(c *accounts.Charge) error {
	if t.exists(bucketCharges, c.ID) {
		return fmt.Errorf("create charge %s: id already used: %w", c.ID, accounts.ErrConflict)
	}
	if err := t.checkCharge(c); err != nil {
		return fmt.Errorf("create charge %s: %w", c.ID, err)
	}
	if err := t.save(bucketCharges, c.ID, newChargeRecord(c)); err != nil {
		return fmt.Errorf("create charge %s: %w", c.ID, err)
	}
	if err := t.indexPending(c); err != nil {
		return err
	}
	return t.bucket(bucketChargesByPeriod).Put(periodKey(c.SubscriptionID, c.PeriodStart), []byte(c.ID))
}

// indexPending keeps c in the index of pending charges while it is pending.
func (t *tx) indexPending(c *accounts.Charge) error {
	if c.Status == accounts.ChargePending {
		return t.bucket(bucketChargesPending).Put([]byte(c.ID), []byte{})
	}
	return t.bucket(bucketChargesPending).Delete([]byte(c.ID))
}

func (t *tx) ListPendingCharges(before time.Time) ([]*accounts.Charge, error) {
	var ids []string
	err := t.bucket(bucketChargesPending).ForEach(func(k, _ []byte) error {
		ids = append(ids, string(k))
		return nil
	})
	if err != nil {
		return nil, err
	}
	records, err := loadAll[chargeRecord](t, bucketCharges, ids)
	if err != nil {
		return nil, fmt.Errorf("list pending charges: %w", err)
	}
	out := make([]*accounts.Charge, 0, len(records))
	for _, r := range records {
		if r.Status == accounts.ChargePending && !r.CreatedAt.After(ts(before)) {
			out = append(out, r.charge())
		}
	}
	byCreation(out, func(c *accounts.Charge) (time.Time, string) { return c.CreatedAt, c.ID })
	return out, nil
}

func (t *tx) UpdateCharge(c *accounts.Charge) error {
	var old chargeRecord
	if err := t.mustLoad(bucketCharges, c.ID, &old); err != nil {
		return fmt.Errorf("update charge %s: %w", c.ID, err)
	}
	if err := t.checkCharge(c); err != nil {
		return fmt.Errorf("update charge %s: %w", c.ID, err)
	}
	if err := t.save(bucketCharges, c.ID, newChargeRecord(c)); err != nil {
		return fmt.Errorf("update charge %s: %w", c.ID, err)
	}
	if err := t.indexPending(c); err != nil {
		return err
	}
	byPeriod := t.bucket(bucketChargesByPeriod)
	if err := byPeriod.Delete(periodKey(old.SubscriptionID, old.PeriodStart)); err != nil {
		return fmt.Errorf("update charge %s: %w", c.ID, err)
	}
	return byPeriod.Put(periodKey(c.SubscriptionID, c.PeriodStart), []byte(c.ID))
}

func (t *tx) ListCharges(subscriptionID string) ([]*accounts.Charge, error) {
	prefix := compositeKey(subscriptionID)
	var ids []string
	c := t.bucket(bucketChargesByPeriod).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		ids = append(ids, string(v))
	}
	records, err := loadAll[chargeRecord](t, bucketCharges, ids)
	if err != nil {
		return nil, fmt.Errorf("list charges of %s: %w", subscriptionID, err)
	}
	charges := make([]*accounts.Charge, len(records))
	for i, r := range records {
		charges[i] = r.charge()
	}
	byCreation(charges, func(c *accounts.Charge) (time.Time, string) { return c.CreatedAt, c.ID })
	return charges, nil
}
