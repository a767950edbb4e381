package storetest

import (
	"testing"

	"github.com/timeblock/timeblock/accounts"
)

// testDeleteSubscription: a deleted subscription is gone from every read,
// its seats are free again (another subscription may take them), and a
// second delete is ErrNotFound.
func testDeleteSubscription(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u, p := f.user(), f.pool(2)
	gone := f.subscription(u, p, seats(accounts.BlockAsia, 0, 1))
	kept := f.subscription(u, p, seats(accounts.BlockAsia, 1, 1))
	f.create(u, p, gone, kept)

	update(t, s, func(tx accounts.Tx) error { return tx.DeleteSubscription(gone.ID) })

	expectErr(t, s, "GetSubscription of a deleted subscription", accounts.ErrNotFound,
		func(tx accounts.Tx) error { _, err := tx.GetSubscription(gone.ID); return err })
	expect(t, s, "ListSubscriptionsByUser after a delete", []*accounts.Subscription{kept},
		func(tx accounts.Tx) ([]*accounts.Subscription, error) { return tx.ListSubscriptionsByUser(u.ID) })
	expect(t, s, "TakenSeats after a delete", holders(map[string][]accounts.Seat{kept.ID: kept.Seats}),
		func(tx accounts.Tx) (map[accounts.Seat]string, error) { return tx.TakenSeats(p.ID) })
	again := f.subscription(u, p, gone.Seats)
	f.create(again)
	expectErr(t, s, "deleting a deleted subscription", accounts.ErrNotFound,
		func(tx accounts.Tx) error { return tx.DeleteSubscription(gone.ID) })
}
