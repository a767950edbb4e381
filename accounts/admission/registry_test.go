package admission

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var testLane = LaneKey{KeyID: "ck_1", PoolID: "pool-1"}

func mustAcquire(t *testing.T, r *Registry, capacity int) Lease {
	t.Helper()
	lease, _, err := r.Acquire(context.Background(), testLane, "p", capacity, 0)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return lease
}

func TestRegistryAdmitsUpToCapacity(t *testing.T) {
	r := NewRegistry()
	a := mustAcquire(t, r, 2)
	b := mustAcquire(t, r, 2)
	if _, _, err := r.Acquire(context.Background(), testLane, "p", 2, 0); !errors.Is(err, ErrLanesFull) {
		t.Fatalf("third acquire with capacity 2: err = %v, want ErrLanesFull", err)
	}
	if got := r.InUse(testLane); got != 2 {
		t.Fatalf("InUse = %d, want 2", got)
	}
	// Another key and another pool have lanes of their own.
	if _, _, err := r.Acquire(context.Background(), LaneKey{KeyID: "ck_1", PoolID: "pool-2"}, "q", 1, 0); err != nil {
		t.Fatalf("other pool: %v", err)
	}
	if _, _, err := r.Acquire(context.Background(), LaneKey{KeyID: "ck_2", PoolID: "pool-1"}, "p", 1, 0); err != nil {
		t.Fatalf("other key: %v", err)
	}
	a.Release()
	a.Release() // a second release of the same lease is ignored
	if got := r.InUse(testLane); got != 1 {
		t.Fatalf("InUse after one release (twice) = %d, want 1", got)
	}
	c := mustAcquire(t, r, 2)
	b.Release()
	c.Release()
	if got := r.InUse(testLane); got != 0 {
		t.Fatalf("InUse at the end = %d, want 0", got)
	}
}

func TestRegistryZeroCapacityRejects(t *testing.T) {
	r := NewRegistry()
	if _, _, err := r.Acquire(context.Background(), testLane, "p", 0, time.Second); !errors.Is(err, ErrLanesFull) {
		t.Fatalf("capacity 0: err = %v, want ErrLanesFull at once", err)
	}
}

func TestRegistryWaiterGetsReleasedLane(t *testing.T) {
	r := NewRegistry()
	held := mustAcquire(t, r, 1)
	type result struct {
		lease  Lease
		waited time.Duration
		err    error
	}
	got := make(chan result, 1)
	go func() {
		l, w, err := r.Acquire(context.Background(), testLane, "p", 1, 5*time.Second)
		got <- result{l, w, err}
	}()
	waitForWaiters(t, r, testLane, 1)
	held.Release()
	res := <-got
	if res.err != nil {
		t.Fatalf("waiter: %v", res.err)
	}
	if res.waited <= 0 {
		t.Errorf("waited = %v, want > 0", res.waited)
	}
	if n := r.InUse(testLane); n != 1 {
		t.Fatalf("InUse = %d, want 1 (handed over, not freed)", n)
	}
	res.lease.Release()
	if n := r.InUse(testLane); n != 0 {
		t.Fatalf("InUse = %d, want 0", n)
	}
}

func TestRegistryWaitTimesOut(t *testing.T) {
	r := NewRegistry()
	held := mustAcquire(t, r, 1)
	defer held.Release()
	start := time.Now()
	_, waited, err := r.Acquire(context.Background(), testLane, "p", 1, 30*time.Millisecond)
	if !errors.Is(err, ErrLanesFull) {
		t.Fatalf("err = %v, want ErrLanesFull", err)
	}
	if el := time.Since(start); el < 30*time.Millisecond || waited < 30*time.Millisecond {
		t.Fatalf("gave up after %v (waited %v), want at least the 30ms wait", el, waited)
	}
	if n := waiters(r, testLane); n != 0 {
		t.Fatalf("%d waiters left behind", n)
	}
}

func TestRegistryCanceledWaiterLeaves(t *testing.T) {
	r := NewRegistry()
	held := mustAcquire(t, r, 1)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, _, err := r.Acquire(ctx, testLane, "p", 1, time.Minute)
		errc <- err
	}()
	waitForWaiters(t, r, testLane, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	held.Release()
	if n, w := r.InUse(testLane), waiters(r, testLane); n != 0 || w != 0 {
		t.Fatalf("in use %d, waiters %d; want 0, 0", n, w)
	}
}

