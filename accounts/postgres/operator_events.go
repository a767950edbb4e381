package postgres

// The outbox of operator events (accounts.OperatorEventTx), table
// operator_events (migration 0010).

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts"
)

const opEventColumns = `id, type, created_at, data, status, attempts, next_attempt_at, finished_at, last_error`

func scanOpEvent(row pgx.Row) (*accounts.OperatorEvent, error) {
	var (
		e        accounts.OperatorEvent
		data     []byte
		finished *time.Time
	)
	err := row.Scan(&e.ID, &e.Type, &e.CreatedAt, &data, &e.Status, &e.Attempts, &e.NextAttemptAt, &finished, &e.LastError)
	if err != nil {
		return nil, err
	}
	e.Data = data
	e.CreatedAt, e.NextAttemptAt, e.FinishedAt = e.CreatedAt.UTC(), e.NextAttemptAt.UTC(), fromNull(finished)
	return &e, nil
}

func opEventArgs(e *accounts.OperatorEvent) []any {
	data := string(e.Data)
	if data == "" {
		data = "{}"
	}
	return []any{e.ID, e.Type, ts(e.CreatedAt), data, e.Status, e.Attempts, ts(e.NextAttemptAt), nullTS(e.FinishedAt), e.LastError}
}

func (t *tx) CreateOperatorEvent(e *accounts.OperatorEvent) error {
	err := t.execOne(`INSERT INTO operator_events (`+opEventColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		opEventArgs(e)...)
	return wrap(err, "create operator event %s", e.ID)
}

func (t *tx) GetOperatorEvent(id string) (*accounts.OperatorEvent, error) {
	e, err := scanOpEvent(t.db.QueryRow(t.ctx, `SELECT `+opEventColumns+` FROM operator_events WHERE id = $1`, id))
	return e, wrap(err, "get operator event %s", id)
}

func (t *tx) UpdateOperatorEvent(e *accounts.OperatorEvent) error {
	err := t.execOne(`UPDATE operator_events SET type = $2, created_at = $3, data = $4, status = $5, attempts = $6,
		next_attempt_at = $7, finished_at = $8, last_error = $9 WHERE id = $1`, opEventArgs(e)...)
	return wrap(err, "update operator event %s", e.ID)
}

func (t *tx) ListOperatorEventsDue(before time.Time, limit int) ([]*accounts.OperatorEvent, error) {
	if limit <= 0 {
		limit = 1 << 30
	}
	out, err := queryAll(t, scanOpEvent, `SELECT `+opEventColumns+` FROM operator_events
		WHERE status = 'pending' AND next_attempt_at <= $1 ORDER BY next_attempt_at, created_at, id LIMIT $2`, ts(before), limit)
	return out, wrap(err, "list due operator events")
}

func (t *tx) DeleteOperatorEventsBefore(before time.Time) (int, error) {
	var n int64
	err := t.write(func(db dbtx) error {
		tag, err := db.Exec(t.ctx, `DELETE FROM operator_events WHERE status <> 'pending' AND created_at < $1`, ts(before))
		n = tag.RowsAffected()
		return err
	})
	return int(n), wrap(err, "delete operator events")
}
