package accounts

import (
	"context"
	"errors"

	"github.com/timeblock/timeblock/accounts/billing"
)

// TestLedger returns the durable ledger of the built-in test processor in
// st, whose transactions must implement TestLedgerTx (both stores' do):
// billing.NewTestProcessorOn(TestLedger(st)) is a test processor whose
// ledger survives a restart and is shared by every node on the store.
func TestLedger(st Store) billing.Ledger { return storeLedger{st} }

// storeLedger runs the test processor's ledger transactions on a Store,
// each in a transaction of its own.
type storeLedger struct{ st Store }

func (l storeLedger) Update(ctx context.Context, fn func(billing.LedgerTx) error) error {
	return ledgerErr(l.st.Update(ctx, func(tx Tx) error { return fn(ledgerTx{tx.(TestLedgerTx)}) }))
}

func (l storeLedger) View(ctx context.Context, fn func(billing.LedgerTx) error) error {
	return ledgerErr(l.st.View(ctx, func(tx Tx) error { return fn(ledgerTx{tx.(TestLedgerTx)}) }))
}

// ledgerTx is a store's TestLedgerTx whose errors also match billing's.
type ledgerTx struct{ tx TestLedgerTx }

func (t ledgerTx) CreateTestCharge(c *billing.TestCharge) error {
	return ledgerErr(t.tx.CreateTestCharge(c))
}

func (t ledgerTx) GetTestCharge(idempotencyKey string) (*billing.TestCharge, error) {
	c, err := t.tx.GetTestCharge(idempotencyKey)
	return c, ledgerErr(err)
}

func (t ledgerTx) GetTestChargeByRef(ref string) (*billing.TestCharge, error) {
	c, err := t.tx.GetTestChargeByRef(ref)
	return c, ledgerErr(err)
}

func (t ledgerTx) UpdateTestCharge(c *billing.TestCharge) error {
	return ledgerErr(t.tx.UpdateTestCharge(c))
}

func (t ledgerTx) ListTestCharges() ([]*billing.TestCharge, error) {
	all, err := t.tx.ListTestCharges()
	return all, ledgerErr(err)
}

// ledgerErr makes a store's ErrNotFound and ErrConflict match billing's
// ledger errors too, keeping the message and the store's error.
func ledgerErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound) && !errors.Is(err, billing.ErrLedgerNotFound):
		return &bothErr{err: err, also: billing.ErrLedgerNotFound}
	case errors.Is(err, ErrConflict) && !errors.Is(err, billing.ErrLedgerConflict):
		return &bothErr{err: err, also: billing.ErrLedgerConflict}
	}
	return err
}

// bothErr is err that also matches another sentinel (errors.Is).
type bothErr struct{ err, also error }

func (e *bothErr) Error() string   { return e.err.Error() }
func (e *bothErr) Unwrap() []error { return []error{e.err, e.also} }
