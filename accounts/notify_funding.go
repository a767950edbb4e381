package accounts

// Funding notices (funding.go): a pledge recorded or released, the goal
// reached or no longer reached, the pool live and the pledge charged, the
// charge failed (the pledge released).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
)

// FundingNotice is one funding event told to a pledger (or the operator).
type FundingNotice struct {
	Kind           string // one of the Notice* kinds
	Pool           *Pool
	SubscriptionID string // the pledge; "" for the operator's notices
	Amount         string // charged, due at activation, or pledged in all (goal reached or lost)
	Reason         string // why a charge failed
}

// Funding logs the notice.
func (n LogNotifier) Funding(_ context.Context, user *User, fn FundingNotice) error {
	logger := n.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	fields := []zap.Field{zap.String("pool", fn.Pool.Slug)}
	if user != nil {
		fields = append(fields, zap.String("user_id", user.ID), zap.String("email", user.Email))
	} else {
		fields = append(fields, zap.String("to", "operator"))
	}
	if fn.SubscriptionID != "" {
		fields = append(fields, zap.String("subscription_id", fn.SubscriptionID))
	}
	if fn.Amount != "" {
		fields = append(fields, zap.String("amount", fn.Amount))
	}
	if fn.Reason != "" {
		fields = append(fields, zap.String("reason", fn.Reason))
	}
	logger.Info("notice: "+fn.Kind, fields...)
	return nil
}

// Funding mails the notice; operator notices go to Operator, or to the
// log when it is not set.
func (n SMTPNotifier) Funding(ctx context.Context, user *User, fn FundingNotice) error {
	to := n.Operator
	if user != nil {
		to = user.Email
	}
	if to == "" {
		return LogNotifier{Logger: n.Logger}.Funding(ctx, user, fn)
	}
	msg, err := fundingMessage(n.From, to, user, fn, time.Now())
	if err != nil {
		return err
	}
	return n.send(ctx, to, msg)
}

// fundingMessage builds the RFC 5322 message of a funding notice.
func fundingMessage(from, to string, user *User, fn FundingNotice, now time.Time) ([]byte, error) {
	for _, v := range []string{from, to} {
		if v == "" || strings.ContainsAny(v, "\r\n") {
			return nil, errors.New("notice: sender and recipient addresses must be set and on one line")
		}
	}
	pool := oneLine(fn.Pool.ModelName)
	if pool == "" {
		pool = oneLine(fn.Pool.Slug)
	}
	slug := oneLine(fn.Pool.Slug)
	var subject, body string
	switch fn.Kind {
	case NoticePledgeRecorded:
		subject = "Your pledge for " + pool + " is recorded"
		body = fmt.Sprintf("Your pledge %s for %s is recorded and its seats are held for you. Nothing is charged now.\r\n"+
			"When the pool goes live your saved card is charged %s USD for the first period and your key can be created.\r\n"+
			"Withdraw it at any time before then with DELETE /api/pools/%s/pledge.", fn.SubscriptionID, pool, fn.Amount, slug)
	case NoticePledgeReleased:
		subject = "Your pledge for " + pool + " is released"
		body = fmt.Sprintf("Your pledge %s for %s is released and its seats are free again: the pool did not go live. Nothing was charged.",
			fn.SubscriptionID, pool)
	case NoticeGoalReached:
		subject = "Funding goal reached: " + pool
		body = fmt.Sprintf("Pool %s reached its funding goal (%s USD pledged a month, goal %s) and is now activating.\r\n"+
			"Start its model server, then make it active with\r\n\r\n"+
			"  curl -X POST localhost:2019/timeblock/pools/%s/status -d '{\"status\":\"active\"}'\r\n\r\n"+
			"which charges every pledge.", slug, fn.Amount, oneLine(fn.Pool.FundingGoal), slug)
	case NoticeGoalLost:
		subject = "Funding goal no longer reached: " + pool
		body = fmt.Sprintf("Pledges to pool %s were withdrawn: %s USD a month is pledged now, under its goal of %s, so it is funding again.\r\n"+
			"It moves to activating by itself once pledges reach the goal again; until then there is no need to start its model server.\r\n"+
			"To go live anyway, make it active with\r\n\r\n"+
			"  curl -X POST localhost:2019/timeblock/pools/%s/status -d '{\"status\":\"active\"}'\r\n\r\n"+
			"which charges every pledge.", slug, fn.Amount, oneLine(fn.Pool.FundingGoal), slug)
	case NoticePoolLive:
		subject = pool + " is live: your key can be created"
		next := fmt.Sprintf("Create its key with POST /api/keys/subscription {\"subscriptionId\":\"%s\"} or on your account page.", fn.SubscriptionID)
		if fn.Pool.ManualProvisioning {
			subject = pool + " is live"
			next = "The operator delivers its key by hand, usually within hours and always within 24 hours; you are told when it is ready."
		}
		body = fmt.Sprintf("%s is live. Your pledge %s was charged %s USD for its first period and is now a subscription.\r\n%s",
			pool, fn.SubscriptionID, fn.Amount, next)
	case NoticeChargeFailed:
		subject = "Your pledge for " + pool + " is released: the card was declined"
		body = fmt.Sprintf("%s is live, but your card was declined when your pledge %s was charged %s USD (%s).\r\n"+
			"Nothing was charged, and the pledge is released: its seats are free again.\r\n"+
			"You can buy seats like any buyer now: save a working card (POST /api/billing/setup-intent or your account page), "+
			"then subscribe (POST /api/pools/%s/subscribe or your account page) while seats are free.",
			pool, fn.SubscriptionID, fn.Amount, oneLine(fn.Reason), slug)
	default:
		return nil, fmt.Errorf("notice: unknown funding notice %q", fn.Kind)
	}
	greeting := "Hello"
	if user != nil && oneLine(user.Name) != "" {
		greeting += " " + oneLine(user.Name)
	}
	var b strings.Builder
	mailHeader(&b, from, to, oneLine(subject), now)
	fmt.Fprintf(&b, "%s,\r\n\r\n%s\r\n", greeting, body)
	return []byte(b.String()), nil
}
