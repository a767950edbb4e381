package postgres

// The operator's audit log (accounts.AuditTx), table operator_audit
// (migration 0012).

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts"
)

const auditColumns = `id, at, actor, action, target, detail`

func scanAudit(row pgx.Row) (*accounts.AuditRecord, error) {
	var r accounts.AuditRecord
	if err := row.Scan(&r.ID, &r.At, &r.Actor, &r.Action, &r.Target, &r.Detail); err != nil {
		return nil, err
	}
	r.At = r.At.UTC()
	return &r, nil
}

func (t *tx) CreateAuditRecord(r *accounts.AuditRecord) error {
	err := t.execOne(`INSERT INTO operator_audit (`+auditColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		r.ID, ts(r.At), r.Actor, r.Action, r.Target, r.Detail)
	return wrap(err, "create audit record %s", r.ID)
}

func (t *tx) ListAuditRecords(beforeAt time.Time, beforeID string, limit int) ([]*accounts.AuditRecord, error) {
	if limit <= 0 {
		limit = 1 << 30
	}
	var (
		out []*accounts.AuditRecord
		err error
	)
	if beforeAt.IsZero() {
		out, err = queryAll(t, scanAudit, `SELECT `+auditColumns+` FROM operator_audit
			ORDER BY at DESC, id DESC LIMIT $1`, limit)
	} else {
		out, err = queryAll(t, scanAudit, `SELECT `+auditColumns+` FROM operator_audit
			WHERE (at, id) < ($1, $2) ORDER BY at DESC, id DESC LIMIT $3`, ts(beforeAt), beforeID, limit)
	}
	return out, wrap(err, "list audit records")
}
