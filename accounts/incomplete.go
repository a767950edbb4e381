package accounts

// Incomplete subscriptions: a subscribe whose payment waits for the
// customer to authenticate it (SCA / 3-D Secure; Stripe's requires_action).
//
// The processor answers the on-session charge with *ActionRequiredError
// (nothing is taken yet). The subscribe then creates the subscription in
// status incomplete, holding its seats for IncompleteHold, with no key and
// no admission, and answers 402 with IncompleteData: the page runs the
// authentication with the client secret (Stripe.js confirmCardPayment) and
// then calls POST /api/subscriptions/:id/confirm. The charge intent written
// before the charge (intents.go) stays pending meanwhile, carrying the
// payment's reference; settlement leaves the intent of an incomplete
// subscription alone.
//
// Whichever comes first ends it, each in a transaction that re-reads the
// subscription and acts only while it is still incomplete (so every path is
// idempotent and they may race):
//
//   - the payment succeeded (the processor's payment_intent.succeeded
//     webhook, the confirm endpoint asking the processor, or the expiry
//     finding it succeeded): active (pending_key on manual pools) with its
//     period starting then, the Charge recorded and the intent done — what a
//     paid subscribe creates;
//   - the payment failed or was canceled (payment_intent.payment_failed or
//     .canceled, the confirm endpoint): canceled, seats released, intent void;
//   - the hold ran out (the lifecycle worker, ExpireIncomplete): the payment
//     is canceled at the processor first; canceled → as failed; when the
//     customer completed it in the meantime (the activation was missed) the
//     subscription is activated instead — its seats are still held, so
//     nobody loses money and nobody loses a seat. Processor unreachable: the
//     subscription stays incomplete and the next pass tries again;
//   - the buyer canceled it (POST /api/subscriptions/:id/cancel,
//     CancelIncomplete): the payment is canceled at the processor first;
//     canceled → as failed; when the customer completed it first, the
//     intent is claimed (pending → settling) while the subscription stays
//     incomplete, the charge is refunded (RefundKey of the subscribe's key,
//     so at most once whoever refunds), and then the subscription is
//     canceled and the intent marked refunded in one transaction. Processor
//     unreachable: nothing changes and the buyer retries. A claimed intent
//     is the canceler's: the webhook and the confirm leave it alone
//     (settleIncompleteTx), and if the canceler dies the expiry finishes
//     the cancel (endCanceled) once the hold has run out.
//
// A payment that succeeds for a subscription already canceled (which a
// canceled PaymentIntent cannot do, but a processor may report anything)
// is refunded by the webhook (processor_events.go).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/timeblock/timeblock/accounts/billing"
	"go.uber.org/zap"
)

// IncompleteHold is how long an incomplete subscription holds its seats
// while the customer authenticates the payment: a 3-D Secure challenge
// takes a minute or two; beyond ten minutes the seats go back on sale (the
// payment is canceled first, so nothing can be paid for them later). Seats
// held unpaid cost their holder nothing, so the hold is short and a user
// holds at most one per pool (checkUnpaidTx).
const IncompleteHold = 10 * time.Minute

// IncompleteData is the data of the 402 that answers a subscribe waiting
// for the customer's authentication, and of a confirm still waiting.
type IncompleteData struct {
	SubscriptionID string `json:"subscriptionId"`
	Status         string `json:"status"` // incomplete
	// ClientSecret finishes the payment in the browser (Stripe.js
	// confirmCardPayment); absent from a confirm's answer.
	ClientSecret string `json:"clientSecret,omitempty"`
	// PaymentRef is the processor's reference of the waiting payment: the
	// :ref of the built-in test processor's bank step (testbank.go).
	PaymentRef    string    `json:"paymentRef,omitempty"`
	Amount        string    `json:"amount"`
	HoldExpiresAt time.Time `json:"holdExpiresAt"`
}

