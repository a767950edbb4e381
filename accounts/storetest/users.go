package storetest

import (
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

func testUsers(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	a, b := f.user(), f.user()
	b.PaymentMethod = nil
	b.CreatedAt = a.CreatedAt.Add(-time.Hour) // created after a, but older
	f.create(a, b)

	expect(t, s, "GetUser a", a, func(tx accounts.Tx) (*accounts.User, error) { return tx.GetUser(a.ID) })
	expect(t, s, "GetUser b (no payment method)", b, func(tx accounts.Tx) (*accounts.User, error) { return tx.GetUser(b.ID) })
	expect(t, s, "GetUserByEmail", a, func(tx accounts.Tx) (*accounts.User, error) { return tx.GetUserByEmail(a.Email) })
	expect(t, s, "ListUsers", []*accounts.User{b, a}, func(tx accounts.Tx) ([]*accounts.User, error) { return tx.ListUsers() })

	// Every field changes, including the email and the payment method both ways.
	oldEmail := a.Email
	a2 := &accounts.User{ID: a.ID, Email: "renamed@example.com", Name: "Renamed", CreatedAt: a.CreatedAt.Add(time.Second)}
	b2 := *b
	b2.PaymentMethod = &billing.PaymentMethod{ID: "pm_new", Brand: "mastercard", Last4: "4444"}
	update(t, s, func(tx accounts.Tx) error {
		if err := tx.UpdateUser(a2); err != nil {
			return err
		}
		return tx.UpdateUser(&b2)
	})
	expect(t, s, "GetUser after update", a2, func(tx accounts.Tx) (*accounts.User, error) { return tx.GetUser(a.ID) })
	expect(t, s, "GetUser b after update", &b2, func(tx accounts.Tx) (*accounts.User, error) { return tx.GetUser(b.ID) })
	expect(t, s, "GetUserByEmail new email", a2, func(tx accounts.Tx) (*accounts.User, error) { return tx.GetUserByEmail(a2.Email) })
	expectErr(t, s, "GetUserByEmail old email", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetUserByEmail(oldEmail)
		return err
	})

	// The old email is free again.
	c := f.user()
	c.Email = oldEmail
	f.create(c)
	expect(t, s, "GetUserByEmail reused email", c, func(tx accounts.Tx) (*accounts.User, error) { return tx.GetUserByEmail(oldEmail) })
}

func testSessions(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u := f.user()
	sess := f.session(u)
	f.create(u, sess)
	expect(t, s, "GetSession", sess, func(tx accounts.Tx) (*accounts.Session, error) { return tx.GetSession(sess.TokenHash) })

	update(t, s, func(tx accounts.Tx) error { return tx.DeleteSession(sess.TokenHash) })
	expectErr(t, s, "GetSession after delete", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetSession(sess.TokenHash)
		return err
	})
}

func testManagementKeys(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	a, b := f.user(), f.user()
	k1, k2, other := f.managementKey(a), f.managementKey(a), f.managementKey(b)
	k1.CreatedAt = k2.CreatedAt.Add(time.Second) // k2 is older
	k2.Active, k2.LastUsedAt = false, time.Time{}
	f.create(a, b, k1, k2, other)

	expect(t, s, "GetManagementKey", k1, func(tx accounts.Tx) (*accounts.ManagementKey, error) { return tx.GetManagementKey(k1.ID) })
	expect(t, s, "GetManagementKey (inactive, never used)", k2, func(tx accounts.Tx) (*accounts.ManagementKey, error) {
		return tx.GetManagementKey(k2.ID)
	})
	expect(t, s, "GetManagementKeyByHash", other, func(tx accounts.Tx) (*accounts.ManagementKey, error) {
		return tx.GetManagementKeyByHash(other.Hash)
	})
	expect(t, s, "ListManagementKeys", []*accounts.ManagementKey{k2, k1}, func(tx accounts.Tx) ([]*accounts.ManagementKey, error) {
		return tx.ListManagementKeys(a.ID)
	})
	expect(t, s, "ListManagementKeys of a user without keys", nil, func(tx accounts.Tx) ([]*accounts.ManagementKey, error) {
		return tx.ListManagementKeys("nobody")
	})

	update(t, s, func(tx accounts.Tx) error { return tx.DeleteManagementKey(k1.ID) })
	expect(t, s, "ListManagementKeys after delete", []*accounts.ManagementKey{k2}, func(tx accounts.Tx) ([]*accounts.ManagementKey, error) {
		return tx.ListManagementKeys(a.ID)
	})
	expectErr(t, s, "GetManagementKeyByHash after delete", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetManagementKeyByHash(k1.Hash)
		return err
	})
	// The hash of a deleted key is free again.
	k3 := f.managementKey(a)
	k3.Hash = k1.Hash
	f.create(k3)
	expect(t, s, "GetManagementKeyByHash reused hash", k3, func(tx accounts.Tx) (*accounts.ManagementKey, error) {
		return tx.GetManagementKeyByHash(k1.Hash)
	})
}
