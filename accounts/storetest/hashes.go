package storetest

import (
	"slices"
	"testing"

	"github.com/timeblock/timeblock/accounts"
)

func testCredentialHashes(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u, p, a := f.basics(4)
	v := f.user()
	b, c, d := f.subscription(u, p, nil), f.subscription(v, p, nil), f.subscription(v, p, nil)
	ka, kc := f.key(a), f.key(c)
	kc.Active = false // revoked keys are still known: the gate says "revoked", not "unknown"
	cu := f.combinedKey(u, b)
	cv := f.combinedKey(v, d)
	mk := f.managementKey(u) // not an inference credential
	sess := f.session(u)
	f.create(v, b, c, d, ka, kc, cu, cv, mk, sess)

	hashes := func(what, userID string, want ...string) {
		t.Helper()
		got := read(t, s, func(tx accounts.Tx) ([]string, error) { return tx.ListCredentialHashes(userID) })
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: ListCredentialHashes(%q) = %q, want %q", what, userID, got, want)
		}
	}
	hashes("every user", accounts.InvalidateAll, ka.Hash, kc.Hash, cu.Hash, cv.Hash)
	hashes("one user", u.ID, ka.Hash, cu.Hash)
	hashes("the other user", v.ID, kc.Hash, cv.Hash)
	hashes("a user without keys", "nobody")

	// A re-keyed credential lists its new hash only; a deleted one leaves.
	ka2 := *ka
	ka2.Hash = "key-hash-rekeyed"
	update(t, s, func(tx accounts.Tx) error {
		if err := tx.UpdateKey(&ka2); err != nil {
			return err
		}
		return tx.DeleteCombinedKey(cv.ID)
	})
	hashes("after re-key and delete", accounts.InvalidateAll, ka2.Hash, kc.Hash, cu.Hash)
	hashes("one user after re-key", u.ID, ka2.Hash, cu.Hash)
	hashes("the other user after delete", v.ID, kc.Hash)
}
