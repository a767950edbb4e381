package admission

import (
	"context"
	"slices"
	"time"
)

// Cluster mode timing. A tick runs every clusterTick; a node gives back the
// idle slots of a key nobody used for idleHoldTicks ticks; the lanes owed
// to wants from other nodes are forgotten after wantedTicks ticks without a
// new want (a waiting request repeats its want every wantEvery); a waiting
// request asks the cluster again every clusterPoll even without a
// notification (a dead node's slots come free without one).
const (
	clusterTick   = 500 * time.Millisecond
	idleHoldTicks = 10 // 5 s
	wantedTicks   = 4  // 2 s
	wantEvery     = time.Second
	clusterPoll   = 250 * time.Millisecond

	// DefaultHandoverGrace is how long a request waits for idle lanes that
	// other nodes hold to come back when the cluster has none free, even
	// with lane_wait 0: a node gives back an idle lane as soon as it hears
	// the want, so the key gets every lane it was sold whichever node the
	// request reaches.
	DefaultHandoverGrace = 250 * time.Millisecond
)

// ClusterConfig configures NewClusterRegistry.
type ClusterConfig struct {
	Coordinator Coordinator
	// HandoverGrace: see DefaultHandoverGrace (used when zero).
	HandoverGrace time.Duration
}

// NewClusterRegistry returns a registry whose lanes are shared with other
// nodes through cfg.Coordinator. Close stops its background tick.
func NewClusterRegistry(cfg ClusterConfig) *Registry {
	r := NewRegistry()
	r.coord = cfg.Coordinator
	r.grace = cfg.HandoverGrace
	if r.grace <= 0 {
		r.grace = DefaultHandoverGrace
	}
	r.stop = make(chan struct{})
	r.done = make(chan struct{})
	r.coord.Attach(r)
	go r.run()
	return r
}

// Close stops a cluster registry's background work and gives back the idle
// slots it holds. A plain registry has nothing to stop.
func (r *Registry) Close() {
	if r.coord == nil {
		return
	}
	close(r.stop)
	<-r.done
	r.releaseIdle(func(*lane) bool { return true })
}

func (r *Registry) run() {
	defer close(r.done)
	t := time.NewTicker(clusterTick)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.tick()
		}
	}
}

// tick ages wants and gives back the idle slots of quiet keys.
func (r *Registry) tick() {
	r.releaseIdle(func(l *lane) bool {
		if l.wanted > 0 {
			if l.wanted--; l.wanted == 0 {
				l.owed = 0
			}
		}
		if l.recent {
			l.recent, l.quiet = false, 0
			return false
		}
		if l.quiet < idleHoldTicks {
			l.quiet++
		}
		return l.quiet >= idleHoldTicks
	})
}

// releaseIdle gives back the idle slots of every lane group for which
// give(l) says so. give runs under the shard lock.
func (r *Registry) releaseIdle(give func(*lane) bool) {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for _, l := range sh.lanes {
			if give(l) {
				r.giveIdle(l)
			}
		}
		sh.mu.Unlock()
	}
}

// giveIdle hands every idle slot of l back to the cluster. The caller holds
// the shard lock.
func (r *Registry) giveIdle(l *lane) {
	epoch := r.coord.Epoch()
	for _, s := range l.idle {
		if s.epoch == epoch {
			r.coord.Release(l.key, s.slot, s.epoch)
		}
	}
	l.idle = l.idle[:0]
}

// Wanted gives back one lane of k to the cluster for the want another node
// sent: an idle one at once, else the next one that frees here (Events).
// Each waiting request wants once, and again every wantEvery while it
// waits, so lanes move to where requests wait, about one per request, and
// not more: a node under steady load keeps the lanes it uses.
func (r *Registry) Wanted(k LaneKey) {
	sh := r.shard(k)
	sh.mu.Lock()
	if l := sh.lanes[k]; l != nil {
		l.wanted = wantedTicks
		if !r.giveOneIdle(l) && int(l.owed) < l.inUse {
			l.owed++
		}
	}
	sh.mu.Unlock()
}

// giveOneIdle hands one idle slot of l back to the cluster, if l has one of
// the current epoch. The caller holds the shard lock.
func (r *Registry) giveOneIdle(l *lane) bool {
	epoch := r.coord.Epoch()
	for len(l.idle) > 0 {
		last := len(l.idle) - 1
		s := l.idle[last]
		l.idle = l.idle[:last]
		if s.epoch == epoch {
			r.coord.Release(l.key, s.slot, s.epoch)
			return true
		}
	}
	return false
}

// Freed makes the requests here that wait for a lane of k ask the cluster
// again (Events).
func (r *Registry) Freed(k LaneKey) {
	sh := r.shard(k)
	sh.mu.Lock()
	if l := sh.lanes[k]; l != nil {
		l.wakeWaiters()
	}
	sh.mu.Unlock()
}

func (l *lane) wakeWaiters() {
	for _, w := range l.waiters {
		select {
		case w.retry <- struct{}{}:
		default:
		}
	}
}

// takeIdle takes an idle slot below capacity of the current epoch, dropping
// the slots of an older epoch (the cluster no longer counts them as ours).
func (l *lane) takeIdle(capacity int, epoch uint64) (clusterSlot, bool) {
	for i := len(l.idle) - 1; i >= 0; i-- {
		s := l.idle[i]
		last := len(l.idle) - 1
		switch {
		case s.epoch != epoch:
			l.idle[i] = l.idle[last]
			l.idle = l.idle[:last]
		case int(s.slot) < capacity:
			l.idle[i] = l.idle[last]
			l.idle = l.idle[:last]
			return s, true
		}
	}
	return clusterSlot{}, false
}

