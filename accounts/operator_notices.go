package accounts

// The operator events of each place that makes one (operator_events.go):
// one call per site, after its transaction committed. Each reads what the
// operator needs to act — the subscription, its pool and buyer — and adds
// what to do as "todo". Amounts are decimal strings in USD; no key, token
// or card number is ever included.

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/timeblock/timeblock/accounts/billing"
	"go.uber.org/zap"
)

// Charge kinds in operator events (SPEC.md §8 charge records).
const (
	opKindPurchase = "purchase"
	opKindRenewal  = "renewal"
	opKindPledge   = "pledge"
	opKindRecovery = "recovery"
)

// notifySubscribed tells the operator that a purchase became active or
// pending_key (subscription.created) and, when its key is made by hand,
// that the order needs it (subscription.pending_key). Any other status
// tells nothing.
func (s *Service) notifySubscribed(ctx context.Context, subID, status string) {
	if status != SubActive && status != SubPendingKey {
		return
	}
	s.notifyAbout(ctx, OpSubscriptionCreated, subID, map[string]any{"kind": opKindPurchase})
	if status == SubPendingKey {
		s.notifyPendingKey(ctx, subID)
	}
}

// notifyPendingKey tells the operator that a subscription waits for its key.
func (s *Service) notifyPendingKey(ctx context.Context, subID string) {
	deliver := "/timeblock/subscriptions/" + subID + "/deliver"
	s.notifyAbout(ctx, OpSubscriptionPendingKey, subID, map[string]any{
		"deliverEndpoint": deliver,
		"todo": fmt.Sprintf("This order needs its key: start serving the pool if it is not yet, then create the key and tell the buyer with "+
			"POST %s on the admin API (e.g. curl -X POST localhost:2019%s). Buyers are promised their key within 24 hours.", deliver, deliver),
	})
}

// notifyPledge tells the operator of a new pledge; due is what it charges
// when the pool goes live.
func (s *Service) notifyPledge(ctx context.Context, subID, due string) {
	s.notifyAbout(ctx, OpPledgeCreated, subID, map[string]any{"amountDueAtActivation": due})
}

// notifyPledgeCharged tells the operator that a pledge was charged as its
// pool went live and, on a manual pool, that it now needs its key.
func (s *Service) notifyPledgeCharged(ctx context.Context, subID, amount, status string) {
	s.notifyCharge(ctx, OpChargeSucceeded, opKindPledge, subID, amount, "")
	if status == SubPendingKey {
		s.notifyPendingKey(ctx, subID)
	}
}

// chargeFailedTodo says what a failed charge of each kind leads to.
var chargeFailedTodo = map[string]string{
	opKindRenewal: "Nothing to do unless you want to reach the buyer: the subscription is past_due and its key suspended; " +
		"it recovers when the buyer saves a working card, and is canceled when the grace period ends.",
	opKindRecovery: "Nothing to do: the subscription stays past_due (key suspended) until a card pays or the grace period ends.",
	opKindPledge:   "Nothing to do: the pledge is released, its seats are free again and nothing was charged.",
}

// notifyCharge tells the operator that a charge of kind succeeded or failed
// (typ OpChargeSucceeded or OpChargeFailed); reason says why it failed.
func (s *Service) notifyCharge(ctx context.Context, typ, kind, subID, amount, reason string) {
	extra := map[string]any{"kind": kind, "amount": amount, "currency": "USD"}
	if reason != "" {
		extra["reason"] = reason
	}
	if typ == OpChargeFailed && chargeFailedTodo[kind] != "" {
		extra["todo"] = chargeFailedTodo[kind]
	}
	s.notifyAbout(ctx, typ, subID, extra)
}

// notifyRefund tells the operator that Timeblock refunded the charge ref,
// made under chargeKey (refundCharge), and why.
func (s *Service) notifyRefund(ctx context.Context, ref, chargeKey, why string) {
	extra := map[string]any{"processorRef": ref, "reason": why, "currency": "USD"}
	op, subID, _ := billing.ParseKey(chargeKey)
	if kind := chargeKindOf(op); kind != "" {
		extra["kind"] = kind
	}
	if subID == "" || !s.operatorListens() {
		s.NotifyOperator(ctx, OpChargeRefunded, extra)
		return
	}
	s.view(ctx, func(tx Tx) error {
		charges, err := tx.ListCharges(subID)
		for _, c := range charges {
			if c.ProcessorRef == ref {
				extra["chargeId"], extra["amount"] = c.ID, c.Amount
			}
		}
		return err
	})
	s.notifyAbout(ctx, OpChargeRefunded, subID, extra)
}

// chargeKindOf names the charge kind of an idempotency key's operation.
func chargeKindOf(op string) string {
	switch op {
	case billing.ChargeSubscribe:
		return opKindPurchase
	case billing.ChargeRenewal:
		return opKindRenewal
	case billing.ChargePledge:
		return opKindPledge
	case billing.ChargeRetry:
		return opKindRecovery
	}
	return ""
}

