package accounts

// Charge intents and settlement: no charge without a record.
//
// Before the processor is asked to charge a new subscription or a past-due
// retry, a ChargeIntent (status pending, with the idempotency key the
// processor will see) is committed; a subscribe's is committed with its
// reservation (subscribe.go) and has the subscription's id. The transaction
// that records the charge (activates the reservation, marks the retried
// charge paid) marks the intent done in the same commit, and refuses when
// the intent is no longer pending: then a settler owns it and the caller
// refunds. A node that dies between the charge and that commit leaves the
// intent pending.
//
// Settlement runs with every lifecycle pass (at start and then every
// lifecycle_interval, on every node). It takes the intents pending (or
// settling, for a settler that died) for longer than settleGrace, and for
// each one:
//
//  1. claims it in a transaction (pending → settling, updated now), so no two
//     nodes settle one intent at once; a subscribe intent whose subscription
//     is past its reservation is marked done right there; one whose payment
//     waits for the customer (3-D Secure) is left pending for incomplete.go,
//     which ends it;
//  2. asks the processor whether the idempotency key was charged
//     (Processor.FindCharge). Unreachable: the intent stays settling and is
//     taken again after settleGrace;
//  3. not charged: marks it void; charged: refunds it (RefundKey of the
//     intent's key, the same one the caller's own refund uses, so it is
//     refunded at most once) and marks it refunded; a subscribe's
//     reservation is deleted in the same transaction, its seats free again.
//
// Renewals need no intent: their pending Charge record, created before the
// processor call, is one already (lifecycle.go reclaims it after
// claimTimeout with the same idempotency key). Only when its subscription can
// no longer renew that period (canceled, cancellation scheduled, past due,
// changed by the operator), nothing would ever reclaim it: settlement then
// turns the claim into a charge intent (kind renewal, already settling) in
// the transaction that marks the Charge record void, and settles that intent
// like any other (refunded if the processor charged it).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/timeblock/timeblock/accounts/billing"
	"go.uber.org/zap"
)

// Charge intent kinds.
const (
	IntentSubscribe = "subscribe"
	IntentRetry     = "retry"
	IntentRenewal   = "renewal" // made by settlement for an abandoned renewal claim
	// IntentPledge (funding.go) is a pledge charged at activation.
)

// Charge intent statuses.
const (
	IntentPending  = "pending"  // written before the processor call
	IntentDone     = "done"     // the charge is recorded (subscription or retried charge)
	IntentSettling = "settling" // claimed by a settler or by the caller's refund
	IntentRefunded = "refunded" // charged, nothing recorded: refunded
	IntentVoid     = "void"     // nothing was charged (declined, or the processor never saw it)
)

// settleGrace is how long an intent may stay pending before settlement takes
// it: longer than any processor call can take (the request's own deadline,
// and the 30 s of a refund), so that settlement never races a caller that is
// still waiting for the processor. Even then the race is safe: the caller's
// recording transaction refuses an intent that is no longer pending, and the
// caller refunds.
const settleGrace = 15 * time.Minute

// SettleGraceEnv overrides settleGrace (a Go duration) for tests that kill
// nodes and cannot wait a quarter of an hour. Not for production.
const SettleGraceEnv = "TIMEBLOCK_TEST_SETTLE_GRACE"

// errIntentTaken is what a recording transaction returns when its intent was
// claimed by a settler: nothing is recorded and the caller refunds.
var errIntentTaken = errors.New("charge intent taken over by settlement")

// settleGraceNow returns settleGrace, or the test override.
func settleGraceNow() time.Duration {
	if v := os.Getenv(SettleGraceEnv); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			return d
		}
	}
	return settleGrace
}

// writeIntent commits a new pending intent before the processor is called.
func (s *Service) writeIntent(ctx context.Context, in *ChargeIntent) error {
	now := s.clock()
	in.ID, in.Status, in.CreatedAt, in.UpdatedAt = newID(), IntentPending, now, now
	return s.store.Update(ctx, func(tx Tx) error { return tx.CreateChargeIntent(in) })
}

