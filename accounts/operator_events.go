package accounts

// Operator notices (SPEC.md §8): events that need the operator — an order
// needs a key, a pool reached its goal, a charge succeeded, failed or was
// refunded — told to the operator's webhook and, through the notifier, by
// e-mail.
//
// The webhook is fed from an outbox in the store. NotifyOperator writes the
// event after the state change it reports has committed (so a crash between
// the two loses that one notice; the state itself is never lost). Every
// node's worker runs DeliverOperatorEvents: it claims the due events in one
// transaction by moving their next attempt a lease ahead — on PostgreSQL
// that transaction is SERIALIZABLE, so of two nodes claiming at once one
// commits and the other retries and finds nothing due — then posts each and
// records the outcome. A node that dies after posting but before recording
// leaves the event to be posted again when the lease ends: delivery is at
// least once, and receivers drop duplicates by the event id.
//
// The e-mail copy is sent at once in the background, as the other notices
// are: a mail server that is down loses it (it is logged).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Operator event types (SPEC.md §8).
const (
	OpSubscriptionCreated    = "subscription.created"     // a purchase is active, or pending_key
	OpSubscriptionPendingKey = "subscription.pending_key" // a manual pool's order needs its key delivered
	OpPledgeCreated          = "pledge.created"           // a pledge to a funding pool
	OpPoolGoalReached        = "pool.goal_reached"        // a funding pool reached its goal
	OpChargeSucceeded        = "charge.succeeded"         // a renewal, pledge or past-due recovery was charged
	OpChargeFailed           = "charge.failed"            // a renewal, pledge or retry was declined
	OpChargeRefunded         = "charge.refunded"          // a charge was refunded
	OpChargeDisputed         = "charge.disputed"          // the card holder disputed a charge
)

// Delivery states of an OperatorEvent.
const (
	OpEventPending   = "pending"   // waiting for (another) delivery attempt
	OpEventDelivered = "delivered" // the webhook answered 2xx
	OpEventFailed    = "failed"    // given up after opGiveUpAfter
)

// The delivery schedule.
const (
	opFirstRetry   = 30 * time.Second    // after the first failure; doubles after each
	opMaxRetry     = time.Hour           // the longest wait between attempts
	opGiveUpAfter  = 72 * time.Hour      // no more attempts this long after the event
	opLease        = 5 * time.Minute     // a claimed event is left to its node this long
	opBatch        = 20                  // events claimed at once (each post times out after 10 s)
	opMaxBatches   = 10                  // per pass; the rest waits for the next pass
	opKeepFinished = 30 * 24 * time.Hour // delivered and failed events are pruned after this
	opPruneEvery   = time.Hour           // how often a pass prunes
	opEventPrefix  = "evt_"              // event ids
	opEventIDChars = 24                  // random characters after the prefix
	opErrorMax     = 300                 // characters of the last error kept
)

// OperatorEvent is one notice to the operator and the state of its webhook
// delivery. Data is a JSON object of ids, amounts (decimal strings) and what
// to do; it never holds a key, a session token or a card number.
type OperatorEvent struct {
	ID        string // evt_ + random
	Type      string // one of the Op* types
	CreatedAt time.Time
	Data      json.RawMessage

	Status        string    // OpEventPending, OpEventDelivered or OpEventFailed
	Attempts      int       // webhook posts made so far
	NextAttemptAt time.Time // when a pending event is due (a claimed one: when its lease ends)
	FinishedAt    time.Time // when it was delivered or given up; zero while pending
	LastError     string    // why the last attempt failed
}

// Payload is the JSON body posted to the webhook: {id, type, createdAt, data}.
func (e *OperatorEvent) Payload() ([]byte, error) {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	return json.Marshal(struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		CreatedAt time.Time       `json:"createdAt"`
		Data      json.RawMessage `json:"data"`
	}{e.ID, e.Type, e.CreatedAt.UTC(), data})
}

