package accounts

// Processor events: what a payment processor reports about a charge after
// the fact (Stripe's webhooks), applied to the subscription the charge paid
// for. Each event is recorded in the same transaction as its effect, so a
// redelivery is a no-op and the caller may answer the processor only once
// the effect is durable. Effects look at the subscription's current state,
// never at the order events arrived in (and the processor's reader gives the
// charge's or dispute's state at delivery, not at the event's creation):
//
//   - a charge failed, was refunded in full, or is disputed: when it is the
//     recorded charge of an active subscription's current period, that
//     period is unpaid: the charge is marked failed and the subscription goes
//     past_due (key suspended), as the operator's payment-failed endpoint
//     does. Saving a card pays it again; otherwise the grace period ends the
//     subscription. A charge of an earlier period, or of a subscription
//     already past due or canceled, changes nothing;
//   - a charge succeeded: when it pays the outstanding failed charge of a
//     past-due subscription (the renewal or retry it was made for), the
//     subscription is active again, as a successful retry makes it; a
//     dispute won does the same when the disputed charge is the outstanding
//     one;
//   - a subscribe's payment that waited for the customer (an incomplete
//     subscription, incomplete.go): succeeded → the subscription is active
//     (pending_key on manual pools) and the charge recorded; failed or
//     canceled → canceled, seats released. A success for such a subscription
//     that already ended canceled without a charge is refunded before the
//     event is recorded (an error leaves the event unrecorded, so the
//     processor delivers it again);
//   - a charge for a subscribe whose subscription does not exist is left to
//     the settlement of charge intents (intents.go), which refunds it once
//     the subscribe that made it is surely over; a failure, refund or
//     dispute of it while that subscribe's intent is still open is answered
//     503 and recorded nothing, so that the processor delivers it again once
//     the subscription exists (or surely never will);
//   - a charge succeeded whose outcome Timeblock has not recorded yet (its
//     answer was lost, or its node died): a pledge's charge at activation
//     still pending makes the pledge paid (recordPledge), a renewal claim
//     still pending pays its period (recordRenewal), a past-due retry whose
//     intent is pending marks it done with the charge it records — as the
//     caller would have, had the answer arrived. A retry whose intent a
//     settler holds is answered 503, delivered again once settled;
//   - a card setup that waited for the card holder succeeded: the card is
//     saved and past-due charges retried, as the page's call back would
//     have done (applySetupSucceeded; not in one transaction, see there).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/timeblock/timeblock/accounts/billing"
	"go.uber.org/zap"
)

// ProcessorEventKind is what happened to a charge.
type ProcessorEventKind int

// Kinds of processor events.
const (
	EventIgnored         ProcessorEventKind = iota // recorded, no effect
	EventChargeSucceeded                           // the charge took the money (possibly late)
	EventChargeFailed                              // the charge failed after all
	EventChargeRefunded                            // refunded in full outside Timeblock
	EventChargeDisputed                            // the card holder disputed it
	EventDisputeWon                                // a dispute of the charge was decided for the seller
	// EventSetupSucceeded: a card setup that waited for the card holder
	// (Processor.FinishSetup, Ref its id) succeeded.
	EventSetupSucceeded
)

// EffectCardSaved is the effect of an EventSetupSucceeded that saved the
// card: the page that ran the setup never called back.
const EffectCardSaved = "card_saved"

// ProcessorEvent is one processor notification about a charge.
type ProcessorEvent struct {
	ID   string // the processor's event id; each is applied once
	Type string // the processor's event type, kept with the record
	Kind ProcessorEventKind
	// IdempotencyKey is the key the charge was made with (subscribe:...,
	// renew:..., retry:...), from the charge's metadata; "" when the
	// charge is not Timeblock's.
	IdempotencyKey string
	Ref            string // the processor's reference of the charge (of the setup for EventSetupSucceeded)
	UserID         string // EventSetupSucceeded: the user whose card was set up
}

// ProcessorEventResult says what applying an event did.
type ProcessorEventResult struct {
	Duplicate      bool   // the event was applied before: nothing done
	SubscriptionID string // the subscription it concerned, if any
	Effect         string // "past_due", "active", EffectCardSaved or "" (recorded only)
}

