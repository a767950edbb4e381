package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts"
)

// TouchLastUsed sends one UPDATE per kind of credential, all in one round
// trip and one implicit transaction. Times only move forward, so a late,
// stale batch cannot undo a newer one; unknown ids match no row.
func (s *Store) TouchLastUsed(ctx context.Context, batch accounts.LastUsedBatch) error {
	type update struct {
		table string
		ids   []string
		times []time.Time
	}
	kinds := []struct {
		table string
		times map[string]time.Time
	}{
		{"keys", batch.Keys},
		{"combined_keys", batch.CombinedKeys},
		{"management_keys", batch.ManagementKeys},
	}
	var updates []update
	for _, kind := range kinds {
		if len(kind.times) == 0 {
			continue
		}
		// A fixed order of tables and ids makes batches from several nodes
		// less likely to lock the same rows in opposite orders; retry
		// handles the rest.
		times := kind.times
		u := update{table: kind.table, ids: make([]string, 0, len(times))}
		for id := range times {
			u.ids = append(u.ids, id)
		}
		slices.Sort(u.ids)
		for _, id := range u.ids {
			u.times = append(u.times, ts(times[id]))
		}
		updates = append(updates, u)
	}
	if len(updates) == 0 {
		return nil
	}
	err := retry(ctx, func() error {
		// A sent batch keeps state of the connection it ran on; build a new one each time.
		var b pgx.Batch
		for _, u := range updates {
			b.Queue(`UPDATE `+u.table+` AS k SET last_used_at = u.at
				FROM unnest($1::text[], $2::timestamptz[]) AS u (id, at)
				WHERE k.id = u.id AND (k.last_used_at IS NULL OR k.last_used_at < u.at)`, u.ids, u.times)
		}
		return s.pool.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return fmt.Errorf("touch last used: %w", err)
	}
	return nil
}