// putBack places a slot whose request ended: back to the cluster when it
// is owed to a node that wants one (the requests waiting here try again
// too, so nodes compete fairly for it), else to the oldest waiter here that
// fits, else idle. The caller holds the shard lock.
func (r *Registry) putBack(l *lane, s clusterSlot) {
	if s.epoch != r.coord.Epoch() {
		return // lost with the connection it was taken on
	}
	if l.owed > 0 {
		l.owed--
		r.coord.Release(l.key, s.slot, s.epoch)
		l.wakeWaiters()
		return
	}
	for i, w := range l.waiters {
		if int(s.slot) < w.capacity {
			l.inUse++
			w.granted, w.slot = true, s
			close(w.ready)
			l.waiters = slices.Delete(l.waiters, i, i+1)
			return
		}
	}
	l.idle = append(l.idle, s)
}

// acquireCluster admits on an idle slot this node holds (no round trip: the
// common case), else takes a slot from the cluster, else waits: for a slot
// freed here, or for another node to free one (it hears our want and tells
// us), asking the cluster again at every notification and every clusterPoll.
// A request that finds the cluster full waits at least the handover grace.
func (r *Registry) acquireCluster(ctx context.Context, k LaneKey, pool string, capacity int, wait time.Duration) (Lease, time.Duration, error) {
	sh := r.shard(k)
	sh.mu.Lock()
	l := sh.lanes[k]
	if l == nil {
		l = &lane{pool: pool, key: k}
		sh.lanes[k] = l
	}
	l.used, l.recent = true, true
	if capacity <= 0 {
		sh.mu.Unlock()
		return Lease{}, 0, ErrLanesFull
	}
	full := l.inUse >= capacity
	if !full {
		if s, ok := l.takeIdle(capacity, r.coord.Epoch()); ok {
			l.inUse++
			sh.mu.Unlock()
			return Lease{sh: sh, l: l, r: r, s: s}, 0, nil
		}
	}
	sh.mu.Unlock()

	if !full {
		lease, ok, err := r.fromCluster(sh, l, k, capacity, nil)
		if err != nil || ok {
			return lease, 0, err
		}
		// Every slot is held: maybe idle on another node.
		wait = max(wait, r.grace)
	}
	if wait <= 0 {
		return Lease{}, 0, ErrLanesFull
	}

	w := &waiter{capacity: capacity, ready: make(chan struct{}), retry: make(chan struct{}, 1)}
	sh.mu.Lock()
	l.waiters = append(l.waiters, w)
	sh.mu.Unlock()
	r.coord.Want(k)

	start := time.Now()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	poll := time.NewTicker(clusterPoll)
	defer poll.Stop()
	lastWant := start
	var err error
	for err == nil {
		select {
		case <-w.ready:
			return Lease{sh: sh, l: l, r: r, s: w.slot}, time.Since(start), nil
		case <-w.retry:
		case now := <-poll.C:
			if now.Sub(lastWant) >= wantEvery {
				lastWant = now
				r.coord.Want(k)
			}
		case <-timer.C:
			err = ErrLanesFull
			continue
		case <-ctx.Done():
			err = ctx.Err()
			continue
		}
		sh.mu.Lock()
		granted, canTry := w.granted, l.inUse < capacity
		sh.mu.Unlock()
		if granted {
			return Lease{sh: sh, l: l, r: r, s: w.slot}, time.Since(start), nil
		}
		if !canTry {
			continue
		}
		lease, ok, cerr := r.fromCluster(sh, l, k, capacity, w)
		if ok {
			return lease, time.Since(start), nil
		}
		err = cerr
	}

	sh.mu.Lock()
	if w.granted {
		// A release handed us a lane while we gave up.
		sh.mu.Unlock()
		lease := Lease{sh: sh, l: l, r: r, s: w.slot}
		if err == ErrLanesFull {
			return lease, time.Since(start), nil
		}
		lease.Release()
		return Lease{}, time.Since(start), err
	}
	if i := slices.Index(l.waiters, w); i >= 0 {
		l.waiters = slices.Delete(l.waiters, i, i+1)
	}
	sh.mu.Unlock()
	return Lease{}, time.Since(start), err
}

// fromCluster takes a slot of k from the cluster for a request (w is its
// waiter, nil when it does not wait). When w was handed a lane here
// meanwhile, the new slot is put back and w's lane is used.
func (r *Registry) fromCluster(sh *registryShard, l *lane, k LaneKey, capacity int, w *waiter) (Lease, bool, error) {
	slot, epoch, ok, err := r.coord.Acquire(k, capacity)
	if err != nil || !ok {
		return Lease{}, false, err
	}
	s := clusterSlot{slot: slot, epoch: epoch}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if w != nil {
		if w.granted {
			r.putBack(l, s)
			return Lease{sh: sh, l: l, r: r, s: w.slot}, true, nil
		}
		if i := slices.Index(l.waiters, w); i >= 0 {
			l.waiters = slices.Delete(l.waiters, i, i+1)
		}
	}
	l.inUse++
	return Lease{sh: sh, l: l, r: r, s: s}, true, nil
}

// Idle returns the number of lanes of k this node holds from the cluster
// without using them (cluster mode).
func (r *Registry) Idle(k LaneKey) int {
	sh := r.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if l := sh.lanes[k]; l != nil {
		return len(l.idle)
	}
	return 0
}
