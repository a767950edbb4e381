package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/admission"
	"github.com/timeblock/timeblock/accounts/postgres"
)

// gateState is the part of the shared state the gate works on: it lives as
// long as the store (across config reloads), so cached entitlements, lane
// counts and pending last-use times carry over, and a request admitted under
// the old config releases its lane to the registry the new config admits from.
type gateState struct {
	cache    *admission.Cache
	lanes    *admission.Registry
	lastUsed *admission.Batcher
	usage    *admission.UsageMeter // usage per key per hour, written every usageInterval
	metrics  *gateMetrics
	guard    *keyGuard    // filter of live keys, throttle of failed checks
	windows  *windowCache // the window of each key's lanes, for the standing headers
	watch    *laneWatch   // the streams of GET /v1/key/lanes

	stopInvalidation func()
	stop, done       chan struct{}

	laneCoord *postgres.LaneCoordinator // nil unless the nodes share lanes (store postgres)
}

// laneCoordinatorStore is a store several nodes share, whose lanes must hold
// across all of them (store postgres).
type laneCoordinatorStore interface {
	LaneCoordinator(ctx context.Context) (*postgres.LaneCoordinator, error)
}

// gateStore is what the gate state needs from the account store.
type gateStore interface {
	admission.Toucher
	OnInvalidation(fn func(userID string)) (cancel func())
}

const (
	laneSweepInterval = 5 * time.Minute
	lastUsedInterval  = 5 * time.Second
	usageInterval     = 30 * time.Second
)

// usageAdder is a store that takes hourly key usage itself (the tests' fake).
type usageAdder interface {
	AddKeyUsage(ctx context.Context, rows []accounts.KeyUsage) error
}

// usageWriter is how the usage meter writes to store.
func usageWriter(store gateStore) admission.UsageWriter {
	switch st := store.(type) {
	case accounts.Store:
		return func(ctx context.Context, rows []accounts.KeyUsage) error { return accounts.AddKeyUsage(ctx, st, rows) }
	case usageAdder:
		return st.AddKeyUsage
	}
	return func(context.Context, []accounts.KeyUsage) error { return nil }
}

func newGateState(store gateStore, logger *zap.Logger) (*gateState, error) {
	guard := newKeyGuard(store, logger)
	cache, err := admission.NewCache(admission.CacheConfig{Filter: guard.filter})
	if err != nil {
		guard.close()
		return nil, fmt.Errorf("timeblock: %w", err)
	}
	lanes := admission.NewRegistry()
	var laneCoord *postgres.LaneCoordinator
	if lcs, ok := store.(laneCoordinatorStore); ok {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		laneCoord, err = lcs.LaneCoordinator(ctx)
		cancel()
		if err != nil {
			cache.Close()
			guard.close()
			return nil, fmt.Errorf("timeblock: cluster lanes: %w", err)
		}
		lanes = admission.NewClusterRegistry(admission.ClusterConfig{Coordinator: laneCoord})
	}
	s := &gateState{
		cache:     cache,
		lanes:     lanes,
		lastUsed:  admission.NewBatcher(store, lastUsedInterval, logger.Named("last_used")),
		usage:     admission.NewUsageMeter(usageWriter(store), usageInterval, logger.Named("key_usage")),
		windows:   newWindowCache(),
		watch:     newLaneWatch(),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		laneCoord: laneCoord,
	}
	s.guard = guard
	s.metrics = newGateMetrics(s.lanes, s.cache)
	s.metrics.collectors = append(s.metrics.collectors, keyGuardCollector{guard})
	// Every node hears every invalidation (its own included), so a change to
	// a user's keys takes effect on the next request here and, through the
	// store's notifications, on the other nodes. The account service of this
	// node also tells this state directly (announcing), before it answers.
	s.stopInvalidation = store.OnInvalidation(s.heard)
	go s.sweep()
	return s, nil
}

// invalidate makes the user's cached entitlements stale and has the filter
// of live keys read the user's hashes again (everything for
// accounts.InvalidateAll).
func (s *gateState) invalidate(userID string) {
	s.cache.InvalidateUser(userID)
	s.guard.invalidate(userID)
}

// heard is the invalidation callback: invalidate, and wake the account
// service of this node if it waits for this echo of its own invalidation.
func (s *gateState) heard(userID string) {
	s.invalidate(userID)
	s.guard.echoes.heard(userID)
}

// announcing wraps the store the account service writes through, so that
// its invalidations reach this state before PublishInvalidation returns,
// and it returns once the store has delivered them back (see
// announcingStore).
func (s *gateState) announcing(st accounts.Store) accounts.Store {
	return announcingStore{Store: st, local: s.invalidate, echoes: &s.guard.echoes}
}

// sweep forgets lane groups of keys that have gone quiet.
func (s *gateState) sweep() {
	defer close(s.done)
	t := time.NewTicker(laneSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.lanes.Sweep()
		}
	}
}

// close stops the background work and writes the last-use times and the
// usage still pending; the store must still be open.
func (s *gateState) close() error {
	s.stopInvalidation()
	close(s.stop)
	<-s.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.lastUsed.Close(ctx)
	uerr := s.usage.Close(ctx)
	s.cache.Close()
	s.guard.close()
	s.lanes.Close()
	if s.laneCoord != nil {
		s.laneCoord.Close() // ends the lane session: PostgreSQL frees this node's lanes
	}
	if err != nil {
		err = fmt.Errorf("timeblock: writing key last-use times: %w", err)
	}
	if uerr != nil {
		err = errors.Join(err, fmt.Errorf("timeblock: writing key usage: %w", uerr))
	}
	return err
}
