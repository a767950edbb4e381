package postgres

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts"
)

const keyColumns = `id, user_id, subscription_id, name, hash, ciphertext, active, created_at, last_used_at`

func scanKey(row pgx.Row) (*accounts.Key, error) {
	var k accounts.Key
	var lastUsed *time.Time
	err := row.Scan(&k.ID, &k.UserID, &k.SubscriptionID, &k.Name, &k.Hash, &k.Ciphertext, &k.Active, &k.CreatedAt, &lastUsed)
	if err != nil {
		return nil, err
	}
	k.CreatedAt, k.LastUsedAt = k.CreatedAt.UTC(), fromNull(lastUsed)
	return &k, nil
}

func (t *tx) CreateKey(k *accounts.Key) error {
	err := t.execOne(`INSERT INTO keys (`+keyColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		k.ID, k.UserID, k.SubscriptionID, k.Name, k.Hash, nonNil(k.Ciphertext), k.Active, ts(k.CreatedAt), nullTS(k.LastUsedAt))
	return wrap(err, "create key %s", k.ID)
}

func (t *tx) GetKey(id string) (*accounts.Key, error) {
	k, err := scanKey(t.db.QueryRow(t.ctx, `SELECT `+keyColumns+` FROM keys WHERE id = $1`, id))
	return k, wrap(err, "get key %s", id)
}

func (t *tx) GetKeyByHash(hash string) (*accounts.Key, error) {
	k, err := scanKey(t.db.QueryRow(t.ctx, `SELECT `+keyColumns+` FROM keys WHERE hash = $1`, hash))
	return k, wrap(err, "get key by hash")
}

func (t *tx) GetKeyBySubscription(subscriptionID string) (*accounts.Key, error) {
	k, err := scanKey(t.db.QueryRow(t.ctx, `SELECT `+keyColumns+` FROM keys WHERE subscription_id = $1`, subscriptionID))
	return k, wrap(err, "get key of subscription %s", subscriptionID)
}

func (t *tx) UpdateKey(k *accounts.Key) error {
	err := t.execOne(`UPDATE keys SET user_id = $2, subscription_id = $3, name = $4, hash = $5, ciphertext = $6,
		active = $7, created_at = $8, last_used_at = $9 WHERE id = $1`,
		k.ID, k.UserID, k.SubscriptionID, k.Name, k.Hash, nonNil(k.Ciphertext), k.Active, ts(k.CreatedAt), nullTS(k.LastUsedAt))
	return wrap(err, "update key %s", k.ID)
}

func (t *tx) ListKeys(userID string) ([]*accounts.Key, error) {
	keys, err := queryAll(t, scanKey, `SELECT `+keyColumns+` FROM keys WHERE user_id = $1 ORDER BY created_at, id`, userID)
	return keys, wrap(err, "list keys of %s", userID)
}

func (t *tx) DeleteKey(id string) error {
	return wrap(t.execOne(`DELETE FROM keys WHERE id = $1`, id), "delete key %s", id)
}
