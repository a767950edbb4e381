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
	t.Run("embedded", func(t *testing.T) {
		st, err := embedded.Open(filepath.Join(t.TempDir(), "t.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(context.Background(), pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}
