package accounts

// Idempotent purchases: POST /api/pools/:id/subscribe with an
// Idempotency-Key header. One key is one purchase and at most one charge.
// The first request under a key is recorded (running) before it runs, with
// the id its purchase gets (the subscription's, its charge intent's, and
// through "subscribe:<id>" the processor's idempotency key); its answer is
// recorded after. The same key and the same request within
// IdempotencyWindow:
//
//   - after a success or a client error, get that answer again and buy
//     nothing;
//   - after a 5xx, or once the first attempt was abandoned (running longer
//     than idempotencyLease, or than reserveLease before its seats were
//     reserved, which only a node that died mid-request leaves behind),
//     carry the same purchase on (SubscribeAs): a charge whose
//     answer was lost is asked again under the same processor key, so the
//     processor replays it rather than charging twice, and a purchase that
//     settlement has ended answers with that outcome;
//   - while the first attempt still runs, or settlement is ending its
//     purchase, get 409 "still being processed" (never recorded as the key's
//     answer) — unless its purchase has already ended (settled after a
//     crash), which is answered at once.
//
// The same key with another request is a 409. A request's fingerprint
// names its pool by id, so a purchase by slug and by id are the same one.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// IdempotencyWindow is how long an Idempotency-Key's answer is kept.
const IdempotencyWindow = 24 * time.Hour

// idempotencyLease is how long a request may run under a key, charging,
// before the key is taken as abandoned; far longer than a charge can last.
const idempotencyLease = 10 * time.Minute

// reserveLease is how long a request may run under a key before its
// purchase is reserved; a node that died before that leaves nothing to wait
// for. (Were the request alive after all, the two would share one processor
// key: still one charge at most.)
const reserveLease = 30 * time.Second

// MaxIdempotencyKey is the longest Idempotency-Key accepted.
const MaxIdempotencyKey = 255

// IdempotentStart is what BeginIdempotent decided.
type IdempotentStart struct {
	// Replay is the recorded answer to send again, or nil: run the request.
	Replay *IdempotentRequest
	// PurchaseID is the purchase to run with SubscribeAs: a new one, or the
	// one an earlier attempt under the key started; "" with a replay.
	PurchaseID string
}

// CheckIdempotencyKey validates an Idempotency-Key header (400).
func CheckIdempotencyKey(key string) error {
	if len(key) > MaxIdempotencyKey {
		return Invalid("Idempotency-Key is longer than %d characters", MaxIdempotencyKey)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return Invalid("Idempotency-Key must be printable ASCII without spaces, e.g. a UUID")
		}
	}
	return nil
}

// BeginIdempotent records a request under (user, key) before it runs, or
// returns the answer to replay, or refuses (409).
func (s *Service) BeginIdempotent(ctx context.Context, userID, key, fingerprint string) (*IdempotentStart, error) {
	if err := CheckIdempotencyKey(key); err != nil {
		return nil, err
	}
	var start IdempotentStart
	err := s.store.Update(ctx, func(tx Tx) error {
		start = IdempotentStart{}
		now := s.clock()
		old, err := tx.GetIdempotentRequest(userID, key)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if err == nil && now.Sub(old.CreatedAt) < IdempotencyWindow {
			if old.Fingerprint != fingerprint {
				return Conflict("Idempotency-Key %q was used for another request in the last 24 hours; nothing was bought. Use a new key for a new purchase", key)
			}
			switch {
			case old.Status != 0 && old.Status < 500:
				start.Replay = old
				return nil
			case old.Status == 0:
				running, err := stillRunningTx(tx, old.ResourceID, now.Sub(old.CreatedAt))
				if err != nil {
					return err
				}
				if running {
					return Conflict("a request with Idempotency-Key %q is still being processed; retry in a moment", key)
				}
			}
			// A 5xx, an abandoned attempt, or one whose purchase ended:
			// carry the same purchase on.
			old.Status, old.Body, old.CreatedAt = 0, nil, now
			start.PurchaseID = old.ResourceID
			return tx.PutIdempotentRequest(old)
		}
		start.PurchaseID = newID()
		return tx.PutIdempotentRequest(&IdempotentRequest{
			UserID: userID, Key: key, Fingerprint: fingerprint, ResourceID: start.PurchaseID, CreatedAt: now,
		})
	})
	if err != nil {
		return nil, passClientError("idempotency key", err)
	}
	return &start, nil
}

