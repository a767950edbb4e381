package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts/admission"
	"github.com/timeblock/timeblock/accounts/postgres"
	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
)

// node is one simulated Caddy node: a store, its lane coordinator and a
// cluster registry, as the gate state builds them.
type node struct {
	coord *postgres.LaneCoordinator
	reg   *admission.Registry
	close func()
}

func openNode(t *testing.T, dsn string) *node {
	t.Helper()
	st := open(t, dsn)
	coord, err := st.LaneCoordinator(t.Context())
	if err != nil {
		t.Fatalf("LaneCoordinator: %v", err)
	}
	n := &node{coord: coord, reg: admission.NewClusterRegistry(admission.ClusterConfig{Coordinator: coord})}
	var closed bool
	n.close = func() {
		if !closed {
			closed = true
			n.reg.Close()
			coord.Close()
		}
	}
	t.Cleanup(n.close)
	return n
}

var laneK = admission.LaneKey{KeyID: "ck_test", PoolID: "pool-test"}

func acquire(n *node, capacity int, wait time.Duration) (admission.Lease, time.Duration, error) {
	return n.reg.Acquire(context.Background(), laneK, "p", capacity, wait)
}

func TestLanesHoldAcrossNodes(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := openNode(t, dsn), openNode(t, dsn)

	var leases []admission.Lease
	for _, n := range []*node{a, b, a} {
		l, _, err := acquire(n, 3, 0)
		if err != nil {
			t.Fatalf("acquire within capacity 3: %v", err)
		}
		leases = append(leases, l)
	}
	for _, n := range []*node{a, b} {
		if _, _, err := acquire(n, 3, 0); !errors.Is(err, admission.ErrLanesFull) {
			t.Fatalf("fourth request of a 3-lane key: err = %v, want ErrLanesFull", err)
		}
	}
	if got := a.coord.Held() + b.coord.Held(); got != 3 {
		t.Fatalf("slots held across nodes = %d, want 3", got)
	}
	for i := range leases {
		leases[i].Release()
	}

	// Once no one has wanted them for a while, a keeps the lanes it used
	// (idle held) and admits on them with no round trip ...
	time.Sleep(2500 * time.Millisecond)
	leases = leases[:0]
	for range 3 {
		l, _, err := acquire(a, 3, 0)
		if err != nil {
			t.Fatalf("acquire on a: %v", err)
		}
		leases = append(leases, l)
	}
	for i := range leases {
		leases[i].Release()
	}
	if got := a.reg.Idle(laneK); got != 3 {
		t.Fatalf("a holds %d idle lanes, want 3", got)
	}
	// ... and all three are usable from b right away: a gives its idle
	// lanes back when b asks.
	leases = leases[:0]
	for range 3 {
		l, waited, err := acquire(b, 3, 0)
		if err != nil {
			t.Fatalf("acquire on b after the releases: %v", err)
		}
		t.Logf("acquire on b waited %v", waited)
		leases = append(leases, l)
	}
	if got := a.coord.Held(); got != 0 {
		t.Fatalf("a still holds %d slots after b took all three", got)
	}
	for i := range leases {
		leases[i].Release()
	}
}

func TestLaneWaiterGetsLaneFreedOnOtherNode(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := openNode(t, dsn), openNode(t, dsn)
	held, _, err := acquire(a, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lease admission.Lease
		err   error
		at    time.Time
	}
	got := make(chan result, 1)
	go func() {
		l, _, err := acquire(b, 1, 10*time.Second)
		got <- result{l, err, time.Now()}
	}()
	time.Sleep(500 * time.Millisecond) // b waits; its want reached a
	select {
	case r := <-got:
		t.Fatalf("b admitted while a holds the only lane: %v", r.err)
	default:
	}
	freed := time.Now()
	held.Release()
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter on b: %v", r.err)
	}
	t.Logf("handover a → b: %v", r.at.Sub(freed))
	if _, _, err := acquire(a, 1, 0); !errors.Is(err, admission.ErrLanesFull) {
		t.Fatalf("a acquired while b holds the only lane: %v", err)
	}
	r.lease.Release()
}

func TestDeadNodeLanesReturn(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := openNode(t, dsn), openNode(t, dsn)
	var lost []admission.Lease
	for range 2 {
		l, _, err := acquire(a, 2, 0)
		if err != nil {
			t.Fatal(err)
		}
		lost = append(lost, l)
	}
	// The lane session of a ends without a word (as when its process dies).
	epoch := a.coord.Epoch()
	terminateLaneSessions(t, dsn, a)
	start := time.Now()
	l, _, err := acquire(b, 2, postgres.LaneDeathBound)
	if err != nil {
		t.Fatalf("b after a's session died: %v", err)
	}
	t.Logf("dead node's lane back after %v", time.Since(start))
	l.Release()
	// a notices within a heartbeat; the requests it admitted end then, and
	// their lanes were lost with the session
	// and do not come back to a.
	for a.coord.Epoch() == epoch {
		if time.Since(start) > 2*time.Second {
			t.Fatal("a did not notice its lane session was gone")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("a noticed after %v", time.Since(start))
	for i := range lost {
		lost[i].Release()
	}
	if got := a.reg.Idle(laneK); got != 0 {
		t.Fatalf("a keeps %d idle lanes of a lost session", got)
	}

	// a saw its session go: it refuses new lanes until it reconnects, and
	// never counts the lanes it lost.
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, _, err := acquire(a, 2, 0)
		if err == nil {
			l.Release()
			break
		}
		if !errors.Is(err, admission.ErrClusterDown) && !errors.Is(err, admission.ErrLanesFull) {
			t.Fatalf("a while its session is lost: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("a never reconnected: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func terminateLaneSessions(t *testing.T, dsn string, _ *node) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid IN (
			SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("terminated %d lane sessions, want 1", n)
	}
}
