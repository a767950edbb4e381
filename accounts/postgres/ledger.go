package postgres

// The ledger of money taken (accounts.LedgerTx), tables ledger_charges and
// the sequence ledger_numbers (migration 0011).

import (
	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts"
)

const ledgerColumns = `id, number, user_id, subscription_id, pool_id, charge_id, kind, amount, currency,
	refunded_amount, processor_ref, description, created_at`

func scanLedgerCharge(row pgx.Row) (*accounts.LedgerCharge, error) {
	var c accounts.LedgerCharge
	err := row.Scan(&c.ID, &c.Number, &c.UserID, &c.SubscriptionID, &c.PoolID, &c.ChargeID, &c.Kind, &c.Amount,
		&c.Currency, &c.RefundedAmount, &c.ProcessorRef, &c.Description, &c.CreatedAt)
	if err != nil {
		return nil, err
	}
	c.CreatedAt = c.CreatedAt.UTC()
	return &c, nil
}

func (t *tx) CreateLedgerCharge(c *accounts.LedgerCharge) error {
	var number int64
	err := t.write(func(db dbtx) error {
		return db.QueryRow(t.ctx, `INSERT INTO ledger_charges (`+ledgerColumns+`)
			VALUES ($1, nextval('ledger_numbers'), $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING number`,
			c.ID, c.UserID, c.SubscriptionID, c.PoolID, c.ChargeID, c.Kind, c.Amount, c.Currency,
			c.RefundedAmount, c.ProcessorRef, c.Description, ts(c.CreatedAt)).Scan(&number)
	})
	if err != nil {
		return wrap(err, "create ledger charge %s", c.ID)
	}
	c.Number = number
	return nil
}

func (t *tx) GetLedgerCharge(id string) (*accounts.LedgerCharge, error) {
	c, err := scanLedgerCharge(t.db.QueryRow(t.ctx, `SELECT `+ledgerColumns+` FROM ledger_charges WHERE id = $1`, id))
	return c, wrap(err, "get ledger charge %s", id)
}

func (t *tx) GetLedgerChargeByRef(ref string) (*accounts.LedgerCharge, error) {
	c, err := scanLedgerCharge(t.db.QueryRow(t.ctx,
		`SELECT `+ledgerColumns+` FROM ledger_charges WHERE processor_ref = $1 AND processor_ref <> ''`, ref))
	return c, wrap(err, "ledger charge of payment %s", ref)
}

func (t *tx) UpdateLedgerCharge(c *accounts.LedgerCharge) error {
	err := t.execOne(`UPDATE ledger_charges SET subscription_id = $4, pool_id = $5, charge_id = $6, kind = $7,
		amount = $8, currency = $9, refunded_amount = $10, processor_ref = $11, description = $12, created_at = $13
		WHERE id = $1 AND number = $2 AND user_id = $3`,
		c.ID, c.Number, c.UserID, c.SubscriptionID, c.PoolID, c.ChargeID, c.Kind, c.Amount, c.Currency,
		c.RefundedAmount, c.ProcessorRef, c.Description, ts(c.CreatedAt))
	return wrap(err, "update ledger charge %s", c.ID)
}

func (t *tx) ListLedgerCharges(userID string, before int64, limit int) ([]*accounts.LedgerCharge, error) {
	if limit <= 0 {
		limit = 1 << 30
	}
	if before <= 0 {
		before = 1 << 62
	}
	out, err := queryAll(t, scanLedgerCharge, `SELECT `+ledgerColumns+` FROM ledger_charges
		WHERE user_id = $1 AND number < $2 ORDER BY number DESC LIMIT $3`, userID, before, limit)
	return out, wrap(err, "list ledger charges of %s", userID)
}
