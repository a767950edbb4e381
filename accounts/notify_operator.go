package accounts

// The e-mail (or log) copy of an operator event (operator_events.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
)

// OperatorEvent logs the event.
func (n LogNotifier) OperatorEvent(_ context.Context, e *OperatorEvent) error {
	logger := n.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	logger.Info("notice: "+e.Type, zap.String("to", "operator"), zap.String("event_id", e.ID),
		zap.Time("created_at", e.CreatedAt), zap.ByteString("data", e.Data))
	return nil
}

// OperatorEvent mails the event to Operator, or logs it when that is not set.
func (n SMTPNotifier) OperatorEvent(ctx context.Context, e *OperatorEvent) error {
	if n.Operator == "" {
		return LogNotifier{Logger: n.Logger}.OperatorEvent(ctx, e)
	}
	msg, err := operatorEventMessage(n.From, n.Operator, e, time.Now())
	if err != nil {
		return err
	}
	return n.send(ctx, n.Operator, msg)
}

// operatorEventSubjects are the subjects of the operator's e-mails.
var operatorEventSubjects = map[string]string{
	OpSubscriptionCreated:    "New subscription",
	OpSubscriptionPendingKey: "An order needs its key",
	OpPledgeCreated:          "New pledge",
	OpPoolGoalReached:        "Funding goal reached",
	OpChargeSucceeded:        "Charge succeeded",
	OpChargeFailed:           "Charge failed",
	OpChargeRefunded:         "Charge refunded",
	OpChargeDisputed:         "Charge disputed",
}

// operatorEventMessage builds the RFC 5322 message of an operator event:
// the subject says what happened, the body lists the data, with "todo"
// (what the operator should do) first.
func operatorEventMessage(from, to string, e *OperatorEvent, now time.Time) ([]byte, error) {
	for _, v := range []string{from, to} {
		if v == "" || strings.ContainsAny(v, "\r\n") {
			return nil, errors.New("notice: sender and recipient addresses must be set and on one line")
		}
	}
	var data map[string]any
	if err := json.Unmarshal(e.Data, &data); err != nil {
		return nil, fmt.Errorf("notice: operator event %s: %w", e.ID, err)
	}
	subject := operatorEventSubjects[e.Type]
	if subject == "" {
		subject = e.Type
	}
	if slug, ok := data["poolSlug"].(string); ok && slug != "" {
		subject += ": " + slug
	}
	var b strings.Builder
	mailHeader(&b, from, to, oneLine(subject), now)
	if todo, ok := data["todo"].(string); ok && todo != "" {
		fmt.Fprintf(&b, "%s\r\n\r\n", oneLine(todo))
	}
	fmt.Fprintf(&b, "Event %s (%s) at %s:\r\n\r\n", e.ID, oneLine(e.Type), e.CreatedAt.UTC().Format(time.RFC3339))
	keys := make([]string, 0, len(data))
	for k := range data {
		if k != "todo" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s: %s\r\n", oneLine(k), oneLine(fmt.Sprint(data[k])))
	}
	return []byte(b.String()), nil
}
