package accounts

// Cards: the billing endpoints (save a card, billing status) and the retry
// of past-due charges, which saving a card does at once. The processor
// interface, the built-in test processor and the charge keys live in
// package billing (accounts/billing).
//
// Charges and transactions. A processor call is never made inside a store
// transaction (Update may re-run its function, and a charge is an outside
// effect). Every charge carries an idempotency key derived from the logical
// operation, so repeating a call after a crash or a race charges at most
// once; a record of it is committed before the call (a charge intent, or the
// renewal's pending Charge), and its outcome is recorded afterwards in a
// transaction that first re-reads the state it depends on (the keys are
// built in accounts/billing/chargekeys.go):
//
//   - subscribe: "subscribe:<subscription id>"; the seats are reserved with
//     a charge intent, then the card charged, then the subscription
//     activated (and the intent marked done) (see subscribe.go); settled by
//     any node when the node died in between (intents.go);
//   - renewal: "renew:<subscription id>:<period start>", after the period was
//     claimed by creating its pending Charge record (see lifecycle.go);
//   - past-due retry: "retry:<subscription id>:<charge id>:<payment method
//     id>": the same card is never charged twice for one outstanding charge;
//     a charge intent is written first, as for a subscribe.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/timeblock/timeblock/accounts/billing"
	"go.uber.org/zap"
)

// PaymentMethodView is a saved card on the wire.
type PaymentMethodView struct {
	ID    string `json:"id"`
	Brand string `json:"brand"`
	Last4 string `json:"last4"`
}

func paymentMethodView(pm *billing.PaymentMethod) *PaymentMethodView {
	if pm == nil {
		return nil
	}
	return &PaymentMethodView{ID: pm.ID, Brand: pm.Brand, Last4: pm.Last4}
}

// SetupIntentResult answers POST /api/billing/setup-intent.
type SetupIntentResult struct {
	PaymentMethod PaymentMethodView `json:"paymentMethod"`
	// Recovered lists past-due subscriptions the new card paid for (now active).
	Recovered []string `json:"recovered"`
	// PastDue lists subscriptions still past due after the retry.
	PastDue []string `json:"pastDue"`
}

// SetupRequiresAction is the status of a card setup waiting for the card
// holder (the data of its 402).
const SetupRequiresAction = "requires_action"

// SetupActionView is the data of the 402 answering a card save that waits
// for the card holder's 3-D Secure.
type SetupActionView struct {
	Status        string `json:"status"` // SetupRequiresAction
	SetupIntentID string `json:"setupIntentId"`
	ClientSecret  string `json:"clientSecret"`
}

// BillingStatus answers GET /api/billing/status.
type BillingStatus struct {
	HasPaymentMethod bool               `json:"hasPaymentMethod"`
	PaymentMethod    *PaymentMethodView `json:"paymentMethod"`
	Processor        string             `json:"processor"`
	PastDue          []string           `json:"pastDue"`
}

// SetupIntent saves a payment method for the user (replacing any previous
// one) and retries the user's past-due charges with it at once. When the
// bank first wants the card holder to authenticate the card, nothing is
// saved: the answer is a 402 whose data (SetupActionView) the page confirms,
// and FinishSetupIntent saves the card afterwards.
func (s *Service) SetupIntent(ctx context.Context, userID, method string) (*SetupIntentResult, error) {
	if method == "" {
		return nil, Invalid("paymentMethod is required, e.g. {\"paymentMethod\": %q}", billing.TestCardVisa)
	}
	if len(method) > maxLabel {
		return nil, Invalid("paymentMethod is longer than %d characters", maxLabel)
	}
	pm, err := s.processor.SaveMethod(ctx, userID, method)
	if err != nil {
		return nil, setupError(err)
	}
	return s.saveMethod(ctx, userID, pm)
}

