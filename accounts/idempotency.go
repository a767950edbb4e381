package accounts

// Idempotent purchases: POST /api/pools/:id/subscribe with an
// Idempotency-Key header. The first request under a key is recorded
// (running) before it runs, with the id the new subscription will have, and
// its answer is recorded after; the same key and the same request within
// IdempotencyWindow get that answer again and buy nothing. The same key with
// another request is a 409. Answers of 5xx are not kept (the request bought
// nothing and may be retried under the same key).
//
// A request still running under the key answers 409 "in progress" — unless
// it has been running longer than idempotencyLease, which only a node that
// died mid-request leaves behind: then, when its subscription exists, the
// answer is rebuilt from it; when it does not, the request runs again with a
// new subscription id (the dead attempt's charge, if any, is refunded by the
// settlement of charge intents, intents.go). A subscription still incomplete
// (its payment waits for 3-D Secure, incomplete.go) is answered 402 saying
// so; one that ended canceled unpaid counts as not created.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// IdempotencyWindow is how long an Idempotency-Key's answer is kept.
const IdempotencyWindow = 24 * time.Hour

// idempotencyLease is how long a request may run under a key before the
// key is taken as abandoned; far longer than a request can last.
const idempotencyLease = 10 * time.Minute

// MaxIdempotencyKey is the longest Idempotency-Key accepted.
const MaxIdempotencyKey = 255

// IdempotentStart is what BeginIdempotent decided.
type IdempotentStart struct {
	// Replay is the recorded answer to send again, or nil: run the request.
	Replay *IdempotentRequest
	// Recovered is the subscription an abandoned request under the key
	// created: answer 201 with it (and record that with FinishIdempotent).
	Recovered *SubscribeResult
	// SubscriptionID is the id the new subscription must have (pass it on
	// with WithSubscriptionID); "" with a replay or a recovered answer.
	SubscriptionID string
}

type subscriptionIDKey struct{}

// WithSubscriptionID tells Subscribe which id the new subscription gets.
func WithSubscriptionID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, subscriptionIDKey{}, id)
}

// newSubscriptionID is the id a Subscribe in ctx gives its subscription.
func newSubscriptionID(ctx context.Context) string {
	if id, ok := ctx.Value(subscriptionIDKey{}).(string); ok && id != "" {
		return id
	}
	return newID()
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
	var (
		start    IdempotentStart
		orphanOf string // subscription id of an abandoned attempt, to look for
	)
	err := s.store.Update(ctx, func(tx Tx) error {
		start, orphanOf = IdempotentStart{}, ""
		now := s.clock()
		old, err := tx.GetIdempotentRequest(userID, key)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if err == nil && now.Sub(old.CreatedAt) < IdempotencyWindow {
			if old.Fingerprint != fingerprint {
				return Conflict("Idempotency-Key %q was used for another request in the last 24 hours; nothing was bought. Use a new key for a new purchase", key)
			}
			if old.Status != 0 {
				start.Replay = old
				return nil
			}
			if now.Sub(old.CreatedAt) < idempotencyLease {
				return Conflict("a request with Idempotency-Key %q is still being processed; retry in a moment", key)
			}
			orphanOf = old.ResourceID
			return nil
		}
		start.SubscriptionID = newID()
		return tx.PutIdempotentRequest(&IdempotentRequest{
			UserID: userID, Key: key, Fingerprint: fingerprint, ResourceID: start.SubscriptionID, CreatedAt: now,
		})
	})
	if err != nil {
		return nil, passClientError("idempotency key", err)
	}
	if orphanOf == "" {
		return &start, nil
	}
	return s.takeOverIdempotent(ctx, userID, key, fingerprint, orphanOf)
}

// takeOverIdempotent handles a key whose request was abandoned: the answer
// is the subscription it created, or the request runs again.
func (s *Service) takeOverIdempotent(ctx context.Context, userID, key, fingerprint, subID string) (*IdempotentStart, error) {
	res, err := s.subscribeResultOf(ctx, userID, subID)
	if err != nil {
		return nil, err
	}
	switch {
	case res != nil && res.Status == SubIncomplete:
		// Its payment waits for the customer, whose client secret the dead
		// request never gave out (incomplete.go): say so; the hold ends it.
		hold := res.CreatedAt.Add(IncompleteHold)
		return nil, &Error{Status: 402,
			Message: fmt.Sprintf("an earlier request with Idempotency-Key %q left subscription %s waiting for 3-D Secure, and its answer was lost; it is canceled at %s unless paid (POST /api/subscriptions/%s/confirm once paid), then buy again with a new key",
				key, subID, hold.Format(time.RFC3339), subID),
			Data: IncompleteData{SubscriptionID: subID, Status: SubIncomplete, HoldExpiresAt: hold}}
	case res != nil && res.Status == SubCanceled && res.AmountCharged == "":
		// An incomplete subscription that ended unpaid: nothing was bought.
	case res != nil:
		return &IdempotentStart{Recovered: res}, nil
	}
	start := &IdempotentStart{SubscriptionID: newID()}
	err = s.store.Update(ctx, func(tx Tx) error {
		return tx.PutIdempotentRequest(&IdempotentRequest{
			UserID: userID, Key: key, Fingerprint: fingerprint, ResourceID: start.SubscriptionID, CreatedAt: s.clock(),
		})
	})
	if err != nil {
		return nil, fmt.Errorf("idempotency key: %w", err)
	}
	return start, nil
}

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
	return &SubscribeResult{SubscriptionView: v, AmountCharged: charged}, nil
}

// FinishIdempotent records the answer of the request under (user, key); a
// 5xx answer is not kept, so that the key may be used again.
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
		if status >= 500 {
			return tx.DeleteIdempotentRequest(userID, key)
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
