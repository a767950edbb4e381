package billing

// Charge keys: every processor call carries an idempotency key naming the
// logical operation, so that repeating it (a retry, a crash, a race) makes
// the processor replay its first answer instead of charging again. They are
// built and read here only.
//
//   - subscribe:<subscription id>, the first period of a purchase;
//   - renew:<subscription id>:<period start>, one renewal;
//   - pledge:<subscription id>, a pledge charged when its pool goes live;
//   - retry:<subscription id>:<charge id>:<payment method id>, a past-due
//     charge tried on one card (each card once per charge);
//   - refund:<charge key> and cancel:<charge key>, the refund of a charge
//     and the cancellation of a payment that waits for the customer.

import (
	"strings"
	"time"
)

// Kinds of charge, the first part of a charge key.
const (
	ChargeSubscribe = "subscribe"
	ChargeRenewal   = "renew"
	ChargeRetry     = "retry"
	ChargePledge    = "pledge"
)

// SubscribeKey is the idempotency key of the first charge of a subscription.
func SubscribeKey(subID string) string { return ChargeSubscribe + ":" + subID }

// PledgeKey is the idempotency key of the charge of a pledge when its pool
// goes live (the first period, off-session).
func PledgeKey(subID string) string { return ChargePledge + ":" + subID }

// RenewalKey is the idempotency key of the renewal of a subscription for the
// period starting at periodStart.
func RenewalKey(subID string, periodStart time.Time) string {
	return ChargeRenewal + ":" + subID + ":" + periodStart.UTC().Format(time.RFC3339Nano)
}

// RetryKey is the idempotency key of a past-due charge tried on one card.
func RetryKey(subID, chargeID, methodID string) string {
	return ChargeRetry + ":" + subID + ":" + chargeID + ":" + methodID
}

// RefundKey is the idempotency key of the refund of the charge under
// chargeKey: every path that refunds a charge uses it, so that a charge is
// refunded at most once.
func RefundKey(chargeKey string) string { return "refund:" + chargeKey }

// CancelKey is the idempotency key of canceling the payment under chargeKey.
func CancelKey(chargeKey string) string { return "cancel:" + chargeKey }

// ChargeKind returns the kind of charge a charge key names (ChargeSubscribe,
// ChargeRenewal, ChargeRetry or ChargePledge), or "" for anything else.
func ChargeKind(key string) string {
	kind, _, _ := ParseKey(key)
	return kind
}

// ParseKey splits a charge key into its kind, the subscription id and
// the rest (a renewal's period start, a retry's charge and card); all ""
// for a key that is not a charge key.
func ParseKey(key string) (kind, subID, rest string) {
	kind, tail, _ := strings.Cut(key, ":")
	switch kind {
	case ChargeSubscribe, ChargeRenewal, ChargeRetry, ChargePledge:
	default:
		return "", "", ""
	}
	subID, rest, _ = strings.Cut(tail, ":")
	return kind, subID, rest
}
