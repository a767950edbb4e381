package admission

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// fakeSource serves entitlements by key hash and counts loads. When gate is
// set, every load waits for it to be closed.
type fakeSource struct {
	mu    sync.Mutex
	ents  map[string]*accounts.Entitlement // by accounts.HashKey
	err   error
	gate  chan struct{}
	calls atomic.Int64
	panic bool
}

func newFakeSource() *fakeSource {
	return &fakeSource{ents: make(map[string]*accounts.Entitlement)}
}

func (s *fakeSource) put(key string, e *accounts.Entitlement) {
	s.mu.Lock()
	s.ents[accounts.HashKey(key)] = e
	s.mu.Unlock()
}

func (s *fakeSource) Entitlement(ctx context.Context, hash string) (*accounts.Entitlement, error) {
	s.calls.Add(1)
	s.mu.Lock()
	gate, err, doPanic := s.gate, s.err, s.panic
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if doPanic {
		panic("boom")
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.ents[hash]; ok {
		return e, nil
	}
	return nil, accounts.ErrNotFound
}

// testClock is a clock tests move by hand.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := new(testClock)
	c.ns.Store(time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

const (
	keyA = "sk_pool_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	keyB = "sk-compat-meta-BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
	keyC = "sk_pool_CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC"
)

func newTestCache(t *testing.T, clock *testClock) *Cache {
	t.Helper()
	c, err := NewCache(CacheConfig{Now: clock.Now, TTL: 30 * time.Second, NegativeTTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func lookup(t *testing.T, c *Cache, key string, src Source) *accounts.Entitlement {
	t.Helper()
	e, err := c.Lookup(context.Background(), key, clockNow(c), src)
	if err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	return e
}

func TestCacheHitAfterLoad(t *testing.T) {
	clock := newTestClock()
	c := newTestCache(t, clock)
	src := newFakeSource()
	want := &accounts.Entitlement{KeyID: "key_a", UserID: "u1"}
	src.put(keyA, want)
	if got := lookup(t, c, keyA, src); got != want {
		t.Fatalf("first lookup = %+v", got)
	}
	for range 3 {
		if got := lookup(t, c, keyA, src); got != want {
			t.Fatalf("cached lookup = %+v", got)
		}
	}
	if n := src.calls.Load(); n != 1 {
		t.Fatalf("source called %d times, want 1", n)
	}
	if s := c.Stats(); s.Hits != 3 || s.Misses != 1 || s.Loads != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestCacheHitAllocatesNothing(t *testing.T) {
	c := newTestCache(t, newTestClock())
	src := newFakeSource()
	src.put(keyA, &accounts.Entitlement{KeyID: "key_a", UserID: "u1"})
	lookup(t, c, keyA, src)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := c.Lookup(ctx, keyA, clockNow(c), src); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("a cache hit allocates %v times, want 0", allocs)
	}
}

func TestCacheCollapsesConcurrentMisses(t *testing.T) {
	c := newTestCache(t, newTestClock())
	src := newFakeSource()
	want := &accounts.Entitlement{KeyID: "key_a", UserID: "u1"}
	src.put(keyA, want)
	src.gate = make(chan struct{})

	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Lookup(context.Background(), keyA, clockNow(c), src)
			if err == nil && got != want {
				err = errors.New("wrong entitlement")
			}
			errs <- err
		}()
	}
	// Let every goroutine reach the flight before the load finishes.
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats().Misses < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(src.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := src.calls.Load(); got != 1 {
		t.Fatalf("%d concurrent misses made %d loads, want 1", n, got)
	}
}

func TestCacheWaiterGivesUpLoadContinues(t *testing.T) {
	c := newTestCache(t, newTestClock())
	src := newFakeSource()
	src.put(keyA, &accounts.Entitlement{KeyID: "key_a", UserID: "u1"})
	src.gate = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Lookup(ctx, keyA, clockNow(c), src)
		errc <- err
	}()
	for src.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	close(src.gate)
	// The abandoned load still fills the cache.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := c.Lookup(context.Background(), keyA, clockNow(c), src); err != nil {
			t.Fatal(err)
		}
		if c.Stats().Hits > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned load never filled the cache")
		}
		time.Sleep(time.Millisecond)
	}
	if n := src.calls.Load(); n != 1 {
		t.Fatalf("source called %d times, want 1", n)
	}
}

func TestCacheNegative(t *testing.T) {
	clock := newTestClock()
	c := newTestCache(t, clock)
	src := newFakeSource()
	for range 3 {
		_, err := c.Lookup(context.Background(), keyC, clockNow(c), src)
		if !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("unknown key: err = %v, want ErrUnknownKey", err)
		}
	}
	if n := src.calls.Load(); n != 1 {
		t.Fatalf("an unknown key reached the store %d times, want 1", n)
	}
	if s := c.Stats(); s.NegativeHits != 2 {
		t.Fatalf("negative hits = %d, want 2", s.NegativeHits)
	}
	clock.Advance(11 * time.Second)
	if _, err := c.Lookup(context.Background(), keyC, clockNow(c), src); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("err = %v", err)
	}
	if n := src.calls.Load(); n != 2 {
		t.Fatalf("after the negative TTL the store was asked %d times in all, want 2", n)
	}
}

