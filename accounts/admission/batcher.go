package admission

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
)

// Toucher writes last-use times; accounts.Store satisfies it.
type Toucher interface {
	TouchLastUsed(ctx context.Context, batch accounts.LastUsedBatch) error
}

const batcherShards = 16

// Batcher collects key uses in memory and writes them to the store every
// interval, so that lastUsedAt costs a request one map write under a sharded
// lock and never any I/O.
type Batcher struct {
	store  Toucher
	logger *zap.Logger
	seed   maphash.Seed
	shards [batcherShards]batcherShard

	flushMu sync.Mutex // one flush at a time
	loop    *flushLoop
}

type batcherShard struct {
	mu sync.Mutex
	// pending is written by Record; spare is the map the previous flush
	// emptied, swapped in by the next one so that steady traffic reuses
	// both maps' storage.
	pending, spare batchMaps
	_              [32]byte
}

type batchMaps struct {
	keys     map[string]time.Time
	combined map[string]time.Time
}

func newBatchMaps() batchMaps {
	return batchMaps{keys: make(map[string]time.Time), combined: make(map[string]time.Time)}
}

// NewBatcher starts a batcher that flushes to store every interval (default
// 5s). Close flushes what is left and stops it.
func NewBatcher(store Toucher, interval time.Duration, logger *zap.Logger) *Batcher {
	if interval <= 0 {
		interval = 5 * time.Second
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	b := &Batcher{
		store:  store,
		logger: logger,
		seed:   maphash.MakeSeed(),
	}
	for i := range b.shards {
		b.shards[i].pending = newBatchMaps()
		b.shards[i].spare = newBatchMaps()
	}
	b.loop = startFlushLoop(interval, b.Flush, func(err error) {
		// lastUsedAt is informational: losing one batch is better than
		// growing without bound while the store is down.
		b.logger.Warn("writing key last-use times", zap.Error(err))
	})
	return b
}

// Record notes that the key (a combined key when combined) was used at t.
func (b *Batcher) Record(keyID string, combined bool, t time.Time) {
	sh := &b.shards[maphash.String(b.seed, keyID)%batcherShards]
	sh.mu.Lock()
	m := sh.pending.keys
	if combined {
		m = sh.pending.combined
	}
	if prev, ok := m[keyID]; !ok || t.After(prev) {
		m[keyID] = t
	}
	sh.mu.Unlock()
}

// Flush writes everything recorded so far in one batch.
func (b *Batcher) Flush(ctx context.Context) error {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	batch := accounts.LastUsedBatch{Keys: map[string]time.Time{}, CombinedKeys: map[string]time.Time{}}
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		taken := sh.pending
		sh.pending, sh.spare = sh.spare, taken
		sh.mu.Unlock()
		// Only Flush touches spare, under flushMu.
		for id, t := range taken.keys {
			batch.Keys[id] = t
		}
		for id, t := range taken.combined {
			batch.CombinedKeys[id] = t
		}
		clear(taken.keys)
		clear(taken.combined)
	}
	if len(batch.Keys) == 0 && len(batch.CombinedKeys) == 0 {
		return nil
	}
	return b.store.TouchLastUsed(ctx, batch)
}

// Close stops the periodic flush and writes what is left. It is safe to call
// more than once; later calls do nothing.
func (b *Batcher) Close(ctx context.Context) error { return b.loop.close(ctx) }
