package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationFiles are the schema versions, applied in file name order:
// 0001_init.sql is version 1. Add a new file for every change; never edit
// one that has shipped.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLock keys the advisory lock that serializes migrations across
// nodes ("tblkmig" in ASCII).
const migrationLock int64 = 0x74626c6b6d6967

// migrate brings the schema up to date. Nodes starting together against a
// fresh database queue on the advisory lock; the first applies the
// migrations and the others find them recorded. The lock is scoped to the
// transaction, so a node that dies mid-migration releases it and leaves
// nothing half applied.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	migrations, err := loadMigrations()
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		var current int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&current); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if current > len(migrations) {
			return fmt.Errorf("database schema version %d is newer than this build supports (%d); upgrade Timeblock", current, len(migrations))
		}
		for version := current + 1; version <= len(migrations); version++ {
			if _, err := tx.Exec(ctx, migrations[version-1]); err != nil {
				return fmt.Errorf("apply schema migration %d: %w", version, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", version); err != nil {
				return fmt.Errorf("record schema migration %d: %w", version, err)
			}
		}
		return nil
	})
}

func loadMigrations() ([]string, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	migrations := make([]string, len(names))
	for i, name := range names {
		if want := fmt.Sprintf("migrations/%04d_", i+1); !strings.HasPrefix(name, want) {
			return nil, fmt.Errorf("schema migration %s is out of sequence: want a name starting %s", name, want)
		}
		b, err := migrationFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		migrations[i] = string(b)
	}
	return migrations, nil
}