// markIntentDoneTx marks the intent done inside the transaction that records
// its charge, or refuses with errIntentTaken when it is no longer pending.
func markIntentDoneTx(tx Tx, id, ref string, now time.Time) error {
	in, err := tx.GetChargeIntent(id)
	if err != nil {
		return err
	}
	if in.Status != IntentPending {
		return fmt.Errorf("intent %s is %s: %w", id, in.Status, errIntentTaken)
	}
	in.Status, in.ProcessorRef, in.UpdatedAt = IntentDone, ref, now
	return tx.UpdateChargeIntent(in)
}

// finishIntent moves an intent to a final status (void, refunded) unless it
// is done already. Failures are logged: settlement finishes it later.
func (s *Service) finishIntent(ctx context.Context, id, status, ref string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := s.store.Update(ctx, func(tx Tx) error {
		in, err := tx.GetChargeIntent(id)
		if err != nil {
			return err
		}
		if in.Status == IntentDone || in.Status == status {
			return nil
		}
		in.Status, in.UpdatedAt = status, s.clock()
		if ref != "" {
			in.ProcessorRef = ref
		}
		return tx.UpdateChargeIntent(in)
	})
	if err != nil {
		s.logger.Warn("charge intent left open for settlement", zap.String("intent_id", id),
			zap.String("status", status), zap.Error(err))
	}
}

// refundIntent returns the charge of an intent whose recording failed: it
// claims the intent (unless its charge was recorded after all: then it
// reports done and refunds nothing), refunds, and marks it refunded. When
// any step fails the intent stays open and settlement finishes the job.
func (s *Service) refundIntent(ctx context.Context, id, idem, ref, why string) (done bool) {
	// The request context may be what failed; the refund must still go out.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := s.store.Update(ctx, func(tx Tx) error {
		done = false
		in, err := tx.GetChargeIntent(id)
		if err != nil {
			return err
		}
		switch in.Status {
		case IntentDone:
			done = true
			return nil
		case IntentPending:
			in.Status, in.UpdatedAt = IntentSettling, s.clock()
			return tx.UpdateChargeIntent(in)
		}
		return nil // settling (a settler refunds with the same key) or finished
	})
	if err != nil {
		s.logger.Error("charge intent not claimed for refund; settlement will refund it",
			zap.String("intent_id", id), zap.String("charge_ref", ref), zap.Error(err))
		return false
	}
	if done {
		return true
	}
	if s.refundCharge(ctx, ref, idem, why) == nil {
		s.finishIntent(ctx, id, IntentRefunded, ref)
	}
	return false
}

// refundCharge returns the charge ref, made under chargeKey, in full: the
// one path every refund takes. Its idempotency key is RefundKey(chargeKey)
// whichever path refunds, so a charge is refunded at most once; it gets 30
// seconds of its own, as the caller's context may be what failed. A failure
// is logged loudly and returned: while the charge's intent is open,
// settlement tries again; otherwise the operator must refund by hand.
func (s *Service) refundCharge(ctx context.Context, ref, chargeKey, why string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := s.processor.Refund(rctx, ref, billing.RefundKey(chargeKey)); err != nil {
		s.logger.Error("REFUND FAILED: settlement retries it while its intent is open; refund by hand if it keeps failing",
			zap.String("charge_ref", ref), zap.String("reason", why), zap.Error(err))
		return err
	}
	s.logger.Warn("charge refunded", zap.String("charge_ref", ref), zap.String("reason", why))
	s.notifyRefund(ctx, ref, chargeKey, why) // operator notices (operator_notices.go)
	return nil
}

// chargeRecorded reports whether ref is a succeeded charge of the
// subscription's records.
func (s *Service) chargeRecorded(ctx context.Context, subID, ref string) (bool, error) {
	recorded := false
	err := s.store.View(ctx, func(tx Tx) error {
		recorded = false
		charges, err := tx.ListCharges(subID)
		if err != nil {
			return err
		}
		for _, c := range charges {
			if c.ProcessorRef == ref && c.Status == ChargeSucceeded {
				recorded = true
			}
		}
		return nil
	})
	return recorded, err
}

