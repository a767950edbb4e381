package storetest

import (
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

func testPools(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	// IDs sort against insertion order, to tell the two orders apart.
	first, second := f.pool(4), f.pool(2)
	first.ID, second.ID = "pool-z", "pool-a"
	second.BlockPrices = nil
	second.Description, second.ManualProvisioning, second.MaxOutputTokens = "", false, 0
	f.create(first, second)

	expect(t, s, "GetPool", first, func(tx accounts.Tx) (*accounts.Pool, error) { return tx.GetPool(first.ID) })
	expect(t, s, "GetPool (no prices)", second, func(tx accounts.Tx) (*accounts.Pool, error) { return tx.GetPool(second.ID) })
	expect(t, s, "GetPoolBySlug", first, func(tx accounts.Tx) (*accounts.Pool, error) { return tx.GetPoolBySlug(first.Slug) })
	expect(t, s, "ListPools", []*accounts.Pool{first, second}, func(tx accounts.Tx) ([]*accounts.Pool, error) { return tx.ListPools() })

	// Upserting replaces every field, the slug included, and keeps the list position.
	replaced := f.pool(8)
	replaced.ID = first.ID
	replaced.Status = accounts.PoolPaused
	replaced.BlockPrices = map[accounts.Block]string{accounts.BlockAmericas: "12.345"}
	f.create(replaced)
	expect(t, s, "GetPool after upsert", replaced, func(tx accounts.Tx) (*accounts.Pool, error) { return tx.GetPool(first.ID) })
	expect(t, s, "GetPoolBySlug new slug", replaced, func(tx accounts.Tx) (*accounts.Pool, error) { return tx.GetPoolBySlug(replaced.Slug) })
	expectErr(t, s, "GetPoolBySlug old slug", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetPoolBySlug(first.Slug)
		return err
	})
	expect(t, s, "ListPools after upsert", []*accounts.Pool{replaced, second}, func(tx accounts.Tx) ([]*accounts.Pool, error) { return tx.ListPools() })
}

func testSubscriptions(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u, other, p := f.user(), f.user(), f.pool(4)
	// Seats out of order: their order is not part of the contract.
	held := append(seats(accounts.BlockEurope, 1, 2), seats(accounts.BlockAsia, 0, 2)...)
	a := f.subscription(u, p, held)
	b := f.subscription(u, p, nil)
	b.Status, b.Blocks, b.PastDueSince, b.TermsVersion, b.AckVia = accounts.SubPendingKey, nil, time.Time{}, "", "api"
	b.PeriodAmount = ""                         // bought before the amount was kept: read back as ""
	b.CreatedAt = a.CreatedAt.Add(-time.Second) // b is the older
	c := f.subscription(other, p, seats(accounts.BlockAmericas, 0, 1))
	f.create(u, other, p, a, b, c)

	expect(t, s, "GetSubscription", a, func(tx accounts.Tx) (*accounts.Subscription, error) { return tx.GetSubscription(a.ID) })
	expect(t, s, "GetSubscription (no seats, zero times)", b, func(tx accounts.Tx) (*accounts.Subscription, error) {
		return tx.GetSubscription(b.ID)
	})
	expect(t, s, "ListSubscriptionsByUser", []*accounts.Subscription{b, a}, func(tx accounts.Tx) ([]*accounts.Subscription, error) {
		return tx.ListSubscriptionsByUser(u.ID)
	})
	expect(t, s, "ListSubscriptionsByUser of a user without any", nil, func(tx accounts.Tx) ([]*accounts.Subscription, error) {
		return tx.ListSubscriptionsByUser("nobody")
	})

	// Update every field; the seats move: europe released, americas taken.
	a2 := f.subscription(u, p, append(seats(accounts.BlockAsia, 0, 2), seats(accounts.BlockAmericas, 1, 2)...))
	a2.ID, a2.CreatedAt = a.ID, a.CreatedAt
	a2.Status, a2.BillingCycle, a2.Quantity, a2.CancelAtPeriodEnd = accounts.SubPastDue, accounts.CycleYear, 2, false
	a2.PeriodAmount = "1948.20" // kept as written, trailing zero included
	a2.Blocks = []accounts.Block{accounts.BlockAsia, accounts.BlockAmericas}
	update(t, s, func(tx accounts.Tx) error { return tx.UpdateSubscription(a2) })
	expect(t, s, "GetSubscription after update", a2, func(tx accounts.Tx) (*accounts.Subscription, error) { return tx.GetSubscription(a.ID) })
	want := holders(map[string][]accounts.Seat{a.ID: a2.Seats, c.ID: c.Seats})
	expect(t, s, "TakenSeats after update", want, func(tx accounts.Tx) (map[accounts.Seat]string, error) { return tx.TakenSeats(p.ID) })

	// Canceling releases every seat, and another subscription can take them.
	a3 := *a2
	a3.Status, a3.Seats = accounts.SubCanceled, nil
	d := f.subscription(other, p, a2.Seats)
	update(t, s, func(tx accounts.Tx) error {
		if err := tx.UpdateSubscription(&a3); err != nil {
			return err
		}
		return tx.CreateSubscription(d)
	})
	expect(t, s, "GetSubscription after cancel", &a3, func(tx accounts.Tx) (*accounts.Subscription, error) { return tx.GetSubscription(a.ID) })
	want = holders(map[string][]accounts.Seat{d.ID: d.Seats, c.ID: c.Seats})
	expect(t, s, "TakenSeats after cancel", want, func(tx accounts.Tx) (map[accounts.Seat]string, error) { return tx.TakenSeats(p.ID) })
}

