package storetest

import (
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

func testKeys(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u, p, a := f.basics(4)
	b := f.subscription(u, p, nil)
	k1, k2 := f.key(a), f.key(b)
	k1.CreatedAt = k2.CreatedAt.Add(time.Second) // k2 is older
	k2.Ciphertext, k2.Name, k2.Active, k2.LastUsedAt = nil, "", false, time.Time{}
	f.create(b, k1, k2)

	expect(t, s, "GetKey", k1, func(tx accounts.Tx) (*accounts.Key, error) { return tx.GetKey(k1.ID) })
	expect(t, s, "GetKey (empty fields)", k2, func(tx accounts.Tx) (*accounts.Key, error) { return tx.GetKey(k2.ID) })
	expect(t, s, "GetKeyByHash", k1, func(tx accounts.Tx) (*accounts.Key, error) { return tx.GetKeyByHash(k1.Hash) })
	expect(t, s, "GetKeyBySubscription", k2, func(tx accounts.Tx) (*accounts.Key, error) { return tx.GetKeyBySubscription(b.ID) })
	expect(t, s, "ListKeys", []*accounts.Key{k2, k1}, func(tx accounts.Tx) ([]*accounts.Key, error) { return tx.ListKeys(u.ID) })
	expect(t, s, "ListKeys of a user without keys", nil, func(tx accounts.Tx) ([]*accounts.Key, error) { return tx.ListKeys("nobody") })

	// Update every field but the id; the key moves to subscription c.
	c := f.subscription(u, p, nil)
	f.create(c)
	k1b := f.key(c)
	k1b.ID, k1b.Active = k1.ID, false
	update(t, s, func(tx accounts.Tx) error { return tx.UpdateKey(k1b) })
	expect(t, s, "GetKey after update", k1b, func(tx accounts.Tx) (*accounts.Key, error) { return tx.GetKey(k1.ID) })
	expect(t, s, "GetKeyByHash new hash", k1b, func(tx accounts.Tx) (*accounts.Key, error) { return tx.GetKeyByHash(k1b.Hash) })
	expect(t, s, "GetKeyBySubscription new subscription", k1b, func(tx accounts.Tx) (*accounts.Key, error) {
		return tx.GetKeyBySubscription(c.ID)
	})
	expectErr(t, s, "GetKeyByHash old hash", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetKeyByHash(k1.Hash)
		return err
	})
	expectErr(t, s, "GetKeyBySubscription old subscription", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetKeyBySubscription(a.ID)
		return err
	})

	// Deleting frees the hash and the subscription.
	update(t, s, func(tx accounts.Tx) error { return tx.DeleteKey(k1.ID) })
	expectErr(t, s, "GetKey after delete", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetKey(k1.ID)
		return err
	})
	k3 := f.key(c)
	k3.Hash = k1b.Hash
	f.create(k3)
	expect(t, s, "GetKeyBySubscription after re-issue", k3, func(tx accounts.Tx) (*accounts.Key, error) {
		return tx.GetKeyBySubscription(c.ID)
	})
}

func testCombinedKeys(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u, p, a := f.basics(4)
	b, c, d := f.subscription(u, p, nil), f.subscription(u, p, nil), f.subscription(u, p, nil)
	f.create(b, c, d)
	// Members keep their order, which is not the order of their ids.
	k1 := f.combinedKey(u, c, a, b)
	k2 := f.combinedKey(u, d)
	k1.CreatedAt = k2.CreatedAt.Add(time.Second) // k2 is older
	k2.Label, k2.Ciphertext, k2.Active, k2.LastUsedAt = "", nil, false, time.Time{}
	f.create(k1, k2)

	expect(t, s, "GetCombinedKey", k1, func(tx accounts.Tx) (*accounts.CombinedKey, error) { return tx.GetCombinedKey(k1.ID) })
	expect(t, s, "GetCombinedKey (empty fields)", k2, func(tx accounts.Tx) (*accounts.CombinedKey, error) {
		return tx.GetCombinedKey(k2.ID)
	})
	expect(t, s, "GetCombinedKeyByHash", k1, func(tx accounts.Tx) (*accounts.CombinedKey, error) {
		return tx.GetCombinedKeyByHash(k1.Hash)
	})
	for _, sub := range []*accounts.Subscription{a, b, c} {
		expect(t, s, "GetCombinedKeyBySubscription "+sub.ID, k1, func(tx accounts.Tx) (*accounts.CombinedKey, error) {
			return tx.GetCombinedKeyBySubscription(sub.ID)
		})
	}
	expect(t, s, "ListCombinedKeys", []*accounts.CombinedKey{k2, k1}, func(tx accounts.Tx) ([]*accounts.CombinedKey, error) {
		return tx.ListCombinedKeys(u.ID)
	})
	expect(t, s, "ListCombinedKeys of a user without any", nil, func(tx accounts.Tx) ([]*accounts.CombinedKey, error) {
		return tx.ListCombinedKeys("nobody")
	})

	// Update every field; a leaves, b changes role, and d moves over from k2.
	k1b := f.combinedKey(u)
	k1b.ID = k1.ID
	k1b.Members = []accounts.Member{
		{SubscriptionID: b.ID, Role: accounts.RoleLane},
		{SubscriptionID: d.ID, Role: accounts.RoleBoost},
		{SubscriptionID: c.ID, Role: accounts.RoleLane},
	}
	k2b := *k2
	k2b.Members = nil
	update(t, s, func(tx accounts.Tx) error {
		if err := tx.UpdateCombinedKey(&k2b); err != nil {
			return err
		}
		return tx.UpdateCombinedKey(k1b)
	})
	expect(t, s, "GetCombinedKey after update", k1b, func(tx accounts.Tx) (*accounts.CombinedKey, error) {
		return tx.GetCombinedKey(k1.ID)
	})
	expect(t, s, "GetCombinedKey emptied", &k2b, func(tx accounts.Tx) (*accounts.CombinedKey, error) {
		return tx.GetCombinedKey(k2.ID)
	})
	expect(t, s, "GetCombinedKeyBySubscription moved member", k1b, func(tx accounts.Tx) (*accounts.CombinedKey, error) {
		return tx.GetCombinedKeyBySubscription(d.ID)
	})
	expectErr(t, s, "GetCombinedKeyBySubscription former member", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetCombinedKeyBySubscription(a.ID)
		return err
	})
	expectErr(t, s, "GetCombinedKeyByHash old hash", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetCombinedKeyByHash(k1.Hash)
		return err
	})

	// Deleting frees the members and the hash.
	update(t, s, func(tx accounts.Tx) error { return tx.DeleteCombinedKey(k1.ID) })
	expectErr(t, s, "GetCombinedKey after delete", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetCombinedKey(k1.ID)
		return err
	})
	k3 := f.combinedKey(u, a, b, c, d)
	k3.Hash = k1b.Hash
	f.create(k3)
	expect(t, s, "GetCombinedKeyBySubscription after re-issue", k3, func(tx accounts.Tx) (*accounts.CombinedKey, error) {
		return tx.GetCombinedKeyBySubscription(d.ID)
	})
}
