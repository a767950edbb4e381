package embedded

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/timeblock/timeblock/accounts"
)

// tx is the accounts.Tx of one bbolt transaction.
//
// Every write method checks all of its constraints before it writes
// anything, so a method that fails leaves the transaction as it was and fn
// may go on, as it can on PostgreSQL (where each write runs in a savepoint).
type tx struct {
	btx *bolt.Tx
}

func (t *tx) bucket(name string) *bolt.Bucket { return t.btx.Bucket([]byte(name)) }

// load decodes the record stored under key in bucket into r; ok is false
// when there is none.
func (t *tx) load(bucket, key string, r any) (ok bool, err error) {
	v := t.bucket(bucket).Get([]byte(key))
	if v == nil {
		return false, nil
	}
	if err := json.Unmarshal(v, r); err != nil {
		return false, fmt.Errorf("decode %s record %q: %w", bucket, key, err)
	}
	return true, nil
}

// mustLoad is load with a missing record reported as ErrNotFound.
func (t *tx) mustLoad(bucket, key string, r any) error {
	ok, err := t.load(bucket, key, r)
	if err == nil && !ok {
		err = accounts.ErrNotFound
	}
	return err
}

func (t *tx) save(bucket, key string, r any) error {
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode %s record %q: %w", bucket, key, err)
	}
	return t.bucket(bucket).Put([]byte(key), v)
}

func (t *tx) exists(bucket, key string) bool {
	return t.bucket(bucket).Get([]byte(key)) != nil
}

// free reports whether the unique value is unclaimed in index b, or claimed by id.
func free(b *bolt.Bucket, value, id string) bool {
	v := b.Get(compositeKey(value))
	return v == nil || string(v) == id
}

// lookup returns the id a unique index maps value to, or "".
func lookup(b *bolt.Bucket, value string) string {
	return string(b.Get(compositeKey(value)))
}

// refs checks that the records a write points at exist, as PostgreSQL's
// foreign keys do; a dangling reference is ErrNotFound.
func (t *tx) refs(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		bucket, id := pairs[i], pairs[i+1]
		if !t.exists(bucket, id) {
			return fmt.Errorf("%s %q: %w", bucket, id, accounts.ErrNotFound)
		}
	}
	return nil
}

// idsOf returns the ids indexed under compositeKey(owner) in an (owner, id) index.
func idsOf(b *bolt.Bucket, owner string) []string {
	prefix := compositeKey(owner)
	var ids []string
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		ids = append(ids, lastPart(k, prefix))
	}
	return ids
}

// putUnique maps a unique value to the id that holds it.
func putUnique(b *bolt.Bucket, value, id string) error {
	return b.Put(compositeKey(value), []byte(id))
}

// putOwned adds id to the ids of owner.
func putOwned(b *bolt.Bucket, owner, id string) error {
	return b.Put(compositeKey(owner, id), []byte{})
}

// moveUnique points the unique index entry of id at its new value.
func moveUnique(b *bolt.Bucket, oldValue, newValue, id string) error {
	if oldValue == newValue {
		return nil
	}
	if err := b.Delete(compositeKey(oldValue)); err != nil {
		return err
	}
	return putUnique(b, newValue, id)
}

// moveOwned moves id from the ids of oldOwner to those of newOwner.
func moveOwned(b *bolt.Bucket, oldOwner, newOwner, id string) error {
	if oldOwner == newOwner {
		return nil
	}
	if err := b.Delete(compositeKey(oldOwner, id)); err != nil {
		return err
	}
	return putOwned(b, newOwner, id)
}

// loadAll decodes the records with the given ids from bucket.
func loadAll[R any](t *tx, bucket string, ids []string) ([]*R, error) {
	out := make([]*R, 0, len(ids))
	for _, id := range ids {
		r := new(R)
		if err := t.mustLoad(bucket, id, r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// scanAll decodes every record of bucket.
func scanAll[R any](t *tx, bucket string) ([]*R, error) {
	var out []*R
	err := t.bucket(bucket).ForEach(func(k, v []byte) error {
		r := new(R)
		if err := json.Unmarshal(v, r); err != nil {
			return fmt.Errorf("decode %s record %q: %w", bucket, k, err)
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// byCreation sorts items oldest first, ties broken by id: the order every
// List method promises.
func byCreation[T any](items []T, key func(T) (created time.Time, id string)) {
	slices.SortFunc(items, func(a, b T) int {
		ca, ia := key(a)
		cb, ib := key(b)
		return cmp.Or(ca.Compare(cb), cmp.Compare(ia, ib))
	})
}

// entry names one key in one bucket.
type entry struct {
	bucket string
	key    []byte
}

func (t *tx) delete(entries ...entry) error {
	for _, e := range entries {
		if err := t.bucket(e.bucket).Delete(e.key); err != nil {
			return fmt.Errorf("delete from %s: %w", e.bucket, err)
		}
	}
	return nil
}

// Interface guards.
var (
	_ accounts.Tx           = (*tx)(nil)
	_ accounts.TestLedgerTx = (*tx)(nil)
)