// holdIncomplete keeps a reservation whose payment waits for the customer
// (3-D Secure) as the incomplete subscription it already is, notes the
// payment's reference on its charge intent (which stays pending), and
// returns the 402 to answer. When that cannot be written the payment is
// canceled and the seats released.
func (s *Service) holdIncomplete(ctx context.Context, p *purchase, action *billing.ActionRequiredError) error {
	in, sub := p.intent, p.sub
	err := s.store.Update(ctx, func(tx Tx) error {
		cur, err := tx.GetChargeIntent(in.ID)
		if err != nil {
			return err
		}
		if cur.Status != IntentPending {
			return fmt.Errorf("intent %s is %s: %w", in.ID, cur.Status, errIntentTaken)
		}
		cur.ProcessorRef, cur.UpdatedAt = action.Ref, s.clock()
		return tx.UpdateChargeIntent(cur)
	})
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		state, cerr := s.processor.CancelPayment(cctx, action.Ref, billing.CancelKey(in.IdempotencyKey))
		cancel()
		switch {
		case cerr != nil:
			// The intent stays pending: settlement refunds a charge made after all.
			s.logger.Error("subscribe: canceling a waiting payment failed", zap.String("intent_id", in.ID), zap.Error(cerr))
			s.releaseSeats(ctx, sub.ID)
		case state == billing.PaymentSucceeded:
			s.refundIntent(ctx, in.ID, in.IdempotencyKey, action.Ref, "the incomplete subscription could not be recorded")
			s.releaseSeats(ctx, sub.ID)
		default:
			s.release(ctx, in.ID, IntentVoid, action.Ref)
		}
		if errors.Is(err, errIntentTaken) {
			return &Error{Status: 503, Message: "the payment took too long to be recorded; nothing was created. Try again"}
		}
		return passClientError("subscribe", err)
	}
	s.logger.Info("subscription incomplete: the payment waits for the customer's authentication",
		zap.String("user_id", sub.UserID), zap.String("subscription_id", sub.ID), zap.String("pool", p.pool.Slug),
		zap.String("payment_ref", action.Ref))
	hold := sub.CreatedAt.Add(IncompleteHold)
	return &Error{
		Status: 402,
		Message: fmt.Sprintf("your bank asks you to confirm this payment (3-D Secure): complete it with data.clientSecret (Stripe.js confirmCardPayment), then POST /api/subscriptions/%s/confirm. The seats are held until %s; nothing is charged unless you confirm",
			sub.ID, hold.Format(time.RFC3339)),
		Data: IncompleteData{SubscriptionID: sub.ID, Status: SubIncomplete, ClientSecret: action.ClientSecret, PaymentRef: action.Ref, Amount: in.Amount, HoldExpiresAt: hold},
	}
}

// subscribeIntentTx returns the open (pending or settling) charge intent of
// a subscribe, or nil. Its id is the subscription's; intents written before
// that rule are found by their idempotency key.
func subscribeIntentTx(tx Tx, subID string, now time.Time) (*ChargeIntent, error) {
	in, err := tx.GetChargeIntent(subID)
	switch {
	case err == nil && in.Kind == IntentSubscribe:
		if in.Status == IntentPending || in.Status == IntentSettling {
			return in, nil
		}
		return nil, nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return nil, err
	}
	open, err := tx.ListOpenChargeIntents(now)
	if err != nil {
		return nil, err
	}
	key := billing.SubscribeKey(subID)
	for _, in := range open {
		if in.IdempotencyKey == key {
			return in, nil
		}
	}
	return nil, nil
}

