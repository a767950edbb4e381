package caddymodule

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/embedded"
)

// notYet reports whether ch has not delivered within a moment; a call that
// must wait and does not is caught (nearly always) without a timing bound
// that could fail a correct build.
func notYet[T any](ch <-chan T) bool {
	select {
	case <-ch:
		return false
	case <-time.After(50 * time.Millisecond):
		return true
	}
}

func openEmbedded(t *testing.T) accounts.Store {
	t.Helper()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "timeblock.db"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A call through the handle before the store opens waits for it, then runs
// on the open store.
func TestStoreHandleWaitsForOpen(t *testing.T) {
	h := newStoreHandle()
	done := make(chan error, 1)
	go func() {
		done <- h.View(context.Background(), func(tx accounts.Tx) error {
			_, err := tx.ListPools()
			return err
		})
	}()
	if !notYet(done) {
		t.Fatal("View returned before the store was opened")
	}
	st := openEmbedded(t)
	h.settle(st, nil)
	if err := <-done; err != nil {
		t.Fatalf("View after open: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.View(context.Background(), func(accounts.Tx) error { return nil }); err == nil {
		t.Error("Close on the handle left the store open")
	}
}

func TestStoreHandleFailedOpen(t *testing.T) {
	h := newStoreHandle()
	cause := errors.New("connection refused")
	h.settle(nil, cause)
	err := h.Update(context.Background(), func(accounts.Tx) error { return nil })
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "not open") {
		t.Errorf("Update on a store that failed to open: %v; want it to say so and wrap the cause", err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("Close of a store that never opened: %v", err)
	}
}

func TestStoreHandleCallerGivesUp(t *testing.T) {
	h := newStoreHandle()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.TouchLastUsed(ctx, accounts.LastUsedBatch{}); !errors.Is(err, context.Canceled) {
		t.Errorf("TouchLastUsed with a canceled context before open: %v", err)
	}
}

// A listener registered before the store opens hears what is published
// after; one canceled before then never does.
func TestStoreHandleInvalidationBeforeOpen(t *testing.T) {
	h := newStoreHandle()
	heard := make(chan string, 4)
	cancel := h.OnInvalidation(func(u string) { heard <- u })
	dropped := h.OnInvalidation(func(u string) { heard <- "dropped:" + u })
	dropped()
	st := openEmbedded(t)
	t.Cleanup(func() { st.Close() })
	h.settle(st, nil)
	// The subscription happens as the store opens, on another goroutine.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := h.PublishInvalidation(context.Background(), "u1"); err != nil {
			t.Fatal(err)
		}
		select {
		case u := <-heard:
			if u != "u1" {
				t.Fatalf("heard %q; want u1 (a canceled listener must hear nothing)", u)
			}
			cancel()
			return
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("a listener registered before open heard nothing after it")
		}
	}
}

// A request that reaches the gate before the app has started waits for the
// store, and is then admitted; if the store fails to open it is answered
// 503 with a reason.
func TestGateWaitsForStore(t *testing.T) {
	f := newGateFixture(t, 0)
	f.gate.state = pendingGateState()
	done := make(chan result, 1)
	go func() { done <- f.do(t, chatPath, tKey, chatBody, nil) }()
	if !notYet(done) {
		t.Fatal("the gate answered before the store was opened")
	}
	if err := f.gate.state.open(f.store, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.gate.state.close() })
	if res := <-done; res.status != http.StatusOK {
		t.Errorf("after open: status %d %s; want 200", res.status, res.body)
	}

	f.gate.state = pendingGateState()
	f.gate.state.settle(errors.New("connection refused"))
	res := f.do(t, chatPath, tKey, chatBody, nil)
	if res.status != http.StatusServiceUnavailable || !strings.Contains(res.body, "account store is not open") || res.header.Get("Retry-After") == "" {
		t.Errorf("store failed to open: status %d %s (Retry-After %q); want 503 saying the store is not open, with Retry-After",
			res.status, res.body, res.header.Get("Retry-After"))
	}
}

// Before the store opens the key guard's collector says the filter is not
// ready (0, not absent) and nothing else; once open, all of its series.
func TestKeyGuardMetricsBeforeOpen(t *testing.T) {
	s := pendingGateState()
	gather := func() map[string]float64 {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(keyGuardCollector{s})
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := make(map[string]float64)
		for _, mf := range mfs {
			m := mf.GetMetric()[0]
			got[mf.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
		return got
	}
	got := gather()
	if v, ok := got["timeblock_gate_key_filter_ready"]; len(got) != 1 || !ok || v != 0 {
		t.Errorf("before open: %v; want only timeblock_gate_key_filter_ready 0", got)
	}
	if err := s.open(openEmbedded(t), zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.close() })
	if got := gather(); len(got) != 8 {
		t.Errorf("after open: %d series %v; want the guard's 8", len(got), got)
	}
}
