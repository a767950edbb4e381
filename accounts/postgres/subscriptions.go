package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts"
)

// subscriptionColumns lists a subscription's columns, then its seats as two
// parallel arrays, ordered by hour and slot index.
const subscriptionColumns = `s.id, s.user_id, s.pool_id, s.status, s.blocks, s.quantity, s.billing_cycle,
	s.monthly_price, s.period_amount, s.cancel_at_period_end, s.current_period_start, s.current_period_end, s.past_due_since,
	s.terms_version, s.ack_via, s.created_at, s.updated_at,
	ARRAY(SELECT hour FROM seats WHERE subscription_id = s.id ORDER BY hour, slot_index),
	ARRAY(SELECT slot_index FROM seats WHERE subscription_id = s.id ORDER BY hour, slot_index)`

func scanSubscription(row pgx.Row) (*accounts.Subscription, error) {
	var s accounts.Subscription
	var blocks []string
	var pastDue *time.Time
	var hours, slots []int
	err := row.Scan(&s.ID, &s.UserID, &s.PoolID, &s.Status, &blocks, &s.Quantity, &s.BillingCycle,
		&s.MonthlyPrice, &s.PeriodAmount, &s.CancelAtPeriodEnd, &s.CurrentPeriodStart, &s.CurrentPeriodEnd, &pastDue,
		&s.TermsVersion, &s.AckVia, &s.CreatedAt, &s.UpdatedAt, &hours, &slots)
	if err != nil {
		return nil, err
	}
	s.Blocks = make([]accounts.Block, len(blocks))
	for i, b := range blocks {
		s.Blocks[i] = accounts.Block(b)
	}
	s.Seats = make([]accounts.Seat, len(hours))
	for i := range hours {
		s.Seats[i] = accounts.Seat{Hour: hours[i], SlotIndex: slots[i]}
	}
	s.CurrentPeriodStart, s.CurrentPeriodEnd = s.CurrentPeriodStart.UTC(), s.CurrentPeriodEnd.UTC()
	s.PastDueSince = fromNull(pastDue)
	s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	return &s, nil
}

// subscriptionArgs lists s's columns in table order.
func subscriptionArgs(s *accounts.Subscription) []any {
	blocks := make([]string, len(s.Blocks))
	for i, b := range s.Blocks {
		blocks[i] = string(b)
	}
	return []any{s.ID, s.UserID, s.PoolID, s.Status, blocks, s.Quantity, s.BillingCycle,
		s.MonthlyPrice, s.PeriodAmount, s.CancelAtPeriodEnd, ts(s.CurrentPeriodStart), ts(s.CurrentPeriodEnd), nullTS(s.PastDueSince),
		s.TermsVersion, s.AckVia, ts(s.CreatedAt), ts(s.UpdatedAt)}
}

// insertSeats takes s's seats; the primary key refuses one held by another
// subscription or listed twice.
func insertSeats(ctx context.Context, db dbtx, s *accounts.Subscription) error {
	if len(s.Seats) == 0 {
		return nil
	}
	hours, slots := make([]int, len(s.Seats)), make([]int, len(s.Seats))
	for i, seat := range s.Seats {
		hours[i], slots[i] = seat.Hour, seat.SlotIndex
	}
	_, err := db.Exec(ctx, `INSERT INTO seats (pool_id, hour, slot_index, subscription_id)
		SELECT $1, hour, slot_index, $2 FROM unnest($3::integer[], $4::integer[]) AS t (hour, slot_index)`,
		s.PoolID, s.ID, hours, slots)
	return err
}

func (t *tx) CreateSubscription(s *accounts.Subscription) error {
	err := t.write(func(db dbtx) error {
		_, err := db.Exec(t.ctx, `INSERT INTO subscriptions (id, user_id, pool_id, status, blocks, quantity,
			billing_cycle, monthly_price, period_amount, cancel_at_period_end, current_period_start, current_period_end,
			past_due_since, terms_version, ack_via, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`, subscriptionArgs(s)...)
		if err != nil {
			return err
		}
		return insertSeats(t.ctx, db, s)
	})
	return wrap(err, "create subscription %s", s.ID)
}