// OperatorEventTx is the part of Tx that keeps the outbox of operator
// events. Both backends implement it and storetest checks them alike.
type OperatorEventTx interface {
	// CreateOperatorEvent adds an event (ErrConflict when the id is taken).
	CreateOperatorEvent(e *OperatorEvent) error
	// GetOperatorEvent returns one event (ErrNotFound when none).
	GetOperatorEvent(id string) (*OperatorEvent, error)
	// UpdateOperatorEvent replaces an event's delivery state (ErrNotFound when none).
	UpdateOperatorEvent(e *OperatorEvent) error
	// ListOperatorEventsDue lists at most limit pending events whose
	// NextAttemptAt is at or before t, earliest NextAttemptAt first.
	ListOperatorEventsDue(t time.Time, limit int) ([]*OperatorEvent, error)
	// DeleteOperatorEventsBefore removes the delivered and failed events
	// created before t (never a pending one) and says how many.
	DeleteOperatorEventsBefore(t time.Time) (int, error)
}

// OperatorWebhook posts an event's payload to the operator's endpoint
// (accounts/operatorhook). An error, a timeout or an answer other than 2xx
// is a failed attempt.
type OperatorWebhook interface {
	Post(ctx context.Context, payload []byte) error
}

// OperatorNotifier is a Notifier that also tells the operator about
// operator events (LogNotifier logs them; SMTPNotifier mails them to its
// Operator address). A Notifier without it sends no e-mail copy.
type OperatorNotifier interface {
	OperatorEvent(ctx context.Context, e *OperatorEvent) error
}

// NotifyOperator records an operator event of type typ with data (a
// JSON-encodable object) for the webhook, when one is configured, and
// sends its e-mail copy. Call it after the change it reports has
// committed. Failures are logged, never returned: the change stands.
func (s *Service) NotifyOperator(ctx context.Context, typ string, data map[string]any) {
	if !s.operatorListens() {
		return
	}
	raw, err := json.Marshal(data)
	if err != nil {
		s.logger.Error("operator notice: encoding its data failed", zap.String("type", typ), zap.Error(err))
		return
	}
	now := s.clock()
	e := &OperatorEvent{ID: opEventPrefix + randomAlnum(opEventIDChars), Type: typ, CreatedAt: now, Data: raw,
		Status: OpEventPending, NextAttemptAt: now}
	if s.opWebhook != nil {
		// Not tied to a request that may end now: the event must be written.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), noticeTimeout)
		err := s.store.Update(wctx, func(tx Tx) error { return tx.CreateOperatorEvent(e) })
		cancel()
		if err != nil {
			s.logger.Error("operator notice: writing it to the outbox failed: it is not posted to the webhook",
				zap.String("event_id", e.ID), zap.String("type", typ), zap.ByteString("data", raw), zap.Error(err))
		}
	}
	if on, ok := s.notifier.(OperatorNotifier); ok && typ != OpPoolGoalReached { // the funding notice mails that one
		go func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), noticeTimeout)
			defer cancel()
			if err := on.OperatorEvent(ctx, e); err != nil {
				s.logger.Error("operator notice: sending its e-mail failed", zap.String("event_id", e.ID),
					zap.String("type", typ), zap.Error(err))
			}
		}()
	}
}

// OperatorEventReport counts what one delivery pass did.
type OperatorEventReport struct {
	Delivered int // posted and answered 2xx
	Retrying  int // failed; tried again later
	GaveUp    int // failed for good (opGiveUpAfter after the event)
	Pruned    int // finished events deleted
}

// Acted reports whether the pass did anything.
func (r OperatorEventReport) Acted() bool { return r.Delivered+r.Retrying+r.GaveUp+r.Pruned > 0 }

// DeliverOperatorEvents makes one delivery pass over the outbox: it posts
// the due events to the webhook and records each outcome. Without a webhook
// it does nothing. Safe on several nodes at once (see the top of the file).
func (s *Service) DeliverOperatorEvents(ctx context.Context) (OperatorEventReport, error) {
	var rep OperatorEventReport
	if s.opWebhook == nil {
		return rep, nil
	}
	var errs []error
	for range opMaxBatches {
		claimed, err := s.claimOperatorEvents(ctx)
		if err != nil {
			return rep, errors.Join(append(errs, fmt.Errorf("operator notices: claiming due events: %w", err))...)
		}
		for _, e := range claimed {
			if ctx.Err() != nil {
				return rep, errors.Join(append(errs, ctx.Err())...)
			}
			if err := s.deliverOperatorEvent(ctx, e, &rep); err != nil {
				errs = append(errs, fmt.Errorf("operator event %s: %w", e.ID, err))
			}
		}
		if len(claimed) < opBatch {
			break
		}
	}
	if now := s.clock(); now.Sub(s.opPruned) >= opPruneEvery {
		var n int
		err := s.store.Update(ctx, func(tx Tx) error {
			var err error
			n, err = tx.DeleteOperatorEventsBefore(now.Add(-opKeepFinished))
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("operator notices: pruning: %w", err))
		} else {
			s.opPruned, rep.Pruned = now, n
		}
	}
	return rep, errors.Join(errs...)
}

