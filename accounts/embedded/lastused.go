package embedded

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/timeblock/timeblock/accounts"
)

// TouchLastUsed writes the batch in one transaction, moving each time only
// forward so that a late, stale batch cannot undo a newer one.
func (s *Store) TouchLastUsed(ctx context.Context, batch accounts.LastUsedBatch) error {
	if len(batch.Keys)+len(batch.CombinedKeys)+len(batch.ManagementKeys) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(btx *bolt.Tx) error {
		t := &tx{btx: btx}
		if err := touch(t, bucketKeys, batch.Keys, func(r *keyRecord) *time.Time { return &r.LastUsedAt }); err != nil {
			return err
		}
		if err := touch(t, bucketCombined, batch.CombinedKeys, func(r *combinedKeyRecord) *time.Time { return &r.LastUsedAt }); err != nil {
			return err
		}
		return touch(t, bucketMgmtKeys, batch.ManagementKeys, func(r *mgmtKeyRecord) *time.Time { return &r.LastUsedAt })
	})
}

func touch[R any](t *tx, bucket string, times map[string]time.Time, lastUsed func(*R) *time.Time) error {
	for id, at := range times {
		r := new(R)
		ok, err := t.load(bucket, id, r)
		if err != nil {
			return fmt.Errorf("touch %s: %w", bucket, err)
		}
		if !ok {
			continue
		}
		if at = ts(at); !at.After(*lastUsed(r)) {
			continue
		}
		*lastUsed(r) = at
		if err := t.save(bucket, id, r); err != nil {
			return fmt.Errorf("touch %s: %w", bucket, err)
		}
	}
	return nil
}
