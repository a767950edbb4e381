package admission

import (
	"context"
	"errors"
	"hash/maphash"
	"slices"
	"sync"
	"time"
)

// ErrLanesFull means every lane of the key in the pool stayed busy for as
// long as the caller was willing to wait.
var ErrLanesFull = errors.New("every lane of this key is busy")

// LaneKey names one lane group: the requests of one key (a consumption key or
// a combined key) in one pool.
type LaneKey struct {
	KeyID  string
	PoolID string
}

const registryShards = 32

// Registry counts the requests in flight per key and pool and admits up to a
// capacity the caller computes per request (the seats of the lane members
// open now). A request that finds every lane busy queues, first in first out,
// and is handed a lane directly by the release that frees it, so nothing
// polls and a release wakes exactly one waiter.
//
// Idle lane groups are kept (so that the next request allocates nothing) until
// two Sweeps pass without any use.
//
// A registry made by NewClusterRegistry shares the lanes with other nodes
// through a Coordinator: see acquireCluster.
type Registry struct {
	seed   maphash.Seed
	coord  Coordinator // nil: this process alone holds the lanes
	grace  time.Duration
	stop   chan struct{}
	done   chan struct{}
	shards [registryShards]registryShard
}

type registryShard struct {
	mu    sync.Mutex
	lanes map[LaneKey]*lane
	_     [48]byte // keep shards on separate cache lines
}

type lane struct {
	pool    string // label for metrics
	inUse   int
	waiters []*waiter
	used    bool // acquired since the last Sweep

	// With a coordinator only.
	key    LaneKey
	idle   []clusterSlot // slots this node holds from the cluster, not in use
	recent bool          // acquired since the last tick
	quiet  uint8         // ticks without an acquire
	wanted uint8         // ticks left during which another node waits for a lane
	owed   uint16        // lanes to give back as they free (one per want heard)
}

// clusterSlot is one lane taken from the cluster.
type clusterSlot struct {
	slot  int32
	epoch uint64
}

type waiter struct {
	capacity int
	ready    chan struct{} // closed when granted
	granted  bool
	slot     clusterSlot   // with granted, in cluster mode
	retry    chan struct{} // cluster mode: a slot may have come free elsewhere
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	r := &Registry{seed: maphash.MakeSeed()}
	for i := range r.shards {
		r.shards[i].lanes = make(map[LaneKey]*lane)
	}
	return r
}

func (r *Registry) shard(k LaneKey) *registryShard {
	return &r.shards[maphash.String(r.seed, k.KeyID)%registryShards]
}

// Lease is one lane held by one request. Release gives it back; a Lease
// released once ignores further calls, so `defer lease.Release()` is safe
// beside an earlier explicit release.
type Lease struct {
	sh *registryShard
	l  *lane
	r  *Registry // set in cluster mode only
	s  clusterSlot
}

// Release returns the lane, handing it to the oldest waiter that fits.
func (ls *Lease) Release() {
	if ls.l == nil {
		return
	}
	ls.sh.mu.Lock()
	ls.l.inUse--
	if ls.r == nil {
		ls.l.handOff()
	} else {
		ls.r.putBack(ls.l, ls.s)
	}
	ls.sh.mu.Unlock()
	ls.l = nil
}

// InUse returns how many lanes of the lease's group are in use on this node,
// its own included (0 once released). It asks no other node: cheap enough
// for every admitted request.
func (ls *Lease) InUse() int {
	if ls.l == nil {
		return 0
	}
	ls.sh.mu.Lock()
	n := ls.l.inUse
	ls.sh.mu.Unlock()
	return n
}

