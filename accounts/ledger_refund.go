package accounts

// Operator refunds (SPEC.md §8, POST /api/operator/charges/:id/refund): a
// ledger charge, in whole or in part, through the processor, once however
// often the request is retried or its answer lost.
//
// One refund is one processor idempotency key, derived from the request
// (refundKey), so a retry of a request whose processor answer was lost (or
// whose process died before it recorded the refund) sends the same refund
// again and the processor replays it instead of refunding twice. The
// processor answers the charge's refunded total, and the ledger takes that
// total (never adds to it), so a replay, a refund made in between and
// Stripe's later charge.refunded event all agree on one number. No pending
// record is written first: the key is the write-ahead — the operator's
// Idempotency-Key is recorded before the action runs (BeginIdempotent), and
// without one the key is fixed by what the ledger says and the amount.
//
// A refund moves only money and the ledger: a subscription whose period the
// charge paid for stays as it is (the operator cancels it separately).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/timeblock/timeblock/accounts/billing"
)

// RefundOpKey is the operation of an operator refund's idempotency key.
const RefundOpKey = "oprefund"

// RefundLedgerCharge refunds amount (exact decimal USD, at most two
// decimals; "" refunds what remains) of the ledger charge chargeID and
// returns the charge afterwards. requestKey is the operator's
// Idempotency-Key ("" without one): a repeat under it refunds nothing more.
// An unknown charge is a 404, a charge refunded in full a 409, an amount
// that is not positive, has more than two decimals or is more than remains
// a 400. The audit record ctx carries (WithAudit) is written in the
// transaction that records the refund in the ledger.
func (s *Service) RefundLedgerCharge(ctx context.Context, chargeID, amount, requestKey string) (*LedgerCharge, error) {
	var lc *LedgerCharge
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		lc, err = tx.GetLedgerCharge(chargeID)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, NotFound("no charge %s", chargeID)
	}
	if err != nil {
		return nil, fmt.Errorf("refund %s: %w", chargeID, err)
	}
	if amount, err = refundAmount(lc, amount); err != nil {
		return nil, err
	}
	key := refundKey(lc, amount, requestKey)
	total, err := s.processor.RefundAmount(ctx, lc.ProcessorRef, amount, key)
	var ie *billing.IdempotencyError
	switch {
	case errors.Is(err, billing.ErrRefundTooLarge):
		return nil, Invalid("the processor refused to refund %s of charge %s: it is more than what remains of the charge there", amount, chargeID)
	case errors.As(err, &ie):
		return nil, Conflict("this refund of charge %s was sent before with another amount; send it with a new Idempotency-Key", chargeID)
	case err != nil:
		return nil, fmt.Errorf("refund %s of charge %s (the processor's answer is unknown; retry with the same Idempotency-Key, which refunds once): %w", amount, chargeID, err)
	}
	refunded, err := parseAmount(total)
	if err != nil {
		return nil, fmt.Errorf("refund %s of charge %s: the processor's refunded total: %w", amount, chargeID, err)
	}
	err = s.store.Update(ctx, func(tx Tx) error {
		if err := s.auditTx(ctx, tx); err != nil {
			return err
		}
		var err error
		if lc, err = tx.GetLedgerCharge(chargeID); err != nil {
			return err
		}
		// The processor's total counts every refund of the charge, this
		// one included; the ledger never goes down nor past the amount.
		full, err := parseAmount(lc.Amount)
		if err != nil {
			return err
		}
		had, err := parseAmount(lc.RefundedAmount)
		if err != nil {
			had = new(big.Rat)
		}
		after := refunded
		if after.Cmp(full) > 0 {
			after = full
		}
		if after.Cmp(had) <= 0 {
			return nil
		}
		lc.RefundedAmount = formatAmount(after)
		return tx.UpdateLedgerCharge(lc)
	})
	if err != nil {
		return nil, fmt.Errorf("refund %s of charge %s: refunded at the processor; recording it: %w (retry with the same Idempotency-Key to record it)", amount, chargeID, err)
	}
	s.notifyLedgerRefund(ctx, lc, amount)
	return lc, nil
}

// refundAmount checks the amount asked to refund of lc ("" is what
// remains) and returns it canonical.
func refundAmount(lc *LedgerCharge, amount string) (string, error) {
	full, err := parseAmount(lc.Amount)
	if err != nil {
		return "", fmt.Errorf("charge %s: %w", lc.ID, err)
	}
	had, err := parseAmount(lc.RefundedAmount)
	if err != nil {
		had = new(big.Rat)
	}
	rest := new(big.Rat).Sub(full, had)
	if rest.Sign() <= 0 {
		return "", Conflict("charge %s is refunded in full already", lc.ID)
	}
	if lc.ProcessorRef == "" {
		return "", Conflict("charge %s has no processor reference to refund", lc.ID)
	}
	if amount == "" {
		return formatAmount(rest), nil
	}
	r, err := parseAmount(amount)
	if _, frac, _ := strings.Cut(amount, "."); err != nil || len(frac) > 2 {
		return "", Invalid("amount must be a decimal number of dollars with at most two decimals, such as 12.50, not %q", amount)
	}
	if r.Sign() <= 0 {
		return "", Invalid("amount must be more than 0")
	}
	if r.Cmp(rest) > 0 {
		return "", Invalid("amount %s is more than what remains of charge %s (%s of %s)", amount, lc.ID, formatAmount(rest), lc.Amount)
	}
	return formatAmount(r), nil
}

// refundKey is the processor's idempotency key of a refund: from the
// operator's Idempotency-Key (hashed: it is the client's, of any length)
// when given; else from what the ledger says was refunded and the amount,
// so that a retry of a request whose answer was lost before the ledger
// recorded it sends the same refund again.
func refundKey(lc *LedgerCharge, amount, requestKey string) string {
	basis := "auto\x00" + lc.RefundedAmount + "\x00" + amount
	if requestKey != "" {
		basis = "key\x00" + requestKey
	}
	sum := sha256.Sum256([]byte(basis))
	return RefundOpKey + ":" + lc.ID + ":" + hex.EncodeToString(sum[:12])
}

// notifyLedgerRefund tells the operator that they refunded amount of lc.
func (s *Service) notifyLedgerRefund(ctx context.Context, lc *LedgerCharge, amount string) {
	extra := map[string]any{"ledgerChargeId": lc.ID, "processorRef": lc.ProcessorRef, "amount": amount,
		"refundedAmount": lc.RefundedAmount, "chargeAmount": lc.Amount, "kind": lc.Kind, "currency": "USD",
		"reason": "refunded by an operator; the subscription is unchanged (cancel it separately if it should end)"}
	if lc.SubscriptionID == "" {
		s.NotifyOperator(ctx, OpChargeRefunded, extra)
		return
	}
	s.notifyAbout(ctx, OpChargeRefunded, lc.SubscriptionID, extra)
}
