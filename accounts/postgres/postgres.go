// Package postgres is the account store for production and for several Caddy
// nodes sharing one database: PostgreSQL through pgx.
//
// Update runs fn in a SERIALIZABLE transaction and runs it again when
// PostgreSQL reports a serialization failure or a deadlock, so concurrent
// read-then-write transactions (such as taking the lowest free seats) behave
// as if they ran one after another. Each write method runs in a savepoint, so
// a write refused with ErrConflict or ErrNotFound leaves the transaction
// usable, as on the embedded store. Invalidations travel between nodes with
// LISTEN/NOTIFY.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/timeblock/timeblock/accounts"
)

// maxAttempts bounds how often Update runs fn when PostgreSQL keeps
// reporting serialization failures.
const maxAttempts = 10

// Store is an accounts.Store over a PostgreSQL database.
type Store struct {
	pool      *pgxpool.Pool
	logger    *slog.Logger
	callbacks accounts.Listeners

	stopListener context.CancelFunc
	listenerDone chan struct{}
	closeOnce    sync.Once
}

// Option changes how Open opens the store.
type Option func(*options)

type options struct {
	logger *slog.Logger
}

// WithLogger sets where the store reports trouble it recovers from on its
// own, such as a dropped notification connection. By default it is silent.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// Open connects to the database named by dsn (a postgres:// URL or a
// keyword/value string; pool_max_conns and the other pgxpool settings
// apply), applies pending schema migrations and starts listening for
// invalidations. ctx bounds the opening only.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	o := options{logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse PostgreSQL DSN: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL at %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrate schema: %w", err)
	}
	s := &Store{pool: pool, logger: o.logger}
	if err := s.startListener(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Update runs fn in a SERIALIZABLE transaction, again on serialization
// failures and deadlocks (after a short random pause, at most maxAttempts
// times; then it gives up with ErrConflict). Errors from fn are returned as
// they are.
func (s *Store) Update(ctx context.Context, fn func(tx accounts.Tx) error) error {
	return retry(ctx, func() error {
		return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(ptx pgx.Tx) error {
			return fn(&tx{ctx: ctx, db: ptx})
		})
	})
}

// View runs fn in a read-only REPEATABLE READ transaction: one snapshot,
// and no serialization failures to retry.
func (s *Store) View(ctx context.Context, fn func(tx accounts.Tx) error) error {
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	return pgx.BeginTxFunc(ctx, s.pool, opts, func(ptx pgx.Tx) error {
		return fn(&tx{ctx: ctx, db: ptx})
	})
}

// Close stops the invalidation listener and closes every connection.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stopListener()
		<-s.listenerDone
		s.pool.Close()
	})
	return nil
}

// retry runs attempt until it succeeds, fails with an error worth no retry,
// or has failed maxAttempts times.
func retry(ctx context.Context, attempt func() error) error {
	for n := 1; ; n++ {
		err := attempt()
		if err == nil || !retryable(err) {
			return err
		}
		if n == maxAttempts {
			return fmt.Errorf("%w: transaction still conflicting after %d attempts: %w", accounts.ErrConflict, n, err)
		}
		// Full jitter over an exponential window (2ms, 4ms, … 256ms), so
		// that the transactions that collided do not collide again.
		window := time.Millisecond << min(n, 8)
		if err := sleep(ctx, rand.N(window)+time.Millisecond); err != nil {
			return err
		}
	}
}

// retryable reports whether err is a serialization failure or a deadlock,
// which PostgreSQL resolves by aborting one transaction that should run again.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == codeSerializationFailure || pgErr.Code == codeDeadlockDetected)
}

func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var _ accounts.Store = (*Store)(nil)
