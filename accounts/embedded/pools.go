package embedded

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/timeblock/timeblock/accounts"
)

func (t *tx) UpsertPool(p *accounts.Pool) error {
	bySlug := t.bucket(bucketPoolsBySlug)
	if !free(bySlug, p.Slug, p.ID) {
		return fmt.Errorf("upsert pool %s: slug %q already used by another pool: %w", p.ID, p.Slug, accounts.ErrConflict)
	}
	var old poolRecord
	exists, err := t.load(bucketPools, p.ID, &old)
	if err != nil {
		return fmt.Errorf("upsert pool %s: %w", p.ID, err)
	}
	seq := old.Seq
	if !exists {
		if seq, err = t.bucket(bucketPools).NextSequence(); err != nil {
			return fmt.Errorf("upsert pool %s: %w", p.ID, err)
		}
	}
	if err := t.save(bucketPools, p.ID, newPoolRecord(p, seq)); err != nil {
		return fmt.Errorf("upsert pool %s: %w", p.ID, err)
	}
	if exists {
		return moveUnique(bySlug, old.Slug, p.Slug, p.ID)
	}
	return putUnique(bySlug, p.Slug, p.ID)
}

func (t *tx) GetPool(id string) (*accounts.Pool, error) {
	var r poolRecord
	if err := t.mustLoad(bucketPools, id, &r); err != nil {
		return nil, fmt.Errorf("get pool %s: %w", id, err)
	}
	return r.pool(), nil
}

func (t *tx) GetPoolBySlug(slug string) (*accounts.Pool, error) {
	id := lookup(t.bucket(bucketPoolsBySlug), slug)
	if id == "" {
		return nil, fmt.Errorf("get pool %q: %w", slug, accounts.ErrNotFound)
	}
	return t.GetPool(id)
}

// ListPools lists pools in the order they were first upserted: a pool has no
// creation time of its own.
func (t *tx) ListPools() ([]*accounts.Pool, error) {
	records, err := scanAll[poolRecord](t, bucketPools)
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	slices.SortFunc(records, func(a, b *poolRecord) int { return cmp.Compare(a.Seq, b.Seq) })
	pools := make([]*accounts.Pool, len(records))
	for i, r := range records {
		pools[i] = r.pool()
	}
	return pools, nil
}
