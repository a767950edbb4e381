package billing

// The payment-processor interface and what it answers with.

import (
	"context"
	"errors"
	"time"
)

// ErrDeclined is what Processor.Charge returns when the card was declined.
var ErrDeclined = errors.New("card declined")

// ErrRefundTooLarge is what Processor.RefundAmount returns when the amount
// is more than what remains of the charge (Stripe: "amount exceeds the
// charge"); a charge refunded in full is refunded again by nothing.
var ErrRefundTooLarge = errors.New("the refund is larger than what remains of the charge")

// ActionRequiredError is what Processor.Charge returns for an on-session
// subscribe charge that waits for the customer to authenticate it (SCA /
// 3-D Secure, Stripe's requires_action): nothing is taken yet, and the page
// finishes the payment with the client secret (Stripe.js
// confirmCardPayment). It is not a decline: errors.Is(err, ErrDeclined) is
// false. Processors return it only for "subscribe:" idempotency keys.
type ActionRequiredError struct {
	Ref          string // the processor's reference of the waiting payment
	ClientSecret string // what the page confirms the payment with
}

func (e *ActionRequiredError) Error() string {
	return "the payment " + e.Ref + " waits for the customer to authenticate it"
}

// SetupActionRequiredError is what Processor.SaveMethod and FinishSetup
// return when the bank wants the card holder to authenticate the card before
// it is set up for later off-session charges (3-D Secure on Stripe's
// SetupIntent, status requires_action): nothing is saved yet. The page
// confirms the setup with the client secret (Stripe.js confirmCardSetup) and
// then finishes it with the setup id (Service.FinishSetupIntent).
type SetupActionRequiredError struct {
	SetupIntentID string // the processor's id of the waiting setup
	ClientSecret  string // what the page confirms the setup with
}

func (e *SetupActionRequiredError) Error() string {
	return "the card setup " + e.SetupIntentID + " waits for the customer to authenticate it"
}

// States of a payment that waited for the customer (Processor.PaymentStatus).
const (
	PaymentSucceeded = "succeeded" // the money is taken (or being taken)
	PaymentWaiting   = "waiting"   // still waits for the customer
	PaymentFailed    = "failed"    // canceled, or the authentication failed: nothing taken
)

// IdempotencyError is what Processor.Charge returns when its idempotency key
// was used before with other parameters (another card, amount or customer):
// Stripe's 400 idempotency_error. This call charged nothing, and it says
// nothing of what the first request under the key did: FindCharge tells.
// Callers avoid it by fixing a charge's request when they first make it
// (accounts.ChargeIntent) and re-sending exactly that.
type IdempotencyError struct {
	Key    string // the idempotency key
	Detail string // the processor's words, for logs
}

