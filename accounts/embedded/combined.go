package embedded

import (
	"fmt"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

func (t *tx) CreateCombinedKey(k *accounts.CombinedKey) error {
	if t.exists(bucketCombined, k.ID) {
		return fmt.Errorf("create combined key %s: id already used: %w", k.ID, accounts.ErrConflict)
	}
	if err := t.checkCombinedKey(k); err != nil {
		return fmt.Errorf("create combined key %s: %w", k.ID, err)
	}
	if err := t.save(bucketCombined, k.ID, newCombinedKeyRecord(k)); err != nil {
		return fmt.Errorf("create combined key %s: %w", k.ID, err)
	}
	if err := putUnique(t.bucket(bucketCombinedByHash), k.Hash, k.ID); err != nil {
		return err
	}
	if err := t.putMembers(k); err != nil {
		return err
	}
	return putOwned(t.bucket(bucketCombinedByUser), k.UserID, k.ID)
}

// checkCombinedKey checks the constraints a combined key must meet to be
// written: a unique hash, and members that exist and belong to no other
// combined key.
func (t *tx) checkCombinedKey(k *accounts.CombinedKey) error {
	if !free(t.bucket(bucketCombinedByHash), k.Hash, k.ID) {
		return fmt.Errorf("hash already used: %w", accounts.ErrConflict)
	}
	bySub := t.bucket(bucketCombinedBySub)
	seen := make(map[string]bool, len(k.Members))
	for _, m := range k.Members {
		if seen[m.SubscriptionID] {
			return fmt.Errorf("subscription %s listed twice: %w", m.SubscriptionID, accounts.ErrConflict)
		}
		seen[m.SubscriptionID] = true
		if !free(bySub, m.SubscriptionID, k.ID) {
			return fmt.Errorf("subscription %s is in another combined key: %w", m.SubscriptionID, accounts.ErrConflict)
		}
	}
	if err := t.refs(bucketUsers, k.UserID); err != nil {
		return err
	}
	for _, m := range k.Members {
		if err := t.refs(bucketSubs, m.SubscriptionID); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) putMembers(k *accounts.CombinedKey) error {
	bySub := t.bucket(bucketCombinedBySub)
	for _, m := range k.Members {
		if err := putUnique(bySub, m.SubscriptionID, k.ID); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) deleteMembers(r *combinedKeyRecord) error {
	bySub := t.bucket(bucketCombinedBySub)
	for _, m := range r.Members {
		if err := bySub.Delete(compositeKey(m.SubscriptionID)); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) GetCombinedKey(id string) (*accounts.CombinedKey, error) {
	var r combinedKeyRecord
	if err := t.mustLoad(bucketCombined, id, &r); err != nil {
		return nil, fmt.Errorf("get combined key %s: %w", id, err)
	}
	return r.combinedKey(), nil
}

func (t *tx) GetCombinedKeyByHash(hash string) (*accounts.CombinedKey, error) {
	id := lookup(t.bucket(bucketCombinedByHash), hash)
	if id == "" {
		return nil, fmt.Errorf("get combined key by hash: %w", accounts.ErrNotFound)
	}
	return t.GetCombinedKey(id)
}

func (t *tx) GetCombinedKeyBySubscription(subscriptionID string) (*accounts.CombinedKey, error) {
	id := lookup(t.bucket(bucketCombinedBySub), subscriptionID)
	if id == "" {
		return nil, fmt.Errorf("get combined key of subscription %s: %w", subscriptionID, accounts.ErrNotFound)
	}
	return t.GetCombinedKey(id)
}

func (t *tx) UpdateCombinedKey(k *accounts.CombinedKey) error {
	var old combinedKeyRecord
	if err := t.mustLoad(bucketCombined, k.ID, &old); err != nil {
		return fmt.Errorf("update combined key %s: %w", k.ID, err)
	}
	if err := t.checkCombinedKey(k); err != nil {
		return fmt.Errorf("update combined key %s: %w", k.ID, err)
	}
	if err := t.save(bucketCombined, k.ID, newCombinedKeyRecord(k)); err != nil {
		return fmt.Errorf("update combined key %s: %w", k.ID, err)
	}
	if err := moveUnique(t.bucket(bucketCombinedByHash), old.Hash, k.Hash, k.ID); err != nil {
		return err
	}
	if err := t.deleteMembers(&old); err != nil {
		return err
	}
	if err := t.putMembers(k); err != nil {
		return err
	}
	return moveOwned(t.bucket(bucketCombinedByUser), old.UserID, k.UserID, k.ID)
}

func (t *tx) ListCombinedKeys(userID string) ([]*accounts.CombinedKey, error) {
	records, err := loadAll[combinedKeyRecord](t, bucketCombined, idsOf(t.bucket(bucketCombinedByUser), userID))
	if err != nil {
		return nil, fmt.Errorf("list combined keys of %s: %w", userID, err)
	}
	keys := make([]*accounts.CombinedKey, len(records))
	for i, r := range records {
		keys[i] = r.combinedKey()
	}
	byCreation(keys, func(k *accounts.CombinedKey) (time.Time, string) { return k.CreatedAt, k.ID })
	return keys, nil
}

func (t *tx) DeleteCombinedKey(id string) error {
	var r combinedKeyRecord
	if err := t.mustLoad(bucketCombined, id, &r); err != nil {
		return fmt.Errorf("delete combined key %s: %w", id, err)
	}
	if err := t.deleteMembers(&r); err != nil {
		return fmt.Errorf("delete combined key %s: %w", id, err)
	}
	if err := t.delete(
		entry{bucketCombined, []byte(id)},
		entry{bucketCombinedByHash, compositeKey(r.Hash)},
		entry{bucketCombinedByUser, compositeKey(r.UserID, id)},
	); err != nil {
		return fmt.Errorf("delete combined key %s: %w", id, err)
	}
	return nil
}