// settleIncompleteTx ends an incomplete subscription inside tx by its
// payment's state and returns its new status ("" when it stays incomplete).
func settleIncompleteTx(tx Tx, sub *Subscription, state, ref string, now time.Time) (string, error) {
	if sub.Status != SubIncomplete {
		return "", nil
	}
	in, err := subscribeIntentTx(tx, sub.ID, now)
	if err != nil {
		return "", err
	}
	if in != nil && in.Status == IntentSettling {
		return "", nil // claimed by the buyer's cancel, which refunds it (endCanceled)
	}
	switch state {
	case billing.PaymentSucceeded:
		pool, err := tx.GetPool(sub.PoolID)
		if err != nil {
			return "", err
		}
		amount := ""
		if in != nil {
			amount = in.Amount
			if ref == "" {
				ref = in.ProcessorRef
			}
			in.Status, in.ProcessorRef, in.UpdatedAt = IntentDone, ref, now
			if err := tx.UpdateChargeIntent(in); err != nil {
				return "", err
			}
		} else if amount, err = periodAmountTx(tx, sub); err != nil {
			return "", err
		}
		sub.Status = SubActive
		if pool.ManualProvisioning {
			sub.Status = SubPendingKey
		}
		sub.CurrentPeriodStart, sub.CurrentPeriodEnd, sub.UpdatedAt = now, nextPeriodEnd(now, sub.BillingCycle), now
		if err := tx.UpdateSubscription(sub); err != nil {
			return "", err
		}
		charge := &Charge{
			ID: newID(), UserID: sub.UserID, SubscriptionID: sub.ID, PeriodStart: now,
			Amount: amount, Status: ChargeSucceeded, ProcessorRef: ref, CreatedAt: now,
		}
		if err := tx.CreateCharge(charge); err != nil {
			return "", err
		}
		return sub.Status, recordLedgerTx(tx, charge, LedgerPurchase, now)
	case billing.PaymentFailed:
		if in != nil {
			in.Status, in.UpdatedAt = IntentVoid, now
			if err := tx.UpdateChargeIntent(in); err != nil {
				return "", err
			}
		}
		sub.CurrentPeriodEnd = now // never paid: no period to show
		return SubCanceled, cancelTx(tx, sub, now)
	}
	return "", nil
}

// openPayment returns the open charge intent of an incomplete
// subscription (nil when there is none), which carries its payment's
// reference once the payment waits for the customer.
func (s *Service) openPayment(ctx context.Context, subID string) (*ChargeIntent, error) {
	var in *ChargeIntent
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		in, err = subscribeIntentTx(tx, subID, s.clock())
		return err
	})
	return in, err
}

// settleIncomplete applies a payment state the processor reported to an
// incomplete subscription; it returns the new status ("" when unchanged).
func (s *Service) settleIncomplete(ctx context.Context, subID, state, ref string) (string, error) {
	var (
		status string
		userID string
	)
	err := s.store.Update(ctx, func(tx Tx) error {
		sub, err := tx.GetSubscription(subID)
		if err != nil {
			return err
		}
		userID = sub.UserID
		status, err = settleIncompleteTx(tx, sub, state, ref, s.clock())
		return err
	})
	if err != nil {
		return "", err
	}
	if status != "" {
		s.logger.Info("incomplete subscription settled", zap.String("subscription_id", subID), zap.String("status", status))
		s.publishKeyChange(ctx, userID)
		s.notifySubscribed(ctx, subID, status) // operator notices (operator_notices.go)
	}
	return status, nil
}

// ConfirmSubscription finishes an incomplete subscription of the user once
// the customer authenticated its payment (POST /api/subscriptions/:id/
// confirm): it asks the processor and activates it when paid (200 with the
// subscription), cancels it when the payment failed (402), and answers 402
// with IncompleteData while it still waits. Any other subscription of the
// user is answered 200 as it is (a repeated confirm); another user's is a 404.
func (s *Service) ConfirmSubscription(ctx context.Context, userID, subID string) (*SubscribeResult, error) {
	sub, err := s.userSubscription(ctx, userID, subID)
	if err != nil {
		return nil, err
	}
	if sub.Status == SubIncomplete {
		in, err := s.openPayment(ctx, subID)
		if err != nil {
			return nil, fmt.Errorf("confirm %s: %w", subID, err)
		}
		if in == nil || in.ProcessorRef == "" {
			// A reservation whose card is being charged (subscribe.go).
			return nil, Conflict("the payment of subscription %s is still being processed and waits for nobody's confirmation; look again in a moment", subID)
		}
		if in.Status == IntentSettling {
			return nil, Conflict("subscription %s is being canceled (its payment is being refunded); look at it again in a moment", subID)
		}
		ref := in.ProcessorRef
		state, err := s.processor.PaymentStatus(ctx, ref)
		if err != nil {
			s.logger.Error("confirm: asking the processor", zap.String("subscription_id", subID), zap.Error(err))
			return nil, &Error{Status: 502, Message: "the payment processor could not be asked; try again in a moment"}
		}
		switch state {
		case billing.PaymentWaiting:
			hold := sub.CreatedAt.Add(IncompleteHold)
			return nil, &Error{Status: 402,
				Message: fmt.Sprintf("the payment still waits for your bank's confirmation (3-D Secure); finish it and confirm again before %s", hold.Format(time.RFC3339)),
				Data:    IncompleteData{SubscriptionID: sub.ID, Status: SubIncomplete, PaymentRef: ref, Amount: in.Amount, HoldExpiresAt: hold}}
		case billing.PaymentSucceeded, billing.PaymentFailed:
			status, err := s.settleIncomplete(ctx, subID, state, ref)
			if err != nil {
				return nil, passClientError("confirm", err)
			}
			if status == SubCanceled {
				s.cancelPayment(ctx, ref, billing.SubscribeKey(subID))
			}
		}
	}
	res, err := s.subscribeResultOf(ctx, userID, subID)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, NotFound("subscription %s not found", subID)
	}
	if res.Status == SubCanceled && sub.Status == SubIncomplete {
		return nil, PaymentDeclined("the payment was not confirmed (3-D Secure failed or was canceled); nothing was charged and the seats are released. Subscribe again to retry")
	}
	return res, nil
}

