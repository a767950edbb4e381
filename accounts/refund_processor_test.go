package accounts_test

import (
	"context"
	"errors"
	"testing"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// The built-in test processor refunds in part under Stripe's rules, in
// memory and over a durable ledger: a key refunds once (a repeat answers
// the total again), another amount under a used key is an
// *IdempotencyError, more than remains is ErrRefundTooLarge, and the
// refunds add up to a charge refunded in full.
func TestTestProcessorPartialRefunds(t *testing.T) {
	check := func(t *testing.T, p *billing.TestProcessor) {
		ctx := context.Background()
		ref, err := p.Charge(ctx, billing.ChargeRequest{UserID: "u1", MethodID: billing.TestCardVisa, Amount: "80", IdempotencyKey: billing.SubscribeKey("s1")})
		if err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			amount, key, total string
			err                func(error) bool
		}{
			{"12.50", "r1", "12.5", nil},
			{"12.50", "r1", "12.5", nil}, // a repeat: nothing more
			{"3", "r1", "", func(err error) bool { return errors.As(err, new(*billing.IdempotencyError)) }},
			{"67.51", "r2", "", func(err error) bool { return errors.Is(err, billing.ErrRefundTooLarge) }},
			{"0", "r3", "", func(err error) bool { return err != nil }},
			{"1.001", "r3", "", func(err error) bool { return err != nil }},
			{"67.5", "r2", "80", nil},
			{"0.01", "r4", "", func(err error) bool { return errors.Is(err, billing.ErrRefundTooLarge) }},
		}
		for _, s := range steps {
			total, err := p.RefundAmount(ctx, ref, s.amount, s.key)
			if s.err != nil {
				if !s.err(err) {
					t.Errorf("refund %s under %s = %q, %v; want it refused", s.amount, s.key, total, err)
				}
				continue
			}
			if err != nil || total != s.total {
				t.Errorf("refund %s under %s = %q, %v; want %s refunded in all", s.amount, s.key, total, err, s.total)
			}
		}
		l := p.Ledger()
		if len(l) != 1 || !l[0].Refunded || l[0].RefundedAmount() != "80" {
			t.Errorf("ledger %+v: want the charge refunded in full", l)
		}
		if err := p.Refund(ctx, ref, "full"); err != nil {
			t.Errorf("a full refund of a charge refunded in parts: %v, want no error", err)
		}
	}
	t.Run("memory", func(t *testing.T) { check(t, billing.NewTestProcessor()) })
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		check(t, billing.NewTestProcessorOn(accounts.TestLedger(st)))
	})
}
