package postgres

// Billing records (accounts.BillingTx); the tables are made by migration
// 0004_stripe.sql.

import (
	"time"

	"github.com/timeblock/timeblock/accounts"
)

func (t *tx) GetProcessorCustomer(processor, userID string) (string, error) {
	var id string
	err := t.db.QueryRow(t.ctx, `SELECT customer_id FROM processor_customers WHERE processor = $1 AND user_id = $2`,
		processor, userID).Scan(&id)
	return id, wrap(err, "%s customer of user %s", processor, userID)
}

func (t *tx) CreateProcessorCustomer(processor, userID, customerID string) error {
	err := t.execOne(`INSERT INTO processor_customers (processor, user_id, customer_id) VALUES ($1, $2, $3)`,
		processor, userID, customerID)
	return wrap(err, "create %s customer of user %s", processor, userID)
}

func (t *tx) RecordWebhookEvent(e *accounts.WebhookEvent) error {
	err := t.execOne(`INSERT INTO webhook_events (id, type, received_at) VALUES ($1, $2, $3)`,
		e.ID, e.Type, ts(e.ReceivedAt))
	return wrap(err, "record webhook event %s", e.ID)
}

func (t *tx) GetIdempotentRequest(userID, key string) (*accounts.IdempotentRequest, error) {
	r := accounts.IdempotentRequest{UserID: userID, Key: key}
	err := t.db.QueryRow(t.ctx, `SELECT fingerprint, resource_id, status, body, created_at FROM idempotent_requests
		WHERE user_id = $1 AND key = $2`, userID, key).Scan(&r.Fingerprint, &r.ResourceID, &r.Status, &r.Body, &r.CreatedAt)
	if err != nil {
		return nil, wrap(err, "idempotent request %q of user %s", key, userID)
	}
	r.CreatedAt = r.CreatedAt.UTC()
	return &r, nil
}

func (t *tx) PutIdempotentRequest(r *accounts.IdempotentRequest) error {
	err := t.execOne(`INSERT INTO idempotent_requests (user_id, key, fingerprint, resource_id, status, body, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (user_id, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, resource_id = EXCLUDED.resource_id,
			status = EXCLUDED.status, body = EXCLUDED.body, created_at = EXCLUDED.created_at`,
		r.UserID, r.Key, r.Fingerprint, r.ResourceID, r.Status, nonNil(r.Body), ts(r.CreatedAt))
	return wrap(err, "put idempotent request %q of user %s", r.Key, r.UserID)
}

func (t *tx) DeleteIdempotentRequest(userID, key string) error {
	err := t.write(func(db dbtx) error {
		_, err := db.Exec(t.ctx, `DELETE FROM idempotent_requests WHERE user_id = $1 AND key = $2`, userID, key)
		return err
	})
	return wrap(err, "delete idempotent request %q of user %s", key, userID)
}

func (t *tx) PruneBillingRecords(requestsBefore, eventsBefore time.Time) (int, error) {
	n := 0
	err := t.write(func(db dbtx) error {
		tag, err := db.Exec(t.ctx, `DELETE FROM idempotent_requests WHERE created_at < $1`, ts(requestsBefore))
		if err != nil {
			return err
		}
		n += int(tag.RowsAffected())
		tag, err = db.Exec(t.ctx, `DELETE FROM webhook_events WHERE received_at < $1`, ts(eventsBefore))
		if err != nil {
			return err
		}
		n += int(tag.RowsAffected())
		return nil
	})
	return n, wrap(err, "prune billing records")
}

var _ accounts.BillingTx = (*tx)(nil)