// userSubscription reads one of the user's subscriptions (404 for others').
func (s *Service) userSubscription(ctx context.Context, userID, subID string) (*Subscription, error) {
	var sub *Subscription
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		sub, err = tx.GetSubscription(subID)
		return err
	})
	if errors.Is(err, ErrNotFound) || err == nil && sub.UserID != userID {
		return nil, NotFound("subscription %s not found", subID)
	}
	if err != nil {
		return nil, fmt.Errorf("confirm %s: %w", subID, err)
	}
	return sub, nil
}

// ExpireIncomplete ends the incomplete subscriptions whose hold ran out
// (see the top of this file); the lifecycle worker runs it. It returns how
// many it ended (activated or canceled).
func (s *Service) ExpireIncomplete(ctx context.Context) (int, error) {
	now := s.clock()
	var expired []*ChargeIntent
	err := s.store.View(ctx, func(tx Tx) error {
		open, err := tx.ListOpenChargeIntents(now.Add(-IncompleteHold))
		if err != nil {
			return err
		}
		expired = expired[:0]
		for _, in := range open {
			if in.Kind != IntentSubscribe || in.ProcessorRef == "" {
				continue
			}
			sub, err := tx.GetSubscription(in.SubscriptionID)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if sub.Status == SubIncomplete && !sub.CreatedAt.Add(IncompleteHold).After(now) {
				expired = append(expired, in)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("incomplete subscriptions: %w", err)
	}
	var (
		n    int
		errs []error
	)
	for _, in := range expired {
		state, err := s.processor.CancelPayment(ctx, in.ProcessorRef, billing.CancelKey(in.IdempotencyKey))
		if err == nil && state == billing.PaymentWaiting {
			err = fmt.Errorf("payment %s still waits after its cancellation", in.ProcessorRef)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("subscription %s: canceling its payment: %w", in.SubscriptionID, err))
			continue
		}
		if in.Status == IntentSettling {
			// A buyer's cancel that stopped half-way: finish it.
			if _, err := s.endCanceled(ctx, in.SubscriptionID, in, state); err != nil {
				errs = append(errs, fmt.Errorf("subscription %s: finishing its cancel: %w", in.SubscriptionID, err))
			} else {
				n++
			}
			continue
		}
		status, err := s.settleIncomplete(ctx, in.SubscriptionID, state, in.ProcessorRef)
		if err != nil {
			errs = append(errs, fmt.Errorf("subscription %s: %w", in.SubscriptionID, err))
			continue
		}
		if status != "" {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// cancelPayment cancels, best effort, the payment of an incomplete
// subscription that ended canceled, so that it cannot be completed later
// (a failed authentication leaves it confirmable with another card).
func (s *Service) cancelPayment(ctx context.Context, ref, idem string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := s.processor.CancelPayment(cctx, ref, billing.CancelKey(idem)); err != nil {
		s.logger.Warn("canceling the payment of a canceled incomplete subscription failed", zap.String("payment_ref", ref), zap.Error(err))
	}
}

// NotIncompleteError is CancelIncomplete's answer for a subscription that is
// not an unpaid purchase: a 409 (it unwraps to the *Error the API answers)
// whose message says how to end a subscription in that state.
type NotIncompleteError struct {
	SubscriptionID string
	Status         string // the subscription's status
	err            *Error
}

func (e *NotIncompleteError) Error() string { return e.err.Message }

// Unwrap returns the 409 to answer.
func (e *NotIncompleteError) Unwrap() error { return e.err }

func notIncomplete(sub *Subscription) *NotIncompleteError {
	var what string
	switch sub.Status {
	case SubActive, SubPendingKey, SubPastDue:
		what = "it is paid: cancel it at the end of its period instead (POST /api/subscriptions/" + sub.ID + "/cancel does that for a paid subscription; nothing is refunded)"
	case SubPledged:
		what = "it is a pledge: withdraw it with DELETE /api/pools/:id/pledge or POST /api/subscriptions/" + sub.ID + "/cancel"
	case SubCanceled:
		what = "it has already ended and holds no seats; nothing is left to cancel"
	default:
		what = "only an unpaid purchase (incomplete) is canceled at once"
	}
	return &NotIncompleteError{SubscriptionID: sub.ID, Status: sub.Status,
		err: Conflict("subscription %s is %s, not an unpaid purchase: %s", sub.ID, sub.Status, what)}
}

// CancelSubscription is POST /api/subscriptions/:id/cancel: an unpaid
// (incomplete) purchase is canceled at once (CancelIncomplete), any other
// subscription is set to cancel at the end of its period, or a pledge
// withdrawn (SetCancelAtPeriodEnd).
func (s *Service) CancelSubscription(ctx context.Context, userID, subID string) (*CancelResult, error) {
	res, err := s.CancelIncomplete(ctx, userID, subID)
	if _, ok := errors.AsType[*NotIncompleteError](err); ok {
		return s.SetCancelAtPeriodEnd(ctx, userID, subID, true)
	}
	return res, err
}

// CancelIncomplete cancels one of the user's unpaid purchases (an
// incomplete subscription waiting for 3-D Secure) at once: its payment is
// canceled at the processor, or refunded when the customer completed it
// first, and the subscription ends canceled with its seats free (see the
// top of this file). The answer has withdrawn true, and refunded true when
// a payment was refunded. Another user's subscription is a 404, one in any
// other state a *NotIncompleteError (409); when the processor cannot be
// reached nothing changes (the seats stay held) and the answer says to
// retry.
func (s *Service) CancelIncomplete(ctx context.Context, userID, subID string) (*CancelResult, error) {
	sub, err := s.userSubscription(ctx, userID, subID)
	if err != nil {
		return nil, err
	}
	if sub.Status != SubIncomplete {
		return nil, notIncomplete(sub)
	}
	in, err := s.openPayment(ctx, subID)
	if err != nil {
		return nil, fmt.Errorf("cancel %s: %w", subID, err)
	}
	if in != nil && in.ProcessorRef == "" {
		// A reservation whose card is being charged right now (subscribe.go).
		return nil, Conflict("the payment of subscription %s is being processed right now; look again in a moment: it ends paid or released by itself", subID)
	}
	state := billing.PaymentFailed // no open payment: nothing to cancel
	if in != nil {
		hold := sub.CreatedAt.Add(IncompleteHold).Format(time.RFC3339)
		state, err = s.processor.CancelPayment(ctx, in.ProcessorRef, billing.CancelKey(in.IdempotencyKey))
		if err == nil && state == billing.PaymentWaiting {
			err = fmt.Errorf("payment %s still waits after its cancellation", in.ProcessorRef)
		}
		if err != nil {
			s.logger.Error("cancel: canceling the payment at the processor", zap.String("subscription_id", subID), zap.Error(err))
			return nil, &Error{Status: 502, Message: fmt.Sprintf("the payment processor could not cancel the payment just now; nothing changed (the seats stay held until %s). Try again in a moment", hold)}
		}
	}
	refunded, err := s.endCanceled(ctx, subID, in, state)
	if err != nil {
		return nil, err
	}
	s.logger.Info("unpaid purchase canceled by its buyer", zap.String("user_id", userID),
		zap.String("subscription_id", subID), zap.Bool("refunded", refunded))
	s.publishKeyChange(ctx, userID)
	return &CancelResult{Canceled: true, SubscriptionID: subID, CurrentPeriodEnd: s.clock(), Withdrawn: true, Refunded: refunded}, nil
}

// endCanceled ends an incomplete subscription whose buyer canceled it,
// once its payment (in, nil when it has none) was canceled at the processor
// and ended in state. A failed (canceled) payment: the subscription is
// canceled and the intent void in one transaction. A payment the customer
// completed first: the intent is claimed (settling; the subscription stays
// incomplete, its seats held), the charge refunded, then the subscription
// canceled and the intent marked refunded in one transaction; a failure
// leaves the claim for a retry of the cancel or the expiry, never seats
// freed with the charge unrefunded. It reports whether it refunded.
func (s *Service) endCanceled(ctx context.Context, subID string, in *ChargeIntent, state string) (bool, error) {
	paid := in != nil && state == billing.PaymentSucceeded
	if paid {
		var (
			active   *Subscription // no longer incomplete
			recorded bool          // the payment is a recorded charge
		)
		err := s.store.Update(ctx, func(tx Tx) error {
			active, recorded = nil, false
			sub, err := tx.GetSubscription(subID)
			if err != nil {
				return err
			}
			if sub.Status != SubIncomplete {
				active = sub
				charges, err := tx.ListCharges(subID)
				for _, c := range charges {
					recorded = recorded || c.ProcessorRef == in.ProcessorRef
				}
				return err
			}
			cur, err := tx.GetChargeIntent(in.ID)
			if err != nil {
				return err
			}
			switch cur.Status {
			case IntentPending:
				cur.Status, cur.UpdatedAt = IntentSettling, s.clock()
				return tx.UpdateChargeIntent(cur)
			case IntentSettling:
				return nil // claimed by an earlier cancel: carried on
			}
			return fmt.Errorf("intent %s of incomplete subscription %s is %s", in.ID, subID, cur.Status)
		})
		if err != nil {
			return false, fmt.Errorf("cancel %s: claiming its payment for a refund: %w", subID, err)
		}
		if active != nil && (active.Status != SubCanceled || recorded) {
			return false, Conflict("your bank confirmed the payment before the cancel reached it: subscription %s is paid and %s now. Cancel it again to end it at the end of its period (no refund), or ask the operator for a refund", subID, active.Status)
		}
		// Still incomplete and claimed, or canceled unpaid meanwhile (a
		// concurrent cancel: refunding again under the same key refunds
		// nothing twice, and makes sure of it).
		if err := s.refundCharge(ctx, in.ProcessorRef, in.IdempotencyKey, "its buyer canceled the unpaid purchase "+subID+" after the bank had confirmed it"); err != nil {
			return false, &Error{Status: 502, Message: "the payment went through before the cancel and its refund could not be made just now; the seats stay held until it is. Try the cancel again in a moment"}
		}
	}
	err := s.store.Update(ctx, func(tx Tx) error {
		sub, err := tx.GetSubscription(subID)
		if err != nil {
			return err
		}
		if sub.Status != SubIncomplete {
			return nil // ended meanwhile (a webhook's failure, or a repeat)
		}
		now := s.clock()
		if in != nil {
			cur, err := tx.GetChargeIntent(in.ID)
			if err != nil {
				return err
			}
			if cur.Status == IntentPending || cur.Status == IntentSettling {
				cur.Status, cur.UpdatedAt = IntentVoid, now
				if paid {
					cur.Status = IntentRefunded
				}
				if err := tx.UpdateChargeIntent(cur); err != nil {
					return err
				}
			}
		}
		sub.CurrentPeriodEnd = now // never paid: no period to show
		return cancelTx(tx, sub, now)
	})
	if err != nil {
		return false, fmt.Errorf("cancel %s: %w", subID, err)
	}
	return paid, nil
}
