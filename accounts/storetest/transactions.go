package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

func testRollback(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u, p, sub := f.basics(2)
	boom := errors.New("boom")

	newUser := f.user()
	newSub := f.subscription(u, p, seats(accounts.BlockEurope, 0, 1))
	changed := *sub
	changed.Status, changed.Seats = accounts.SubCanceled, nil
	err := s.Update(t.Context(), func(tx accounts.Tx) error {
		for _, r := range []any{newUser, newSub, f.key(sub), f.charge(sub, sub.CurrentPeriodStart)} {
			if err := createRecord(tx, r); err != nil {
				return err
			}
		}
		if err := tx.UpdateSubscription(&changed); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatalf("Update returned %v, want fn's error as is", err)
	}

	expectErr(t, s, "GetUser of a rolled back user", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetUser(newUser.ID)
		return err
	})
	expectErr(t, s, "GetKeyBySubscription of a rolled back key", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetKeyBySubscription(sub.ID)
		return err
	})
	expect(t, s, "GetSubscription after rollback", sub, func(tx accounts.Tx) (*accounts.Subscription, error) {
		return tx.GetSubscription(sub.ID)
	})
	expect(t, s, "TakenSeats after rollback", holders(map[string][]accounts.Seat{sub.ID: sub.Seats}),
		func(tx accounts.Tx) (map[accounts.Seat]string, error) { return tx.TakenSeats(p.ID) })
	expect(t, s, "ListCharges after rollback", nil, func(tx accounts.Tx) ([]*accounts.Charge, error) { return tx.ListCharges(sub.ID) })
}

// testFailedWriteKeepsTransaction checks that a write refused with a
// sentinel changes nothing and leaves the transaction usable: the service
// may treat a conflict as an answer and go on.
func testFailedWriteKeepsTransaction(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u, p, sub := f.basics(2)
	before, after := f.user(), f.user()
	clash := f.subscription(u, p, append(seats(accounts.BlockEurope, 0, 1), sub.Seats[0]))
	dup := f.user()
	dup.Email = u.Email
	update(t, s, func(tx accounts.Tx) error {
		if err := tx.CreateUser(before); err != nil {
			return err
		}
		if err := tx.CreateSubscription(clash); !errors.Is(err, accounts.ErrConflict) {
			t.Errorf("CreateSubscription with a held seat: got %v, want ErrConflict", err)
		}
		if err := tx.CreateUser(dup); !errors.Is(err, accounts.ErrConflict) {
			t.Errorf("CreateUser with a taken email: got %v, want ErrConflict", err)
		}
		if _, err := tx.GetUser("missing"); !errors.Is(err, accounts.ErrNotFound) {
			t.Errorf("GetUser missing: got %v, want ErrNotFound", err)
		}
		return tx.CreateUser(after)
	})
	expect(t, s, "ListUsers", []*accounts.User{u, before, after}, func(tx accounts.Tx) ([]*accounts.User, error) { return tx.ListUsers() })
	expect(t, s, "TakenSeats", holders(map[string][]accounts.Seat{sub.ID: sub.Seats}),
		func(tx accounts.Tx) (map[accounts.Seat]string, error) { return tx.TakenSeats(p.ID) })
	expectErr(t, s, "GetSubscription of the refused subscription", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetSubscription(clash.ID)
		return err
	})
}

func testView(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u, _, _ := f.basics(1)
	expect(t, s, "GetUser in View", u, func(tx accounts.Tx) (*accounts.User, error) { return tx.GetUser(u.ID) })

	err := s.View(t.Context(), func(tx accounts.Tx) error { return tx.CreateUser(f.user()) })
	if err == nil {
		t.Error("CreateUser inside View succeeded")
	}
	expect(t, s, "ListUsers after a write in View", []*accounts.User{u}, func(tx accounts.Tx) ([]*accounts.User, error) {
		return tx.ListUsers()
	})

	boom := errors.New("boom")
	if err := s.View(t.Context(), func(accounts.Tx) error { return boom }); err != boom {
		t.Errorf("View returned %v, want fn's error as is", err)
	}
}

// testTimes checks that times come back as the same instant in UTC, cut to
// the microsecond both backends keep, and that zero times stay zero.
func testTimes(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	precise := time.Date(2025, 7, 14, 23, 59, 59, 987654321, zone)
	truncated := time.Date(2025, 7, 14, 18, 29, 59, 987654000, time.UTC)

	u := f.user()
	u.CreatedAt = precise
	p := f.pool(1)
	p.UpdatedAt = time.Time{}
	sub := f.subscription(u, p, nil)
	sub.CurrentPeriodStart, sub.CurrentPeriodEnd, sub.PastDueSince, sub.CreatedAt, sub.UpdatedAt =
		precise, precise, time.Time{}, time.Time{}, precise
	f.create(u, p, sub)

	got := read(t, s, func(tx accounts.Tx) (*accounts.User, error) { return tx.GetUser(u.ID) })
	if got.CreatedAt != truncated {
		t.Errorf("CreatedAt = %v (%s), want %v in UTC", got.CreatedAt, got.CreatedAt.Location(), truncated)
	}
	gotPool := read(t, s, func(tx accounts.Tx) (*accounts.Pool, error) { return tx.GetPool(p.ID) })
	if !gotPool.UpdatedAt.IsZero() {
		t.Errorf("zero UpdatedAt came back as %v", gotPool.UpdatedAt)
	}
	gotSub := read(t, s, func(tx accounts.Tx) (*accounts.Subscription, error) { return tx.GetSubscription(sub.ID) })
	for name, v := range map[string]time.Time{
		"CurrentPeriodStart": gotSub.CurrentPeriodStart,
		"CurrentPeriodEnd":   gotSub.CurrentPeriodEnd,
		"UpdatedAt":          gotSub.UpdatedAt,
	} {
		if v != truncated {
			t.Errorf("%s = %v, want %v", name, v, truncated)
		}
	}
	for name, v := range map[string]time.Time{"PastDueSince": gotSub.PastDueSince, "CreatedAt": gotSub.CreatedAt} {
		if !v.IsZero() || v != (time.Time{}) {
			t.Errorf("zero %s came back as %#v", name, v)
		}
	}

	// A charge's period is unique at the precision kept: nanoseconds apart is the same period.
	c1 := f.charge(sub, precise)
	c2 := f.charge(sub, precise.Add(-321*time.Nanosecond))
	f.create(c1)
	expectErr(t, s, "CreateCharge for the same microsecond", accounts.ErrConflict, func(tx accounts.Tx) error {
		return tx.CreateCharge(c2)
	})
}
