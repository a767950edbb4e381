package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/timeblock/timeblock/accounts"
)

// PostgreSQL error codes the store acts on.
const (
	codeUniqueViolation      = "23505"
	codeForeignKeyViolation  = "23503"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
)

// mapErr turns pgx's and PostgreSQL's errors into the store's sentinels: a
// missing row and a dangling reference are ErrNotFound, a unique violation
// is ErrConflict. Other errors pass through, so that retry still sees
// serialization failures.
func mapErr(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return accounts.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeUniqueViolation:
			return fmt.Errorf("%s: %w", pgErr.ConstraintName, accounts.ErrConflict)
		case codeForeignKeyViolation:
			return fmt.Errorf("%s refers to a missing record: %w", pgErr.ConstraintName, accounts.ErrNotFound)
		}
	}
	return err
}
