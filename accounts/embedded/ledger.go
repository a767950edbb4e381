package embedded

// The ledger of money taken (accounts.LedgerTx). Its buckets are created by
// the first write, so an older file needs no format migration. Receipt
// numbers come from the ledger bucket's own sequence (bbolt's NextSequence),
// which is part of the transaction: a rollback gives the number back.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

const (
	bucketLedger       = "ledger"         // ledger charge id → record; its sequence numbers receipts
	bucketLedgerByUser = "ledger_by_user" // user id + big-endian number → ledger charge id
	bucketLedgerByRef  = "ledger_by_ref"  // processor reference → ledger charge id
)

type ledgerRecord struct {
	ID             string    `json:"id"`
	Number         int64     `json:"number"`
	UserID         string    `json:"user_id"`
	SubscriptionID string    `json:"subscription_id"`
	PoolID         string    `json:"pool_id"`
	ChargeID       string    `json:"charge_id"`
	Kind           string    `json:"kind"`
	Amount         string    `json:"amount"`
	Currency       string    `json:"currency"`
	RefundedAmount string    `json:"refunded_amount"`
	ProcessorRef   string    `json:"processor_ref"`
	Description    string    `json:"description"`
	CreatedAt      time.Time `json:"created_at"`
}

func newLedgerRecord(c *accounts.LedgerCharge) *ledgerRecord {
	return &ledgerRecord{ID: c.ID, Number: c.Number, UserID: c.UserID, SubscriptionID: c.SubscriptionID, PoolID: c.PoolID,
		ChargeID: c.ChargeID, Kind: c.Kind, Amount: c.Amount, Currency: c.Currency, RefundedAmount: c.RefundedAmount,
		ProcessorRef: c.ProcessorRef, Description: c.Description, CreatedAt: ts(c.CreatedAt)}
}

func (r *ledgerRecord) charge() *accounts.LedgerCharge {
	return &accounts.LedgerCharge{ID: r.ID, Number: r.Number, UserID: r.UserID, SubscriptionID: r.SubscriptionID,
		PoolID: r.PoolID, ChargeID: r.ChargeID, Kind: r.Kind, Amount: r.Amount, Currency: r.Currency,
		RefundedAmount: r.RefundedAmount, ProcessorRef: r.ProcessorRef, Description: r.Description, CreatedAt: r.CreatedAt.UTC()}
}

// ledgerUserKey orders a user's charges by number.
func ledgerUserKey(userID string, number int64) []byte {
	return binary.BigEndian.AppendUint64(compositeKey(userID), uint64(number))
}

func (t *tx) getLedger(id string) (*ledgerRecord, bool, error) {
	b, err := t.optBucket(bucketLedger)
	if err != nil || b == nil {
		return nil, false, err
	}
	v := b.Get([]byte(id))
	if v == nil {
		return nil, false, nil
	}
	var r ledgerRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, false, fmt.Errorf("decode ledger charge %s: %w", id, err)
	}
	return &r, true, nil
}

// putLedger writes the record and its indexes.
func (t *tx) putLedger(c *accounts.LedgerCharge) error {
	ledger, err := t.optBucket(bucketLedger)
	if err != nil {
		return err
	}
	byUser, err := t.optBucket(bucketLedgerByUser)
	if err != nil {
		return err
	}
	byRef, err := t.optBucket(bucketLedgerByRef)
	if err != nil {
		return err
	}
	v, err := json.Marshal(newLedgerRecord(c))
	if err != nil {
		return fmt.Errorf("encode ledger charge %s: %w", c.ID, err)
	}
	if err := ledger.Put([]byte(c.ID), v); err != nil {
		return err
	}
	if err := byUser.Put(ledgerUserKey(c.UserID, c.Number), []byte(c.ID)); err != nil {
		return err
	}
	if c.ProcessorRef != "" {
		return byRef.Put([]byte(c.ProcessorRef), []byte(c.ID))
	}
	return nil
}

