package embedded

import (
	"fmt"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

func (t *tx) CreateKey(k *accounts.Key) error {
	if t.exists(bucketKeys, k.ID) {
		return fmt.Errorf("create key %s: id already used: %w", k.ID, accounts.ErrConflict)
	}
	if err := t.checkKey(k); err != nil {
		return fmt.Errorf("create key %s: %w", k.ID, err)
	}
	if err := t.save(bucketKeys, k.ID, newKeyRecord(k)); err != nil {
		return fmt.Errorf("create key %s: %w", k.ID, err)
	}
	if err := putUnique(t.bucket(bucketKeysByHash), k.Hash, k.ID); err != nil {
		return err
	}
	if err := putUnique(t.bucket(bucketKeysBySub), k.SubscriptionID, k.ID); err != nil {
		return err
	}
	return putOwned(t.bucket(bucketKeysByUser), k.UserID, k.ID)
}

// checkKey checks the constraints a key must meet to be written.
func (t *tx) checkKey(k *accounts.Key) error {
	if !free(t.bucket(bucketKeysByHash), k.Hash, k.ID) {
		return fmt.Errorf("hash already used: %w", accounts.ErrConflict)
	}
	if !free(t.bucket(bucketKeysBySub), k.SubscriptionID, k.ID) {
		return fmt.Errorf("subscription %s already has a key: %w", k.SubscriptionID, accounts.ErrConflict)
	}
	return t.refs(bucketUsers, k.UserID, bucketSubs, k.SubscriptionID)
}

func (t *tx) GetKey(id string) (*accounts.Key, error) {
	var r keyRecord
	if err := t.mustLoad(bucketKeys, id, &r); err != nil {
		return nil, fmt.Errorf("get key %s: %w", id, err)
	}
	return r.key(), nil
}

func (t *tx) GetKeyByHash(hash string) (*accounts.Key, error) {
	id := lookup(t.bucket(bucketKeysByHash), hash)
	if id == "" {
		return nil, fmt.Errorf("get key by hash: %w", accounts.ErrNotFound)
	}
	return t.GetKey(id)
}

func (t *tx) GetKeyBySubscription(subscriptionID string) (*accounts.Key, error) {
	id := lookup(t.bucket(bucketKeysBySub), subscriptionID)
	if id == "" {
		return nil, fmt.Errorf("get key of subscription %s: %w", subscriptionID, accounts.ErrNotFound)
	}
	return t.GetKey(id)
}

func (t *tx) UpdateKey(k *accounts.Key) error {
	var old keyRecord
	if err := t.mustLoad(bucketKeys, k.ID, &old); err != nil {
		return fmt.Errorf("update key %s: %w", k.ID, err)
	}
	if err := t.checkKey(k); err != nil {
		return fmt.Errorf("update key %s: %w", k.ID, err)
	}
	if err := t.save(bucketKeys, k.ID, newKeyRecord(k)); err != nil {
		return fmt.Errorf("update key %s: %w", k.ID, err)
	}
	if err := moveUnique(t.bucket(bucketKeysByHash), old.Hash, k.Hash, k.ID); err != nil {
		return err
	}
	if err := moveUnique(t.bucket(bucketKeysBySub), old.SubscriptionID, k.SubscriptionID, k.ID); err != nil {
		return err
	}
	return moveOwned(t.bucket(bucketKeysByUser), old.UserID, k.UserID, k.ID)
}

func (t *tx) ListKeys(userID string) ([]*accounts.Key, error) {
	records, err := loadAll[keyRecord](t, bucketKeys, idsOf(t.bucket(bucketKeysByUser), userID))
	if err != nil {
		return nil, fmt.Errorf("list keys of %s: %w", userID, err)
	}
	keys := make([]*accounts.Key, len(records))
	for i, r := range records {
		keys[i] = r.key()
	}
	byCreation(keys, func(k *accounts.Key) (time.Time, string) { return k.CreatedAt, k.ID })
	return keys, nil
}

func (t *tx) DeleteKey(id string) error {
	var r keyRecord
	if err := t.mustLoad(bucketKeys, id, &r); err != nil {
		return fmt.Errorf("delete key %s: %w", id, err)
	}
	if err := t.delete(
		entry{bucketKeys, []byte(id)},
		entry{bucketKeysByHash, compositeKey(r.Hash)},
		entry{bucketKeysBySub, compositeKey(r.SubscriptionID)},
		entry{bucketKeysByUser, compositeKey(r.UserID, id)},
	); err != nil {
		return fmt.Errorf("delete key %s: %w", id, err)
	}
	return nil
}
