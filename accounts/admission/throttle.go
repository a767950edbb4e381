package admission

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// FailureThrottle counts failed credential checks per client address in a
// window of one minute, so that an address past its limit can be refused
// before its key is even looked at. Each address's window starts at its
// first failure and lasts FailureWindow; the next failure after it starts a
// new one.
//
// IPv6 addresses count by their /64, which one client usually holds whole.
// Memory is bounded: at most MaxAddresses are tracked (about 64 bytes each);
// when a shard is full, expired windows go first, then arbitrary ones, so an
// attacker with more addresses than that can only make the throttle forget
// some of them, not grow it.
type FailureThrottle struct {
	shards    [throttleShards]throttleShard
	perShard  int
	throttled atomic.Uint64
	failures  atomic.Uint64
}

// FailureWindow is the throttle's window.
const FailureWindow = time.Minute

const throttleShards = 32

type throttleShard struct {
	mu sync.Mutex
	m  map[netip.Addr]failWindow
	// n is len(m), written under mu; Check reads it first, so that a shard
	// with no failures (the usual case) costs no lock.
	n atomic.Int32
}

type failWindow struct {
	start int64 // unix nanoseconds of the first failure in the window
	count int32
}

// NewFailureThrottle tracks at most maxAddresses addresses (default 65 536
// when maxAddresses <= 0).
func NewFailureThrottle(maxAddresses int) *FailureThrottle {
	if maxAddresses <= 0 {
		maxAddresses = 1 << 16
	}
	t := &FailureThrottle{perShard: max(maxAddresses/throttleShards, 1)}
	for i := range t.shards {
		t.shards[i].m = make(map[netip.Addr]failWindow)
	}
	return t
}

// throttleAddr is the unit counted: the address itself for IPv4, its /64
// for IPv6.
func throttleAddr(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, err := a.Prefix(64)
		if err == nil {
			return p.Addr()
		}
	}
	return a
}

func (t *FailureThrottle) shard(a netip.Addr) *throttleShard {
	b := a.As16()
	h := uint32(2166136261)
	for _, x := range b {
		h = (h ^ uint32(x)) * 16777619
	}
	return &t.shards[h%throttleShards]
}

// Check returns how long addr must wait before its credentials are checked
// again: zero when it has had fewer than limit failures in its current
// window (or limit <= 0), else the time until that window ends. A positive
// answer counts as one throttled request.
func (t *FailureThrottle) Check(addr netip.Addr, limit int, now time.Time) time.Duration {
	if limit <= 0 || !addr.IsValid() {
		return 0
	}
	addr = throttleAddr(addr)
	s := t.shard(addr)
	if s.n.Load() == 0 {
		return 0
	}
	s.mu.Lock()
	w, ok := s.m[addr]
	s.mu.Unlock()
	if !ok || int(w.count) < limit {
		return 0
	}
	wait := time.Duration(w.start + int64(FailureWindow) - now.UnixNano())
	if wait <= 0 {
		return 0
	}
	t.throttled.Add(1)
	return wait
}

// Fail records a failed credential check from addr.
func (t *FailureThrottle) Fail(addr netip.Addr, now time.Time) {
	if !addr.IsValid() {
		return
	}
	t.failures.Add(1)
	addr = throttleAddr(addr)
	ns := now.UnixNano()
	s := t.shard(addr)
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.m[addr]
	switch {
	case ok && ns-w.start < int64(FailureWindow):
		if w.count < 1<<30 {
			w.count++
		}
	default:
		if !ok && len(s.m) >= t.perShard {
			s.evict(ns, t.perShard)
		}
		w = failWindow{start: ns, count: 1}
	}
	s.m[addr] = w
	s.n.Store(int32(len(s.m)))
}

// evict makes room for one address under the bound: it drops every
// expired window and, when none had expired, an arbitrary one (map order is
// random).
func (s *throttleShard) evict(now int64, bound int) {
	for a, w := range s.m {
		if now-w.start >= int64(FailureWindow) {
			delete(s.m, a)
		}
	}
	for a := range s.m {
		if len(s.m) < bound {
			break
		}
		delete(s.m, a)
	}
}

// Sweep forgets windows that have ended.
func (t *FailureThrottle) Sweep(now time.Time) {
	ns := now.UnixNano()
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for a, w := range s.m {
			if ns-w.start >= int64(FailureWindow) {
				delete(s.m, a)
			}
		}
		s.n.Store(int32(len(s.m)))
		s.mu.Unlock()
	}
}

// ThrottleStats are the throttle's counts.
type ThrottleStats struct {
	Addresses int    // addresses tracked now
	Failures  uint64 // failed checks recorded
	Throttled uint64 // requests refused by Check
}

// Stats returns the counts so far.
func (t *FailureThrottle) Stats() ThrottleStats {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return ThrottleStats{Addresses: n, Failures: t.failures.Load(), Throttled: t.throttled.Load()}
}
