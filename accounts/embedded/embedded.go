// Package embedded is the single-node account store: one bbolt file under
// Caddy's data directory, with every commit fsynced before Update returns.
//
// bbolt admits one writer at a time, so every Update is serializable without
// retries. Invalidations stay in this process: there is no other node to tell.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/timeblock/timeblock/accounts"
)

// DefaultLockTimeout is how long Open waits for another process to release
// the store file before giving up.
const DefaultLockTimeout = 3 * time.Second

// Store is an accounts.Store over a bbolt file.
type Store struct {
	db        *bolt.DB
	path      string
	callbacks accounts.Listeners
	closeOnce sync.Once
	closeErr  error
}

// Option changes how Open opens the store.
type Option func(*options)

type options struct {
	lockTimeout time.Duration
}

// WithLockTimeout sets how long Open waits for the file lock held by another
// process (default DefaultLockTimeout).
func WithLockTimeout(d time.Duration) Option {
	return func(o *options) { o.lockTimeout = d }
}

// Open opens the store file at path, creating it (and its parent directory,
// private to this user) when missing, and brings its format up to date.
func Open(path string, opts ...Option) (*Store, error) {
	o := options{lockTimeout: DefaultLockTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create directory for store file: %w", err)
	}
	// bbolt treats a zero timeout as "wait forever"; a lock held by another
	// Caddy must fail Open instead of hanging it.
	if o.lockTimeout <= 0 {
		o.lockTimeout = time.Millisecond
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: o.lockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("another Caddy process is using %s; the embedded store admits one process — use store postgres for several nodes", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open store file %s: %w", path, err)
	}
	if err := db.Update(migrate); err != nil {
		db.Close()
		return nil, fmt.Errorf("store file %s: %w", path, err)
	}
	return &Store{db: db, path: path}, nil
}

// Update runs fn in a bbolt read-write transaction. Errors from fn are
// returned as they are.
func (s *Store) Update(ctx context.Context, fn func(tx accounts.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(btx *bolt.Tx) error { return fn(&tx{btx: btx}) })
}

// View runs fn in a bbolt read-only transaction.
func (s *Store) View(ctx context.Context, fn func(tx accounts.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(func(btx *bolt.Tx) error { return fn(&tx{btx: btx}) })
}

// Close closes the file and releases its lock.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("close store file %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

var _ accounts.Store = (*Store)(nil)
