package storetest

import (
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

func testTouchLastUsed(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u, _, sub := f.basics(1)
	key, ck, mk := f.key(sub), f.combinedKey(u, sub), f.managementKey(u)
	fresh := f.managementKey(u)
	fresh.LastUsedAt = time.Time{}
	f.create(key, ck, mk, fresh)

	later := key.LastUsedAt.Add(time.Hour + 987*time.Nanosecond)
	earlier := ck.LastUsedAt.Add(-time.Hour)
	err := s.TouchLastUsed(t.Context(), accounts.LastUsedBatch{
		Keys:           map[string]time.Time{key.ID: later, "no-such-key": later},
		CombinedKeys:   map[string]time.Time{ck.ID: earlier, "no-such-key": later},
		ManagementKeys: map[string]time.Time{mk.ID: mk.LastUsedAt, fresh.ID: earlier, "no-such-key": later},
	})
	if err != nil {
		t.Fatalf("TouchLastUsed: %v", err)
	}
	if err := s.TouchLastUsed(t.Context(), accounts.LastUsedBatch{}); err != nil {
		t.Fatalf("TouchLastUsed with an empty batch: %v", err)
	}

	wantKey := *key
	wantKey.LastUsedAt = later.Truncate(time.Microsecond)
	expect(t, s, "key moved forward", &wantKey, func(tx accounts.Tx) (*accounts.Key, error) { return tx.GetKey(key.ID) })
	expect(t, s, "combined key not moved back", ck, func(tx accounts.Tx) (*accounts.CombinedKey, error) { return tx.GetCombinedKey(ck.ID) })
	expect(t, s, "management key at the same time", mk, func(tx accounts.Tx) (*accounts.ManagementKey, error) {
		return tx.GetManagementKey(mk.ID)
	})
	wantFresh := *fresh
	wantFresh.LastUsedAt = earlier
	expect(t, s, "never used management key", &wantFresh, func(tx accounts.Tx) (*accounts.ManagementKey, error) {
		return tx.GetManagementKey(fresh.ID)
	})
}