// stillRunningTx reports whether the request that started the purchase
// under id, age ago, may still be running. A purchase with an outcome that
// no request will change (recorded, refunded, void) is not; one charging
// may be for idempotencyLease; one not yet reserved, for reserveLease (a
// live request reserves within moments of its start).
func stillRunningTx(tx Tx, id string, age time.Duration) (bool, error) {
	in, err := tx.GetChargeIntent(id)
	if errors.Is(err, ErrNotFound) {
		return age < reserveLease, nil
	}
	if err != nil {
		return false, err
	}
	if in.Status == IntentDone || in.Status == IntentRefunded || in.Status == IntentVoid {
		return false, nil
	}
	return age < idempotencyLease, nil
}

// findPurchase reads what the purchase under id has come to: nil when
// nothing of it was written.
func (s *Service) findPurchase(ctx context.Context, userID, id string) (*purchase, error) {
	var p *purchase
	err := s.store.View(ctx, func(tx Tx) error {
		p = nil
		in, err := tx.GetChargeIntent(id)
		if errors.Is(err, ErrNotFound) {
			in = nil
		} else if err != nil {
			return err
		}
		sub, err := tx.GetSubscription(id)
		if errors.Is(err, ErrNotFound) {
			sub = nil
		} else if err != nil {
			return err
		}
		if in == nil && sub == nil {
			return nil
		}
		if in != nil && in.UserID != userID || sub != nil && sub.UserID != userID {
			return fmt.Errorf("purchase %s belongs to another user", id)
		}
		p = &purchase{intent: in, sub: sub, resumable: true}
		if sub == nil {
			return nil
		}
		p.pool, err = tx.GetPool(sub.PoolID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("idempotency key: %w", err)
	}
	return p, nil
}

// msgBoughtNothing answers a key whose purchase ended unpaid.
const msgBoughtNothing = "an earlier request with this Idempotency-Key bought nothing: its payment did not go through and nothing was charged. Buy again with a new Idempotency-Key"

// resume carries on a purchase an earlier attempt under the same
// Idempotency-Key started, or answers with its outcome.
func (s *Service) resume(ctx context.Context, p *purchase) (*SubscribeResult, error) {
	in, sub := p.intent, p.sub
	unpaid := sub != nil && sub.Status == SubIncomplete
	switch {
	case in == nil && unpaid, in != nil && in.Status == IntentPending && unpaid && in.ProcessorRef != "":
		// Its payment waits for the customer, whose client secret went out
		// with the first answer (incomplete.go).
		hold := sub.CreatedAt.Add(IncompleteHold)
		amount := ""
		if in != nil {
			amount = in.Amount
		}
		return nil, &Error{Status: 402,
			Message: fmt.Sprintf("this purchase (subscription %s) waits for your bank's confirmation (3-D Secure): finish it and POST /api/subscriptions/%s/confirm before %s, when it is canceled unpaid",
				sub.ID, sub.ID, hold.Format(time.RFC3339)),
			Data: IncompleteData{SubscriptionID: sub.ID, Status: SubIncomplete, Amount: amount, HoldExpiresAt: hold}}
	case in != nil && in.Status == IntentPending && unpaid:
		// Reserved, the charge's outcome unknown: ask again under the same
		// key; the processor replays a charge it made.
		return s.charge(ctx, p)
	case in != nil && in.Status == IntentVoid:
		return nil, Conflict(msgBoughtNothing)
	case in != nil && in.Status == IntentRefunded:
		return nil, Conflict("an earlier request with this Idempotency-Key was charged but could not be completed: the charge was refunded (%s) and nothing was bought. Buy again with a new Idempotency-Key", in.Amount)
	case in == nil || in.Status == IntentDone:
		res, err := s.subscribeResultOf(ctx, sub.UserID, sub.ID)
		if err != nil {
			return nil, err
		}
		if res != nil && res.Status == SubCanceled && res.AmountCharged == "" {
			// Made before intents carried the subscription id: an
			// incomplete subscription that ended unpaid.
			return nil, Conflict(msgBoughtNothing)
		}
		if res != nil {
			return res, nil
		}
	}
	// Settlement holds it (settling), or its reservation is gone while the
	// intent waits for settlement: the outcome comes within minutes.
	return nil, ErrPurchaseSettling
}

// ErrPurchaseSettling answers a retry whose purchase settlement is ending
// after an interruption: its outcome is not known yet. It is not the key's
// answer, so it is not recorded (the API checks for it): were it replayed,
// the key would say "retry" for 24 hours after the outcome was known. Until
// then a retry is told the purchase is still being processed, the words
// clients already retry on.
var ErrPurchaseSettling = &Error{Status: http.StatusConflict,
	Message: "the purchase of an earlier request with this Idempotency-Key is still being processed: it is being settled after an interruption; retry in a minute for its outcome"}

// subscribeResultOf rebuilds the answer of the subscribe that created subID
// (nil when it does not exist).
func (s *Service) subscribeResultOf(ctx context.Context, userID, subID string) (*SubscribeResult, error) {
	var (
		sub     *Subscription
		pool    *Pool
		key     *Key
		charged string
	)
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		sub, err = tx.GetSubscription(subID)
		if err != nil {
			return err
		}
		if pool, err = tx.GetPool(sub.PoolID); err != nil {
			return err
		}
		if key, err = keyOfTx(tx, sub.ID); err != nil {
			return err
		}
		charges, err := tx.ListCharges(sub.ID)
		if err != nil {
			return err
		}
		for _, c := range charges {
			if c.PeriodStart.Equal(sub.CreatedAt) || charged == "" {
				charged = c.Amount
			}
		}
		return nil
	})
	if errors.Is(err, ErrNotFound) || (err == nil && sub.UserID != userID) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("idempotency key: %w", err)
	}
	v, err := s.subscriptionView(sub, pool, key)
	if err != nil {
		return nil, err
	}
	res := &SubscribeResult{SubscriptionView: v, AmountCharged: charged}
	if sub.Status == SubPledged {
		// No key and no window until the pool is live (funding.go).
		res.AmountCharged, res.AmountDue = "0", canonicalAmount(sub.PeriodAmount)
		return res, nil
	}
	now := s.clock()
	if mask := MaskOf(sub.Blocks); mask.Has(now.Hour()) {
		res.WindowOpen = true
	} else if opens := mask.NextOpen(now); !opens.IsZero() {
		res.OpensAt = &opens
	}
	return res, nil
}

