package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts"
)

// combinedKeyColumns lists a combined key's columns, then its members as two
// parallel arrays in their stored order.
const combinedKeyColumns = `k.id, k.user_id, k.label, k.hash, k.ciphertext, k.active, k.created_at, k.last_used_at,
	ARRAY(SELECT subscription_id FROM combined_key_members WHERE combined_key_id = k.id ORDER BY position),
	ARRAY(SELECT role FROM combined_key_members WHERE combined_key_id = k.id ORDER BY position)`

func scanCombinedKey(row pgx.Row) (*accounts.CombinedKey, error) {
	var k accounts.CombinedKey
	var lastUsed *time.Time
	var subs, roles []string
	err := row.Scan(&k.ID, &k.UserID, &k.Label, &k.Hash, &k.Ciphertext, &k.Active, &k.CreatedAt, &lastUsed, &subs, &roles)
	if err != nil {
		return nil, err
	}
	k.Members = make([]accounts.Member, len(subs))
	for i := range subs {
		k.Members[i] = accounts.Member{SubscriptionID: subs[i], Role: roles[i]}
	}
	k.CreatedAt, k.LastUsedAt = k.CreatedAt.UTC(), fromNull(lastUsed)
	return &k, nil
}

// insertMembers adds k's members in order; the unique subscription_id
// refuses one that is already in a combined key.
func insertMembers(ctx context.Context, db dbtx, k *accounts.CombinedKey) error {
	if len(k.Members) == 0 {
		return nil
	}
	subs, roles := make([]string, len(k.Members)), make([]string, len(k.Members))
	for i, m := range k.Members {
		subs[i], roles[i] = m.SubscriptionID, m.Role
	}
	_, err := db.Exec(ctx, `INSERT INTO combined_key_members (combined_key_id, position, subscription_id, role)
		SELECT $1, position, subscription_id, role
		FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS t (subscription_id, role, position)`,
		k.ID, subs, roles)
	return err
}

func (t *tx) CreateCombinedKey(k *accounts.CombinedKey) error {
	err := t.write(func(db dbtx) error {
		_, err := db.Exec(t.ctx, `INSERT INTO combined_keys (id, user_id, label, hash, ciphertext, active, created_at, last_used_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			k.ID, k.UserID, k.Label, k.Hash, nonNil(k.Ciphertext), k.Active, ts(k.CreatedAt), nullTS(k.LastUsedAt))
		if err != nil {
			return err
		}
		return insertMembers(t.ctx, db, k)
	})
	return wrap(err, "create combined key %s", k.ID)
}

func (t *tx) GetCombinedKey(id string) (*accounts.CombinedKey, error) {
	k, err := scanCombinedKey(t.db.QueryRow(t.ctx, `SELECT `+combinedKeyColumns+` FROM combined_keys k WHERE k.id = $1`, id))
	return k, wrap(err, "get combined key %s", id)
}

func (t *tx) GetCombinedKeyByHash(hash string) (*accounts.CombinedKey, error) {
	k, err := scanCombinedKey(t.db.QueryRow(t.ctx, `SELECT `+combinedKeyColumns+` FROM combined_keys k WHERE k.hash = $1`, hash))
	return k, wrap(err, "get combined key by hash")
}

func (t *tx) GetCombinedKeyBySubscription(subscriptionID string) (*accounts.CombinedKey, error) {
	k, err := scanCombinedKey(t.db.QueryRow(t.ctx, `SELECT `+combinedKeyColumns+` FROM combined_keys k
		JOIN combined_key_members m ON m.combined_key_id = k.id WHERE m.subscription_id = $1`, subscriptionID))
	return k, wrap(err, "get combined key of subscription %s", subscriptionID)
}

func (t *tx) UpdateCombinedKey(k *accounts.CombinedKey) error {
	err := t.write(func(db dbtx) error {
		err := execOne(t.ctx, db, `UPDATE combined_keys SET user_id = $2, label = $3, hash = $4, ciphertext = $5,
			active = $6, created_at = $7, last_used_at = $8 WHERE id = $1`,
			k.ID, k.UserID, k.Label, k.Hash, nonNil(k.Ciphertext), k.Active, ts(k.CreatedAt), nullTS(k.LastUsedAt))
		if err != nil {
			return err
		}
		if _, err := db.Exec(t.ctx, `DELETE FROM combined_key_members WHERE combined_key_id = $1`, k.ID); err != nil {
			return err
		}
		return insertMembers(t.ctx, db, k)
	})
	return wrap(err, "update combined key %s", k.ID)
}

func (t *tx) ListCombinedKeys(userID string) ([]*accounts.CombinedKey, error) {
	keys, err := queryAll(t, scanCombinedKey,
		`SELECT `+combinedKeyColumns+` FROM combined_keys k WHERE k.user_id = $1 ORDER BY k.created_at, k.id`, userID)
	return keys, wrap(err, "list combined keys of %s", userID)
}

func (t *tx) DeleteCombinedKey(id string) error {
	return wrap(t.execOne(`DELETE FROM combined_keys WHERE id = $1`, id), "delete combined key %s", id)
}