// FinishSetupIntent saves the card of a setup that waited for the card
// holder (the setupIntentId of SetupIntent's 402) once the bank accepted
// it, and retries past-due charges as SetupIntent does.
func (s *Service) FinishSetupIntent(ctx context.Context, userID, setupID string) (*SetupIntentResult, error) {
	if len(setupID) > maxLabel {
		return nil, Invalid("setupIntent is longer than %d characters", maxLabel)
	}
	pm, err := s.processor.FinishSetup(ctx, userID, setupID)
	if err != nil {
		return nil, setupError(err)
	}
	return s.saveMethod(ctx, userID, pm)
}

// setupError answers a card setup that did not save the card: 402 in both
// cases, since nothing was saved and the user has something to do.
func setupError(err error) error {
	if a, ok := errors.AsType[*billing.SetupActionRequiredError](err); ok {
		return &Error{
			Status: http.StatusPaymentRequired,
			Message: "Your bank asks you to confirm this card (3-D Secure); it is not saved yet. " +
				"Run Stripe.js confirmCardSetup(data.clientSecret), then call POST /api/billing/setup-intent again with {\"setupIntent\": \"" + a.SetupIntentID + "\"}.",
			Data: &SetupActionView{Status: SetupRequiresAction, SetupIntentID: a.SetupIntentID, ClientSecret: a.ClientSecret},
		}
	}
	if m, ok := errors.AsType[*billing.MethodError](err); ok {
		return Invalid("%s", m.Message)
	}
	if nf, ok := errors.AsType[*billing.SetupNotFoundError](err); ok {
		return NotFound("%s", nf.Error())
	}
	if errors.Is(err, billing.ErrDeclined) {
		reason := billing.DeclineReason(err)
		if reason == "" {
			reason = "Your card was declined."
		}
		return PaymentDeclined("The card was not saved. The processor says: %s Use another card.", reason)
	}
	return err
}

// saveMethod makes pm the user's payment method and retries the user's
// past-due charges with it.
func (s *Service) saveMethod(ctx context.Context, userID string, pm billing.PaymentMethod) (*SetupIntentResult, error) {
	if _, err := s.storeMethod(ctx, userID, pm); err != nil {
		return nil, err
	}
	res := &SetupIntentResult{PaymentMethod: *paymentMethodView(&pm), Recovered: []string{}, PastDue: []string{}}
	recovered, stillDue, err := s.retryPastDue(ctx, userID, pm)
	if err != nil {
		// The card is saved; the retry failing is logged, not the request.
		s.logger.Error("retrying past-due charges", zap.String("user_id", userID), zap.Error(err))
	}
	res.Recovered = append(res.Recovered, recovered...)
	res.PastDue = append(res.PastDue, stillDue...)
	return res, nil
}

// storeMethod makes pm the user's payment method and reports whether it
// was not already.
func (s *Service) storeMethod(ctx context.Context, userID string, pm billing.PaymentMethod) (changed bool, err error) {
	err = s.store.Update(ctx, func(tx Tx) error {
		u, err := tx.GetUser(userID)
		if err != nil {
			return err
		}
		changed = u.PaymentMethod == nil || u.PaymentMethod.ID != pm.ID
		saved := pm
		u.PaymentMethod = &saved
		return tx.UpdateUser(u)
	})
	if errors.Is(err, ErrNotFound) {
		return false, NotFound("no user %s", userID)
	}
	if err != nil {
		return false, fmt.Errorf("save payment method: %w", err)
	}
	return changed, nil
}

// BillingStatus reports the user's payment method and past-due subscriptions.
func (s *Service) BillingStatus(ctx context.Context, userID string) (*BillingStatus, error) {
	var (
		u    *User
		subs []*Subscription
	)
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		if u, err = tx.GetUser(userID); err != nil {
			return err
		}
		subs, err = tx.ListSubscriptionsByUser(userID)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, NotFound("no user %s", userID)
	}
	if err != nil {
		return nil, fmt.Errorf("billing status: %w", err)
	}
	st := &BillingStatus{
		HasPaymentMethod: u.PaymentMethod != nil,
		PaymentMethod:    paymentMethodView(u.PaymentMethod),
		Processor:        s.processor.Name(),
		PastDue:          []string{},
	}
	for _, sub := range subs {
		if sub.Status == SubPastDue {
			st.PastDue = append(st.PastDue, sub.ID)
		}
	}
	return st, nil
}