// Acquire takes a lane of k when fewer than capacity are in use. Otherwise it
// waits up to wait (not at all when wait <= 0) for a release, and returns
// ErrLanesFull when none came in time, or ctx's error when ctx ends first.
// pool labels the group in InUseByPool. waited is how long the call queued
// (zero when a lane was free at once).
func (r *Registry) Acquire(ctx context.Context, k LaneKey, pool string, capacity int, wait time.Duration) (lease Lease, waited time.Duration, err error) {
	if r.coord != nil {
		return r.acquireCluster(ctx, k, pool, capacity, wait)
	}
	sh := r.shard(k)
	sh.mu.Lock()
	l := sh.lanes[k]
	if l == nil {
		l = &lane{pool: pool}
		sh.lanes[k] = l
	}
	l.used = true
	if l.inUse < capacity {
		l.inUse++
		sh.mu.Unlock()
		return Lease{sh: sh, l: l}, 0, nil
	}
	if wait <= 0 || capacity <= 0 {
		sh.mu.Unlock()
		return Lease{}, 0, ErrLanesFull
	}
	w := &waiter{capacity: capacity, ready: make(chan struct{})}
	l.waiters = append(l.waiters, w)
	sh.mu.Unlock()

	start := time.Now()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.ready:
		return Lease{sh: sh, l: l}, time.Since(start), nil
	case <-timer.C:
		err = ErrLanesFull
	case <-ctx.Done():
		err = ctx.Err()
	}
	sh.mu.Lock()
	if w.granted {
		// A release handed us the lane while we gave up.
		sh.mu.Unlock()
		if err == ErrLanesFull {
			return Lease{sh: sh, l: l}, time.Since(start), nil
		}
		granted := Lease{sh: sh, l: l}
		granted.Release()
		return Lease{}, time.Since(start), err
	}
	if i := slices.Index(l.waiters, w); i >= 0 {
		l.waiters = slices.Delete(l.waiters, i, i+1)
	}
	sh.mu.Unlock()
	return Lease{}, time.Since(start), err
}

// handOff grants freed lanes to waiters, oldest first. A waiter's capacity
// was computed when it arrived, so a younger waiter with a larger capacity
// (the hour changed) may pass an older one that still does not fit.
// The caller holds the shard lock.
func (l *lane) handOff() {
	for i := 0; i < len(l.waiters); {
		w := l.waiters[i]
		if l.inUse >= w.capacity {
			i++
			continue
		}
		l.inUse++
		w.granted = true
		close(w.ready)
		l.waiters = slices.Delete(l.waiters, i, i+1)
	}
}

// InUse returns the number of lanes of k in use.
func (r *Registry) InUse(k LaneKey) int {
	sh := r.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if l := sh.lanes[k]; l != nil {
		return l.inUse
	}
	return 0
}

// InUseAcross returns the requests of the lane groups keys in flight: on
// this node, and on the other nodes when the registry shares its lanes
// through a coordinator that can count them (InUseCounter). That asks the
// cluster: for status endpoints, not for admission.
func (r *Registry) InUseAcross(ctx context.Context, keys []LaneKey) (int, error) {
	n := 0
	for _, k := range keys {
		n += r.InUse(k)
	}
	if c, ok := r.coord.(InUseCounter); ok && len(keys) > 0 {
		m, err := c.InUseElsewhere(ctx, keys)
		if err != nil {
			return 0, err
		}
		n += m
	}
	return n, nil
}

// InUseByPool sums the lanes in use per pool label.
func (r *Registry) InUseByPool() map[string]int {
	out := make(map[string]int)
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for _, l := range sh.lanes {
			out[l.pool] += l.inUse
		}
		sh.mu.Unlock()
	}
	return out
}

// Sweep forgets lane groups that have been idle since the previous Sweep and
// reports how many it removed. Call it every few minutes.
func (r *Registry) Sweep() int {
	removed := 0
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for k, l := range sh.lanes {
			switch {
			case l.inUse > 0 || len(l.waiters) > 0 || len(l.idle) > 0:
			case l.used:
				l.used = false
			default:
				delete(sh.lanes, k)
				removed++
			}
		}
		sh.mu.Unlock()
	}
	return removed
}
