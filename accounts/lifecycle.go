package accounts

// The subscription lifecycle: at each period end a live subscription renews
// (charge) or, when its cancellation is scheduled, ends (key revoked, seats
// freed); a failed renewal makes it past_due (key suspended); past_due for
// longer than the grace period ends it. Each pass also ends the incomplete
// subscriptions whose hold ran out (incomplete.go).
//
// Exactly once with several nodes. Every node runs the worker on the same
// store. A renewal is claimed before the processor is called, by creating
// the period's Charge record (status pending) in a transaction: the store
// keeps (subscription, period start) unique, so of several nodes exactly one
// creates it and the others see it and skip. The outcome is then recorded in
// a second transaction that re-reads the charge and only moves it out of
// pending once. A node that dies between the two leaves a pending charge;
// after claimTimeout another node reclaims it and calls the processor again
// with the same idempotency key ("renew:<subscription>:<period start>"),
// which the processor answers with the first outcome instead of charging
// again. Cancellations re-read the subscription in their transaction and do
// nothing when another node got there first.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/timeblock/timeblock/accounts/billing"
	"go.uber.org/zap"
)

// claimTimeout is how long a claimed renewal may stay pending before
// another node takes it over (with the same idempotency key).
const claimTimeout = 10 * time.Minute

// LifecycleReport counts what one lifecycle pass did.
type LifecycleReport struct {
	Renewed  int // charged and advanced by one period
	PastDue  int // renewal declined: now past_due
	Canceled int // scheduled cancellations carried out at period end
	Expired  int // past_due beyond the grace period: canceled
	Skipped  int // due but handled by another node, or waiting (past_due in grace)
	Failed   int // errors (logged; retried on the next pass)
	// Incomplete counts incomplete subscriptions whose hold ran out: their
	// payment canceled and they canceled, or activated when it was paid
	// meanwhile (incomplete.go).
	Incomplete int
}

// Acted reports whether the pass changed anything.
func (r LifecycleReport) Acted() bool {
	return r.Renewed+r.PastDue+r.Canceled+r.Expired+r.Failed+r.Incomplete > 0
}

// RunLifecycle makes one pass over the subscriptions that are due. It is
// safe to run concurrently on several nodes sharing one store: each period
// end is handled exactly once. Errors on single subscriptions are logged,
// counted and joined into the returned error; the pass goes on.
func (s *Service) RunLifecycle(ctx context.Context) (LifecycleReport, error) {
	var rep LifecycleReport
	now := s.clock()
	graceLimit := now.Add(-s.gracePeriod)
	var due []*Subscription
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		due, err = tx.ListSubscriptionsDue(now, graceLimit)
		return err
	})
	if err != nil {
		return rep, fmt.Errorf("lifecycle: listing due subscriptions: %w", err)
	}
	var errs []error
	for _, sub := range due {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		outcome, err := s.handleDue(ctx, sub, now, graceLimit)
		if err != nil {
			rep.Failed++
			errs = append(errs, fmt.Errorf("subscription %s: %w", sub.ID, err))
			s.logger.Error("lifecycle", zap.String("subscription_id", sub.ID), zap.Error(err))
			continue
		}
		switch outcome {
		case outcomeRenewed:
			rep.Renewed++
		case outcomePastDue:
			rep.PastDue++
		case outcomeCanceled:
			rep.Canceled++
		case outcomeExpired:
			rep.Expired++
		default:
			rep.Skipped++
		}
	}
	if ctx.Err() == nil {
		n, err := s.ExpireIncomplete(ctx)
		rep.Incomplete = n
		if err != nil {
			rep.Failed++
			errs = append(errs, err)
			s.logger.Error("lifecycle: incomplete subscriptions", zap.Error(err))
		}
	}
	return rep, errors.Join(errs...)
}

type dueOutcome int

const (
	outcomeSkipped dueOutcome = iota
	outcomeRenewed
	outcomePastDue
	outcomeCanceled
	outcomeExpired
)

func (s *Service) handleDue(ctx context.Context, sub *Subscription, now, graceLimit time.Time) (dueOutcome, error) {
	periodOver := !sub.CurrentPeriodEnd.After(now)
	graceOver := sub.Status == SubPastDue && !sub.PastDueSince.IsZero() && !sub.PastDueSince.After(graceLimit)
	switch {
	case sub.Status == SubPastDue && graceOver:
		return s.endSubscription(ctx, sub.ID, outcomeExpired, func(cur *Subscription) bool {
			return cur.Status == SubPastDue && !cur.PastDueSince.IsZero() && !cur.PastDueSince.After(graceLimit)
		})
	case sub.CancelAtPeriodEnd && periodOver && (sub.Status == SubActive || sub.Status == SubPastDue):
		return s.endSubscription(ctx, sub.ID, outcomeCanceled, func(cur *Subscription) bool {
			return cur.CancelAtPeriodEnd && !cur.CurrentPeriodEnd.After(now) && (cur.Status == SubActive || cur.Status == SubPastDue)
		})
	case sub.Status == SubActive && periodOver:
		return s.renew(ctx, sub.ID, now)
	}
	return outcomeSkipped, nil // past_due within its grace period: waiting for a new card
}

