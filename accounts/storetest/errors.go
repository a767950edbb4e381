package storetest

import (
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

func testNotFound(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u, p, sub := f.basics(1)
	// Records that were never stored, referring to ones that were.
	user, key, ck, charge := f.user(), f.key(sub), f.combinedKey(u, sub), f.charge(sub, sub.CurrentPeriodStart)
	subscription := f.subscription(u, p, nil)
	const missing = "missing"

	for name, fn := range map[string]func(tx accounts.Tx) error{
		"GetUser":                      func(tx accounts.Tx) error { _, err := tx.GetUser(missing); return err },
		"GetUserByEmail":               func(tx accounts.Tx) error { _, err := tx.GetUserByEmail(missing); return err },
		"UpdateUser":                   func(tx accounts.Tx) error { return tx.UpdateUser(user) },
		"GetSession":                   func(tx accounts.Tx) error { _, err := tx.GetSession(missing); return err },
		"DeleteSession":                func(tx accounts.Tx) error { return tx.DeleteSession(missing) },
		"GetManagementKey":             func(tx accounts.Tx) error { _, err := tx.GetManagementKey(missing); return err },
		"GetManagementKeyByHash":       func(tx accounts.Tx) error { _, err := tx.GetManagementKeyByHash(missing); return err },
		"DeleteManagementKey":          func(tx accounts.Tx) error { return tx.DeleteManagementKey(missing) },
		"GetPool":                      func(tx accounts.Tx) error { _, err := tx.GetPool(missing); return err },
		"GetPoolBySlug":                func(tx accounts.Tx) error { _, err := tx.GetPoolBySlug(missing); return err },
		"GetSubscription":              func(tx accounts.Tx) error { _, err := tx.GetSubscription(missing); return err },
		"UpdateSubscription":           func(tx accounts.Tx) error { return tx.UpdateSubscription(subscription) },
		"GetKey":                       func(tx accounts.Tx) error { _, err := tx.GetKey(missing); return err },
		"GetKeyByHash":                 func(tx accounts.Tx) error { _, err := tx.GetKeyByHash(missing); return err },
		"GetKeyBySubscription":         func(tx accounts.Tx) error { _, err := tx.GetKeyBySubscription(sub.ID); return err },
		"UpdateKey":                    func(tx accounts.Tx) error { return tx.UpdateKey(key) },
		"DeleteKey":                    func(tx accounts.Tx) error { return tx.DeleteKey(missing) },
		"GetCombinedKey":               func(tx accounts.Tx) error { _, err := tx.GetCombinedKey(missing); return err },
		"GetCombinedKeyByHash":         func(tx accounts.Tx) error { _, err := tx.GetCombinedKeyByHash(missing); return err },
		"GetCombinedKeyBySubscription": func(tx accounts.Tx) error { _, err := tx.GetCombinedKeyBySubscription(sub.ID); return err },
		"UpdateCombinedKey":            func(tx accounts.Tx) error { return tx.UpdateCombinedKey(ck) },
		"DeleteCombinedKey":            func(tx accounts.Tx) error { return tx.DeleteCombinedKey(missing) },
		"UpdateCharge":                 func(tx accounts.Tx) error { return tx.UpdateCharge(charge) },
	} {
		expectErr(t, s, name, accounts.ErrNotFound, fn)
	}
}

func testConflicts(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u, p, sub := f.basics(4)
	other := f.subscription(u, p, seats(accounts.BlockEurope, 0, 1))
	third := f.subscription(u, p, nil)
	user2 := f.user()
	mk := f.managementKey(u)
	sess := f.session(u)
	key, key2 := f.key(sub), f.key(other)
	ck, ck2 := f.combinedKey(u, sub), f.combinedKey(u, other)
	charge, charge2 := f.charge(sub, sub.CurrentPeriodStart), f.charge(sub, sub.CurrentPeriodEnd)
	f.create(other, third, user2, mk, sess, key, key2, ck, ck2, charge, charge2)

	cases := map[string]func(tx accounts.Tx) error{
		"CreateUser same id": func(tx accounts.Tx) error {
			x := f.user()
			x.ID = u.ID
			return tx.CreateUser(x)
		},
		"CreateUser same email": func(tx accounts.Tx) error {
			x := f.user()
			x.Email = u.Email
			return tx.CreateUser(x)
		},
		"UpdateUser to a taken email": func(tx accounts.Tx) error {
			x := *user2
			x.Email = u.Email
			return tx.UpdateUser(&x)
		},
		"CreateSession same hash": func(tx accounts.Tx) error {
			x := f.session(user2)
			x.TokenHash = sess.TokenHash
			return tx.CreateSession(x)
		},
		"CreateManagementKey same id": func(tx accounts.Tx) error {
			x := f.managementKey(u)
			x.ID = mk.ID
			return tx.CreateManagementKey(x)
		},
		"CreateManagementKey same hash": func(tx accounts.Tx) error {
			x := f.managementKey(u)
			x.Hash = mk.Hash
			return tx.CreateManagementKey(x)
		},
		"UpsertPool with another pool's slug": func(tx accounts.Tx) error {
			x := f.pool(1)
			x.Slug = p.Slug
			return tx.UpsertPool(x)
		},
		"CreateSubscription same id": func(tx accounts.Tx) error {
			x := f.subscription(u, p, nil)
			x.ID = sub.ID
			return tx.CreateSubscription(x)
		},
		"CreateSubscription taking a held seat": func(tx accounts.Tx) error {
			held := append(seats(accounts.BlockAmericas, 0, 1), sub.Seats[3])
			return tx.CreateSubscription(f.subscription(u, p, held))
		},
		"CreateSubscription listing a seat twice": func(tx accounts.Tx) error {
			held := append(seats(accounts.BlockAmericas, 0, 1), accounts.Seat{Hour: 16, SlotIndex: 0})
			return tx.CreateSubscription(f.subscription(u, p, held))
		},
		"UpdateSubscription taking a held seat": func(tx accounts.Tx) error {
			x := *third
			x.Seats = []accounts.Seat{{Hour: 23, SlotIndex: 3}, other.Seats[0]}
			return tx.UpdateSubscription(&x)
		},
		"CreateKey same id": func(tx accounts.Tx) error {
			x := f.key(third)
			x.ID = key.ID
			return tx.CreateKey(x)
		},
		"CreateKey same hash": func(tx accounts.Tx) error {
			x := f.key(third)
			x.Hash = key.Hash
			return tx.CreateKey(x)
		},
		"CreateKey second for a subscription": func(tx accounts.Tx) error {
			return tx.CreateKey(f.key(sub))
		},
		"UpdateKey to a taken hash": func(tx accounts.Tx) error {
			x := *key2
			x.Hash = key.Hash
			return tx.UpdateKey(&x)
		},
		"UpdateKey to a subscription with a key": func(tx accounts.Tx) error {
			x := *key2
			x.SubscriptionID = sub.ID
			return tx.UpdateKey(&x)
		},
		"CreateCombinedKey same id": func(tx accounts.Tx) error {
			x := f.combinedKey(u, third)
			x.ID = ck.ID
			return tx.CreateCombinedKey(x)
		},
		"CreateCombinedKey same hash": func(tx accounts.Tx) error {
			x := f.combinedKey(u, third)
			x.Hash = ck.Hash
			return tx.CreateCombinedKey(x)
		},
		"CreateCombinedKey with a member of another": func(tx accounts.Tx) error {
			return tx.CreateCombinedKey(f.combinedKey(u, third, sub))
		},
		"CreateCombinedKey listing a member twice": func(tx accounts.Tx) error {
			return tx.CreateCombinedKey(f.combinedKey(u, third, third))
		},
		"UpdateCombinedKey to a taken hash": func(tx accounts.Tx) error {
			x := *ck2
			x.Hash = ck.Hash
			return tx.UpdateCombinedKey(&x)
		},
		"UpdateCombinedKey adding a member of another": func(tx accounts.Tx) error {
			x := *ck2
			x.Members = append(x.Members, accounts.Member{SubscriptionID: sub.ID, Role: accounts.RoleBoost})
			return tx.UpdateCombinedKey(&x)
		},
		"CreateCharge same id": func(tx accounts.Tx) error {
			x := f.charge(sub, at(-24*time.Hour))
			x.ID = charge.ID
			return tx.CreateCharge(x)
		},
		"CreateCharge same period": func(tx accounts.Tx) error {
			return tx.CreateCharge(f.charge(sub, charge.PeriodStart))
		},
		"UpdateCharge to a claimed period": func(tx accounts.Tx) error {
			x := *charge2
			x.PeriodStart = charge.PeriodStart
			return tx.UpdateCharge(&x)
		},
	}
	for name, fn := range cases {
		expectErr(t, s, name, accounts.ErrConflict, fn)
	}

	// Nothing above changed anything.
	expect(t, s, "TakenSeats", holders(map[string][]accounts.Seat{sub.ID: sub.Seats, other.ID: other.Seats}),
		func(tx accounts.Tx) (map[accounts.Seat]string, error) { return tx.TakenSeats(p.ID) })
	expect(t, s, "GetUser", user2, func(tx accounts.Tx) (*accounts.User, error) { return tx.GetUser(user2.ID) })
	expect(t, s, "GetKeyBySubscription", key2, func(tx accounts.Tx) (*accounts.Key, error) { return tx.GetKeyBySubscription(other.ID) })
	expect(t, s, "GetCombinedKey", ck2, func(tx accounts.Tx) (*accounts.CombinedKey, error) { return tx.GetCombinedKey(ck2.ID) })
	expect(t, s, "ListCharges", []*accounts.Charge{charge, charge2}, func(tx accounts.Tx) ([]*accounts.Charge, error) {
		return tx.ListCharges(sub.ID)
	})
}

// testMissingReferences checks that a record pointing at a user, pool or
// subscription that does not exist is refused with ErrNotFound.
func testMissingReferences(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u, p, sub := f.basics(2)
	ghostUser, ghostPool := f.user(), f.pool(1)
	ghostSub := f.subscription(u, p, nil)

	for name, fn := range map[string]func(tx accounts.Tx) error{
		"CreateSession for a missing user":       func(tx accounts.Tx) error { return tx.CreateSession(f.session(ghostUser)) },
		"CreateManagementKey for a missing user": func(tx accounts.Tx) error { return tx.CreateManagementKey(f.managementKey(ghostUser)) },
		"CreateSubscription for a missing user": func(tx accounts.Tx) error {
			return tx.CreateSubscription(f.subscription(ghostUser, p, nil))
		},
		"CreateSubscription in a missing pool": func(tx accounts.Tx) error {
			return tx.CreateSubscription(f.subscription(u, ghostPool, seats(accounts.BlockAsia, 0, 1)))
		},
		"UpdateSubscription to a missing pool": func(tx accounts.Tx) error {
			x := *sub
			x.PoolID = ghostPool.ID
			return tx.UpdateSubscription(&x)
		},
		"CreateKey for a missing subscription": func(tx accounts.Tx) error { return tx.CreateKey(f.key(ghostSub)) },
		"CreateCombinedKey with a missing member": func(tx accounts.Tx) error {
			return tx.CreateCombinedKey(f.combinedKey(u, sub, ghostSub))
		},
		"CreateCharge for a missing subscription": func(tx accounts.Tx) error {
			return tx.CreateCharge(f.charge(ghostSub, ghostSub.CurrentPeriodStart))
		},
	} {
		expectErr(t, s, name, accounts.ErrNotFound, fn)
	}
}
