package admission

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeCoord is one node's view of a cluster held in memory: slots taken by
// any node of the same fakeCluster.
type fakeCluster struct {
	mu    sync.Mutex
	taken map[LaneKey]map[int32]*fakeCoord
}

type fakeCoord struct {
	cl    *fakeCluster
	epoch uint64
	down  bool
	calls int
	ev    Events
}

func (c *fakeCoord) Acquire(k LaneKey, capacity int) (int32, uint64, bool, error) {
	c.cl.mu.Lock()
	defer c.cl.mu.Unlock()
	c.calls++
	if c.down {
		return 0, 0, false, ErrClusterDown
	}
	if c.cl.taken[k] == nil {
		c.cl.taken[k] = map[int32]*fakeCoord{}
	}
	for s := range int32(capacity) {
		if c.cl.taken[k][s] == nil {
			c.cl.taken[k][s] = c
			return s, c.epoch, true, nil
		}
	}
	return 0, 0, false, nil
}

func (c *fakeCoord) Release(k LaneKey, slot int32, epoch uint64) {
	c.cl.mu.Lock()
	defer c.cl.mu.Unlock()
	if epoch == c.epoch && c.cl.taken[k][slot] == c {
		delete(c.cl.taken[k], slot)
	}
}

func (c *fakeCoord) Want(LaneKey)     {}
func (c *fakeCoord) Epoch() uint64    { c.cl.mu.Lock(); defer c.cl.mu.Unlock(); return c.epoch }
func (c *fakeCoord) Attach(ev Events) { c.ev = ev }
func (c *fakeCoord) heldBy(k LaneKey) int {
	c.cl.mu.Lock()
	defer c.cl.mu.Unlock()
	n := 0
	for _, o := range c.cl.taken[k] {
		if o == c {
			n++
		}
	}
	return n
}

// lose simulates a lost session: the cluster frees the node's slots.
func (c *fakeCoord) lose() {
	c.cl.mu.Lock()
	defer c.cl.mu.Unlock()
	for _, m := range c.cl.taken {
		for s, o := range m {
			if o == c {
				delete(m, s)
			}
		}
	}
	c.epoch++
}

func newFakeNode(t *testing.T, cl *fakeCluster) (*Registry, *fakeCoord) {
	c := &fakeCoord{cl: cl, epoch: 1}
	r := NewClusterRegistry(ClusterConfig{Coordinator: c, HandoverGrace: time.Millisecond})
	t.Cleanup(r.Close)
	return r, c
}

func TestClusterRegistryKeepsIdleLanes(t *testing.T) {
	cl := &fakeCluster{taken: map[LaneKey]map[int32]*fakeCoord{}}
	r, c := newFakeNode(t, cl)
	ctx := context.Background()
	l1, _, err := r.Acquire(ctx, testLane, "p", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	l1.Release()
	if c.calls != 1 || r.Idle(testLane) != 1 || c.heldBy(testLane) != 1 {
		t.Fatalf("after one request: %d coordinator calls, %d idle, %d held; want 1, 1, 1", c.calls, r.Idle(testLane), c.heldBy(testLane))
	}
	// The next request admits on the idle lane, with no coordinator call
	// and no allocation.
	allocs := testing.AllocsPerRun(100, func() {
		l, _, err := r.Acquire(ctx, testLane, "p", 2, 0)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
	})
	if c.calls != 1 || allocs != 0 {
		t.Fatalf("idle-lane admissions: %d coordinator calls (want 1), %v allocations (want 0)", c.calls, allocs)
	}

	// Another node wants a lane: the idle one goes back to the cluster.
	r.Wanted(testLane)
	if r.Idle(testLane) != 0 || c.heldBy(testLane) != 0 {
		t.Fatalf("after a want: %d idle, %d held; want 0, 0", r.Idle(testLane), c.heldBy(testLane))
	}
	// A want heard while every lane here is busy is paid with the next lane
	// that frees; one want, one lane.
	l2, _, err := r.Acquire(ctx, testLane, "p", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	l3, _, err := r.Acquire(ctx, testLane, "p", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.Wanted(testLane)
	l2.Release()
	if r.Idle(testLane) != 0 || c.heldBy(testLane) != 1 {
		t.Fatalf("release owed to a want: %d idle, %d held; want 0, 1", r.Idle(testLane), c.heldBy(testLane))
	}
	l3.Release()
	if r.Idle(testLane) != 1 || c.heldBy(testLane) != 1 {
		t.Fatalf("release after the debt was paid: %d idle, %d held; want 1, 1", r.Idle(testLane), c.heldBy(testLane))
	}
}

func TestClusterRegistryNeverExceedsCapacityAcrossNodes(t *testing.T) {
	cl := &fakeCluster{taken: map[LaneKey]map[int32]*fakeCoord{}}
	a, _ := newFakeNode(t, cl)
	b, _ := newFakeNode(t, cl)
	ctx := context.Background()
	la, _, err := a.Acquire(ctx, testLane, "p", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	lb, _, err := b.Acquire(ctx, testLane, "p", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Registry{a, b} {
		if _, _, err := r.Acquire(ctx, testLane, "p", 2, 0); !errors.Is(err, ErrLanesFull) {
			t.Fatalf("third request of a 2-lane key: %v, want ErrLanesFull", err)
		}
	}
	la.Release()
	// a holds its lane idle; b cannot have it until a gives it back.
	if _, _, err := b.Acquire(ctx, testLane, "p", 2, 0); !errors.Is(err, ErrLanesFull) {
		t.Fatalf("b took a lane a holds idle: %v", err)
	}
	a.Wanted(testLane)
	lb2, _, err := b.Acquire(ctx, testLane, "p", 2, 0)
	if err != nil {
		t.Fatalf("b after a gave its idle lane back: %v", err)
	}
	lb.Release()
	lb2.Release()
}

func TestClusterRegistryLostSession(t *testing.T) {
	cl := &fakeCluster{taken: map[LaneKey]map[int32]*fakeCoord{}}
	r, c := newFakeNode(t, cl)
	ctx := context.Background()
	inFlight, _, err := r.Acquire(ctx, testLane, "p", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	idle, _, err := r.Acquire(ctx, testLane, "p", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	idle.Release()
	c.lose()
	c.down = true
	// The idle lane belonged to the lost session: it must not admit, and
	// with the cluster unreachable the request is refused.
	if _, _, err := r.Acquire(ctx, testLane, "p", 2, 0); !errors.Is(err, ErrClusterDown) {
		t.Fatalf("acquire with the session lost: %v, want ErrClusterDown", err)
	}
	inFlight.Release()
	if r.Idle(testLane) != 0 || r.InUse(testLane) != 0 {
		t.Fatalf("after the lost lease ended: %d idle, %d in use; want 0, 0", r.Idle(testLane), r.InUse(testLane))
	}
	c.down = false
	l, _, err := r.Acquire(ctx, testLane, "p", 2, 0)
	if err != nil {
		t.Fatalf("after reconnecting: %v", err)
	}
	l.Release()
}
