package stripe

// Webhook deliveries: the signature is checked with stripe-go's webhook
// package (Stripe-Signature header, the endpoint's whsec_ secret, five
// minutes of tolerance), then the few fields Timeblock acts on are read.
// Events are read by field rather than into stripe-go's types, so that an
// endpoint pinned to another API version than stripe-go's still works.
//
// The event says which object changed; its effect is decided on the
// object's state when the delivery is read (Stripe's own advice), so that
// deliveries in any order end in the same state. Events acted on (every
// other one is recorded and ignored):
//
//	payment_intent.succeeded,      the PaymentIntent as it is now:
//	payment_intent.payment_failed, succeeded → the charge succeeded;
//	payment_intent.canceled        requires_payment_method/canceled → failed
//	charge.refunded                refunded in full → refunded (a refund is
//	                               never undone; a partial one is ignored)
//	charge.dispute.*               the dispute as it is now: won → dispute
//	                               won; warning_closed → ignored; any other
//	                               status → disputed
//	setup_intent.succeeded         a card setup that waited for the card
//	                               holder, still the Customer's newest →
//	                               the card is saved (setupintent.go)

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	stripeapi "github.com/stripe/stripe-go/v85"
	"github.com/stripe/stripe-go/v85/webhook"

	"github.com/timeblock/timeblock/accounts"
)

// SignatureHeader is the header Stripe signs deliveries in.
const SignatureHeader = "Stripe-Signature"

// eventObject holds the fields read from an event's data.object, whichever
// object it is (PaymentIntent, Charge, Dispute or SetupIntent).
type eventObject struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Metadata      map[string]string `json:"metadata"`
	PaymentIntent json.RawMessage   `json:"payment_intent"` // id, or an expanded object
	Refunded      bool              `json:"refunded"`
	Status        string            `json:"status"`
}