// ApplyProcessorEvent records ev and applies its effect in one transaction.
func (s *Service) ApplyProcessorEvent(ctx context.Context, ev ProcessorEvent) (*ProcessorEventResult, error) {
	if ev.ID == "" {
		return nil, Invalid("the event has no id")
	}
	if ev.Kind == EventSetupSucceeded {
		return s.applySetupSucceeded(ctx, ev)
	}
	op, subID, rest := billing.ParseKey(ev.IdempotencyKey)
	if op == billing.ChargeSubscribe && ev.Kind == EventChargeSucceeded && ev.Ref != "" {
		if err := s.refundUnrecordedSubscribe(ctx, ev, subID); err != nil {
			return nil, fmt.Errorf("processor event %s: %w", ev.ID, err)
		}
	}
	if ev.Kind == EventChargeSucceeded && ev.Ref != "" {
		if err := s.completePendingCharge(ctx, ev, op, subID, rest); err != nil {
			return nil, fmt.Errorf("processor event %s: %w", ev.ID, err)
		}
	}
	var res ProcessorEventResult
	var userID, cancelRef string
	err := s.store.Update(ctx, func(tx Tx) error {
		res = ProcessorEventResult{SubscriptionID: subID}
		userID, cancelRef = "", ""
		err := tx.RecordWebhookEvent(&WebhookEvent{ID: ev.ID, Type: ev.Type, ReceivedAt: s.clock()})
		if errors.Is(err, ErrConflict) {
			res.Duplicate = true
			return nil
		}
		if err != nil || subID == "" || ev.Kind == EventIgnored {
			return err
		}
		sub, err := tx.GetSubscription(subID)
		if errors.Is(err, ErrNotFound) && op == billing.ChargeSubscribe && ev.Kind != EventChargeSucceeded {
			// The subscribe may still be running (its intent open): the
			// failure must not be lost before the subscription exists.
			open, err := tx.ListOpenChargeIntents(s.clock())
			if err != nil {
				return err
			}
			for _, in := range open {
				if in.IdempotencyKey == ev.IdempotencyKey {
					return &Error{Status: 503, Message: "the purchase this charge paid for is still being recorded; deliver the event again later"}
				}
			}
		}
		if errors.Is(err, ErrNotFound) {
			return nil // a subscribe that created nothing: settlement's (see above)
		}
		if err != nil {
			return err
		}
		now := s.clock()
		if sub.Status == SubIncomplete && op == billing.ChargeSubscribe {
			in, err := subscribeIntentTx(tx, sub.ID, now)
			if err != nil {
				return err
			}
			if in != nil && in.ProcessorRef == "" {
				// A reservation whose subscribe is charging it right now
				// (subscribe.go): the subscribe records the outcome, or
				// settlement does. Delivered again later, the event finds
				// the subscription as that left it.
				return &Error{Status: 503, Message: "the purchase this charge paid for is still being recorded; deliver the event again later"}
			}
			// Its payment waited for the customer (incomplete.go).
			state := ""
			switch ev.Kind {
			case EventChargeSucceeded:
				state = billing.PaymentSucceeded
			case EventChargeFailed:
				state = billing.PaymentFailed
			}
			if state == "" {
				return nil
			}
			res.Effect, err = settleIncompleteTx(tx, sub, state, ev.Ref, now)
			if res.Effect != "" {
				userID = sub.UserID
			}
			if res.Effect == SubCanceled {
				cancelRef = ev.Ref
			}
			return err
		}
		charges, err := tx.ListCharges(sub.ID)
		if err != nil {
			return err
		}
		if ev.Kind == EventChargeFailed || ev.Kind == EventChargeRefunded {
			// The money went back to the buyer: the ledger says so
			// (a dispute is not a refund until it is lost).
			already, err := refundLedgerTx(tx, ev.Ref)
			if err != nil {
				return err
			}
			if already && ev.Kind == EventChargeRefunded {
				// An operator refunded it through Timeblock
				// (ledger_refund.go) and the processor reports it:
				// counted once, and the subscription stays as the
				// operator left it.
				return nil
			}
		}
		switch ev.Kind {
		case EventChargeFailed, EventChargeRefunded, EventChargeDisputed:
			if sub.Status != SubActive {
				return nil
			}
			for _, c := range charges {
				if c.ProcessorRef != ev.Ref || c.Status != ChargeSucceeded || !c.PeriodStart.Equal(sub.CurrentPeriodStart) {
					continue
				}
				c.Status = ChargeFailed
				if err := tx.UpdateCharge(c); err != nil {
					return err
				}
				sub.Status, sub.PastDueSince, sub.UpdatedAt = SubPastDue, now, now
				if err := tx.UpdateSubscription(sub); err != nil {
					return err
				}
				res.Effect, userID = SubPastDue, sub.UserID
				return nil
			}
		case EventChargeSucceeded, EventDisputeWon:
			if sub.Status != SubPastDue {
				return nil
			}
			c := outstandingCharge(charges, sub)
			if c == nil {
				return nil
			}
			if ev.Kind == EventDisputeWon && c.ProcessorRef != ev.Ref {
				return nil
			}
			if ev.Kind == EventChargeSucceeded && !paysCharge(op, rest, c) {
				return nil
			}
			if op == billing.ChargeRetry {
				// The retry's intent records this charge, so that
				// settlement does not refund it as unrecorded.
				if err := takeIntentByKeyTx(tx, ev.IdempotencyKey, ev.Ref, now); err != nil {
					return err
				}
			}
			c.Status, c.ProcessorRef = ChargeSucceeded, ev.Ref
			if err := tx.UpdateCharge(c); err != nil {
				return err
			}
			if err := recordLedgerTx(tx, c, ledgerKindOf(op), now); err != nil {
				return err
			}
			if c.PeriodStart.Equal(sub.CurrentPeriodEnd) {
				sub.CurrentPeriodStart = sub.CurrentPeriodEnd
				sub.CurrentPeriodEnd = nextPeriodEnd(sub.CurrentPeriodEnd, sub.BillingCycle)
			}
			sub.Status, sub.PastDueSince, sub.UpdatedAt = SubActive, time.Time{}, now
			if err := tx.UpdateSubscription(sub); err != nil {
				return err
			}
			res.Effect, userID = SubActive, sub.UserID
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("processor event %s: %w", ev.ID, err)
	}
	if cancelRef != "" {
		// A failed authentication leaves the payment confirmable with
		// another card: cancel it for good (best effort; a success after
		// all would be refunded, see refundUnrecordedSubscribe).
		s.cancelPayment(ctx, cancelRef, ev.IdempotencyKey)
	}
	if userID != "" {
		s.publishKeyChange(ctx, userID)
		s.logger.Info("processor event applied", zap.String("event_id", ev.ID), zap.String("event_type", ev.Type),
			zap.String("subscription_id", subID), zap.String("status", res.Effect))
	}
	s.notifyProcessorEvent(ctx, ev, &res) // operator notices (operator_notices.go)
	return &res, nil
}

// takeIntentByKeyTx marks done the pending intent charged under key, whose
// charge ref the caller records in tx. An intent a settler holds is a 503:
// settlement decides, and the processor delivers the event again after.
func takeIntentByKeyTx(tx Tx, key, ref string, now time.Time) error {
	in, err := openIntentByKeyTx(tx, key)
	if err != nil || in == nil {
		return err
	}
	if in.Status == IntentSettling {
		return &Error{Status: 503, Message: "the charge this event reports is being settled; deliver the event again later"}
	}
	return markIntentDoneTx(tx, in.ID, ref, now)
}

// openIntentByKeyTx returns the open (pending or settling) charge intent
// charged under the processor key, or nil.
func openIntentByKeyTx(tx Tx, key string) (*ChargeIntent, error) {
	// Every open intent, whatever its time: another node's clock may be ahead.
	open, err := tx.ListOpenChargeIntents(endOfTime)
	if err != nil {
		return nil, err
	}
	for _, in := range open {
		if in.IdempotencyKey == key {
			return in, nil
		}
	}
	return nil, nil
}

// completePendingCharge records a successful charge of a pledge or a
// renewal whose caller never learnt its outcome (see the top of this
// file). Each record refuses what is recorded already, so a redelivery, or
// the pass that charged it recording it too, changes nothing.
func (s *Service) completePendingCharge(ctx context.Context, ev ProcessorEvent, op, subID, rest string) error {
	switch op {
	case billing.ChargePledge:
		var in *ChargeIntent
		err := s.store.View(ctx, func(tx Tx) error {
			var err error
			in, err = openIntentByKeyTx(tx, ev.IdempotencyKey)
			return err
		})
		if err != nil || in == nil || in.Status != IntentPending {
			return err
		}
		status, err := s.recordPledge(ctx, in, false, ev.Ref)
		if err != nil || status == "" {
			return err
		}
		s.publishKeyChange(ctx, in.UserID)
		s.logger.Info("pledge charge completed by the processor's event", zap.String("subscription_id", in.SubscriptionID),
			zap.String("status", status), zap.String("charge_ref", ev.Ref))
	case billing.ChargeRenewal:
		periodStart, err := time.Parse(time.RFC3339Nano, rest)
		if err != nil {
			return nil // not a key Timeblock made
		}
		var claim *Charge
		err = s.store.View(ctx, func(tx Tx) error {
			claim = nil
			charges, err := tx.ListCharges(subID)
			if err != nil {
				return err
			}
			for _, c := range charges {
				if c.Status == ChargePending && c.PeriodStart.Equal(periodStart) {
					claim = c
				}
			}
			return nil
		})
		if err != nil || claim == nil {
			return err
		}
		moved, err := s.recordRenewal(ctx, subID, claim.ID, false, ev.Ref)
		if err != nil || !moved {
			return err
		}
		s.publishKeyChange(ctx, claim.UserID)
		s.logger.Info("renewal completed by the processor's event", zap.String("subscription_id", subID),
			zap.String("charge_ref", ev.Ref))
	}
	return nil
}

// paysCharge reports whether a charge made under the key (op and the part
// after the subscription id) was made for the outstanding charge c: the
// renewal of its period, or a retry of it.
func paysCharge(op, rest string, c *Charge) bool {
	switch op {
	case billing.ChargeRenewal:
		t, err := time.Parse(time.RFC3339Nano, rest)
		return err == nil && t.Equal(c.PeriodStart)
	case billing.ChargeRetry:
		chargeID, _, _ := strings.Cut(rest, ":")
		return chargeID == c.ID
	}
	return false
}

// refundUnrecordedSubscribe refunds a subscribe's payment that succeeded
// although its subscription ended canceled with no charge recorded for it
// (an incomplete subscription canceled before its payment went through).
func (s *Service) refundUnrecordedSubscribe(ctx context.Context, ev ProcessorEvent, subID string) error {
	refund := false
	err := s.store.View(ctx, func(tx Tx) error {
		refund = false
		sub, err := tx.GetSubscription(subID)
		if errors.Is(err, ErrNotFound) {
			return nil // settlement's (intents.go)
		}
		if err != nil || sub.Status != SubCanceled {
			return err
		}
		charges, err := tx.ListCharges(subID)
		if err != nil {
			return err
		}
		for _, c := range charges {
			if c.ProcessorRef == ev.Ref {
				return nil
			}
		}
		refund = true
		return nil
	})
	if err != nil || !refund {
		return err
	}
	return s.refundCharge(ctx, ev.Ref, ev.IdempotencyKey, "paid after its incomplete subscription "+subID+" was canceled")
}

// applySetupSucceeded saves the card of a setup that waited for the card
// holder, in case the page that confirmed it never called back
// (FinishSetupIntent): the processor checks that the setup is the user's
// and succeeded, and a card saved already is left alone, so only a save
// the page missed retries the past-due charges. Saving cannot share the
// event's transaction (the processor is asked first), so the event is
// recorded after it; a redelivery finds the card saved and does nothing.
func (s *Service) applySetupSucceeded(ctx context.Context, ev ProcessorEvent) (*ProcessorEventResult, error) {
	var res ProcessorEventResult
	pm, err := s.processor.FinishSetup(ctx, ev.UserID, ev.Ref)
	_, refused := errors.AsType[*Error](err)
	_, waits := errors.AsType[*billing.SetupActionRequiredError](err)
	switch {
	case refused || waits || errors.Is(err, billing.ErrDeclined):
		// Not the user's, or not succeeded after all: nothing to save.
	case err != nil:
		return nil, fmt.Errorf("processor event %s: %w", ev.ID, err)
	default:
		changed, err := s.storeMethod(ctx, ev.UserID, pm)
		if _, gone := errors.AsType[*Error](err); err != nil && !gone {
			return nil, fmt.Errorf("processor event %s: %w", ev.ID, err)
		}
		if changed {
			res.Effect = EffectCardSaved
			recovered, stillDue, err := s.retryPastDue(ctx, ev.UserID, pm)
			if err != nil {
				s.logger.Error("retrying past-due charges", zap.String("user_id", ev.UserID), zap.Error(err))
			}
			s.logger.Info("card saved by the processor's event", zap.String("event_id", ev.ID), zap.String("user_id", ev.UserID),
				zap.String("setup", ev.Ref), zap.Strings("recovered", recovered), zap.Strings("past_due", stillDue))
		}
	}
	err = s.store.Update(ctx, func(tx Tx) error {
		err := tx.RecordWebhookEvent(&WebhookEvent{ID: ev.ID, Type: ev.Type, ReceivedAt: s.clock()})
		res.Duplicate = errors.Is(err, ErrConflict)
		if res.Duplicate {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("processor event %s: %w", ev.ID, err)
	}
	return &res, nil
}
