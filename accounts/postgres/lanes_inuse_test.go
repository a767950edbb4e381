package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts/admission"
	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
)

// Requests in flight count across nodes, and idle lanes a node keeps (its
// advisory locks stay held) do not count.
func TestLanesInUseAcrossNodes(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := openNode(t, dsn), openNode(t, dsn)
	other := admission.LaneKey{KeyID: laneK.KeyID, PoolID: "pool-other"}
	keys := []admission.LaneKey{laneK, other}

	inUse := func(n *node) int {
		t.Helper()
		got, err := n.reg.InUseAcross(t.Context(), keys)
		if err != nil {
			t.Fatalf("InUseAcross: %v", err)
		}
		return got
	}
	var leases []admission.Lease
	take := func(n *node, k admission.LaneKey) {
		t.Helper()
		l, _, err := n.reg.Acquire(context.Background(), k, "p", 5, 0)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	if got := inUse(a); got != 0 {
		t.Fatalf("nothing in flight: a counts %d", got)
	}
	take(a, laneK)
	take(a, laneK)
	take(b, laneK)
	take(b, other)
	// Another key's requests do not count.
	take(b, admission.LaneKey{KeyID: "ck_someone_else", PoolID: laneK.PoolID})
	if got, want := inUse(a), 4; got != want {
		t.Errorf("a counts %d in flight, want %d", got, want)
	}
	if got, want := inUse(b), 4; got != want {
		t.Errorf("b counts %d in flight, want %d", got, want)
	}
	// Just one group.
	if got, err := b.reg.InUseAcross(t.Context(), []admission.LaneKey{other}); err != nil || got != 1 {
		t.Errorf("b counts %d in flight in the other pool (%v), want 1", got, err)
	}

	for i := range leases {
		leases[i].Release()
	}
	if a.coord.Held()+b.coord.Held() == 0 {
		t.Fatal("the nodes kept no idle lane: this test no longer shows that idle lanes are not counted")
	}
	if got := inUse(a); got != 0 {
		t.Errorf("after every request ended, a counts %d in flight (idle lanes counted?)", got)
	}
	if got := inUse(b); got != 0 {
		t.Errorf("after every request ended, b counts %d in flight", got)
	}
}

// A node that does not answer makes the count fail rather than come out
// short.
func TestLanesInUseSilentNode(t *testing.T) {
	dsn := pgtest.DSN(t)
	a := openNode(t, dsn)
	// A session that looks like another node's lane session and never
	// listens.
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = "timeblock lanes silentnode01"
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	n, err := a.reg.InUseAcross(ctx, []admission.LaneKey{laneK})
	if err == nil {
		t.Fatalf("counted %d with a node that never answers, want an error", n)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("gave up after %v, want within the caller's deadline", took)
	}
	t.Logf("error: %v", err)
}
