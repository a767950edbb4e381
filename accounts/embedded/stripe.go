package embedded

// Billing records (accounts.BillingTx). Their buckets are created by the
// first write that needs them rather than by a format migration, so a file
// written by a build without them needs no new format version; a read finds
// a missing bucket empty.

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/timeblock/timeblock/accounts"
)

const (
	bucketProcessorCustomers = "processor_customers" // (processor, user) → customer id
	bucketWebhookEvents      = "webhook_events"      // event id → record
	bucketIdempotent         = "idempotent_requests" // (user, key) → record
)

// optBucket returns a lazily created bucket: nil when it does not exist yet
// and the transaction is read-only.
func (t *tx) optBucket(name string) (*bolt.Bucket, error) {
	if b := t.btx.Bucket([]byte(name)); b != nil || !t.btx.Writable() {
		return b, nil
	}
	b, err := t.btx.CreateBucketIfNotExists([]byte(name))
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", name, err)
	}
	return b, nil
}

func (t *tx) GetProcessorCustomer(processor, userID string) (string, error) {
	b, err := t.optBucket(bucketProcessorCustomers)
	if err != nil {
		return "", err
	}
	if b == nil {
		return "", fmt.Errorf("%s customer of user %s: %w", processor, userID, accounts.ErrNotFound)
	}
	v := b.Get(compositeKey(processor, userID))
	if v == nil {
		return "", fmt.Errorf("%s customer of user %s: %w", processor, userID, accounts.ErrNotFound)
	}
	return string(v), nil
}

func (t *tx) CreateProcessorCustomer(processor, userID, customerID string) error {
	if err := t.refs(bucketUsers, userID); err != nil {
		return fmt.Errorf("create %s customer: %w", processor, err)
	}
	b, err := t.optBucket(bucketProcessorCustomers)
	if err != nil {
		return err
	}
	k := compositeKey(processor, userID)
	if b.Get(k) != nil {
		return fmt.Errorf("user %s already has a %s customer: %w", userID, processor, accounts.ErrConflict)
	}
	return b.Put(k, []byte(customerID))
}

type webhookEventRecord struct {
	Type       string    `json:"type"`
	ReceivedAt time.Time `json:"receivedAt"`
}

func (t *tx) RecordWebhookEvent(e *accounts.WebhookEvent) error {
	b, err := t.optBucket(bucketWebhookEvents)
	if err != nil {
		return err
	}
	if b.Get([]byte(e.ID)) != nil {
		return fmt.Errorf("webhook event %s was recorded before: %w", e.ID, accounts.ErrConflict)
	}
	return t.save(bucketWebhookEvents, e.ID, webhookEventRecord{Type: e.Type, ReceivedAt: ts(e.ReceivedAt)})
}

type idempotentRecord struct {
	Fingerprint string    `json:"fingerprint"`
	ResourceID  string    `json:"resourceId,omitempty"`
	Status      int       `json:"status"`
	Body        []byte    `json:"body"`
	CreatedAt   time.Time `json:"createdAt"`
}

func (t *tx) GetIdempotentRequest(userID, key string) (*accounts.IdempotentRequest, error) {
	b, err := t.optBucket(bucketIdempotent)
	if err != nil {
		return nil, err
	}
	var v []byte
	if b != nil {
		v = b.Get(compositeKey(userID, key))
	}
	if v == nil {
		return nil, fmt.Errorf("idempotent request %q of user %s: %w", key, userID, accounts.ErrNotFound)
	}
	var r idempotentRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, fmt.Errorf("decode idempotent request %q of user %s: %w", key, userID, err)
	}
	return &accounts.IdempotentRequest{
		UserID: userID, Key: key, Fingerprint: r.Fingerprint, ResourceID: r.ResourceID, Status: r.Status, Body: r.Body, CreatedAt: r.CreatedAt.UTC(),
	}, nil
}

func (t *tx) PutIdempotentRequest(r *accounts.IdempotentRequest) error {
	if err := t.refs(bucketUsers, r.UserID); err != nil {
		return fmt.Errorf("put idempotent request: %w", err)
	}
	b, err := t.optBucket(bucketIdempotent)
	if err != nil {
		return err
	}
	v, err := json.Marshal(idempotentRecord{Fingerprint: r.Fingerprint, ResourceID: r.ResourceID, Status: r.Status, Body: r.Body, CreatedAt: ts(r.CreatedAt)})
	if err != nil {
		return fmt.Errorf("encode idempotent request %q: %w", r.Key, err)
	}
	return b.Put(compositeKey(r.UserID, r.Key), v)
}

func (t *tx) DeleteIdempotentRequest(userID, key string) error {
	b, err := t.optBucket(bucketIdempotent)
	if err != nil || b == nil {
		return err
	}
	return b.Delete(compositeKey(userID, key))
}

func (t *tx) PruneBillingRecords(requestsBefore, eventsBefore time.Time) (int, error) {
	n := 0
	for _, p := range []struct {
		bucket string
		before time.Time
		at     func(v []byte) (time.Time, error)
	}{
		{bucketIdempotent, requestsBefore, func(v []byte) (time.Time, error) {
			var r idempotentRecord
			err := json.Unmarshal(v, &r)
			return r.CreatedAt, err
		}},
		{bucketWebhookEvents, eventsBefore, func(v []byte) (time.Time, error) {
			var r webhookEventRecord
			err := json.Unmarshal(v, &r)
			return r.ReceivedAt, err
		}},
	} {
		b, err := t.optBucket(p.bucket)
		if err != nil || b == nil {
			return n, err
		}
		var old [][]byte
		err = b.ForEach(func(k, v []byte) error {
			at, err := p.at(v)
			if err != nil {
				return fmt.Errorf("decode %s record: %w", p.bucket, err)
			}
			if at.Before(p.before) {
				old = append(old, k)
			}
			return nil
		})
		if err != nil {
			return n, err
		}
		for _, k := range old {
			if err := b.Delete(k); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

var _ accounts.BillingTx = (*tx)(nil)
