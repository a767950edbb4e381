package postgres

import (
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts"
)

const poolColumns = `id, slug, model_id, model_name, description, status, slots, block_prices,
	annual_discount, manual_provisioning, max_output_tokens, updated_at,
	funding_goal, funding_deadline, config_status, status_reason, status_changed_at, max_pledge_seats`

func scanPool(row pgx.Row) (*accounts.Pool, error) {
	var p accounts.Pool
	var deadline, changed *time.Time
	err := row.Scan(&p.ID, &p.Slug, &p.ModelID, &p.ModelName, &p.Description, &p.Status, &p.Slots, &p.BlockPrices,
		&p.AnnualDiscount, &p.ManualProvisioning, &p.MaxOutputTokens, &p.UpdatedAt,
		&p.FundingGoal, &deadline, &p.ConfigStatus, &p.StatusReason, &changed, &p.MaxPledgeSeats)
	if err != nil {
		return nil, err
	}
	p.UpdatedAt = p.UpdatedAt.UTC()
	p.FundingDeadline, p.StatusChangedAt = fromNull(deadline), fromNull(changed)
	return &p, nil
}

func (t *tx) UpsertPool(p *accounts.Pool) error {
	prices := p.BlockPrices
	if prices == nil {
		prices = map[accounts.Block]string{} // nil would be NULL
	}
	// ON CONFLICT (id) covers only its arbiter: when two nodes insert the
	// same new pool at once, the second can still fail on the slug's unique
	// index. By then the first has committed, so once more takes the update
	// path; a slug that another pool holds fails again, as it should.
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		err = t.execOne(`INSERT INTO pools (`+poolColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
		ON CONFLICT (id) DO UPDATE SET slug = excluded.slug, model_id = excluded.model_id,
			model_name = excluded.model_name, description = excluded.description, status = excluded.status,
			slots = excluded.slots, block_prices = excluded.block_prices, annual_discount = excluded.annual_discount,
			manual_provisioning = excluded.manual_provisioning, max_output_tokens = excluded.max_output_tokens,
			updated_at = excluded.updated_at, funding_goal = excluded.funding_goal,
			funding_deadline = excluded.funding_deadline, config_status = excluded.config_status,
			status_reason = excluded.status_reason, status_changed_at = excluded.status_changed_at,
			max_pledge_seats = excluded.max_pledge_seats`,
			p.ID, p.Slug, p.ModelID, p.ModelName, p.Description, p.Status, p.Slots, prices,
			p.AnnualDiscount, p.ManualProvisioning, p.MaxOutputTokens, ts(p.UpdatedAt),
			p.FundingGoal, nullTS(p.FundingDeadline), p.ConfigStatus, p.StatusReason, nullTS(p.StatusChangedAt), p.MaxPledgeSeats)
		if !errors.Is(mapErr(err), accounts.ErrConflict) {
			break
		}
	}
	return wrap(err, "upsert pool %s", p.ID)
}

func (t *tx) GetPool(id string) (*accounts.Pool, error) {
	p, err := scanPool(t.db.QueryRow(t.ctx, `SELECT `+poolColumns+` FROM pools WHERE id = $1`, id))
	return p, wrap(err, "get pool %s", id)
}

func (t *tx) GetPoolBySlug(slug string) (*accounts.Pool, error) {
	p, err := scanPool(t.db.QueryRow(t.ctx, `SELECT `+poolColumns+` FROM pools WHERE slug = $1`, slug))
	return p, wrap(err, "get pool %q", slug)
}

// ListPools lists pools in the order they were first upserted: a pool has no
// creation time of its own.
func (t *tx) ListPools() ([]*accounts.Pool, error) {
	pools, err := queryAll(t, scanPool, `SELECT `+poolColumns+` FROM pools ORDER BY seq`)
	return pools, wrap(err, "list pools")
}