// endSubscription cancels a subscription for good: seats freed, key revoked.
// Combined keys keep it as a member, which then contributes nothing. still
// re-checks, inside the transaction, that the subscription is still due.
func (s *Service) endSubscription(ctx context.Context, subID string, outcome dueOutcome, still func(*Subscription) bool) (dueOutcome, error) {
	var (
		ended  bool
		userID string
	)
	err := s.store.Update(ctx, func(tx Tx) error {
		ended = false
		cur, err := tx.GetSubscription(subID)
		if err != nil {
			return err
		}
		if !still(cur) {
			return nil
		}
		if err := cancelTx(tx, cur, s.clock()); err != nil {
			return err
		}
		ended, userID = true, cur.UserID
		return nil
	})
	if err != nil {
		return outcomeSkipped, err
	}
	if !ended {
		return outcomeSkipped, nil
	}
	reason := "scheduled cancellation at period end"
	if outcome == outcomeExpired {
		reason = "past due beyond the grace period"
	}
	s.logger.Info("subscription canceled", zap.String("subscription_id", subID), zap.String("reason", reason))
	s.publishKeyChange(ctx, userID)
	return outcome, nil
}

// cancelTx ends sub inside tx: canceled, seats freed, its key revoked.
func cancelTx(tx Tx, sub *Subscription, now time.Time) error {
	sub.Status = SubCanceled
	sub.Seats = nil
	sub.PastDueSince = time.Time{}
	sub.UpdatedAt = now
	if err := tx.UpdateSubscription(sub); err != nil {
		return err
	}
	k, err := keyOfTx(tx, sub.ID)
	if err != nil || k == nil || !k.Active {
		return err
	}
	k.Active = false
	return tx.UpdateKey(k)
}

// renew charges the next period of an active subscription whose period
// ended: claim, charge, record.
func (s *Service) renew(ctx context.Context, subID string, now time.Time) (dueOutcome, error) {
	// Claim the period.
	var (
		charge   *Charge
		method   *billing.PaymentMethod
		userID   string
		takeover bool
	)
	err := s.store.Update(ctx, func(tx Tx) error {
		charge, method, takeover = nil, nil, false
		cur, err := tx.GetSubscription(subID)
		if err != nil {
			return err
		}
		if cur.Status != SubActive || cur.CancelAtPeriodEnd || cur.CurrentPeriodEnd.After(now) {
			return nil // handled meanwhile
		}
		userID = cur.UserID
		charges, err := tx.ListCharges(cur.ID)
		if err != nil {
			return err
		}
		for _, c := range charges {
			if c.PeriodStart.Equal(cur.CurrentPeriodEnd) {
				if c.Status == ChargePending && now.Sub(c.CreatedAt) >= claimTimeout {
					charge, takeover = c, true // abandoned claim: take it over
				}
				break
			}
		}
		u, err := tx.GetUser(cur.UserID)
		if err != nil {
			return err
		}
		method = u.PaymentMethod
		if charge != nil {
			return nil
		}
		for _, c := range charges {
			if c.PeriodStart.Equal(cur.CurrentPeriodEnd) {
				return nil // another node holds it
			}
		}
		amount, err := periodAmountTx(tx, cur)
		if err != nil {
			return err
		}
		charge = &Charge{
			ID:             newID(),
			UserID:         cur.UserID,
			SubscriptionID: cur.ID,
			PeriodStart:    cur.CurrentPeriodEnd,
			Amount:         amount,
			Status:         ChargePending,
			CreatedAt:      s.clock(),
		}
		if method != nil {
			charge.MethodID = method.ID // the request is fixed here (charge_fixed.go)
		}
		return tx.CreateCharge(charge)
	})
	if errors.Is(err, ErrConflict) {
		return outcomeSkipped, nil // another node claimed it first
	}
	if err != nil {
		return outcomeSkipped, fmt.Errorf("claiming renewal: %w", err)
	}
	if charge == nil {
		return outcomeSkipped, nil
	}

	// Charge: the card of the claim, whatever the user saved since; a
	// takeover asks the processor first what became of the claim's key.
	var ref string
	methodID, askFirst := charge.MethodID, takeover
	if methodID == "" && takeover && method != nil {
		methodID, askFirst = method.ID, true // a claim written before its card was kept
	}
	declined := methodID == ""
	if !declined {
		ref, err = s.chargeFixed(ctx, billing.ChargeRequest{
			UserID:         userID,
			MethodID:       methodID,
			Amount:         charge.Amount,
			IdempotencyKey: billing.RenewalKey(subID, charge.PeriodStart),
			Description:    fmt.Sprintf("Timeblock subscription %s, period from %s", subID, charge.PeriodStart.Format(time.DateOnly)),
		}, charge.CreatedAt, askFirst)
		if errors.Is(err, billing.ErrDeclined) {
			declined, err = true, nil
		}
		if err != nil {
			// Left pending: reclaimed with the same idempotency key later.
			return outcomeSkipped, fmt.Errorf("charging renewal: %w", err)
		}
	}

	// Record.
	recorded, err := s.recordRenewal(ctx, subID, charge.ID, declined, ref)
	if err != nil {
		// Left pending: a later pass reclaims it, and the processor answers
		// the same idempotency key with this outcome.
		return outcomeSkipped, fmt.Errorf("recording renewal: %w", err)
	}
	if !recorded {
		return outcomeSkipped, nil
	}
	s.publishKeyChange(ctx, userID)
	if declined {
		s.logger.Info("renewal declined: subscription past due", zap.String("subscription_id", subID), zap.String("amount", charge.Amount))
		s.notifyCharge(ctx, OpChargeFailed, opKindRenewal, subID, charge.Amount, "") // operator notices (operator_notices.go)
		return outcomePastDue, nil
	}
	s.logger.Info("subscription renewed", zap.String("subscription_id", subID), zap.String("amount", charge.Amount), zap.String("charge_ref", ref))
	s.notifyCharge(ctx, OpChargeSucceeded, opKindRenewal, subID, charge.Amount, "") // operator notices (operator_notices.go)
	return outcomeRenewed, nil
}

