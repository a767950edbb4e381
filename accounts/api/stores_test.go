package api_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/embedded"
	"github.com/timeblock/timeblock/accounts/postgres"
	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
)

// forEachStore runs fn once per store backend, each on a fresh, empty store.
// The PostgreSQL run is skipped when no server is reachable (see pgtest).
func forEachStore(t *testing.T, fn func(t *testing.T, st accounts.Store)) {
	t.Helper()
	t.Run("embedded", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "t.db")
		st, err := embedded.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		registerDump(t, st, func(t *testing.T) []byte {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			return b
		})
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		st, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		registerDump(t, st, func(t *testing.T) []byte { return dumpPostgres(t, dsn) })
		fn(t, st)
	})
}

var dumps sync.Map // accounts.Store → func(*testing.T) []byte

func registerDump(t *testing.T, st accounts.Store, dump func(t *testing.T) []byte) {
	dumps.Store(st, dump)
	t.Cleanup(func() { dumps.Delete(st) })
}

// dumpStore returns everything the store has written, as raw bytes: the
// database file of the embedded store, every row of every table (as text)
// of PostgreSQL. Tests use it to prove secrets are not stored in the clear.
func dumpStore(t *testing.T, st accounts.Store) []byte {
	t.Helper()
	dump, ok := dumps.Load(st)
	if !ok {
		t.Fatal("no dump registered for this store")
	}
	return dump.(func(*testing.T) []byte)(t)
}

// dumpPostgres renders every row of every table of the public schema as
// text (bytea columns come out hex-encoded, as PostgreSQL stores them).
func dumpPostgres(t *testing.T, dsn string) []byte {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, table := range tables {
		rows, err := conn.Query(ctx, `SELECT t::text FROM `+pgx.Identifier{table}.Sanitize()+` t`)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			out.WriteString(table + " " + l + "\n")
		}
	}
	return out.Bytes()
}