// WebhookEvent verifies a delivery and reads it as a processor event. A
// missing, wrong or stale signature, or an unreadable payload, is a 400
// *accounts.Error; failing to ask Stripe about the charge is an error
// (answered 5xx, so that Stripe delivers again).
func (p *Processor) WebhookEvent(ctx context.Context, payload []byte, signature string) (accounts.ProcessorEvent, error) {
	if p.webhookSecret == "" {
		return accounts.ProcessorEvent{}, errors.New("stripe: no webhook_secret is configured")
	}
	ev, err := webhook.ConstructEventWithOptions(payload, signature, p.webhookSecret,
		webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
	if err != nil {
		return accounts.ProcessorEvent{}, signatureError(err)
	}
	if signedInFuture(signature, time.Now()) {
		// stripe-go bounds a signature's age only: one dated ahead would
		// stay replayable until that date.
		return accounts.ProcessorEvent{}, accounts.Invalid("the signature is dated more than %s ahead: check the clock of this server, or the delivery was forged", webhook.DefaultTolerance)
	}
	if ev.ID == "" || ev.Data == nil {
		return accounts.ProcessorEvent{}, accounts.Invalid("the event has no id or no data")
	}
	var obj eventObject
	if err := json.Unmarshal(ev.Data.Raw, &obj); err != nil {
		return accounts.ProcessorEvent{}, accounts.Invalid("the event's data.object is unreadable: %v", err)
	}
	out := accounts.ProcessorEvent{ID: ev.ID, Type: string(ev.Type)}
	typ := string(ev.Type)
	switch {
	case typ == "payment_intent.succeeded" || typ == "payment_intent.payment_failed" || typ == "payment_intent.canceled":
		pi, err := p.client.V1PaymentIntents.Retrieve(ctx, obj.ID, nil)
		if missing(err) {
			return out, nil // not this account's (or deleted): nothing to act on
		}
		if err != nil {
			return accounts.ProcessorEvent{}, fmt.Errorf("stripe: reading PaymentIntent %s of event %s: %w", obj.ID, ev.ID, err)
		}
		out.Ref, out.IdempotencyKey = pi.ID, pi.Metadata[MetaIdempotencyKey]
		switch pi.Status {
		case stripeapi.PaymentIntentStatusSucceeded:
			out.Kind = accounts.EventChargeSucceeded
		case stripeapi.PaymentIntentStatusRequiresPaymentMethod, stripeapi.PaymentIntentStatusCanceled:
			out.Kind = accounts.EventChargeFailed
		}
		return out, nil
	case typ == "setup_intent.succeeded":
		return p.setupEvent(ctx, out, obj.ID)
	case typ == "charge.refunded":
		if !obj.Refunded {
			return out, nil
		}
		out.Kind = accounts.EventChargeRefunded
	case strings.HasPrefix(typ, "charge.dispute."):
		d, err := p.client.V1Disputes.Retrieve(ctx, obj.ID, nil)
		if missing(err) {
			return out, nil
		}
		if err != nil {
			return accounts.ProcessorEvent{}, fmt.Errorf("stripe: reading dispute %s of event %s: %w", obj.ID, ev.ID, err)
		}
		switch d.Status {
		case stripeapi.DisputeStatusWon:
			out.Kind = accounts.EventDisputeWon
		case stripeapi.DisputeStatusWarningClosed:
			return out, nil
		default:
			out.Kind = accounts.EventChargeDisputed
		}
		if d.PaymentIntent != nil {
			obj.PaymentIntent, _ = json.Marshal(d.PaymentIntent.ID)
		}
	default:
		return out, nil
	}
	// A Charge or a Dispute: the PaymentIntent is the reference; its
	// metadata has the key (a Charge usually carries a copy).
	out.Ref = paymentIntentID(obj.PaymentIntent)
	if out.Ref == "" {
		out.Kind = accounts.EventIgnored // not a PaymentIntent's charge: not Timeblock's
		return out, nil
	}
	if obj.Object == "charge" && obj.Metadata[MetaIdempotencyKey] != "" {
		out.IdempotencyKey = obj.Metadata[MetaIdempotencyKey]
		return out, nil
	}
	pi, err := p.client.V1PaymentIntents.Retrieve(ctx, out.Ref, nil)
	if missing(err) {
		return accounts.ProcessorEvent{ID: out.ID, Type: out.Type}, nil
	}
	if err != nil {
		return accounts.ProcessorEvent{}, fmt.Errorf("stripe: reading PaymentIntent %s of event %s: %w", out.Ref, ev.ID, err)
	}
	out.IdempotencyKey = pi.Metadata[MetaIdempotencyKey]
	return out, nil
}

// missing reports whether Stripe answered that the object does not exist.
func missing(err error) bool {
	var se *stripeapi.Error
	return errors.As(err, &se) && se.Code == stripeapi.ErrorCodeResourceMissing
}

// paymentIntentID reads an object's payment_intent: an id, an expanded
// object, or null.
func paymentIntentID(raw json.RawMessage) string {
	var id string
	if json.Unmarshal(raw, &id) == nil {
		return id
	}
	var obj struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.ID
	}
	return ""
}

// signatureError says why a delivery was refused.
func signatureError(err error) error {
	switch {
	case errors.Is(err, webhook.ErrNotSigned):
		return accounts.Invalid("the request has no %s header: only Stripe's signed deliveries are accepted", SignatureHeader)
	case errors.Is(err, webhook.ErrInvalidHeader):
		return accounts.Invalid("the %s header is malformed", SignatureHeader)
	case errors.Is(err, webhook.ErrTooOld):
		return accounts.Invalid("the signature is older than %s: a replayed or delayed delivery is refused", webhook.DefaultTolerance)
	case errors.Is(err, webhook.ErrNoValidSignature):
		return accounts.Invalid("the signature does not match: check that webhook_secret is this endpoint's signing secret")
	}
	return accounts.Invalid("the event is unreadable: %v", err)
}

// signedInFuture reports whether the Stripe-Signature header (t=<unix
// seconds>,v1=...) is dated more than the tolerance after now.
func signedInFuture(header string, now time.Time) bool {
	for part := range strings.SplitSeq(header, ",") {
		if v, ok := strings.CutPrefix(part, "t="); ok {
			sec, err := strconv.ParseInt(v, 10, 64)
			return err == nil && time.Unix(sec, 0).After(now.Add(webhook.DefaultTolerance))
		}
	}
	return false
}