func (e *IdempotencyError) Error() string {
	msg := "the idempotency key " + e.Key + " was used before with other parameters"
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// KeyLifetime is how long a processor is known to remember an idempotency
// key: Stripe prunes keys once they are at least 24 hours old. A request
// re-sent later may be taken as a new one, so a caller re-sending a charge
// whose outcome it does not know asks FindCharge first.
const KeyLifetime = 24 * time.Hour

// ChargeRequest asks a processor to charge a user's saved payment method.
// A repeat under the same IdempotencyKey must carry the same UserID,
// MethodID and Amount, or the processor refuses it (*IdempotencyError).
type ChargeRequest struct {
	UserID   string
	MethodID string // PaymentMethod.ID
	Amount   string // exact decimal USD, at most two decimals
	// IdempotencyKey identifies the logical charge: a processor charges at
	// most once per key and answers repeats with the first outcome.
	IdempotencyKey string
	Description    string
}

// Processor is a payment processor. The built-in TestProcessor is the
// default; a real one (Stripe and the like) implements the same methods.
type Processor interface {
	// Name identifies the processor in GET /api/billing/status.
	Name() string
	// SaveMethod validates and saves a payment method for the user; an
	// unusable method is a *MethodError that says what to send (the
	// accounts service answers it with a 400, as it passes on an
	// *accounts.Error a processor returns). A processor
	// may set the method up for off-session charges first: a setup that
	// waits for the card holder is *SetupActionRequiredError, a declined
	// one ErrDeclined (a *DeclineError with the reason); nothing is saved
	// then.
	SaveMethod(ctx context.Context, userID, method string) (PaymentMethod, error)
	// FinishSetup saves the method of a setup that waited for the card
	// holder (a *SetupActionRequiredError's SetupIntentID) once it
	// succeeded. Still waiting is *SetupActionRequiredError again, a failed
	// or canceled setup ErrDeclined, an unknown setup or another user's a
	// *SetupNotFoundError (or a 404 *accounts.Error).
	FinishSetup(ctx context.Context, userID, setupID string) (PaymentMethod, error)
	// Charge charges the amount and returns the processor's reference.
	// A declined card is ErrDeclined (possibly wrapped); a repeated key
	// with other parameters is *IdempotencyError. A processor may forget a
	// key after KeyLifetime and then charge a repeat anew.
	Charge(ctx context.Context, req ChargeRequest) (ref string, err error)
	// Refund returns a charge in full, at most once per idempotency key;
	// refunding a refunded charge again is not an error.
	Refund(ctx context.Context, ref, idempotencyKey string) error
	// RefundAmount returns amount (exact decimal USD, at most two
	// decimals) of a charge, at most once per idempotency key, and answers
	// what is refunded of the charge in all afterwards (its total, with
	// refunds made elsewhere). A repeat under the key answers the total
	// again and refunds nothing; a repeat with another amount is
	// *IdempotencyError. More than remains of the charge is
	// ErrRefundTooLarge, refunding nothing.
	RefundAmount(ctx context.Context, ref, amount, idempotencyKey string) (refunded string, err error)
	// FindCharge reports whether a charge was made under the idempotency
	// key, and its reference; settlement asks it about charges nothing
	// recorded (intents.go), and a caller about to re-send a charge whose
	// outcome it lost asks it first. It finds charges however old (the key
	// is kept in the charge's metadata, not only as an idempotency key). A
	// declined attempt is not found. An error means the processor could not
	// be asked.
	FindCharge(ctx context.Context, idempotencyKey string) (ref string, found bool, err error)
	// PaymentStatus reports the state of a payment that waited for the
	// customer (an *ActionRequiredError's Ref): PaymentSucceeded,
	// PaymentWaiting or PaymentFailed.
	PaymentStatus(ctx context.Context, ref string) (string, error)
	// CancelPayment cancels a payment that waits for the customer and
	// returns its state afterwards: PaymentFailed once canceled, or
	// PaymentSucceeded when the customer completed it first (then nothing
	// is canceled). Canceling a canceled payment is not an error.
	CancelPayment(ctx context.Context, ref, idempotencyKey string) (string, error)
}

// PaymentMethod is a saved card, as the processor describes it.
type PaymentMethod struct {
	ID    string // processor's id
	Brand string
	Last4 string
}

// DeclineError is a declined payment with the processor's reason, in words a
// user understands. errors.Is(err, ErrDeclined) holds for it.
type DeclineError struct {
	// Reason is the processor's explanation, e.g. "Your card has
	// insufficient funds." Empty when the processor gave none.
	Reason string
	// Code is the processor's machine-readable reason (card_declined,
	// authentication_required, ...), for logs.
	Code string
}

func (e *DeclineError) Error() string {
	if e.Reason == "" {
		return ErrDeclined.Error()
	}
	return ErrDeclined.Error() + ": " + e.Reason
}

// Is makes errors.Is(err, ErrDeclined) true.
func (e *DeclineError) Is(target error) bool { return target == ErrDeclined }

// DeclineReason returns the user-facing reason of a decline, or "".
func DeclineReason(err error) string {
	if d, ok := errors.AsType[*DeclineError](err); ok {
		return d.Reason
	}
	return ""
}

// MethodError is what SaveMethod returns for a payment method the processor
// cannot use at all: Message says what to send instead. The accounts
// service answers it with a 400.
type MethodError struct {
	Message string
}

func (e *MethodError) Error() string { return e.Message }

// SetupNotFoundError is what FinishSetup returns for an unknown card setup,
// or another user's. The accounts service answers it with a 404.
type SetupNotFoundError struct {
	SetupID string
}

func (e *SetupNotFoundError) Error() string { return "no card setup " + e.SetupID }