// refFree reports whether ref may be c's processor reference.
func (t *tx) refFree(c *accounts.LedgerCharge) (bool, error) {
	if c.ProcessorRef == "" {
		return true, nil
	}
	b, err := t.optBucket(bucketLedgerByRef)
	if err != nil || b == nil {
		return true, err
	}
	holder := b.Get([]byte(c.ProcessorRef))
	return holder == nil || string(holder) == c.ID, nil
}

func (t *tx) CreateLedgerCharge(c *accounts.LedgerCharge) error {
	if _, ok, err := t.getLedger(c.ID); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("create ledger charge %s: id already used: %w", c.ID, accounts.ErrConflict)
	}
	if free, err := t.refFree(c); err != nil {
		return err
	} else if !free {
		return fmt.Errorf("create ledger charge %s: processor reference %s already recorded: %w", c.ID, c.ProcessorRef, accounts.ErrConflict)
	}
	if err := t.refs(bucketUsers, c.UserID); err != nil {
		return fmt.Errorf("create ledger charge %s: %w", c.ID, err)
	}
	ledger, err := t.optBucket(bucketLedger)
	if err != nil {
		return err
	}
	seq, err := ledger.NextSequence()
	if err != nil {
		return fmt.Errorf("create ledger charge %s: receipt number: %w", c.ID, err)
	}
	c.Number = int64(seq)
	return t.putLedger(c)
}

func (t *tx) GetLedgerCharge(id string) (*accounts.LedgerCharge, error) {
	r, ok, err := t.getLedger(id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("get ledger charge %s: %w", id, accounts.ErrNotFound)
	}
	return r.charge(), nil
}

func (t *tx) GetLedgerChargeByRef(ref string) (*accounts.LedgerCharge, error) {
	b, err := t.optBucket(bucketLedgerByRef)
	if err != nil {
		return nil, err
	}
	var id []byte
	if b != nil && ref != "" {
		id = b.Get([]byte(ref))
	}
	if id == nil {
		return nil, fmt.Errorf("ledger charge of payment %s: %w", ref, accounts.ErrNotFound)
	}
	return t.GetLedgerCharge(string(id))
}

func (t *tx) UpdateLedgerCharge(c *accounts.LedgerCharge) error {
	old, ok, err := t.getLedger(c.ID)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("update ledger charge %s: %w", c.ID, accounts.ErrNotFound)
	}
	if old.Number != c.Number || old.UserID != c.UserID {
		return fmt.Errorf("update ledger charge %s: its number and user never change", c.ID)
	}
	if free, err := t.refFree(c); err != nil {
		return err
	} else if !free {
		return fmt.Errorf("update ledger charge %s: processor reference %s already recorded: %w", c.ID, c.ProcessorRef, accounts.ErrConflict)
	}
	if old.ProcessorRef != "" && old.ProcessorRef != c.ProcessorRef {
		if err := t.bucket(bucketLedgerByRef).Delete([]byte(old.ProcessorRef)); err != nil {
			return err
		}
	}
	return t.putLedger(c)
}

func (t *tx) ListLedgerCharges(userID string, before int64, limit int) ([]*accounts.LedgerCharge, error) {
	b, err := t.optBucket(bucketLedgerByUser)
	if err != nil || b == nil {
		return nil, err
	}
	prefix := compositeKey(userID)
	var ids []string
	cur := b.Cursor()
	// Walk backwards from the first key past the range (before, or the
	// end of the user's prefix).
	var k, v []byte
	if before > 0 {
		k, v = cur.Seek(ledgerUserKey(userID, before))
	} else {
		k, v = cur.Seek(append(bytes.Clone(prefix), 0xFF))
	}
	if k == nil {
		k, v = cur.Last()
	} else {
		k, v = cur.Prev()
	}
	for ; k != nil && bytes.HasPrefix(k, prefix) && (limit <= 0 || len(ids) < limit); k, v = cur.Prev() {
		ids = append(ids, string(v))
	}
	out := make([]*accounts.LedgerCharge, 0, len(ids))
	for _, id := range ids {
		c, err := t.GetLedgerCharge(id)
		if err != nil {
			return nil, fmt.Errorf("list ledger charges of %s: %w", userID, err)
		}
		out = append(out, c)
	}
	return out, nil
}