// outstandingCharge returns the failed charge a past-due subscription owes:
// the renewal of the period starting at CurrentPeriodEnd, or the charge of
// the current period that the operator marked failed.
func outstandingCharge(charges []*Charge, sub *Subscription) *Charge {
	var out *Charge
	for _, c := range charges {
		if c.Status != ChargeFailed {
			continue
		}
		if !c.PeriodStart.Equal(sub.CurrentPeriodEnd) && !c.PeriodStart.Equal(sub.CurrentPeriodStart) {
			continue
		}
		if out == nil || c.PeriodStart.After(out.PeriodStart) {
			out = c
		}
	}
	return out
}

// Charge statuses.
const (
	ChargePending   = "pending"
	ChargeSucceeded = "succeeded"
	ChargeFailed    = "failed"
	// ChargeVoid is a renewal claim left pending by a node that died, for a
	// period its subscription no longer renews: settlement refunded whatever
	// it charged (its charge intent, kind renewal, says what happened).
	ChargeVoid = "void"
)

// retryPastDue charges each past-due subscription's outstanding charge to
// pm. It returns the subscriptions that are active again and those still
// past due.
func (s *Service) retryPastDue(ctx context.Context, userID string, pm billing.PaymentMethod) (recovered, stillDue []string, err error) {
	type due struct {
		sub    *Subscription
		charge *Charge
	}
	var dues []due
	err = s.store.View(ctx, func(tx Tx) error {
		dues = dues[:0]
		subs, err := tx.ListSubscriptionsByUser(userID)
		if err != nil {
			return err
		}
		for _, sub := range subs {
			if sub.Status != SubPastDue {
				continue
			}
			charges, err := tx.ListCharges(sub.ID)
			if err != nil {
				return err
			}
			dues = append(dues, due{sub: sub, charge: outstandingCharge(charges, sub)})
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	for _, d := range dues {
		if d.charge == nil {
			s.logger.Warn("past-due subscription has no failed charge to retry", zap.String("subscription_id", d.sub.ID))
			stillDue = append(stillDue, d.sub.ID)
			continue
		}
		ok, err := s.retryCharge(ctx, d.sub, d.charge, pm)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("subscription %s: %w", d.sub.ID, err))
			stillDue = append(stillDue, d.sub.ID)
		case ok:
			recovered = append(recovered, d.sub.ID)
		default:
			stillDue = append(stillDue, d.sub.ID)
		}
	}
	return recovered, stillDue, errors.Join(errs...)
}

// retryCharge charges one outstanding charge and, on success, makes the
// subscription active again (advancing the period when the charge paid for
// the next one). It reports whether the subscription recovered. Like a
// subscribe, it writes a charge intent first (intents.go).
func (s *Service) retryCharge(ctx context.Context, sub *Subscription, c *Charge, pm billing.PaymentMethod) (bool, error) {
	idem := billing.RetryKey(sub.ID, c.ID, pm.ID)
	in := &ChargeIntent{UserID: sub.UserID, SubscriptionID: sub.ID, ChargeID: c.ID, Kind: IntentRetry, Amount: c.Amount,
		MethodID: pm.ID, IdempotencyKey: idem}
	if err := s.writeIntent(ctx, in); errors.Is(err, ErrConflict) {
		// This card was tried for this charge before: the processor would
		// answer with that outcome again.
		s.logger.Info("past-due retry skipped: this card was already tried for this charge", zap.String("subscription_id", sub.ID))
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("writing the charge intent: %w", err)
	}
	ref, err := s.chargeFixed(ctx, billing.ChargeRequest{
		UserID: sub.UserID, MethodID: pm.ID, Amount: c.Amount, IdempotencyKey: idem,
		Description: fmt.Sprintf("Timeblock subscription %s, past-due period from %s", sub.ID, c.PeriodStart.Format(time.DateOnly)),
	}, in.CreatedAt, false)
	if errors.Is(err, billing.ErrDeclined) {
		s.finishIntent(ctx, in.ID, IntentVoid, "")
		s.logger.Info("past-due retry declined", zap.String("subscription_id", sub.ID))
		s.notifyCharge(ctx, OpChargeFailed, opKindRecovery, sub.ID, c.Amount, billing.DeclineReason(err)) // operator notices
		return false, nil
	}
	if err != nil {
		// The intent stays pending: settlement refunds a charge made anyway.
		return false, fmt.Errorf("charging: %w", err)
	}
	var stale bool
	err = s.store.Update(ctx, func(tx Tx) error {
		stale = false
		cur, err := tx.GetSubscription(sub.ID)
		if err != nil {
			return err
		}
		charges, err := tx.ListCharges(sub.ID)
		if err != nil {
			return err
		}
		var ch *Charge
		for _, x := range charges {
			if x.ID == c.ID {
				ch = x
			}
		}
		if ch == nil || cur.Status != SubPastDue || ch.Status != ChargeFailed {
			stale = true
			return nil
		}
		if err := markIntentDoneTx(tx, in.ID, ref, s.clock()); err != nil {
			return err
		}
		ch.Status = ChargeSucceeded
		ch.ProcessorRef = ref
		if err := tx.UpdateCharge(ch); err != nil {
			return err
		}
		if err := recordLedgerTx(tx, ch, LedgerRecovery, s.clock()); err != nil {
			return err
		}
		if ch.PeriodStart.Equal(cur.CurrentPeriodEnd) {
			cur.CurrentPeriodStart = cur.CurrentPeriodEnd
			cur.CurrentPeriodEnd = nextPeriodEnd(cur.CurrentPeriodEnd, cur.BillingCycle)
		}
		cur.Status = SubActive
		if pending, err := neverKeyedOnManualPoolTx(tx, cur); err != nil {
			return err
		} else if pending {
			// A pledge declined at activation: its key still comes from the operator.
			cur.Status = SubPendingKey
		}
		cur.PastDueSince = time.Time{}
		cur.UpdatedAt = s.clock()
		return tx.UpdateSubscription(cur)
	})
	if err != nil {
		s.refundIntent(ctx, in.ID, idem, ref, "recording the past-due retry failed")
		return false, fmt.Errorf("recording retry: %w", err)
	}
	if stale {
		// Someone else settled or canceled it meanwhile: this charge is extra.
		s.refundIntent(ctx, in.ID, idem, ref, "the subscription was settled or canceled meanwhile")
		return false, nil
	}
	s.logger.Info("past-due subscription recovered", zap.String("subscription_id", sub.ID), zap.String("charge_ref", ref))
	s.notifyCharge(ctx, OpChargeSucceeded, opKindRecovery, sub.ID, c.Amount, "") // operator notices (operator_notices.go)
	s.publishKeyChange(ctx, sub.UserID)
	return true, nil
}

// nextPeriodEnd advances a period end by one calendar month or year.
func nextPeriodEnd(t time.Time, cycle string) time.Time {
	if cycle == CycleYear {
		return t.AddDate(1, 0, 0)
	}
	return t.AddDate(0, 1, 0)
}

// neverKeyedOnManualPoolTx reports whether sub is on a manually provisioned
// pool and has never had a key (standalone or through a combined key): a
// pledge that was declined at activation and is paid now waits for the
// operator's key, as a paid purchase does.
func neverKeyedOnManualPoolTx(tx Tx, sub *Subscription) (bool, error) {
	pool, err := tx.GetPool(sub.PoolID)
	if err != nil || !pool.ManualProvisioning {
		return false, err
	}
	if k, err := keyOfTx(tx, sub.ID); err != nil || k != nil {
		return false, err
	}
	if _, err := tx.GetCombinedKeyBySubscription(sub.ID); !errors.Is(err, ErrNotFound) {
		return false, err
	}
	return true, nil
}
