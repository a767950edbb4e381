package accounts

// The test bank: the 3-D Secure step of the built-in test processor, played
// by the buyer's page. With Stripe the page runs the bank's check with
// Stripe.js (confirmCardPayment); the test processor has no bank page, so
// the quick start's page shows a simulated one whose "Approve" or "Fail"
// lands here (POST /api/billing/test-bank/:ref), and then confirms the
// purchase as it would after Stripe.js.

import (
	"context"
	"fmt"

	"github.com/timeblock/timeblock/accounts/billing"
	"go.uber.org/zap"
)

// testBank is what the built-in test processor (billing.TestProcessor)
// offers besides billing.Processor: the customer's side of a payment that
// waits for 3-D Secure. Real processors have none, so the test bank is
// there only with the test processor.
type testBank interface {
	// PaymentUser returns the user of a payment that waits (or waited)
	// for the customer.
	PaymentUser(ref string) (userID string, ok bool)
	// Authenticate completes the payment (the money is taken).
	Authenticate(ctx context.Context, ref string) error
	// Fail fails it (nothing is taken).
	Fail(ctx context.Context, ref string) error
}

// TestBankResult is the test bank's answer: the payment's state afterwards.
type TestBankResult struct {
	Ref    string `json:"ref"`
	Status string `json:"status"` // billing.PaymentSucceeded or billing.PaymentFailed
}

// HasTestBank reports whether the processor is the built-in test one, whose
// 3-D Secure the page plays with AnswerTestBank.
func (s *Service) HasTestBank() bool {
	_, ok := s.processor.(testBank)
	return ok
}

// AnswerTestBank approves or fails the user's payment ref that waits for
// 3-D Secure at the built-in test processor, as the customer at their bank
// would; the page then confirms the purchase (ConfirmSubscription). Without
// the test processor, for an unknown reference and for another user's
// payment it is a 404. Answering a payment again as it was answered changes
// nothing; answering it otherwise (or a payment canceled meanwhile) is a 409.
func (s *Service) AnswerTestBank(ctx context.Context, userID, ref string, approve bool) (*TestBankResult, error) {
	bank, ok := s.processor.(testBank)
	if !ok {
		return nil, NotFound("there is no test bank: this site's payment processor (%s) runs 3-D Secure in the page itself (Stripe.js)", s.processor.Name())
	}
	if owner, ok := bank.PaymentUser(ref); !ok || owner != userID {
		return nil, NotFound("no payment %s waits for your bank's confirmation", ref)
	}
	want := billing.PaymentFailed
	if approve {
		want = billing.PaymentSucceeded
	}
	state, err := s.processor.PaymentStatus(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("test bank %s: %w", ref, err)
	}
	switch {
	case state == want:
		return &TestBankResult{Ref: ref, Status: state}, nil
	case state != billing.PaymentWaiting:
		return nil, Conflict("payment %s no longer waits for your bank: it is %s (canceled or answered before). Confirm the purchase to see where it stands", ref, state)
	}
	if approve {
		err = bank.Authenticate(ctx, ref)
	} else {
		err = bank.Fail(ctx, ref)
	}
	if err != nil {
		if now, serr := s.processor.PaymentStatus(ctx, ref); serr == nil && now != billing.PaymentWaiting && now != want {
			// Canceled (the hold ran out, or the buyer canceled) in between.
			return nil, Conflict("payment %s no longer waits for your bank: it was canceled meanwhile. Confirm the purchase to see where it stands", ref)
		}
		return nil, fmt.Errorf("test bank %s: %w", ref, err)
	}
	s.logger.Info("test bank answered a payment", zap.String("user_id", userID), zap.String("payment_ref", ref), zap.Bool("approved", approve))
	return &TestBankResult{Ref: ref, Status: want}, nil
}
