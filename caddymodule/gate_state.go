package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
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
//
// It is built in two steps, because Provision must not touch the store
// (`caddy validate` provisions): pendingGateState makes what needs no store,
// and open, at the app's Start, the rest. Caddy starts its apps in no fixed
// order, so a request may reach a gate before then; wait holds it until open.
type gateState struct {
	metrics *gateMetrics
	windows *windowCache // the window of each key's lanes, for the standing headers
	watch   *laneWatch   // the streams of GET /v1/key/lanes
	echoes  echoes       // this node's invalidations the account service waits to hear back

	// opened is set, and ready closed, once open has filled in the fields
	// below; ready is closed with openErr set when opening failed.
	opened  atomic.Bool
	ready   chan struct{}
	openErr error

	cache    *admission.Cache
	lanes    *admission.Registry
	lastUsed *admission.Batcher
	usage    *admission.UsageMeter // usage per key per hour, written every usageInterval
	guard    *keyGuard             // filter of live keys, throttle of failed checks

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

// pendingGateState makes the part of a gate state that needs no store.
func pendingGateState() *gateState {
	s := &gateState{windows: newWindowCache(), watch: newLaneWatch(), ready: make(chan struct{})}
	s.metrics = newGateMetrics(s)
	return s
}

// newGateState makes a gate state on an open store.
func newGateState(store gateStore, logger *zap.Logger) (*gateState, error) {
	s := pendingGateState()
	if err := s.open(store, logger); err != nil {
		return nil, err
	}
	return s, nil
}

// open builds what the gate needs the store for (the filter of live keys
// reads it, the cluster lanes join it) and starts the background work. It
// is called once; a failure is what every waiter gets.
func (s *gateState) open(store gateStore, logger *zap.Logger) error {
	err := s.build(store, logger)
	s.settle(err)
	return err
}

// settle ends the wait for open: the state is open, or err says why not.
func (s *gateState) settle(err error) {
	if err != nil {
		s.openErr = err
	} else {
		s.opened.Store(true)
	}
	close(s.ready)
}

func (s *gateState) build(store gateStore, logger *zap.Logger) error {
	guard := newKeyGuard(store, logger)
	cache, err := admission.NewCache(admission.CacheConfig{Filter: guard.filter})
	if err != nil {
		guard.close()
		return fmt.Errorf("timeblock: %w", err)
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
			return fmt.Errorf("timeblock: cluster lanes: %w", err)
		}
		lanes = admission.NewClusterRegistry(admission.ClusterConfig{Coordinator: laneCoord})
	}
	s.guard = guard
	s.cache = cache
	s.lanes = lanes
	s.laneCoord = laneCoord
	s.lastUsed = admission.NewBatcher(store, lastUsedInterval, logger.Named("last_used"))
	s.usage = admission.NewUsageMeter(usageWriter(store), usageInterval, logger.Named("key_usage"))
	s.stop = make(chan struct{})
	s.done = make(chan struct{})
	// Every node hears every invalidation (its own included), so a change to
	// a user's keys takes effect on the next request here and, through the
	// store's notifications, on the other nodes. The account service of this
	// node also tells this state directly (announcing), before it answers.
	s.stopInvalidation = store.OnInvalidation(s.heard)
	go s.sweep()
	return nil
}

// wait returns once the state is open, or with why it will not be. Once
// the app has started it is one atomic load, inlined on the request path.
func (s *gateState) wait(ctx context.Context) error {
	if s.opened.Load() {
		return nil
	}
	return s.waitOpen(ctx)
}

func (s *gateState) waitOpen(ctx context.Context) error {
	select {
	case <-s.ready:
		if s.openErr != nil {
			return s.openErr
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// invalidate makes the user's cached entitlements stale and has the filter
// of live keys read the user's hashes again (everything for
// accounts.InvalidateAll).
func (s *gateState) invalidate(userID string) {
	if s.cache == nil {
		return // not open: nothing is cached yet (build sets cache before it listens)
	}
	s.cache.InvalidateUser(userID)
	s.guard.invalidate(userID)
}

// heard is the invalidation callback: invalidate, and wake the account
// service of this node if it waits for this echo of its own invalidation.
func (s *gateState) heard(userID string) {
	s.invalidate(userID)
	s.echoes.heard(userID)
}

// announcing wraps the store the account service writes through, so that
// its invalidations reach this state before PublishInvalidation returns,
// and it returns once the store has delivered them back (see
// announcingStore).
func (s *gateState) announcing(st accounts.Store) accounts.Store {
	return announcingStore{Store: st, local: s.invalidate, echoes: &s.echoes}
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
	if !s.opened.Load() {
		return nil
	}
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