// recordRenewal records the outcome of a renewal claim (a pending Charge)
// and, when its subscription still renews that period, the period paid or
// the subscription past due. It reports whether the subscription moved;
// a claim recorded already is left alone (false).
func (s *Service) recordRenewal(ctx context.Context, subID, chargeID string, declined bool, ref string) (bool, error) {
	var recorded bool
	err := s.store.Update(ctx, func(tx Tx) error {
		recorded = false
		cur, err := tx.GetSubscription(subID)
		if err != nil {
			return err
		}
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
		if c == nil || c.Status != ChargePending {
			return nil // recorded by another node that reclaimed it
		}
		now := s.clock()
		if declined {
			c.Status = ChargeFailed
		} else {
			c.Status, c.ProcessorRef = ChargeSucceeded, ref
		}
		if err := tx.UpdateCharge(c); err != nil {
			return err
		}
		if err := recordLedgerTx(tx, c, LedgerRenewal, now); err != nil {
			return err
		}
		if cur.Status != SubActive || !cur.CurrentPeriodEnd.Equal(c.PeriodStart) {
			return nil // changed meanwhile (operator, cancellation): the charge record says what happened
		}
		if declined {
			cur.Status = SubPastDue
			cur.PastDueSince = now
		} else {
			cur.CurrentPeriodStart = cur.CurrentPeriodEnd
			cur.CurrentPeriodEnd = nextPeriodEnd(cur.CurrentPeriodEnd, cur.BillingCycle)
		}
		cur.UpdatedAt = now
		recorded = true
		return tx.UpdateSubscription(cur)
	})
	return recorded, err
}

// RunWorker runs a lifecycle pass, a settlement pass (SettleIntents), a
// funding pass (RunFunding) and an operator-notice pass
// (DeliverOperatorEvents) at once and then every `every` (default one
// minute), or sooner when Kick asks, until ctx is done, logging what each
// pass did.
func (s *Service) RunWorker(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var pruned time.Time // last pruning of billing records (idempotency.go)
	for {
		rep, err := s.RunLifecycle(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.logger.Error("lifecycle pass failed", zap.Error(err), zap.Any("report", rep))
		case rep.Acted():
			s.logger.Info("lifecycle pass", zap.Any("report", rep))
		}
		// Settlement of charge intents left open by a node that died (intents.go).
		srep, err := s.SettleIntents(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.logger.Warn("settlement pass incomplete: the rest is retried next pass", zap.Error(err), zap.Any("report", srep))
		case srep.Acted():
			s.logger.Info("settlement pass", zap.Any("report", srep))
		}
		// Funding pools: goals, deadlines, pledges released or charged (funding.go).
		frep, err := s.RunFunding(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.logger.Warn("funding pass incomplete: the rest is retried next pass", zap.Error(err), zap.Any("report", frep))
		case frep.Acted():
			s.logger.Info("funding pass", zap.Any("report", frep))
		}
		s.runOperatorEventPass(ctx) // operator notices to the webhook (operator_events.go)
		if time.Since(pruned) >= time.Hour {
			if n, err := s.PruneBillingRecords(ctx); err != nil && ctx.Err() == nil {
				s.logger.Warn("pruning billing records failed: retried next pass", zap.Error(err))
			} else if err == nil {
				pruned = time.Now()
				if n > 0 {
					s.logger.Info("billing records pruned", zap.Int("deleted", n))
				}
			}
			if n, err := s.PruneKeyUsage(ctx); err != nil && ctx.Err() == nil {
				s.logger.Warn("pruning key usage failed: retried next hour", zap.Error(err))
			} else if n > 0 {
				s.logger.Info("key usage pruned", zap.Int("hours", n))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
	}
}
