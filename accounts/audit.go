package accounts

// The operator's audit log (SPEC.md §8): one AuditRecord per operator
// action, kept in the store. The record is written in the transaction of
// the action's effect: the operator service (accounts/operator) puts the
// record in the action's context (WithAudit), and the Service methods that
// operators call write it inside their transaction (auditTx). A context
// carries it so that those methods keep one signature for buyers, the admin
// API and operators alike; without a record in the context they write none.

import (
	"context"
	"time"
)

// AuditRecord is one operator action.
type AuditRecord struct {
	ID     string
	At     time.Time
	Actor  string // the operator's e-mail, or AuditAdminAPI
	Action string // e.g. "subscription.deliver", "subscription.cancel", "pool.status", "key.revoke"
	Target string // the subscription or pool id
	Detail string // a short text for people
}

// AuditAdminAPI is the actor of an action taken through Caddy's admin API.
const AuditAdminAPI = "admin API"

// AuditTx is the audit log inside a store transaction. ID is unique.
type AuditTx interface {
	CreateAuditRecord(r *AuditRecord) error
	// ListAuditRecords lists the records newest first (by At, then ID,
	// both descending): only those before (beforeAt, beforeID) when
	// beforeAt is not zero, at most limit.
	ListAuditRecords(beforeAt time.Time, beforeID string, limit int) ([]*AuditRecord, error)
}

type auditKey struct{}

// WithAudit returns ctx carrying r: the Service method called with it
// writes r (its ID and At filled) in the transaction of its effect.
func WithAudit(ctx context.Context, r *AuditRecord) context.Context {
	return context.WithValue(ctx, auditKey{}, r)
}

// auditTx writes the audit record ctx carries, if any. Called at the start
// of a transaction's function, it is rolled back with the effect on error,
// and written again when the store retries the function.
func (s *Service) auditTx(ctx context.Context, tx Tx) error {
	r, _ := ctx.Value(auditKey{}).(*AuditRecord)
	if r == nil {
		return nil
	}
	rec := *r
	if rec.ID == "" {
		rec.ID = newID()
	}
	if rec.At.IsZero() {
		rec.At = s.clock()
	}
	return tx.CreateAuditRecord(&rec)
}
