package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/timeblock/timeblock/accounts"
)

// dbtx is what statements run on: *pgxpool.Pool, pgx.Tx, or a savepoint
// (which is a pgx.Tx too).
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

var (
	_ dbtx = (*pgxpool.Pool)(nil)
	_ dbtx = pgx.Tx(nil)
)

// tx is the accounts.Tx of one PostgreSQL transaction. accounts.Tx methods
// take no context, so tx carries the one Update or View was called with.
type tx struct {
	ctx context.Context
	db  dbtx
}

// write runs the statements of one write method in a savepoint. PostgreSQL
// aborts the whole transaction on any error; rolling back to the savepoint
// instead undoes only this method, so fn can go on after ErrConflict.
func (t *tx) write(fn func(db dbtx) error) error {
	return pgx.BeginFunc(t.ctx, t.db, func(sp pgx.Tx) error { return fn(sp) })
}

// execOne runs one write statement in a savepoint and reports ErrNotFound
// when it touched no row.
func (t *tx) execOne(sql string, args ...any) error {
	return t.write(func(db dbtx) error { return execOne(t.ctx, db, sql, args...) })
}

func execOne(ctx context.Context, db dbtx, sql string, args ...any) error {
	tag, err := db.Exec(ctx, sql, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return pgx.ErrNoRows
	}
	return nil
}

// queryAll runs a query and scans every row with scan.
func queryAll[T any](t *tx, scan func(pgx.Row) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := t.db.Query(t.ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
}

// wrap gives err context after mapping it to the store's sentinels.
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), mapErr(err))
}

// ts is a time as PostgreSQL keeps it, in UTC with microseconds; the
// embedded store cuts times the same way.
func ts(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// nullTS is ts with the zero time stored as NULL: "never" or "not set".
func nullTS(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := ts(t)
	return &u
}

// fromNull reads a nullable timestamptz back; NULL is the zero time.
func fromNull(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// nonNil keeps pgx from sending a nil slice as NULL into a NOT NULL column.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Interface guards.
var (
	_ accounts.Tx           = (*tx)(nil)
	_ accounts.TestLedgerTx = (*tx)(nil)
)