// SettlementReport counts what one settlement pass did.
type SettlementReport struct {
	Done     int // the charge was recorded after all
	Refunded int // charged without a record: refunded
	Void     int // nothing had been charged
	Left     int // processor or store unreachable: taken again next time
}

// Acted reports whether the pass settled anything.
func (r SettlementReport) Acted() bool { return r.Done+r.Refunded+r.Void+r.Left > 0 }

// SettleIntents settles the charge intents left open for longer than the
// settlement grace (see the top of this file). It is safe to run on several
// nodes at once.
func (s *Service) SettleIntents(ctx context.Context) (SettlementReport, error) {
	var rep SettlementReport
	now := s.clock()
	grace := settleGraceNow()
	var (
		open    []*ChargeIntent
		claims  []*Charge
		claimed = now.Add(-max(claimTimeout, grace))
	)
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		if claims, err = tx.ListPendingCharges(claimed); err != nil {
			return err
		}
		open, err = tx.ListOpenChargeIntents(now.Add(-grace))
		return err
	})
	if err != nil {
		return rep, fmt.Errorf("settlement: listing open charge intents: %w", err)
	}
	var errs []error
	for _, c := range claims {
		outcome, err := s.settleAbandonedRenewal(ctx, c.ID, c.SubscriptionID, claimed)
		switch {
		case err != nil:
			rep.Left++
			errs = append(errs, fmt.Errorf("renewal claim %s: %w", c.ID, err))
		case outcome == IntentRefunded:
			rep.Refunded++
		case outcome == IntentVoid:
			rep.Void++
		}
	}
	for _, in := range open {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		outcome, err := s.settleIntent(ctx, in.ID, grace)
		switch {
		case err != nil:
			rep.Left++
			errs = append(errs, fmt.Errorf("intent %s: %w", in.ID, err))
		case outcome == IntentDone:
			rep.Done++
		case outcome == IntentRefunded:
			rep.Refunded++
		case outcome == IntentVoid:
			rep.Void++
		}
	}
	return rep, errors.Join(errs...)
}

// settleIntent settles one intent and returns its final status ("" when
// another node holds it).
func (s *Service) settleIntent(ctx context.Context, id string, grace time.Duration) (string, error) {
	// 1. Claim.
	var (
		in      *ChargeIntent
		outcome string
	)
	err := s.store.Update(ctx, func(tx Tx) error {
		in, outcome = nil, ""
		cur, err := tx.GetChargeIntent(id)
		if err != nil {
			return err
		}
		now := s.clock()
		switch cur.Status {
		case IntentPending:
		case IntentSettling:
			if now.Sub(cur.UpdatedAt) < grace {
				return nil // another settler holds it
			}
		default:
			return nil // finished meanwhile
		}
		in = cur
		if cur.Kind == IntentPledge {
			sub, err := tx.GetSubscription(cur.SubscriptionID)
			if err == nil && sub.Status == SubPledged {
				in = nil
				return nil // the funding pass finishes it with its key (funding.go)
			} else if err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
		}
		if cur.Kind == IntentSubscribe {
			sub, err := tx.GetSubscription(cur.SubscriptionID)
			if err == nil && sub.Status == SubIncomplete && cur.ProcessorRef != "" {
				in = nil
				return nil // its payment waits for the customer: incomplete.go ends it
			} else if err == nil && sub.Status == SubIncomplete {
				// A reservation whose charge has no known outcome: settled
				// below, and its seats released with the outcome.
			} else if err == nil {
				cur.Status, cur.UpdatedAt, outcome = IntentDone, now, IntentDone
				return tx.UpdateChargeIntent(cur)
			} else if !errors.Is(err, ErrNotFound) {
				return err
			}
		}
		cur.Status, cur.UpdatedAt = IntentSettling, now
		return tx.UpdateChargeIntent(cur)
	})
	if err != nil {
		return "", fmt.Errorf("claiming: %w", err)
	}
	if in == nil {
		return "", nil
	}
	if outcome == IntentDone {
		s.logger.Info("charge intent settled", zap.String("intent_id", id), zap.String("kind", in.Kind),
			zap.String("user_id", in.UserID), zap.String("subscription_id", in.SubscriptionID),
			zap.String("outcome", IntentDone))
		return IntentDone, nil
	}

	return s.resolveIntent(ctx, in)
}

