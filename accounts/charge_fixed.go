package accounts

// A charge is the request first made.
//
// A processor's idempotency key names one request: Stripe answers a repeat
// of a key with other parameters (another card, amount or customer) with
// 400 idempotency_error and charges nothing, and forgets a key once it is
// about 24 hours old, after which a repeat is a new charge. So every charge
// Timeblock makes fixes its request when it is first written — the card,
// the amount and the key, in its charge intent (ChargeIntent.MethodID) or
// its renewal claim (Charge.MethodID) — and every later attempt under that
// key re-sends exactly that request, whatever card the user saved since.
//
// A re-send whose first attempt's outcome was lost (a takeover of a
// renewal claim or a pledge charge left pending, a record written before
// the card was kept) first asks the processor what became of the key
// (FindCharge, which finds charges however old): a charge found is
// recorded, not made again. So does any attempt once the key may be
// forgotten (keyTrust after the request was fixed). Only when the
// processor says nothing was charged is the request sent.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/timeblock/timeblock/accounts/billing"
	"go.uber.org/zap"
)

// keyTrust is how long after a charge's request was fixed a re-send may rely
// on the processor's idempotency alone: half the time the processor is known
// to keep keys. Later, FindCharge is asked first.
const keyTrust = billing.KeyLifetime / 2

// searchLag is how long a processor's search may not yet show a charge just
// made (Stripe's search index lags writes by up to about a minute).
const searchLag = 10 * time.Minute

// msgKeyHeldElsewhere is the decline reason when the processor refuses a
// charge's key because an earlier attempt under it had other details and
// took no money: the charge cannot be made under that key any more.
const msgKeyHeldElsewhere = "the payment could not be made: an earlier attempt with another card took no money. Save a card and the charge is tried again"

// chargeFixed charges req, a request fixed at firstAt, under its
// idempotency key. askFirst says its first attempt's outcome may be
// unknown to the caller (a takeover, a record without its card): the
// processor is asked what became of the key before anything is sent, and
// so is it once the key may have been forgotten. A charge found is
// returned as made. Errors are the processor's (ErrDeclined, an unknown
// outcome to retry later), never *billing.IdempotencyError: a key the
// processor holds with other details is answered with the charge found
// under it, or, when it took no money, as a decline.
func (s *Service) chargeFixed(ctx context.Context, req billing.ChargeRequest, firstAt time.Time, askFirst bool) (string, error) {
	age := s.clock().Sub(firstAt)
	if askFirst || age >= keyTrust {
		ref, found, err := s.processor.FindCharge(ctx, req.IdempotencyKey)
		if err != nil {
			return "", fmt.Errorf("asking the processor what became of %s before charging it again: %w", req.IdempotencyKey, err)
		}
		if found {
			s.logger.Info("charge found at the processor: recorded, not made again",
				zap.String("idempotency_key", req.IdempotencyKey), zap.String("charge_ref", ref))
			return ref, nil
		}
	}
	ref, err := s.processor.Charge(ctx, req)
	if _, ok := errors.AsType[*billing.IdempotencyError](err); !ok {
		return ref, err
	}
	// Only a request written before its card was kept can meet this: the
	// key was first sent with another card.
	found, ok, ferr := s.processor.FindCharge(ctx, req.IdempotencyKey)
	switch {
	case ferr != nil:
		return "", fmt.Errorf("%w; and asking the processor what became of it: %w", err, ferr)
	case ok:
		s.logger.Warn("charge refused as a repeat with other details, and found made under its key: recorded",
			zap.String("idempotency_key", req.IdempotencyKey), zap.String("charge_ref", found))
		return found, nil
	case age < searchLag:
		return "", fmt.Errorf("%w; the processor may not show its charge yet: retried later", err)
	}
	s.logger.Warn("charge refused as a repeat with other details, and nothing was charged under its key: taken as declined",
		zap.String("idempotency_key", req.IdempotencyKey), zap.Error(err))
	return "", &billing.DeclineError{Reason: msgKeyHeldElsewhere, Code: "idempotency_error"}
}
