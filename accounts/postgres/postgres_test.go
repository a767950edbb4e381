package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/postgres"
	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
	"github.com/timeblock/timeblock/accounts/storetest"
)

func open(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformance runs the suite on one throwaway database, emptied before
// each subtest: much faster than a database per subtest.
func TestConformance(t *testing.T) {
	dsn := pgtest.DSN(t)
	storetest.Run(t, func(t *testing.T) accounts.Store {
		s := open(t, dsn)
		emptyTables(t, dsn)
		return s
	})
}

// emptyTables empties every table, children before parents. DELETE is much
// faster than TRUNCATE on tables this small; a table added to the schema and
// missing here makes the DELETE of its parent fail, loudly.
func emptyTables(t *testing.T, dsn string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, table := range []string{
		"operator_events", "ledger_charges", "processor_customers", "webhook_events", "idempotent_requests",
		"charge_intents", "test_charges", "charges", "combined_key_members", "combined_keys", "keys", "seats",
		"subscriptions", "pools", "management_keys", "sessions", "users",
	} {
		if _, err := conn.Exec(t.Context(), "DELETE FROM "+table); err != nil {
			t.Fatalf("empty %s: %v", table, err)
		}
	}
}

// TestConcurrentOpen starts two nodes against one fresh database at once:
// both must come up, with the migrations applied exactly once.
func TestConcurrentOpen(t *testing.T) {
	dsn := pgtest.DSN(t)
	const nodes = 2
	stores := make([]*postgres.Store, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { stores[i], errs[i] = postgres.Open(t.Context(), dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: Open: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}

	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var versions, applied int
	err = conn.QueryRow(t.Context(), "SELECT count(*), count(DISTINCT version) FROM schema_migrations").Scan(&applied, &versions)
	if err != nil {
		t.Fatal(err)
	}
	if applied != versions || versions == 0 {
		t.Errorf("schema_migrations holds %d rows for %d versions, want each version once", applied, versions)
	}

	// Both nodes work on the same data, and hear each other's invalidations.
	u := &accounts.User{ID: "u1", Email: "u1@example.com", CreatedAt: time.Now()}
	if err := stores[0].Update(t.Context(), func(tx accounts.Tx) error { return tx.CreateUser(u) }); err != nil {
		t.Fatal(err)
	}
	if err := stores[1].View(t.Context(), func(tx accounts.Tx) error { _, err := tx.GetUser(u.ID); return err }); err != nil {
		t.Errorf("node 1 does not see node 0's user: %v", err)
	}
	heard := make(chan string, 8)
	defer stores[1].OnInvalidation(func(userID string) { heard <- userID })()
	if err := stores[0].PublishInvalidation(t.Context(), u.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-heard:
		if got != u.ID {
			t.Errorf("node 1 heard %q, want %q", got, u.ID)
		}
	case <-time.After(5 * time.Second):
		t.Error("node 1 did not hear node 0's invalidation")
	}
}

// TestListenerReconnects cuts the notification connection from the server
// side: the store must reconnect, say that invalidations may have been
// missed, and deliver new ones again.
func TestListenerReconnects(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := open(t, dsn)
	heard := make(chan string, 64)
	defer s.OnInvalidation(func(userID string) {
		select {
		case heard <- userID:
		default:
		}
	})()

	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tag, err := conn.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %'`)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("terminate the listener: %v (%d backends)", err, tag.RowsAffected())
	}

	deadline := time.After(10 * time.Second)
	for _, want := range []string{"", "after-reconnect"} {
		for got := "?"; got != want; {
			select {
			case got = <-heard:
			case <-time.After(100 * time.Millisecond):
				// Until the listener is back, notifications go nowhere; keep publishing.
				if want != "" {
					if err := s.PublishInvalidation(t.Context(), want); err != nil {
						t.Fatal(err)
					}
				}
			case <-deadline:
				t.Fatalf("no invalidation %q within 10s of cutting the listener", want)
			}
		}
	}
}
