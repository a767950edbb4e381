package admission

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
)

// UsageWriter adds hourly usage to the store (accounts.AddKeyUsage).
type UsageWriter func(ctx context.Context, rows []accounts.KeyUsage) error

const usageShards = 16

// UsageMeter counts what each key's requests do per UTC hour in memory and
// adds the counts to the store every interval, so that usage costs a
// request one map update under a sharded lock and never any I/O. A flush
// the store refuses keeps its counts for the next one.
type UsageMeter struct {
	write  UsageWriter
	logger *zap.Logger
	seed   maphash.Seed
	shards [usageShards]usageShard

	flushMu sync.Mutex // one flush at a time
	loop    *flushLoop
}

type usageShard struct {
	mu     sync.Mutex
	counts map[usageID]*usageCounts
	_      [40]byte
}

type usageID struct {
	keyID string
	hour  int64 // Unix seconds of the hour's start
}

type usageCounts struct {
	admitted, input, output int64
	seconds                 float64
	refused                 map[string]int64
}

// NewUsageMeter starts a meter that writes every interval (default 30s).
// Close writes what is left and stops it.
func NewUsageMeter(write UsageWriter, interval time.Duration, logger *zap.Logger) *UsageMeter {
	if interval <= 0 {
		interval = 30 * time.Second
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	m := &UsageMeter{
		write:  write,
		logger: logger,
		seed:   maphash.MakeSeed(),
	}
	for i := range m.shards {
		m.shards[i].counts = make(map[usageID]*usageCounts)
	}
	m.loop = startFlushLoop(interval, m.Flush, func(err error) {
		// Kept for the next flush: usage is what users are shown.
		m.logger.Warn("writing key usage: kept for the next flush", zap.Error(err))
	})
	return m
}

// counts returns the counters of the key in the hour of at, with the
// shard's lock held; the caller unlocks sh.
func (m *UsageMeter) counts(keyID string, at time.Time) (*usageShard, *usageCounts) {
	sh := &m.shards[maphash.String(m.seed, keyID)%usageShards]
	id := usageID{keyID: keyID, hour: at.Unix() - at.Unix()%3600}
	sh.mu.Lock()
	c := sh.counts[id]
	if c == nil {
		c = new(usageCounts)
		sh.counts[id] = c
	}
	return sh, c
}

// Admitted counts an admitted request of the key, in the hour it was
// admitted (at): the tokens the upstream reported and how long it held its
// lane.
func (m *UsageMeter) Admitted(keyID string, at time.Time, input, output int64, held time.Duration) {
	sh, c := m.counts(keyID, at)
	c.admitted++
	c.input += input
	c.output += output
	c.seconds += held.Seconds()
	sh.mu.Unlock()
}

// Refused counts a request of the key refused for reason at at. reason
// should be a constant: the meter keeps it.
func (m *UsageMeter) Refused(keyID string, at time.Time, reason string) {
	sh, c := m.counts(keyID, at)
	if c.refused == nil {
		c.refused = make(map[string]int64, 2)
	}
	c.refused[reason]++
	sh.mu.Unlock()
}

// Flush writes everything counted so far in one batch. When the write
// fails, the counts go back into the meter for the next flush.
func (m *UsageMeter) Flush(ctx context.Context) error {
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	var rows []accounts.KeyUsage
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		taken := sh.counts
		if len(taken) == 0 {
			sh.mu.Unlock()
			continue
		}
		sh.counts = make(map[usageID]*usageCounts, len(taken))
		sh.mu.Unlock()
		for id, c := range taken {
			rows = append(rows, accounts.KeyUsage{KeyID: id.keyID, Hour: time.Unix(id.hour, 0).UTC(),
				Admitted: c.admitted, Refused: c.refused, InputTokens: c.input, OutputTokens: c.output, Seconds: c.seconds})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	if err := m.write(ctx, rows); err != nil {
		m.putBack(rows)
		return err
	}
	return nil
}

// putBack adds rows a failed flush took to what has been counted since.
func (m *UsageMeter) putBack(rows []accounts.KeyUsage) {
	for i := range rows {
		r := &rows[i]
		sh, c := m.counts(r.KeyID, r.Hour)
		c.admitted += r.Admitted
		c.input += r.InputTokens
		c.output += r.OutputTokens
		c.seconds += r.Seconds
		if len(r.Refused) > 0 && c.refused == nil {
			c.refused = make(map[string]int64, len(r.Refused))
		}
		for reason, n := range r.Refused {
			c.refused[reason] += n
		}
		sh.mu.Unlock()
	}
}

// Close stops the periodic flush and writes what is left. It is safe to call
// more than once; later calls do nothing.
func (m *UsageMeter) Close(ctx context.Context) error { return m.loop.close(ctx) }