// claimOperatorEvents takes the due events for this node: their next
// attempt moves a lease ahead, so no other node takes them meanwhile.
func (s *Service) claimOperatorEvents(ctx context.Context) ([]*OperatorEvent, error) {
	now := s.clock()
	var claimed []*OperatorEvent
	err := s.store.Update(ctx, func(tx Tx) error {
		claimed = claimed[:0]
		due, err := tx.ListOperatorEventsDue(now, opBatch)
		if err != nil {
			return err
		}
		for _, e := range due {
			e.NextAttemptAt = now.Add(opLease)
			if err := tx.UpdateOperatorEvent(e); err != nil {
				return err
			}
			claimed = append(claimed, e)
		}
		return nil
	})
	return claimed, err
}

// deliverOperatorEvent posts one claimed event and records the outcome.
func (s *Service) deliverOperatorEvent(ctx context.Context, e *OperatorEvent, rep *OperatorEventReport) error {
	payload, err := e.Payload()
	if err != nil {
		return err
	}
	postErr := s.opWebhook.Post(ctx, payload)
	if postErr != nil && ctx.Err() != nil {
		return ctx.Err() // shutting down: the lease runs out and a node tries again
	}
	now := s.clock()
	var outcome string
	err = s.store.Update(ctx, func(tx Tx) error {
		outcome = ""
		cur, err := tx.GetOperatorEvent(e.ID)
		if err != nil {
			return err
		}
		// Finished by another node, or its lease ran out and another node
		// holds it now: that node records the outcome.
		if cur.Status != OpEventPending || (postErr != nil && !cur.NextAttemptAt.Equal(e.NextAttemptAt)) {
			return nil
		}
		cur.Attempts++
		switch {
		case postErr == nil:
			cur.Status, cur.FinishedAt, cur.LastError = OpEventDelivered, now, ""
		case now.Sub(cur.CreatedAt) >= opGiveUpAfter:
			cur.Status, cur.FinishedAt, cur.LastError = OpEventFailed, now, truncate(postErr.Error(), opErrorMax)
		default:
			cur.NextAttemptAt, cur.LastError = now.Add(opRetryAfter(cur.Attempts)), truncate(postErr.Error(), opErrorMax)
		}
		outcome = cur.Status
		return tx.UpdateOperatorEvent(cur)
	})
	if err != nil {
		return fmt.Errorf("recording the delivery: %w", err)
	}
	switch {
	case outcome == OpEventDelivered:
		rep.Delivered++
	case outcome == OpEventFailed:
		rep.GaveUp++
		s.logger.Error("operator notice: the webhook refused it for 3 days; giving up",
			zap.String("event_id", e.ID), zap.String("type", e.Type), zap.Time("created_at", e.CreatedAt),
			zap.ByteString("data", e.Data), zap.Error(postErr))
	case outcome == OpEventPending:
		rep.Retrying++
		s.logger.Warn("operator notice: the webhook did not take it; retrying later",
			zap.String("event_id", e.ID), zap.String("type", e.Type), zap.Error(postErr))
	}
	return nil
}

// opRetryAfter is the wait after the n-th failed attempt: 30 s, doubling,
// at most an hour.
func opRetryAfter(n int) time.Duration {
	d := opFirstRetry
	for i := 1; i < n && d < opMaxRetry; i++ {
		d *= 2
	}
	return min(d, opMaxRetry)
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// runOperatorEventPass is RunWorker's delivery pass: it logs what it did.
func (s *Service) runOperatorEventPass(ctx context.Context) {
	rep, err := s.DeliverOperatorEvents(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		s.logger.Warn("operator notice pass incomplete: the rest is retried next pass", zap.Error(err), zap.Any("report", rep))
	case rep.Acted():
		s.logger.Info("operator notice pass", zap.Any("report", rep))
	}
}
