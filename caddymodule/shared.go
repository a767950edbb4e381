package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/embedded"
	"github.com/timeblock/timeblock/accounts/postgres"
)

// sharedPool holds what must outlive a config reload, keyed by the store it
// is built on: a reload provisions the new config before the old one is
// cleaned up, so both see the same store connection, caches and lane counts.
var sharedPool = caddy.NewUsagePool()

// shared is the state behind every timeblock app that names one store. It
// is made in Provision, touching nothing, and opened by the first Start
// (open): `caddy validate` provisions a config but never starts it.
type shared struct {
	key   string
	cfg   StoreConfig
	store *storeHandle
	gate  *gateState // entitlement cache, lane registry, last-use batcher
	// funding counts pool moves and pledge charges across reloads.
	funding *fundingMetrics

	openMu sync.Mutex
}

// Destruct stops the gate's work and closes the store when the last config
// using them is gone; what was never opened has nothing to close.
func (s *shared) Destruct() error { return errors.Join(s.gate.close(), s.store.Close()) }

// loadShared returns the shared state of cfg's store: the running config's
// during a reload, else a new one, not yet open.
func loadShared(cfg *StoreConfig) *shared {
	key := storeKey(cfg)
	val, _, _ := sharedPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		return &shared{key: key, cfg: *cfg, store: newStoreHandle(), gate: pendingGateState(), funding: newFundingMetrics()}, nil
	})
	return val.(*shared)
}

// open opens the store and the gate state on it, once; later calls return
// at once, with the first one's error if it failed. A config whose Start
// fails is cleaned up, which drops the failed state from the pool, so the
// next config opens afresh.
func (s *shared) open(ctx context.Context, logger *zap.Logger) error {
	s.openMu.Lock()
	defer s.openMu.Unlock()
	select {
	case <-s.store.ready:
		return s.store.err
	default:
	}
	st, err := openStore(ctx, &s.cfg, logger)
	if err == nil {
		logger.Info("account store opened", zap.String("backend", s.cfg.Backend), zap.String("path", s.cfg.Path))
		if err = s.gate.open(st, logger); err != nil {
			err = errors.Join(err, st.Close())
			st = nil
		}
	} else {
		s.gate.settle(err)
	}
	s.store.settle(st, err)
	return err
}

func openStore(ctx context.Context, cfg *StoreConfig, logger *zap.Logger) (accounts.Store, error) {
	switch cfg.Backend {
	case "embedded":
		st, err := embedded.Open(cfg.Path)
		if err != nil {
			return nil, fmt.Errorf("timeblock: opening embedded store %s: %w", cfg.Path, err)
		}
		return st, nil
	case "postgres":
		openCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		st, err := postgres.Open(openCtx, cfg.DSN, postgres.WithLogger(slog.New(zapslog.NewHandler(logger.Core()))))
		if err != nil {
			return nil, fmt.Errorf("timeblock: opening postgres store: %w", err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("timeblock: unknown store %q", cfg.Backend)
}
