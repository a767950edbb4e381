package accounts

// The ledger (SPEC.md §8): one LedgerCharge per sum of money taken from a
// buyer, written in the transaction that records what it paid for.
//
// A Charge is the claim of one billing period: created pending by a renewal
// (so only one node charges it), failed when declined, made succeeded later
// by a past-due retry with another card — one record through several
// attempts, each with its own processor reference. A LedgerCharge is what
// came of one successful attempt: its amount, its processor reference (the
// id that reconciles it with the processor's records, both ways), its
// receipt number, and what was refunded of it. It is written once and only
// its RefundedAmount changes afterwards, so a receipt never changes under a
// buyer's feet. Declines, pending claims and voided claims are never in it.
//
// The ledger's own reads (lists, receipts) are the ledger package's
// (accounts/ledger); the writes are here, because they happen inside the
// transactions of Service, and accounts cannot import a package that
// imports it.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/timeblock/timeblock/accounts/billing"
)

// Ledger charge kinds (SPEC.md §8).
const (
	LedgerPurchase = "purchase" // the first period of a subscription, paid at purchase
	LedgerRenewal  = "renewal"  // a later period, charged when the previous one ended
	LedgerPledge   = "pledge"   // a funding pool's pledge, charged when the pool activated
	LedgerRecovery = "recovery" // a past-due charge paid by a retry (a new card)
)

// Ledger charge statuses (SPEC.md §8), derived from the refunded amount.
const (
	LedgerSucceeded         = "succeeded"
	LedgerRefunded          = "refunded"
	LedgerPartiallyRefunded = "partially_refunded"
)

// LedgerCurrency is the currency of every amount Timeblock charges.
const LedgerCurrency = "usd"

// LedgerCharge is money taken from a buyer (see the top of this file).
type LedgerCharge struct {
	ID string
	// Number is the receipt number, assigned by CreateLedgerCharge in the
	// recording transaction: unique and increasing on the site. The
	// embedded store has no gaps (a rollback gives its number back);
	// PostgreSQL takes it from a sequence, which skips the number of a
	// transaction that rolled back (see migration 0011 for why).
	Number         int64
	UserID         string
	SubscriptionID string
	PoolID         string
	ChargeID       string // the Charge (period claim) it paid
	Kind           string // one of the Ledger* kinds
	Amount         string // exact decimal, in Currency
	Currency       string
	RefundedAmount string // exact decimal, "0" when nothing was refunded
	ProcessorRef   string // the processor's id of the payment; unique when not ""
	Description    string // what was bought, fixed when charged
	CreatedAt      time.Time
}

// Status says how much of the charge the buyer still paid.
func (c *LedgerCharge) Status() string {
	refunded, err := parseAmount(c.RefundedAmount)
	if err != nil || refunded.Sign() == 0 {
		return LedgerSucceeded
	}
	if amount, err := parseAmount(c.Amount); err == nil && refunded.Cmp(amount) >= 0 {
		return LedgerRefunded
	}
	return LedgerPartiallyRefunded
}

// ReceiptNumber renders Number as printed on receipts: TB-000123.
func (c *LedgerCharge) ReceiptNumber() string { return fmt.Sprintf("TB-%06d", c.Number) }

// LedgerTx is the ledger inside a store transaction. ID, Number and a
// non-empty ProcessorRef are unique (ErrConflict).
type LedgerTx interface {
	// CreateLedgerCharge assigns c.Number (the site's next receipt number)
	// and writes c.
	CreateLedgerCharge(c *LedgerCharge) error
	GetLedgerCharge(id string) (*LedgerCharge, error)
	GetLedgerChargeByRef(processorRef string) (*LedgerCharge, error)
	// UpdateLedgerCharge rewrites c; its Number and UserID cannot change.
	UpdateLedgerCharge(c *LedgerCharge) error
	// ListLedgerCharges lists the user's charges newest (highest Number)
	// first, those numbered below before only when before > 0, at most limit.
	ListLedgerCharges(userID string, before int64, limit int) ([]*LedgerCharge, error)
}

// recordLedgerTx writes the ledger charge of c, a Charge that has just
// succeeded in tx, as kind. A charge whose processor reference is in the
// ledger already (a repeat, a dispute won back) is not written again.
func recordLedgerTx(tx Tx, c *Charge, kind string, now time.Time) error {
	if c.Status != ChargeSucceeded {
		return nil
	}
	if c.ProcessorRef != "" {
		_, err := tx.GetLedgerChargeByRef(c.ProcessorRef)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	sub, err := tx.GetSubscription(c.SubscriptionID)
	if err != nil {
		return fmt.Errorf("ledger charge of %s: %w", c.ID, err)
	}
	pool, err := tx.GetPool(sub.PoolID)
	if err != nil {
		return fmt.Errorf("ledger charge of %s: %w", c.ID, err)
	}
	lc := &LedgerCharge{
		ID: newID(), UserID: c.UserID, SubscriptionID: c.SubscriptionID, PoolID: sub.PoolID, ChargeID: c.ID,
		Kind: kind, Amount: canonicalAmount(c.Amount), Currency: LedgerCurrency, RefundedAmount: "0",
		ProcessorRef: c.ProcessorRef, Description: chargeDescription(pool, sub, c.PeriodStart), CreatedAt: now,
	}
	if err := tx.CreateLedgerCharge(lc); err != nil {
		return fmt.Errorf("ledger charge of %s: %w", c.ID, err)
	}
	return nil
}

// chargeDescription says what a charge paid for, as a receipt line:
// "Llama 70B (llama-70b) · europe, americas · 2 seats · 1 year from 2026-11-28".
func chargeDescription(pool *Pool, sub *Subscription, periodStart time.Time) string {
	name := pool.Slug
	if pool.ModelName != "" && pool.ModelName != pool.Slug {
		name = pool.ModelName + " (" + pool.Slug + ")"
	}
	blocks := make([]string, len(sub.Blocks))
	for i, b := range sub.Blocks {
		blocks[i] = string(b)
	}
	seats := "1 seat"
	if sub.Quantity != 1 {
		seats = fmt.Sprintf("%d seats", sub.Quantity)
	}
	period := "1 month"
	if sub.BillingCycle == CycleYear {
		period = "1 year"
	}
	return fmt.Sprintf("%s · %s · %s · %s from %s", name, strings.Join(blocks, ", "), seats, period,
		periodStart.UTC().Format("2006-01-02"))
}

// ledgerKindOf is the kind of a charge the processor reports succeeded for
// a past-due subscription, by the operation of its idempotency key.
func ledgerKindOf(op string) string {
	switch op {
	case billing.ChargeRenewal:
		return LedgerRenewal
	case billing.ChargePledge:
		return LedgerPledge
	case billing.ChargeSubscribe:
		return LedgerPurchase
	}
	return LedgerRecovery
}

// refundLedgerTx records that the processor gave back the whole payment ref
// (refunded, or failed after all): the ledger charge, if any, is refunded
// in full. It reports whether the ledger had it refunded in full already
// (an operator's refund the processor now reports): nothing is counted
// twice.
func refundLedgerTx(tx Tx, ref string) (already bool, err error) {
	if ref == "" {
		return false, nil
	}
	lc, err := tx.GetLedgerChargeByRef(ref)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if lc.Status() == LedgerRefunded {
		return true, nil
	}
	lc.RefundedAmount = lc.Amount
	return false, tx.UpdateLedgerCharge(lc)
}
