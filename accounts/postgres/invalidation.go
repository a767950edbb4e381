package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts"
)

// invalidationChannel is the LISTEN/NOTIFY channel invalidations travel on;
// the payload is the user id.
const invalidationChannel = "timeblock_invalidate"

// PublishInvalidation notifies every node listening on the database, this
// one included. PostgreSQL delivers it asynchronously, a moment later.
func (s *Store) PublishInvalidation(ctx context.Context, userID string) error {
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, invalidationChannel, userID); err != nil {
		return fmt.Errorf("publish invalidation for %s: %w", userID, err)
	}
	return nil
}

// OnInvalidation registers fn for every invalidation published by any node.
//
// Invalidations published while the listening connection is down are lost,
// so after it reconnects fn is called once with the empty user id, meaning
// "anything may have changed".
func (s *Store) OnInvalidation(fn func(userID string)) (cancel func()) {
	return s.callbacks.Add(fn)
}

// startListener subscribes before returning, so that an invalidation
// published after Open is never missed, then hands the connection to a
// goroutine that runs until Close.
func (s *Store) startListener(ctx context.Context) error {
	conn, err := s.listen(ctx)
	if err != nil {
		return fmt.Errorf("listen for invalidations: %w", err)
	}
	lctx, stop := context.WithCancel(context.Background())
	s.stopListener = stop
	s.listenerDone = make(chan struct{})
	go s.runListener(lctx, conn)
	return nil
}

// listen opens a connection of its own, outside the pool (it stays busy
// for the store's whole life), and subscribes it to the channel.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+invalidationChannel); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

func (s *Store) runListener(ctx context.Context, conn *pgx.Conn) {
	defer close(s.listenerDone)
	for {
		err := s.receive(ctx, conn)
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn.Close(closeCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		s.logger.Warn("invalidation listener lost its connection; reconnecting", "error", err)
		if conn = s.reconnect(ctx); conn == nil {
			return
		}
		s.callbacks.Call(accounts.InvalidateAll)
	}
}

// receive hands every notification to the callbacks until the connection
// fails or ctx ends.
func (s *Store) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		s.callbacks.Call(n.Payload)
	}
}

// reconnect listens again, backing off from 100ms to 10s between attempts.
// It returns nil when ctx ends first.
func (s *Store) reconnect(ctx context.Context) *pgx.Conn {
	delay := 100 * time.Millisecond
	for {
		if sleep(ctx, delay) != nil {
			return nil
		}
		attemptCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := s.listen(attemptCtx)
		cancel()
		if err == nil {
			s.logger.Info("invalidation listener reconnected")
			return conn
		}
		delay = min(2*delay, 10*time.Second)
		s.logger.Warn("invalidation listener cannot reconnect", "error", err, "retry_in", delay)
	}
}