func (t *tx) GetSubscription(id string) (*accounts.Subscription, error) {
	s, err := scanSubscription(t.db.QueryRow(t.ctx, `SELECT `+subscriptionColumns+` FROM subscriptions s WHERE s.id = $1`, id))
	return s, wrap(err, "get subscription %s", id)
}

func (t *tx) UpdateSubscription(s *accounts.Subscription) error {
	err := t.write(func(db dbtx) error {
		err := execOne(t.ctx, db, `UPDATE subscriptions SET user_id = $2, pool_id = $3, status = $4, blocks = $5,
			quantity = $6, billing_cycle = $7, monthly_price = $8, period_amount = $9, cancel_at_period_end = $10,
			current_period_start = $11, current_period_end = $12, past_due_since = $13, terms_version = $14,
			ack_via = $15, created_at = $16, updated_at = $17 WHERE id = $1`, subscriptionArgs(s)...)
		if err != nil {
			return err
		}
		if _, err := db.Exec(t.ctx, `DELETE FROM seats WHERE subscription_id = $1`, s.ID); err != nil {
			return err
		}
		return insertSeats(t.ctx, db, s)
	})
	return wrap(err, "update subscription %s", s.ID)
}

func (t *tx) ListSubscriptionsByUser(userID string) ([]*accounts.Subscription, error) {
	subs, err := queryAll(t, scanSubscription,
		`SELECT `+subscriptionColumns+` FROM subscriptions s WHERE s.user_id = $1 ORDER BY s.created_at, s.id`, userID)
	return subs, wrap(err, "list subscriptions of %s", userID)
}

func (t *tx) ListSubscriptionsByPool(poolID, status string) ([]*accounts.Subscription, error) {
	subs, err := queryAll(t, scanSubscription,
		`SELECT `+subscriptionColumns+` FROM subscriptions s WHERE s.pool_id = $1 AND s.status = $2 ORDER BY s.created_at, s.id`, poolID, status)
	return subs, wrap(err, "list %s subscriptions of pool %s", status, poolID)
}

func (t *tx) ListSubscriptionsDue(due, pastDueBefore time.Time) ([]*accounts.Subscription, error) {
	subs, err := queryAll(t, scanSubscription, `SELECT `+subscriptionColumns+` FROM subscriptions s
		WHERE (s.status IN ($1, $2) AND s.current_period_end <= $3) OR (s.status = $2 AND s.past_due_since <= $4)
		ORDER BY s.created_at, s.id`,
		accounts.SubActive, accounts.SubPastDue, ts(due), ts(pastDueBefore))
	return subs, wrap(err, "list subscriptions due")
}

func (t *tx) TakenSeats(poolID string) (map[accounts.Seat]string, error) {
	rows, err := t.db.Query(t.ctx, `SELECT hour, slot_index, subscription_id FROM seats WHERE pool_id = $1`, poolID)
	if err != nil {
		return nil, wrap(err, "taken seats of %s", poolID)
	}
	taken := make(map[accounts.Seat]string)
	var seat accounts.Seat
	var holder string
	_, err = pgx.ForEachRow(rows, []any{&seat.Hour, &seat.SlotIndex, &holder}, func() error {
		taken[seat] = holder
		return nil
	})
	if err != nil {
		return nil, wrap(err, "taken seats of %s", poolID)
	}
	return taken, nil
}

// DeleteSubscription removes the subscription; its seats go with it (ON
// DELETE CASCADE).
func (t *tx) DeleteSubscription(id string) error {
	return wrap(t.execOne(`DELETE FROM subscriptions WHERE id = $1`, id), "delete subscription %s", id)
}
