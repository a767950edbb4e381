package accounts

// Operator actions on subscriptions (SPEC.md §3): delivering a manually
// provisioned key, and marking a payment failed.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Delivery answers POST /timeblock/subscriptions/{id}/deliver.
type Delivery struct {
	Subscription SubscriptionView `json:"subscription"`
	Key          SubscriptionKey  `json:"key"`
	NoticeSent   bool             `json:"noticeSent"` // false when the notice failed (logged); the key is delivered anyway
}

// PaymentFailure answers POST /timeblock/subscriptions/{id}/payment-failed.
type PaymentFailure struct {
	Subscription SubscriptionView `json:"subscription"`
}

func subscriptionNotFound(id string) *Error {
	return NotFound("no subscription %s", id)
}

// DeliverKey moves a pending_key subscription to active, creates its key
// (in the same transaction) and, once committed, sends the user a notice
// that does not contain the key.
func (s *Service) DeliverKey(ctx context.Context, subID string) (*Delivery, error) {
	var (
		sub  *Subscription
		pool *Pool
		user *User
		key  *Key
		full string
	)
	err := s.store.Update(ctx, func(tx Tx) error {
		if err := s.auditTx(ctx, tx); err != nil {
			return err
		}
		var err error
		if sub, pool, err = subscriptionInState(tx, subID, SubPendingKey, "only pending_key subscriptions wait for a key"); err != nil {
			return err
		}
		if user, err = tx.GetUser(sub.UserID); err != nil {
			return err
		}
		sub.Status = SubActive
		sub.UpdatedAt = s.clock()
		if err := tx.UpdateSubscription(sub); err != nil {
			return err
		}
		key, full, err = s.createKeyTx(tx, sub, pledgeLabel(sub, pool))
		return err
	})
	if err != nil {
		return nil, passClientError("deliver key", err)
	}
	s.publishKeyChange(ctx, sub.UserID)
	d := &Delivery{Key: SubscriptionKey{ID: key.ID, APIKey: full, IsActive: key.Active}}
	if err := s.notifier.KeyDelivered(ctx, user, sub, pool); err != nil {
		s.logger.Error("sending the key-delivered notice failed; tell the user by other means",
			zap.String("subscription_id", sub.ID), zap.String("user_id", user.ID), zap.Error(err))
	} else {
		d.NoticeSent = true
	}
	if d.Subscription, err = s.subscriptionView(sub, pool, key); err != nil {
		return nil, err
	}
	s.logger.Info("key delivered", zap.String("subscription_id", sub.ID), zap.String("key_id", key.ID))
	return d, nil
}

// PaymentFailed marks an active subscription's payment failed: past_due,
// key suspended (the gate answers 403 "payment past due"). The charge of
// the current period is marked failed, so that saving a new card retries it.
func (s *Service) PaymentFailed(ctx context.Context, subID string) (*PaymentFailure, error) {
	var (
		sub  *Subscription
		pool *Pool
		key  *Key
	)
	err := s.store.Update(ctx, func(tx Tx) error {
		var err error
		if sub, pool, err = subscriptionInState(tx, subID, SubActive, "only an active subscription can be marked past due"); err != nil {
			return err
		}
		now := s.clock()
		if err := failCurrentChargeTx(tx, sub, now); err != nil {
			return err
		}
		sub.Status = SubPastDue
		sub.PastDueSince = now
		sub.UpdatedAt = now
		if err := tx.UpdateSubscription(sub); err != nil {
			return err
		}
		key, err = keyOfTx(tx, sub.ID)
		return err
	})
	if err != nil {
		return nil, passClientError("mark payment failed", err)
	}
	s.publishKeyChange(ctx, sub.UserID)
	s.logger.Info("payment marked failed: subscription past due", zap.String("subscription_id", sub.ID))
	v, err := s.subscriptionView(sub, pool, key)
	if err != nil {
		return nil, err
	}
	return &PaymentFailure{Subscription: v}, nil
}

// failCurrentChargeTx marks the charge of sub's current period failed,
// recording one when none exists.
func failCurrentChargeTx(tx Tx, sub *Subscription, now time.Time) error {
	charges, err := tx.ListCharges(sub.ID)
	if err != nil {
		return err
	}
	for _, c := range charges {
		if c.PeriodStart.Equal(sub.CurrentPeriodStart) {
			c.Status = ChargeFailed
			return tx.UpdateCharge(c)
		}
	}
	amount, err := periodAmountTx(tx, sub)
	if err != nil {
		return fmt.Errorf("amount of subscription %s: %w", sub.ID, err)
	}
	return tx.CreateCharge(&Charge{
		ID:             newID(),
		UserID:         sub.UserID,
		SubscriptionID: sub.ID,
		PeriodStart:    sub.CurrentPeriodStart,
		Amount:         amount,
		Status:         ChargeFailed,
		CreatedAt:      now,
	})
}

// subscriptionInState loads an operator's target subscription and its pool,
// answering 404 when it does not exist and 409 (with why) when it is not in
// the state the operation needs.
func subscriptionInState(tx Tx, subID, want, why string) (*Subscription, *Pool, error) {
	sub, err := tx.GetSubscription(subID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, subscriptionNotFound(subID)
	}
	if err != nil {
		return nil, nil, err
	}
	if sub.Status != want {
		return nil, nil, Conflict("subscription %s is %s; %s", sub.ID, sub.Status, why)
	}
	pool, err := tx.GetPool(sub.PoolID)
	if err != nil {
		return nil, nil, err
	}
	return sub, pool, nil
}

// CancelNow ends a subscription at once at the operator's request: canceled,
// seats freed, key revoked, in one transaction; nothing is refunded (a
// refund is a separate action). A pledge is withdrawn (nothing was
// charged); an unpaid purchase must be canceled by its buyer or left to
// expire, as its payment may still be in flight at the processor.
func (s *Service) CancelNow(ctx context.Context, subID string) (*CancelResult, error) {
	var (
		sub       *Subscription
		fell      *fallBack
		withdrawn bool
	)
	err := s.store.Update(ctx, func(tx Tx) error {
		fell, withdrawn = nil, false
		if err := s.auditTx(ctx, tx); err != nil { // audit.go
			return err
		}
		var err error
		sub, err = tx.GetSubscription(subID)
		if errors.Is(err, ErrNotFound) {
			return subscriptionNotFound(subID)
		}
		if err != nil {
			return err
		}
		now := s.clock()
		switch sub.Status {
		case SubActive, SubPendingKey, SubPastDue:
			return cancelTx(tx, sub, now)
		case SubPledged:
			withdrawn = true
			fell, err = withdrawPledgeTx(tx, sub, now)
			return err
		case SubIncomplete:
			return Conflict("subscription %s is an unpaid purchase whose payment may still be in flight; its buyer cancels it, or it is released by itself when its hold ends", sub.ID)
		}
		return Conflict("subscription %s is %s: nothing is left to cancel", sub.ID, sub.Status)
	})
	if err != nil {
		return nil, passClientError("cancel now", err)
	}
	s.fellBack(ctx, fell)
	s.publishKeyChange(ctx, sub.UserID)
	s.logger.Info("subscription canceled by the operator", zap.String("subscription_id", sub.ID))
	return &CancelResult{Canceled: true, SubscriptionID: sub.ID, CurrentPeriodEnd: s.clock(), Withdrawn: withdrawn}, nil
}
