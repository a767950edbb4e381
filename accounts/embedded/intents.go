package embedded

import (
	"fmt"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// Charge intents: bucketIntents maps an id to its record; bucketIntentsByKey
// maps an idempotency key to the id; bucketIntentsOpen holds the ids of the
// intents still pending or settling, so settlement never scans finished ones.
//
// The test processor's ledger: bucketTestCharges maps an idempotency key to
// the record; bucketTestChargesByRef maps a ref to the key.

type intentRecord struct {
	ID             string    `json:"id"`
	UserID         string    `json:"user_id"`
	SubscriptionID string    `json:"subscription_id"`
	ChargeID       string    `json:"charge_id,omitempty"`
	Kind           string    `json:"kind"`
	Amount         string    `json:"amount"`
	MethodID       string    `json:"method_id,omitempty"`
	IdempotencyKey string    `json:"idempotency_key"`
	Status         string    `json:"status"`
	ProcessorRef   string    `json:"processor_ref,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

func newIntentRecord(c *accounts.ChargeIntent) *intentRecord {
	return &intentRecord{
		ID: c.ID, UserID: c.UserID, SubscriptionID: c.SubscriptionID, ChargeID: c.ChargeID, Kind: c.Kind,
		Amount: c.Amount, MethodID: c.MethodID, IdempotencyKey: c.IdempotencyKey, Status: c.Status, ProcessorRef: c.ProcessorRef,
		CreatedAt: ts(c.CreatedAt), UpdatedAt: ts(c.UpdatedAt),
	}
}

func (r *intentRecord) intent() *accounts.ChargeIntent {
	return &accounts.ChargeIntent{
		ID: r.ID, UserID: r.UserID, SubscriptionID: r.SubscriptionID, ChargeID: r.ChargeID, Kind: r.Kind,
		Amount: r.Amount, MethodID: r.MethodID, IdempotencyKey: r.IdempotencyKey, Status: r.Status, ProcessorRef: r.ProcessorRef,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

func intentOpen(status string) bool {
	return status == accounts.IntentPending || status == accounts.IntentSettling
}

func (t *tx) putIntentOpen(c *accounts.ChargeIntent) error {
	if intentOpen(c.Status) {
		return t.bucket(bucketIntentsOpen).Put([]byte(c.ID), []byte{})
	}
	return t.bucket(bucketIntentsOpen).Delete([]byte(c.ID))
}

func (t *tx) CreateChargeIntent(c *accounts.ChargeIntent) error {
	if t.exists(bucketIntents, c.ID) {
		return fmt.Errorf("create charge intent %s: id already used: %w", c.ID, accounts.ErrConflict)
	}
	byKey := t.bucket(bucketIntentsByKey)
	if !free(byKey, c.IdempotencyKey, c.ID) {
		return fmt.Errorf("create charge intent %s: idempotency key already used: %w", c.ID, accounts.ErrConflict)
	}
	if err := t.refs(bucketUsers, c.UserID); err != nil {
		return fmt.Errorf("create charge intent %s: %w", c.ID, err)
	}
	if err := t.save(bucketIntents, c.ID, newIntentRecord(c)); err != nil {
		return fmt.Errorf("create charge intent %s: %w", c.ID, err)
	}
	if err := putUnique(byKey, c.IdempotencyKey, c.ID); err != nil {
		return err
	}
	return t.putIntentOpen(c)
}

func (t *tx) GetChargeIntent(id string) (*accounts.ChargeIntent, error) {
	var r intentRecord
	if err := t.mustLoad(bucketIntents, id, &r); err != nil {
		return nil, fmt.Errorf("get charge intent %s: %w", id, err)
	}
	return r.intent(), nil
}

func (t *tx) UpdateChargeIntent(c *accounts.ChargeIntent) error {
	var old intentRecord
	if err := t.mustLoad(bucketIntents, c.ID, &old); err != nil {
		return fmt.Errorf("update charge intent %s: %w", c.ID, err)
	}
	byKey := t.bucket(bucketIntentsByKey)
	if !free(byKey, c.IdempotencyKey, c.ID) {
		return fmt.Errorf("update charge intent %s: idempotency key already used: %w", c.ID, accounts.ErrConflict)
	}
	if err := t.refs(bucketUsers, c.UserID); err != nil {
		return fmt.Errorf("update charge intent %s: %w", c.ID, err)
	}
	if err := t.save(bucketIntents, c.ID, newIntentRecord(c)); err != nil {
		return fmt.Errorf("update charge intent %s: %w", c.ID, err)
	}
	if err := moveUnique(byKey, old.IdempotencyKey, c.IdempotencyKey, c.ID); err != nil {
		return err
	}
	return t.putIntentOpen(c)
}

func (t *tx) ListOpenChargeIntents(before time.Time) ([]*accounts.ChargeIntent, error) {
	var ids []string
	err := t.bucket(bucketIntentsOpen).ForEach(func(k, _ []byte) error {
		ids = append(ids, string(k))
		return nil
	})
	if err != nil {
		return nil, err
	}
	records, err := loadAll[intentRecord](t, bucketIntents, ids)
	if err != nil {
		return nil, fmt.Errorf("list open charge intents: %w", err)
	}
	out := make([]*accounts.ChargeIntent, 0, len(records))
	for _, r := range records {
		if intentOpen(r.Status) && !r.UpdatedAt.After(ts(before)) {
			out = append(out, r.intent())
		}
	}
	byCreation(out, func(c *accounts.ChargeIntent) (time.Time, string) { return c.CreatedAt, c.ID })
	return out, nil
}

type testChargeRecord struct {
	Ref            string `json:"ref"`
	UserID         string `json:"user_id"`
	MethodID       string `json:"method_id"`
	Amount         string `json:"amount"`
	IdempotencyKey string `json:"idempotency_key"`
	Description    string `json:"description,omitempty"`
	Declined       bool   `json:"declined,omitempty"`
	Refunded       bool   `json:"refunded,omitempty"`
	// Refunds: partial refunds by idempotency key (added with issue 39).
	Refunds   map[string]string `json:"refunds,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
}

func newTestChargeRecord(c *billing.TestCharge) *testChargeRecord {
	return &testChargeRecord{
		Ref: c.Ref, UserID: c.UserID, MethodID: c.MethodID, Amount: c.Amount, IdempotencyKey: c.IdempotencyKey,
		Description: c.Description, Declined: c.Declined, Refunded: c.Refunded, Refunds: c.Refunds, CreatedAt: ts(c.CreatedAt),
	}
}

func (r *testChargeRecord) testCharge() *billing.TestCharge {
	return &billing.TestCharge{
		Ref: r.Ref, UserID: r.UserID, MethodID: r.MethodID, Amount: r.Amount, IdempotencyKey: r.IdempotencyKey,
		Description: r.Description, Declined: r.Declined, Refunded: r.Refunded, Refunds: r.Refunds, CreatedAt: r.CreatedAt.UTC(),
	}
}

func (t *tx) CreateTestCharge(c *billing.TestCharge) error {
	if t.exists(bucketTestCharges, c.IdempotencyKey) {
		return fmt.Errorf("create test charge: idempotency key already used: %w", accounts.ErrConflict)
	}
	byRef := t.bucket(bucketTestChargesByRef)
	if !free(byRef, c.Ref, c.IdempotencyKey) {
		return fmt.Errorf("create test charge %s: ref already used: %w", c.Ref, accounts.ErrConflict)
	}
	if err := t.save(bucketTestCharges, c.IdempotencyKey, newTestChargeRecord(c)); err != nil {
		return fmt.Errorf("create test charge %s: %w", c.Ref, err)
	}
	return putUnique(byRef, c.Ref, c.IdempotencyKey)
}

func (t *tx) GetTestCharge(idempotencyKey string) (*billing.TestCharge, error) {
	var r testChargeRecord
	if err := t.mustLoad(bucketTestCharges, idempotencyKey, &r); err != nil {
		return nil, fmt.Errorf("get test charge: %w", err)
	}
	return r.testCharge(), nil
}

func (t *tx) GetTestChargeByRef(ref string) (*billing.TestCharge, error) {
	key := lookup(t.bucket(bucketTestChargesByRef), ref)
	if key == "" {
		return nil, fmt.Errorf("get test charge %s: %w", ref, accounts.ErrNotFound)
	}
	return t.GetTestCharge(key)
}

func (t *tx) UpdateTestCharge(c *billing.TestCharge) error {
	var old testChargeRecord
	if err := t.mustLoad(bucketTestCharges, c.IdempotencyKey, &old); err != nil {
		return fmt.Errorf("update test charge %s: %w", c.Ref, err)
	}
	byRef := t.bucket(bucketTestChargesByRef)
	if !free(byRef, c.Ref, c.IdempotencyKey) {
		return fmt.Errorf("update test charge %s: ref already used: %w", c.Ref, accounts.ErrConflict)
	}
	if err := t.save(bucketTestCharges, c.IdempotencyKey, newTestChargeRecord(c)); err != nil {
		return fmt.Errorf("update test charge %s: %w", c.Ref, err)
	}
	return moveUnique(byRef, old.Ref, c.Ref, c.IdempotencyKey)
}

func (t *tx) ListTestCharges() ([]*billing.TestCharge, error) {
	records, err := scanAll[testChargeRecord](t, bucketTestCharges)
	if err != nil {
		return nil, fmt.Errorf("list test charges: %w", err)
	}
	out := make([]*billing.TestCharge, len(records))
	for i, r := range records {
		out[i] = r.testCharge()
	}
	byCreation(out, func(c *billing.TestCharge) (time.Time, string) { return c.CreatedAt, c.IdempotencyKey })
	return out, nil
}