// resolveIntent settles an intent this node has claimed (settling): asks the
// processor, refunds what it charged, and records the outcome.
func (s *Service) resolveIntent(ctx context.Context, in *ChargeIntent) (string, error) {
	id := in.ID
	// 2. Ask the processor.
	ref, found, err := s.processor.FindCharge(ctx, in.IdempotencyKey)
	if err != nil {
		return "", fmt.Errorf("asking the processor: %w", err)
	}
	final := IntentVoid
	if found {
		recorded, err := s.chargeRecorded(ctx, in.SubscriptionID, ref)
		if err != nil {
			return "", fmt.Errorf("reading the charges of %s: %w", in.SubscriptionID, err)
		}
		if recorded {
			// Recorded by another path (the processor's event) after
			// all: kept, not refunded.
			final = IntentDone
		} else {
			// 3. Refund.
			if err := s.refundCharge(ctx, ref, in.IdempotencyKey, "settlement: charged without a record"); err != nil {
				return "", fmt.Errorf("refunding %s: %w", ref, err)
			}
			final = IntentRefunded
		}
	}
	err = s.store.Update(ctx, func(tx Tx) error {
		cur, err := tx.GetChargeIntent(id)
		if err != nil {
			return err
		}
		if cur.Status != IntentSettling {
			return nil
		}
		cur.Status, cur.ProcessorRef, cur.UpdatedAt = final, ref, s.clock()
		if err := tx.UpdateChargeIntent(cur); err != nil {
			return err
		}
		if cur.Kind == IntentSubscribe && final != IntentDone {
			return deleteReservationTx(tx, cur.SubscriptionID)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("recording the settlement: %w", err)
	}
	s.logger.Info("charge intent settled", zap.String("intent_id", id), zap.String("kind", in.Kind),
		zap.String("user_id", in.UserID), zap.String("subscription_id", in.SubscriptionID),
		zap.String("outcome", final), zap.String("charge_ref", ref), zap.String("amount", in.Amount))
	return final, nil
}

// settleAbandonedRenewal settles a renewal claim (a pending Charge) that
// nothing will reclaim because its subscription can no longer renew that
// period: it marks the charge void and writes a settling renewal intent in
// one transaction, then resolves the intent. A claim lifecycle.go will still
// reclaim is left alone.
func (s *Service) settleAbandonedRenewal(ctx context.Context, chargeID, subID string, claimedBefore time.Time) (string, error) {
	var in *ChargeIntent
	err := s.store.Update(ctx, func(tx Tx) error {
		in = nil
		charges, err := tx.ListCharges(subID)
		if err != nil {
			return err
		}
		var c *Charge
		for _, x := range charges {
			if x.ID == chargeID {
				c = x
			}
		}
		if c == nil || c.Status != ChargePending || c.CreatedAt.After(claimedBefore) {
			return nil // recorded or reclaimed meanwhile
		}
		sub, err := tx.GetSubscription(subID)
		if err != nil {
			return err
		}
		if sub.Status == SubActive && !sub.CancelAtPeriodEnd && sub.CurrentPeriodEnd.Equal(c.PeriodStart) {
			return nil // the lifecycle reclaims it with the same idempotency key
		}
		now := s.clock()
		c.Status = ChargeVoid
		if err := tx.UpdateCharge(c); err != nil {
			return err
		}
		in = &ChargeIntent{
			ID: newID(), UserID: c.UserID, SubscriptionID: subID, ChargeID: c.ID, Kind: IntentRenewal,
			Amount: c.Amount, IdempotencyKey: billing.RenewalKey(subID, c.PeriodStart),
			Status: IntentSettling, CreatedAt: now, UpdatedAt: now,
		}
		return tx.CreateChargeIntent(in)
	})
	if err != nil {
		return "", fmt.Errorf("claiming: %w", err)
	}
	if in == nil {
		return "", nil
	}
	return s.resolveIntent(ctx, in)
}
