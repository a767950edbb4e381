// Package pgtest gives tests a throwaway PostgreSQL database.
//
//	func TestSomething(t *testing.T) {
//		store, err := postgres.Open(ctx, pgtest.DSN(t))
//		...
//	}
//
// DSN finds a server through the environment:
//
//   - TIMEBLOCK_TEST_DATABASE_URL, when set, is an admin connection (a role
//     allowed to CREATE DATABASE) to a server; if it cannot be reached the
//     test fails, since the setting says PostgreSQL is expected.
//   - Otherwise DSN tries postgres://postgres@127.0.0.1:5432/postgres (trust
//     authentication, as in a local development or CI container) and skips the
//     test when nothing answers — unless TIMEBLOCK_REQUIRE_POSTGRES is 1 or
//     true, which makes that a failure, for CI jobs that must not skip.
package pgtest

import (
	"context"
	"crypto/rand"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables DSN reads.
const (
	EnvDatabaseURL     = "TIMEBLOCK_TEST_DATABASE_URL"
	EnvRequirePostgres = "TIMEBLOCK_REQUIRE_POSTGRES"
)

// DefaultAdminURL is the server DSN tries when EnvDatabaseURL is not set.
const DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// DSN creates an empty database named timeblock_test_<random> and returns a
// DSN for it. The database is dropped, along with any connections still
// open to it, when the test and its subtests have finished.
func DSN(t testing.TB) string {
	t.Helper()
	admin, explicit := os.Getenv(EnvDatabaseURL), true
	if admin == "" {
		admin, explicit = DefaultAdminURL, false
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		unavailable(t, explicit, err)
	}
	defer conn.Close(context.Background())

	// Lower-case base32, so the name needs no quoting.
	name := "timeblock_test_" + strings.ToLower(rand.Text())
	dsn, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvDatabaseURL, err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() { drop(t, admin, name) })
	return dsn
}

func unavailable(t testing.TB, explicit bool, err error) {
	t.Helper()
	if explicit {
		t.Fatalf("pgtest: cannot reach PostgreSQL at %s: %v", EnvDatabaseURL, err)
	}
	if require, _ := strconv.ParseBool(os.Getenv(EnvRequirePostgres)); require {
		t.Fatalf("pgtest: no PostgreSQL on 127.0.0.1:5432 (%v), and %s is set. "+
			"Start one with trust authentication for user postgres, e.g. "+
			"docker run -d -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust postgres:15 "+
			"(or on Debian: pg_ctlcluster <version> main start), "+
			"or point %s at a server where the user may create databases.",
			err, EnvRequirePostgres, EnvDatabaseURL)
	}
	t.Skipf("pgtest: skipping, no PostgreSQL on 127.0.0.1:5432 (%v). "+
		"To run this test, set %s to an admin URL (a user allowed to create databases), "+
		"or start PostgreSQL on 127.0.0.1:5432 with trust authentication for user postgres.",
		err, EnvDatabaseURL)
}

func drop(t testing.TB, admin, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Errorf("pgtest: drop database %s: %v", name, err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		t.Errorf("pgtest: drop database %s: %v", name, err)
	}
}

// withDatabase returns the admin DSN pointed at database name instead.
func withDatabase(admin, name string) (string, error) {
	if strings.HasPrefix(admin, "postgres://") || strings.HasPrefix(admin, "postgresql://") {
		u, err := url.Parse(admin)
		if err != nil {
			return "", err
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	// Keyword/value form: a later setting wins over an earlier one.
	return admin + " dbname=" + name, nil
}