// FinishIdempotent records the answer of the request under (user, key). A
// 5xx answer is recorded but not replayed: a retry carries the purchase on.
func (s *Service) FinishIdempotent(ctx context.Context, userID, key, fingerprint string, status int, body []byte) error {
	// The request context may be what ended; the record must still be written.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return s.store.Update(ctx, func(tx Tx) error {
		cur, err := tx.GetIdempotentRequest(userID, key)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil || cur.Fingerprint != fingerprint || cur.Status != 0 {
			return err
		}
		cur.Status, cur.Body = status, body
		return tx.PutIdempotentRequest(cur)
	})
}

// webhookEventRetention is how long a handled webhook event's id is kept:
// far longer than Stripe redelivers (three days).
const webhookEventRetention = 30 * 24 * time.Hour

// PruneBillingRecords deletes the idempotent requests past
// IdempotencyWindow and the webhook events past their retention. The
// worker runs it hourly.
func (s *Service) PruneBillingRecords(ctx context.Context) (int, error) {
	now := s.clock()
	var n int
	err := s.store.Update(ctx, func(tx Tx) (err error) {
		n, err = tx.PruneBillingRecords(now.Add(-IdempotencyWindow), now.Add(-webhookEventRetention))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pruning billing records: %w", err)
	}
	return n, nil
}