// holders maps each seat to the subscription holding it.
func holders(bySub map[string][]accounts.Seat) map[accounts.Seat]string {
	m := make(map[accounts.Seat]string)
	for id, held := range bySub {
		for _, seat := range held {
			m[seat] = id
		}
	}
	return m
}

func testTakenSeats(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u, p, q := f.user(), f.pool(3), f.pool(3)
	a := f.subscription(u, p, seats(accounts.BlockAsia, 0, 2))
	b := f.subscription(u, p, seats(accounts.BlockAsia, 2, 1))
	c := f.subscription(u, q, seats(accounts.BlockAsia, 0, 3)) // same seats, another pool
	f.create(u, p, q, a, b, c)

	expect(t, s, "TakenSeats", holders(map[string][]accounts.Seat{a.ID: a.Seats, b.ID: b.Seats}),
		func(tx accounts.Tx) (map[accounts.Seat]string, error) { return tx.TakenSeats(p.ID) })
	expect(t, s, "TakenSeats of the other pool", holders(map[string][]accounts.Seat{c.ID: c.Seats}),
		func(tx accounts.Tx) (map[accounts.Seat]string, error) { return tx.TakenSeats(q.ID) })
	expect(t, s, "TakenSeats of an unknown pool", nil,
		func(tx accounts.Tx) (map[accounts.Seat]string, error) { return tx.TakenSeats("no-such-pool") })
}

func testSubscriptionsDue(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u, p := f.user(), f.pool(1)
	now, graceStart := at(1000*time.Hour), at(800*time.Hour)
	sub := func(status string, periodEnd, pastDueSince time.Time) *accounts.Subscription {
		x := f.subscription(u, p, nil)
		x.Status, x.CurrentPeriodEnd, x.PastDueSince = status, periodEnd, pastDueSince
		return x
	}
	var none time.Time
	var (
		ended        = sub(accounts.SubActive, now.Add(-time.Hour), none)
		endsNow      = sub(accounts.SubActive, now, none)
		running      = sub(accounts.SubActive, now.Add(time.Microsecond), none)
		pastDueOver  = sub(accounts.SubPastDue, now.Add(time.Hour), graceStart.Add(-time.Hour))
		pastDueAtEnd = sub(accounts.SubPastDue, now.Add(time.Hour), graceStart)
		pastDueGrace = sub(accounts.SubPastDue, now.Add(time.Hour), graceStart.Add(time.Microsecond))
		pastDueNoTS  = sub(accounts.SubPastDue, now.Add(time.Hour), none)
		pastDueBoth  = sub(accounts.SubPastDue, now.Add(-time.Hour), graceStart.Add(-time.Hour))
		canceled     = sub(accounts.SubCanceled, now.Add(-time.Hour), graceStart.Add(-time.Hour))
		pending      = sub(accounts.SubPendingKey, now.Add(-time.Hour), none)
	)
	f.create(u, p, ended, endsNow, running, pastDueOver, pastDueAtEnd, pastDueGrace, pastDueNoTS, pastDueBoth, canceled, pending)

	want := []*accounts.Subscription{ended, endsNow, pastDueOver, pastDueAtEnd, pastDueBoth}
	expect(t, s, "ListSubscriptionsDue", want, func(tx accounts.Tx) ([]*accounts.Subscription, error) {
		return tx.ListSubscriptionsDue(now, graceStart)
	})
	expect(t, s, "ListSubscriptionsDue before anything is due", nil, func(tx accounts.Tx) ([]*accounts.Subscription, error) {
		return tx.ListSubscriptionsDue(at(0), at(0))
	})
}
