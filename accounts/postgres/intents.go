package postgres

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

const intentColumns = `id, user_id, subscription_id, charge_id, kind, amount, idempotency_key, status, processor_ref, created_at, updated_at, method_id`

func scanIntent(row pgx.Row) (*accounts.ChargeIntent, error) {
	var c accounts.ChargeIntent
	err := row.Scan(&c.ID, &c.UserID, &c.SubscriptionID, &c.ChargeID, &c.Kind, &c.Amount, &c.IdempotencyKey,
		&c.Status, &c.ProcessorRef, &c.CreatedAt, &c.UpdatedAt, &c.MethodID)
	if err != nil {
		return nil, err
	}
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	return &c, nil
}

func intentArgs(c *accounts.ChargeIntent) []any {
	return []any{c.ID, c.UserID, c.SubscriptionID, c.ChargeID, c.Kind, c.Amount, c.IdempotencyKey,
		c.Status, c.ProcessorRef, ts(c.CreatedAt), ts(c.UpdatedAt), c.MethodID}
}

func (t *tx) CreateChargeIntent(c *accounts.ChargeIntent) error {
	err := t.execOne(`INSERT INTO charge_intents (`+intentColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		intentArgs(c)...)
	return wrap(err, "create charge intent %s", c.ID)
}

func (t *tx) GetChargeIntent(id string) (*accounts.ChargeIntent, error) {
	c, err := scanIntent(t.db.QueryRow(t.ctx, `SELECT `+intentColumns+` FROM charge_intents WHERE id = $1`, id))
	return c, wrap(err, "get charge intent %s", id)
}

func (t *tx) UpdateChargeIntent(c *accounts.ChargeIntent) error {
	err := t.execOne(`UPDATE charge_intents SET user_id = $2, subscription_id = $3, charge_id = $4, kind = $5,
		amount = $6, idempotency_key = $7, status = $8, processor_ref = $9, created_at = $10, updated_at = $11,
		method_id = $12 WHERE id = $1`, intentArgs(c)...)
	return wrap(err, "update charge intent %s", c.ID)
}

func (t *tx) ListOpenChargeIntents(before time.Time) ([]*accounts.ChargeIntent, error) {
	out, err := queryAll(t, scanIntent, `SELECT `+intentColumns+` FROM charge_intents
		WHERE status IN ('pending', 'settling') AND updated_at <= $1 ORDER BY created_at, id`, ts(before))
	return out, wrap(err, "list open charge intents")
}

const testChargeColumns = `idempotency_key, ref, user_id, method_id, amount, description, declined, refunded, created_at, refunds`

func scanTestCharge(row pgx.Row) (*billing.TestCharge, error) {
	var c billing.TestCharge
	err := row.Scan(&c.IdempotencyKey, &c.Ref, &c.UserID, &c.MethodID, &c.Amount, &c.Description,
		&c.Declined, &c.Refunded, &c.CreatedAt, &c.Refunds)
	if err != nil {
		return nil, err
	}
	if len(c.Refunds) == 0 {
		c.Refunds = nil
	}
	c.CreatedAt = c.CreatedAt.UTC()
	return &c, nil
}

func testChargeArgs(c *billing.TestCharge) []any {
	return []any{c.IdempotencyKey, c.Ref, c.UserID, c.MethodID, c.Amount, c.Description, c.Declined, c.Refunded, ts(c.CreatedAt), refundsArg(c.Refunds)}
}

// refundsArg is a test charge's partial refunds for the jsonb column.
func refundsArg(r map[string]string) map[string]string {
	if r == nil {
		return map[string]string{}
	}
	return r
}

func (t *tx) CreateTestCharge(c *billing.TestCharge) error {
	err := t.execOne(`INSERT INTO test_charges (`+testChargeColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		testChargeArgs(c)...)
	return wrap(err, "create test charge %s", c.Ref)
}

func (t *tx) GetTestCharge(idempotencyKey string) (*billing.TestCharge, error) {
	c, err := scanTestCharge(t.db.QueryRow(t.ctx, `SELECT `+testChargeColumns+` FROM test_charges WHERE idempotency_key = $1`, idempotencyKey))
	return c, wrap(err, "get test charge")
}

func (t *tx) GetTestChargeByRef(ref string) (*billing.TestCharge, error) {
	c, err := scanTestCharge(t.db.QueryRow(t.ctx, `SELECT `+testChargeColumns+` FROM test_charges WHERE ref = $1`, ref))
	return c, wrap(err, "get test charge %s", ref)
}

func (t *tx) UpdateTestCharge(c *billing.TestCharge) error {
	err := t.execOne(`UPDATE test_charges SET ref = $2, user_id = $3, method_id = $4, amount = $5, description = $6,
		declined = $7, refunded = $8, created_at = $9, refunds = $10 WHERE idempotency_key = $1`, testChargeArgs(c)...)
	return wrap(err, "update test charge %s", c.Ref)
}

func (t *tx) ListTestCharges() ([]*billing.TestCharge, error) {
	out, err := queryAll(t, scanTestCharge, `SELECT `+testChargeColumns+` FROM test_charges ORDER BY created_at, idempotency_key`)
	return out, wrap(err, "list test charges")
}
