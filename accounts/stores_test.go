package accounts_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/embedded"
	"github.com/timeblock/timeblock/accounts/postgres"
	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
)

// forEachStore runs fn once per store backend, each on a fresh, empty store:
// the embedded bbolt store, and PostgreSQL through pgtest (skipped when no
// server answers, unless TIMEBLOCK_REQUIRE_POSTGRES is set).
func forEachStore(t *testing.T, fn func(t *testing.T, st accounts.Store)) {
	t.Helper()
	forEachStoreNodes(t, 1, func(t *testing.T, nodes []accounts.Store) { fn(t, nodes[0]) })
}

// forEachStoreNodes runs fn per backend with n stores that share one
// database, as n Caddy nodes would: n separate PostgreSQL stores (each with
// its own connection pool) on one database. The embedded store is
// single-node (its file is locked by one process), so its nodes share one
// handle.
func forEachStoreNodes(t *testing.T, n int, fn func(t *testing.T, nodes []accounts.Store)) {
	t.Helper()
	t.Run("embedded", func(t *testing.T) {
		st, err := embedded.Open(filepath.Join(t.TempDir(), "t.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		nodes := make([]accounts.Store, n)
		for i := range nodes {
			nodes[i] = st
		}
		fn(t, nodes)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		nodes := make([]accounts.Store, n)
		for i := range nodes {
			st, err := postgres.Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			nodes[i] = st
		}
		fn(t, nodes)
	})
}