func TestRegistryServesWaitersInOrder(t *testing.T) {
	r := NewRegistry()
	held := mustAcquire(t, r, 1)
	order := make(chan int, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, _, err := r.Acquire(context.Background(), testLane, "p", 1, 5*time.Second)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			order <- i
			l.Release()
		}()
		waitForWaiters(t, r, testLane, i+1)
	}
	held.Release()
	wg.Wait()
	close(order)
	want := 0
	for i := range order {
		if i != want {
			t.Fatalf("waiter %d served before waiter %d", i, want)
		}
		want++
	}
}

// TestRegistryHammer runs many goroutines on one combined key with random
// waits, random cancellations and random hold times: the lanes in use never
// exceed the capacity and return to zero.
func TestRegistryHammer(t *testing.T) {
	const (
		capacity   = 3 // e.g. a combined key with lane members of 1 and 2 seats
		goroutines = 64
		iterations = 200
	)
	r := NewRegistry()
	var inFlight, maxSeen, admitted, full, canceled atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range iterations {
				ctx, cancel := context.WithCancel(context.Background())
				if rng.IntN(4) == 0 {
					// The client goes away at a random moment, possibly
					// while waiting, possibly while being handed a lane.
					go func(d time.Duration) { time.Sleep(d); cancel() }(time.Duration(rng.IntN(300)) * time.Microsecond)
				}
				lease, _, err := r.Acquire(ctx, testLane, "p", capacity, time.Duration(rng.IntN(2000))*time.Microsecond)
				switch {
				case err == nil:
					n := inFlight.Add(1)
					for {
						m := maxSeen.Load()
						if n <= m || maxSeen.CompareAndSwap(m, n) {
							break
						}
					}
					admitted.Add(1)
					if rng.IntN(3) == 0 {
						time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
					}
					inFlight.Add(-1)
					lease.Release()
				case errors.Is(err, ErrLanesFull):
					full.Add(1)
				case errors.Is(err, context.Canceled):
					canceled.Add(1)
				default:
					t.Errorf("unexpected error: %v", err)
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	if m := maxSeen.Load(); m > capacity {
		t.Fatalf("%d requests in flight at once, capacity %d", m, capacity)
	}
	if n, w := r.InUse(testLane), waiters(r, testLane); n != 0 || w != 0 {
		t.Fatalf("after the run: %d in use, %d waiters; want 0, 0", n, w)
	}
	if admitted.Load() == 0 || full.Load()+canceled.Load() == 0 {
		t.Fatalf("the run did not exercise both paths: admitted %d, full %d, canceled %d",
			admitted.Load(), full.Load(), canceled.Load())
	}
	t.Logf("admitted %d, lanes full %d, canceled %d, max in flight %d",
		admitted.Load(), full.Load(), canceled.Load(), maxSeen.Load())
}

func TestRegistryInUseByPoolAndSweep(t *testing.T) {
	r := NewRegistry()
	a := mustAcquire(t, r, 2)
	b, _, _ := r.Acquire(context.Background(), LaneKey{KeyID: "k2", PoolID: "pool-2"}, "q", 1, 0)
	if got := r.InUseByPool(); got["p"] != 1 || got["q"] != 1 {
		t.Fatalf("InUseByPool = %v", got)
	}
	b.Release()
	if n := r.Sweep(); n != 0 {
		t.Fatalf("first sweep removed %d groups used since the last one", n)
	}
	if n := r.Sweep(); n != 1 {
		t.Fatalf("second sweep removed %d groups, want the idle one", n)
	}
	if n := r.Sweep(); n != 0 {
		t.Fatalf("a group with a lane in use was removed")
	}
	a.Release()
	r.Sweep()
	if n := r.Sweep(); n != 1 {
		t.Fatalf("released group not removed after two sweeps (%d)", n)
	}
}

func TestRegistryAcquireReleaseAllocatesNothing(t *testing.T) {
	r := NewRegistry()
	first := mustAcquire(t, r, 1) // creates the group
	first.Release()
	allocs := testing.AllocsPerRun(1000, func() {
		l, _, _ := r.Acquire(context.Background(), testLane, "p", 1, time.Second)
		l.Release()
	})
	if allocs != 0 {
		t.Fatalf("acquire+release allocates %v times, want 0", allocs)
	}
}

func waiters(r *Registry, k LaneKey) int {
	sh := r.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if l := sh.lanes[k]; l != nil {
		return len(l.waiters)
	}
	return 0
}

func waitForWaiters(t *testing.T, r *Registry, k LaneKey, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for waiters(r, k) < n {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %d waiters", n)
		}
		time.Sleep(time.Millisecond)
	}
}