func TestCacheNegativeIsBounded(t *testing.T) {
	c, err := NewCache(CacheConfig{MaxNegative: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src := newFakeSource()
	for i := range 2000 {
		key := "sk_pool_" + string(rune('a'+i%26)) + time.Duration(i).String()
		if _, err := c.Lookup(context.Background(), key, clockNow(c), src); !errors.Is(err, ErrUnknownKey) {
			t.Fatal(err)
		}
	}
	if used := c.negative.MaxCost() - c.negative.RemainingCost(); used > 100 {
		t.Fatalf("negative cache holds %d entries, bound 100", used)
	}
}

func TestCacheInvalidateUser(t *testing.T) {
	c := newTestCache(t, newTestClock())
	src := newFakeSource()
	a1 := &accounts.Entitlement{KeyID: "key_a", UserID: "u1"}
	b1 := &accounts.Entitlement{KeyID: "key_b", UserID: "u1", Combined: true}
	other := &accounts.Entitlement{KeyID: "key_c", UserID: "u2"}
	src.put(keyA, a1)
	src.put(keyB, b1)
	src.put(keyC, other)
	lookup(t, c, keyA, src)
	lookup(t, c, keyB, src)
	lookup(t, c, keyC, src)

	revoked := &accounts.Entitlement{KeyID: "key_a", UserID: "u1", Denied: "this key was revoked", DeniedStatus: 401}
	src.put(keyA, revoked)
	c.InvalidateUser("u1")

	if got := lookup(t, c, keyA, src); got != revoked {
		t.Fatalf("after invalidation: %+v, want the reloaded entitlement", got)
	}
	lookup(t, c, keyB, src)
	if n := src.calls.Load(); n != 5 {
		t.Fatalf("source calls = %d, want 5 (3 first loads + 2 reloads of u1's keys)", n)
	}
	if got := lookup(t, c, keyC, src); got != other {
		t.Fatal("another user's entry changed")
	}
	if n := src.calls.Load(); n != 5 {
		t.Fatalf("another user's entry was reloaded (calls = %d)", n)
	}
	c.InvalidateUser("nobody") // unknown users are fine
}

func TestCacheInvalidationDuringLoad(t *testing.T) {
	c := newTestCache(t, newTestClock())
	src := newFakeSource()
	src.put(keyA, &accounts.Entitlement{KeyID: "key_a", UserID: "u1"})
	src.gate = make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := c.Lookup(context.Background(), keyA, clockNow(c), src); err != nil {
			t.Error(err)
		}
	}()
	for src.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	// The user changes while the load is reading the old state.
	c.InvalidateUser("u1")
	close(src.gate)
	<-done
	src.mu.Lock()
	src.gate = nil
	src.mu.Unlock()
	lookup(t, c, keyA, src)
	if n := src.calls.Load(); n != 2 {
		t.Fatalf("a load overtaken by an invalidation was cached (calls = %d, want 2)", n)
	}
}

func TestCacheTTLBackstopAndValidUntil(t *testing.T) {
	clock := newTestClock()
	c := newTestCache(t, clock)
	src := newFakeSource()
	src.put(keyA, &accounts.Entitlement{KeyID: "key_a", UserID: "u1"})
	src.put(keyB, &accounts.Entitlement{KeyID: "key_b", UserID: "u2", ValidUntil: clock.Now().Add(5 * time.Second)})
	lookup(t, c, keyA, src)
	lookup(t, c, keyB, src)

	clock.Advance(6 * time.Second)
	lookup(t, c, keyA, src)
	lookup(t, c, keyB, src)
	if n := src.calls.Load(); n != 3 {
		t.Fatalf("calls = %d, want 3: only the entry past ValidUntil reloads", n)
	}
	clock.Advance(25 * time.Second)
	lookup(t, c, keyA, src)
	if n := src.calls.Load(); n != 4 {
		t.Fatalf("calls = %d, want 4: the TTL backstop reloads", n)
	}
	// An entitlement already past ValidUntil is served but never cached.
	src.put(keyC, &accounts.Entitlement{KeyID: "key_c", UserID: "u3", ValidUntil: clock.Now().Add(-time.Second)})
	lookup(t, c, keyC, src)
	lookup(t, c, keyC, src)
	if n := src.calls.Load(); n != 6 {
		t.Fatalf("calls = %d, want 6", n)
	}
}

func TestCacheSourceErrorsAreNotCached(t *testing.T) {
	c := newTestCache(t, newTestClock())
	src := newFakeSource()
	src.put(keyA, &accounts.Entitlement{KeyID: "key_a", UserID: "u1"})
	src.err = errors.New("database is down")
	_, err := c.Lookup(context.Background(), keyA, clockNow(c), src)
	if err == nil || errors.Is(err, ErrUnknownKey) {
		t.Fatalf("err = %v, want the store error", err)
	}
	src.err = nil
	lookup(t, c, keyA, src)
	if s := c.Stats(); s.LoadErrors != 1 || s.Loads != 2 {
		t.Fatalf("stats = %+v", s)
	}

	src.panic = true
	if _, err := c.Lookup(context.Background(), keyB, clockNow(c), src); err == nil {
		t.Fatal("a panicking source gave no error")
	}
}

func TestCachePrunesIdleUsers(t *testing.T) {
	clock := newTestClock()
	c := newTestCache(t, clock)
	src := newFakeSource()
	src.put(keyA, &accounts.Entitlement{KeyID: "key_a", UserID: "u1"})
	lookup(t, c, keyA, src)
	c.pruneUsers()
	if len(c.users) != 1 {
		t.Fatal("a user with a live entry was pruned")
	}
	clock.Advance(31 * time.Second)
	c.pruneUsers()
	if len(c.users) != 0 {
		t.Fatal("an idle user was kept")
	}
	// The stale entry that pointed at the pruned state is not served.
	lookup(t, c, keyA, src)
	if n := src.calls.Load(); n != 2 {
		t.Fatalf("calls = %d, want 2", n)
	}
}

// clockNow reads the cache's own clock, as the gate reads its clock once per
// request and hands the reading to Lookup.
func clockNow(c *Cache) time.Time { return c.cfg.Now() }
