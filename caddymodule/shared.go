package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// shared is the state behind every timeblock app that names one store.
type shared struct {
	key   string
	store accounts.Store
	gate  *gateState // entitlement cache, lane registry, last-use batcher
	// funding counts pool moves and pledge charges across reloads.
	funding *fundingMetrics
}

// Destruct closes the store when the last config using it is gone.
func (s *shared) Destruct() error { return errors.Join(s.gate.close(), s.store.Close()) }

func loadShared(ctx caddy.Context, cfg *StoreConfig, logger *zap.Logger) (*shared, error) {
	key := storeKey(cfg)
	val, _, err := sharedPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		st, err := openStore(ctx, cfg, logger)
		if err != nil {
			return nil, err
		}
		logger.Info("account store opened", zap.String("backend", cfg.Backend), zap.String("path", cfg.Path))
		gate, err := newGateState(st, logger)
		if err != nil {
			return nil, errors.Join(err, st.Close())
		}
		return &shared{key: key, store: st, gate: gate, funding: newFundingMetrics()}, nil
	})
	if err != nil {
		return nil, err
	}
	return val.(*shared), nil
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
