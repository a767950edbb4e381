package admission

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

type fakeToucher struct {
	mu      sync.Mutex
	batches []accounts.LastUsedBatch
	err     error
	touched chan struct{}
}

func (f *fakeToucher) TouchLastUsed(_ context.Context, b accounts.LastUsedBatch) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, b)
	if f.touched != nil {
		select {
		case f.touched <- struct{}{}:
		default:
		}
	}
	return f.err
}

func (f *fakeToucher) all() []accounts.LastUsedBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]accounts.LastUsedBatch(nil), f.batches...)
}

func TestBatcherFlushesLatestUsePerKey(t *testing.T) {
	st := &fakeToucher{}
	b := NewBatcher(st, time.Hour, nil)
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	b.Record("k1", false, t0)
	b.Record("k1", false, t0.Add(2*time.Second))
	b.Record("k1", false, t0.Add(time.Second)) // older than what is recorded: ignored
	b.Record("ck1", true, t0)
	if err := b.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := st.all()
	if len(got) != 1 {
		t.Fatalf("%d batches, want 1", len(got))
	}
	if ts := got[0].Keys["k1"]; !ts.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("k1 last used %v, want the latest use", ts)
	}
	if ts := got[0].CombinedKeys["ck1"]; !ts.Equal(t0) || len(got[0].Keys) != 1 {
		t.Errorf("batch = %+v", got[0])
	}
	// Nothing new: no write at all.
	if err := b.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(st.all()) != 1 {
		t.Fatal("an empty flush wrote to the store")
	}
	// The next flush carries only what came after.
	b.Record("k2", false, t0)
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got = st.all()
	if len(got) != 2 || len(got[1].Keys) != 1 || !got[1].Keys["k2"].Equal(t0) {
		t.Fatalf("Close did not flush the rest: %+v", got)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestBatcherFlushesPeriodically(t *testing.T) {
	st := &fakeToucher{touched: make(chan struct{}, 1)}
	b := NewBatcher(st, 10*time.Millisecond, nil)
	defer b.Close(context.Background())
	b.Record("k1", false, time.Now())
	select {
	case <-st.touched:
	case <-time.After(5 * time.Second):
		t.Fatal("no periodic flush")
	}
}

func TestBatcherReportsStoreErrors(t *testing.T) {
	st := &fakeToucher{err: errors.New("down")}
	b := NewBatcher(st, time.Hour, nil)
	b.Record("k1", false, time.Now())
	if err := b.Close(context.Background()); err == nil {
		t.Fatal("the store error was swallowed by Close")
	}
}

func TestBatcherRecordAllocatesNothing(t *testing.T) {
	b := NewBatcher(&fakeToucher{}, time.Hour, nil)
	defer b.Close(context.Background())
	now := time.Now()
	b.Record("k1", false, now)
	allocs := testing.AllocsPerRun(1000, func() { b.Record("k1", false, now) })
	if allocs != 0 {
		t.Fatalf("Record allocates %v times, want 0", allocs)
	}
}