// notifyProcessorEvent tells the operator what a processor's event did
// that needs them (ApplyProcessorEvent): a dispute; a refund or failure
// made outside Timeblock that left a subscription past_due; a payment that
// waited for the customer and activated a purchase; a late success that
// recovered a past-due subscription.
func (s *Service) notifyProcessorEvent(ctx context.Context, ev ProcessorEvent, res *ProcessorEventResult) {
	if res == nil || res.Duplicate || res.SubscriptionID == "" {
		return
	}
	op, subID, _ := billing.ParseKey(ev.IdempotencyKey)
	kind := chargeKindOf(op)
	extra := map[string]any{"kind": kind, "processorRef": ev.Ref, "processorEventId": ev.ID, "processorEventType": ev.Type}
	switch {
	case ev.Kind == EventChargeDisputed:
		extra["todo"] = "The card holder disputed this charge: answer the dispute in the payment processor's dashboard. " +
			"When it was the current period's charge, the subscription is past_due (key suspended) until it is paid again or the dispute is won."
		s.notifyAbout(ctx, OpChargeDisputed, subID, extra)
	case ev.Kind == EventChargeRefunded && res.Effect == SubPastDue:
		extra["reason"] = "refunded outside Timeblock (in the payment processor's dashboard): the period is unpaid, the subscription past_due"
		s.notifyAbout(ctx, OpChargeRefunded, subID, extra)
	case ev.Kind == EventChargeFailed && res.Effect == SubPastDue:
		extra["reason"], extra["todo"] = "the processor reported the charge failed after all", chargeFailedTodo[opKindRenewal]
		s.notifyAbout(ctx, OpChargeFailed, subID, extra)
	case op == billing.ChargeSubscribe:
		s.notifySubscribed(ctx, subID, res.Effect)
	case ev.Kind == EventChargeSucceeded && res.Effect == SubActive:
		s.notifyAbout(ctx, OpChargeSucceeded, subID, extra)
	}
}

// notifyGoalReached tells the operator that a funding pool reached its goal
// (pledged is the monthly amount pledged) and is activating.
func (s *Service) notifyGoalReached(ctx context.Context, p *Pool, pledged string) {
	status := "/timeblock/pools/" + p.Slug + "/status"
	s.NotifyOperator(ctx, OpPoolGoalReached, map[string]any{
		"poolId": p.ID, "poolSlug": p.Slug, "fundingGoal": p.FundingGoal, "pledged": pledged, "currency": "USD",
		"statusEndpoint": status,
		"todo": fmt.Sprintf("Start the pool's model server, then make it active with POST %s {\"status\":\"active\"} on the admin API, "+
			"which charges every pledge.", status),
	})
}

// notifyAbout records an operator event about a subscription: its id,
// status and terms, its pool and its buyer, with extra on top. What cannot
// be read is left out (logged), never the event.
func (s *Service) notifyAbout(ctx context.Context, typ, subID string, extra map[string]any) {
	if !s.operatorListens() {
		return
	}
	data := map[string]any{"subscriptionId": subID}
	s.view(ctx, func(tx Tx) error {
		sub, err := tx.GetSubscription(subID)
		if err != nil {
			return err
		}
		data["userId"], data["status"], data["quantity"], data["blocks"] = sub.UserID, sub.Status, sub.Quantity, sub.Blocks
		data["billingCycle"], data["monthlyPrice"] = sub.BillingCycle, sub.MonthlyPrice
		if sub.PeriodAmount != "" {
			data["periodAmount"] = sub.PeriodAmount
		}
		if !sub.CurrentPeriodEnd.IsZero() {
			data["currentPeriodEnd"] = sub.CurrentPeriodEnd.UTC().Format(time.RFC3339)
		}
		if typ == OpSubscriptionCreated { // what the purchase charged
			charges, err := tx.ListCharges(subID)
			if err != nil {
				return err
			}
			for _, c := range charges {
				if c.Status == ChargeSucceeded && c.PeriodStart.Equal(sub.CurrentPeriodStart) {
					data["amount"], data["chargeId"], data["currency"] = c.Amount, c.ID, "USD"
				}
			}
		}
		if pool, err := tx.GetPool(sub.PoolID); err == nil {
			data["poolId"], data["poolSlug"] = pool.ID, pool.Slug
		}
		if user, err := tx.GetUser(sub.UserID); err == nil {
			data["email"] = user.Email
		}
		return nil
	})
	maps.Copy(data, extra)
	s.NotifyOperator(ctx, typ, data)
}

// view runs fn in a View of its own (the caller's request may be ending);
// an error is logged: an operator event goes out with what was read.
func (s *Service) view(ctx context.Context, fn func(tx Tx) error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), noticeTimeout)
	defer cancel()
	if err := s.store.View(ctx, fn); err != nil {
		s.logger.Warn("operator notice: reading its details failed; it goes out without them", zap.Error(err))
	}
}

// operatorListens reports whether operator events go anywhere: a webhook,
// or a notifier that tells the operator. Without, the sites read nothing.
func (s *Service) operatorListens() bool {
	_, ok := s.notifier.(OperatorNotifier)
	return ok || s.opWebhook != nil
}
