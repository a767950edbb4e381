package postgres

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts"
)

const chargeColumns = `id, user_id, subscription_id, period_start, amount, status, processor_ref, created_at, method_id`

func scanCharge(row pgx.Row) (*accounts.Charge, error) {
	var c accounts.Charge
	err := row.Scan(&c.ID, &c.UserID, &c.SubscriptionID, &c.PeriodStart, &c.Amount, &c.Status, &c.ProcessorRef, &c.CreatedAt, &c.MethodID)
	if err != nil {
		return nil, err
	}
	c.PeriodStart, c.CreatedAt = c.PeriodStart.UTC(), c.CreatedAt.UTC()
	return &c, nil
}

func (t *tx) CreateCharge(c *accounts.Charge) error {
	err := t.execOne(`INSERT INTO charges (`+chargeColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		c.ID, c.UserID, c.SubscriptionID, ts(c.PeriodStart), c.Amount, c.Status, c.ProcessorRef, ts(c.CreatedAt), c.MethodID)
	return wrap(err, "create charge %s", c.ID)
}

func (t *tx) UpdateCharge(c *accounts.Charge) error {
	err := t.execOne(`UPDATE charges SET user_id = $2, subscription_id = $3, period_start = $4, amount = $5,
		status = $6, processor_ref = $7, created_at = $8, method_id = $9 WHERE id = $1`,
		c.ID, c.UserID, c.SubscriptionID, ts(c.PeriodStart), c.Amount, c.Status, c.ProcessorRef, ts(c.CreatedAt), c.MethodID)
	return wrap(err, "update charge %s", c.ID)
}

func (t *tx) ListCharges(subscriptionID string) ([]*accounts.Charge, error) {
	charges, err := queryAll(t, scanCharge,
		`SELECT `+chargeColumns+` FROM charges WHERE subscription_id = $1 ORDER BY created_at, id`, subscriptionID)
	return charges, wrap(err, "list charges of %s", subscriptionID)
}

func (t *tx) ListPendingCharges(before time.Time) ([]*accounts.Charge, error) {
	charges, err := queryAll(t, scanCharge,
		`SELECT `+chargeColumns+` FROM charges WHERE status = 'pending' AND created_at <= $1 ORDER BY created_at, id`, ts(before))
	return charges, wrap(err, "list pending charges")
}
