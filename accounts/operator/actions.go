package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/ledger"
)

// Audit actions.
const (
	ActionDeliver    = "subscription.deliver"
	ActionCancel     = "subscription.cancel"
	ActionPoolStatus = "pool.status"
	ActionRefund     = "charge.refund"
	ActionKeyRevoke  = "key.revoke"
)

// audited returns ctx carrying the audit record of an action by actor (an
// operator's e-mail, or accounts.AuditAdminAPI): accounts.Service writes it
// in the transaction of the action's effect, so the log has an action
// exactly when it took effect.
func audited(ctx context.Context, actor, action, target, detail string) context.Context {
	return accounts.WithAudit(ctx, &accounts.AuditRecord{Actor: actor, Action: action, Target: target, Detail: detail})
}

// Deliver delivers the key of a pending_key subscription (pending_key →
// active, key created, the buyer told): accounts.Service.DeliverKey. The
// answer carries the full key; the operator's API leaves it out.
func (s *Service) Deliver(ctx context.Context, actor, subID string) (*accounts.Delivery, error) {
	return s.svc.DeliverKey(audited(ctx, actor, ActionDeliver, subID, "key delivered"), subID)
}

// Cancel cancels a subscription: at the end of its period (scheduled; the
// key works until then: accounts.Service.SetCancelAtPeriodEnd) or now
// (canceled, seats freed, key revoked: accounts.Service.CancelNow). Neither
// refunds anything; a pledge is withdrawn at once either way.
func (s *Service) Cancel(ctx context.Context, actor, subID string, atPeriodEnd bool) (*accounts.CancelResult, error) {
	if !atPeriodEnd {
		return s.svc.CancelNow(audited(ctx, actor, ActionCancel, subID, "canceled now"), subID)
	}
	var userID string
	err := s.store.View(ctx, func(tx accounts.Tx) error {
		sub, err := tx.GetSubscription(subID)
		if err == nil {
			userID = sub.UserID
		}
		return err
	})
	if errors.Is(err, accounts.ErrNotFound) {
		return nil, accounts.NotFound("no subscription %s", subID)
	}
	if err != nil {
		return nil, fmt.Errorf("cancel %s: %w", subID, err)
	}
	return s.svc.SetCancelAtPeriodEnd(audited(ctx, actor, ActionCancel, subID, "set to cancel at period end"), userID, subID, true)
}

// KeyRevoke answers a key's revocation.
type KeyRevoke struct {
	KeyID          string `json:"keyId"`
	SubscriptionID string `json:"subscriptionId"`
	IsActive       bool   `json:"isActive"` // always false
	// Changed is false when the key was already revoked (nothing done,
	// nothing audited).
	Changed bool `json:"changed"`
}

// RevokeKey deactivates the consumption key id, whoever's it is: the
// buyer's own revocation (accounts.Service.UpdateKey with isActive false),
// which tells the gates at once. The audit target is the key's id.
func (s *Service) RevokeKey(ctx context.Context, actor, keyID string) (*KeyRevoke, error) {
	var key *accounts.Key
	err := s.store.View(ctx, func(tx accounts.Tx) error {
		var err error
		key, err = tx.GetKey(keyID)
		return err
	})
	if errors.Is(err, accounts.ErrNotFound) {
		return nil, accounts.NotFound("no key %s", keyID)
	}
	if err != nil {
		return nil, fmt.Errorf("revoke key %s: %w", keyID, err)
	}
	res := &KeyRevoke{KeyID: key.ID, SubscriptionID: key.SubscriptionID}
	if !key.Active {
		return res, nil
	}
	inactive := false
	if _, err := s.svc.UpdateKey(audited(ctx, actor, ActionKeyRevoke, key.ID, "key revoked"), key.UserID, key.ID, nil, &inactive); err != nil {
		return nil, err
	}
	res.Changed = true
	return res, nil
}

// SetPoolStatus moves a pool (by slug or id): accounts.Service.SetPoolStatus.
// The audit target is the pool's id.
func (s *Service) SetPoolStatus(ctx context.Context, actor, idOrSlug, status string) (*accounts.PoolStatusResult, error) {
	id := s.svc.PoolID(ctx, idOrSlug)
	return s.svc.SetPoolStatus(audited(ctx, actor, ActionPoolStatus, id, "status set to "+status), idOrSlug, status)
}

// Refund refunds amount ("" for what remains) of the ledger charge id
// through the processor: accounts.Service.RefundLedgerCharge, with
// requestKey the operator's Idempotency-Key. The charge's subscription is
// not changed (Cancel ends it). The audit target is the charge's id.
func (s *Service) Refund(ctx context.Context, actor, chargeID, amount, requestKey string) (*Charge, error) {
	detail := "refunded the rest of the charge"
	if amount != "" {
		detail = "refunded " + amount + " USD"
	}
	lc, err := s.svc.RefundLedgerCharge(audited(ctx, actor, ActionRefund, chargeID, detail), chargeID, amount, requestKey)
	if err != nil {
		return nil, err
	}
	c := &Charge{Charge: ledger.View(lc), UserID: lc.UserID, ProcessorRef: lc.ProcessorRef}
	err = s.store.View(ctx, func(tx accounts.Tx) error {
		u, err := tx.GetUser(lc.UserID)
		if err == nil {
			c.Email = u.Email
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("refund %s: refunded; reading its buyer: %w", chargeID, err)
	}
	return c, nil
}

// AuditEntry is one operator action (SPEC.md §8).
type AuditEntry struct {
	ID     string    `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Detail string    `json:"detail"`
}

// AuditPage is one page of the audit log, newest first; NextCursor is ""
// on the last one.
type AuditPage struct {
	Entries    []AuditEntry
	NextCursor string
}

// Audit lists the operator actions newest first: at most limit (0: the
// default), those after the cursor a previous page answered.
func (s *Service) Audit(ctx context.Context, limit int, before string) (*AuditPage, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return nil, err
	}
	after, err := parseCursor(before)
	if err != nil {
		return nil, err
	}
	var recs []*accounts.AuditRecord
	err = s.store.View(ctx, func(tx accounts.Tx) error {
		var err error
		recs, err = tx.ListAuditRecords(after.at, after.id, limit+1)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	page := &AuditPage{Entries: []AuditEntry{}}
	if len(recs) > limit {
		recs = recs[:limit]
		last := recs[limit-1]
		page.NextCursor = cursor{at: last.At, id: last.ID}.String()
	}
	for _, r := range recs {
		page.Entries = append(page.Entries, AuditEntry{ID: r.ID, At: r.At.UTC(),
			Actor: r.Actor, Action: r.Action, Target: r.Target, Detail: r.Detail})
	}
	return page, nil
}
