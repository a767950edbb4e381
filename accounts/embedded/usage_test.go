package embedded_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/timeblock/timeblock/accounts"
)

// A file of format 4 (before usage per key per hour) opens as format 5,
// with its data kept and the usage bucket added.
func TestMigrateFormat4AddsKeyUsage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s := open(t, path)
	ctx := context.Background()
	u := &accounts.User{ID: "u1", Email: "old@example.com", CreatedAt: time.Now().UTC()}
	if err := s.Update(ctx, func(tx accounts.Tx) error { return tx.CreateUser(u) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Back to format 4: no key_usage bucket.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(btx *bolt.Tx) error {
		if err := btx.DeleteBucket([]byte("key_usage")); err != nil {
			return err
		}
		return btx.Bucket([]byte("meta")).Put([]byte("format"), []byte("4"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	s = open(t, path)
	hour := time.Date(2033, 1, 31, 9, 0, 0, 0, time.UTC)
	if err := accounts.AddKeyUsage(ctx, s, []accounts.KeyUsage{{KeyID: "k", Hour: hour, Admitted: 2}}); err != nil {
		t.Fatalf("usage after migrating: %v", err)
	}
	err = s.View(ctx, func(tx accounts.Tx) error {
		if _, err := tx.GetUser("u1"); err != nil {
			return err
		}
		rows, err := tx.ListKeyUsage("k", hour, hour.Add(time.Hour))
		if err != nil || len(rows) != 1 || rows[0].Admitted != 2 {
			t.Errorf("usage = %+v, %v", rows, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err = bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(btx *bolt.Tx) error {
		if v := string(btx.Bucket([]byte("meta")).Get([]byte("format"))); v != "5" {
			t.Errorf("format %q, want 5", v)
		}
		return nil
	})
}
