package embedded_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/embedded"
	"github.com/timeblock/timeblock/accounts/storetest"
)

func open(t *testing.T, path string, opts ...embedded.Option) *embedded.Store {
	t.Helper()
	s, err := embedded.Open(path, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) accounts.Store {
		return open(t, filepath.Join(t.TempDir(), "timeblock.db"))
	})
}

func TestSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", "dir", "timeblock.db")
	u := &accounts.User{ID: "u1", Email: "a@example.com", CreatedAt: time.Now()}

	s := open(t, path)
	err := s.Update(t.Context(), func(tx accounts.Tx) error { return tx.CreateUser(u) })
	if err != nil {
		t.Fatalf("CreateUser: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	s = open(t, path)
	var got *accounts.User
	err = s.View(t.Context(), func(tx accounts.Tx) (err error) {
		got, err = tx.GetUserByEmail(u.Email)
		return err
	})
	if err != nil {
		t.Fatalf("GetUserByEmail after reopening: %v", err)
	}
	if got.ID != u.ID || !got.CreatedAt.Equal(u.CreatedAt.Truncate(time.Microsecond)) {
		t.Errorf("after reopening got %+v, want %+v", got, u)
	}
}

func TestLockedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "timeblock.db")
	open(t, path)

	start := time.Now()
	s, err := embedded.Open(path, embedded.WithLockTimeout(200*time.Millisecond))
	if err == nil {
		s.Close()
		t.Fatal("second Open of a locked file succeeded")
	}
	if want := "another Caddy process is using " + path + "; the embedded store admits one process — use store postgres for several nodes"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Errorf("Open waited %v for the lock, want about 200ms", waited)
	}
}
