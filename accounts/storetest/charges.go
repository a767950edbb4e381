package storetest

import (
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

func testCharges(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	_, _, sub := f.basics(1)
	first := f.charge(sub, sub.CurrentPeriodStart)
	second := f.charge(sub, sub.CurrentPeriodEnd)
	second.Status, second.ProcessorRef = "failed", ""
	first.CreatedAt = second.CreatedAt.Add(time.Second) // second is older
	f.create(first, second)

	expect(t, s, "ListCharges", []*accounts.Charge{second, first}, func(tx accounts.Tx) ([]*accounts.Charge, error) {
		return tx.ListCharges(sub.ID)
	})
	expect(t, s, "ListCharges of a subscription without any", nil, func(tx accounts.Tx) ([]*accounts.Charge, error) {
		return tx.ListCharges("no-such-subscription")
	})

	// Update every field but the id and the subscription; the period moves
	// and the one it leaves can be claimed again.
	moved := f.charge(sub, sub.CurrentPeriodEnd.AddDate(0, 1, 0))
	moved.ID, moved.Status, moved.Amount = first.ID, "succeeded", "191.00"
	update(t, s, func(tx accounts.Tx) error { return tx.UpdateCharge(moved) })
	again := f.charge(sub, first.PeriodStart)
	f.create(again)
	expect(t, s, "ListCharges after update", []*accounts.Charge{second, moved, again}, func(tx accounts.Tx) ([]*accounts.Charge, error) {
		return tx.ListCharges(sub.ID)
	})
}
