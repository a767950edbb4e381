package admission

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// hashStore is the credential side of a store for the filter: hashes by
// user, and a Source serving entitlements of the same keys. A read may be
// held back (hold) or fail (err).
type hashStore struct {
	src *fakeSource

	mu     sync.Mutex
	byUser map[string][]string
	hold   chan struct{}
	err    error
	reads  int
}

func newHashStore() *hashStore {
	return &hashStore{src: newFakeSource(), byUser: make(map[string][]string)}
}

func (h *hashStore) list(ctx context.Context, userID string) ([]string, error) {
	h.mu.Lock()
	hold, err := h.hold, h.err
	h.reads++
	h.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for u, hashes := range h.byUser {
		if userID == accounts.InvalidateAll || u == userID {
			out = append(out, hashes...)
		}
	}
	return out, nil
}

// create stores a key of the user; the caller announces it (Invalidate).
func (h *hashStore) create(userID, key string) *accounts.Entitlement {
	e := &accounts.Entitlement{KeyID: "id-" + key[len(key)-6:], UserID: userID}
	h.src.put(key, e)
	h.mu.Lock()
	h.byUser[userID] = append(h.byUser[userID], accounts.HashKey(key))
	h.mu.Unlock()
	return e
}

func (h *hashStore) remove(userID, key string) {
	h.src.mu.Lock()
	delete(h.src.ents, accounts.HashKey(key))
	h.src.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	hashes := h.byUser[userID]
	for i, x := range hashes {
		if x == accounts.HashKey(key) {
			h.byUser[userID] = append(hashes[:i:i], hashes[i+1:]...)
			return
		}
	}
}

func (h *hashStore) set(hold chan struct{}, err error) {
	h.mu.Lock()
	h.hold, h.err = hold, err
	h.mu.Unlock()
}

// randomKey is a well-formed key nobody issued: 256 random bits, as
// accounts makes them.
func randomKey(prefix string) string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func newFilteredCache(t *testing.T, h *hashStore) (*Cache, *KeyFilter) {
	t.Helper()
	f := NewKeyFilter(h.list, FilterConfig{})
	t.Cleanup(f.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if !f.WaitReady(ctx) {
		t.Fatal("the filter never became ready")
	}
	c, err := NewCache(CacheConfig{Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, f
}

func TestFilterGuessedKeysCostNoLoad(t *testing.T) {
	h := newHashStore()
	wantA := h.create("u1", keyA)
	wantB := h.create("u2", keyB)
	c, f := newFilteredCache(t, h)

	const guesses = 10_000
	for i := range guesses {
		prefix := accounts.PoolKeyPrefix
		if i%2 == 1 {
			prefix = accounts.CombinedTokenPrefix
		}
		if _, err := c.Lookup(t.Context(), randomKey(prefix), time.Now(), h.src); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("guess %d: err = %v, want ErrUnknownKey", i, err)
		}
	}
	if n := h.src.calls.Load(); n != 0 {
		t.Errorf("%d guessed keys caused %d loads, want 0", guesses, n)
	}
	if s := c.Stats(); s.Loads != 0 || s.Misses != 0 {
		t.Errorf("cache stats after guesses = %+v, want no miss and no load", s)
	}
	if s := f.Stats(); s.Rejects != guesses || s.Keys != 2 || !s.Ready {
		t.Errorf("filter stats = %+v, want %d rejects, 2 keys, ready", s, guesses)
	}
	// Real keys still load, once each.
	if got := lookup(t, c, keyA, h.src); got != wantA {
		t.Errorf("keyA = %+v", got)
	}
	if got := lookup(t, c, keyB, h.src); got != wantB {
		t.Errorf("keyB = %+v", got)
	}
	if n := h.src.calls.Load(); n != 2 {
		t.Errorf("loads = %d, want 2", n)
	}
}

func TestFilterNewKeyWorksOnTheNextRequest(t *testing.T) {
	h := newHashStore()
	h.create("u1", keyA)
	c, _ := newFilteredCache(t, h)
	for i := range 200 {
		key := randomKey(accounts.PoolKeyPrefix)
		want := h.create("u1", key)
		// The service announces the key once it is committed and before it
		// answers; the client's very next request must find it.
		c.cfg.Filter.Invalidate("u1")
		e, err := c.Lookup(t.Context(), key, time.Now(), h.src)
		if err != nil || e != want {
			t.Fatalf("new key %d: %+v, %v; want its entitlement", i, e, err)
		}
	}
}

func TestFilterLookupWaitsForQueuedRead(t *testing.T) {
	h := newHashStore()
	c, f := newFilteredCache(t, h)
	hold := make(chan struct{})
	h.set(hold, nil)
	key := randomKey(accounts.CombinedTokenPrefix)
	want := h.create("u9", key)
	f.Invalidate("u9")

	type result struct {
		e   *accounts.Entitlement
		err error
	}
	got := make(chan result, 1)
	go func() {
		e, err := c.Lookup(t.Context(), key, time.Now(), h.src)
		got <- result{e, err}
	}()
	select {
	case r := <-got:
		t.Fatalf("lookup answered %+v, %v before the queued read was applied", r.e, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	// A lookup whose context ends while it waits gives up with ctx's error.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Lookup(ctx, randomKey(accounts.PoolKeyPrefix), time.Now(), h.src); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled lookup: err = %v, want context.Canceled", err)
	}
	h.set(nil, nil)
	close(hold)
	r := <-got
	if r.err != nil || r.e != want {
		t.Fatalf("lookup after the read = %+v, %v", r.e, r.err)
	}
	if s := f.Stats(); s.Waits < 1 {
		t.Errorf("filter stats = %+v, want a wait", s)
	}
}

func TestFilterRebuildDropsDeletedKeys(t *testing.T) {
	h := newHashStore()
	h.create("u1", keyA)
	h.create("u1", keyC)
	c, f := newFilteredCache(t, h)
	h.remove("u1", keyC)
	f.Invalidate(accounts.InvalidateAll)
	// A key the set lacks waits for the queued read; one it still holds
	// passes at once, so look up an absent key first.
	if _, err := c.Lookup(t.Context(), randomKey(accounts.PoolKeyPrefix), time.Now(), h.src); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("guess: err = %v", err)
	}
	if _, err := c.Lookup(t.Context(), keyC, time.Now(), h.src); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("deleted key: err = %v, want ErrUnknownKey", err)
	}
	if n := h.src.calls.Load(); n != 0 {
		t.Errorf("a deleted key caused %d loads after a full read, want 0", n)
	}
	if s := f.Stats(); s.Keys != 1 {
		t.Errorf("filter holds %d keys, want 1", s.Keys)
	}
	lookup(t, c, keyA, h.src)
}

func TestFilterPeriodicRebuild(t *testing.T) {
	h := newHashStore()
	h.create("u1", keyA)
	f := NewKeyFilter(h.list, FilterConfig{Rebuild: 10 * time.Millisecond})
	defer f.Close()
	h.create("u1", keyC) // never announced
	deadline := time.Now().Add(10 * time.Second)
	for f.Stats().Keys != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the filter never picked up an unannounced key: %+v", f.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFilterFailedReadPassesEverything(t *testing.T) {
	h := newHashStore()
	h.set(nil, errors.New("store down"))
	f := NewKeyFilter(h.list, FilterConfig{RetryMax: time.Hour})
	defer f.Close()
	c, err := NewCache(CacheConfig{Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Not loaded: the filter cannot say no, so unknown keys reach the source
	// as they would without it.
	guess := randomKey(accounts.PoolKeyPrefix)
	if _, err := c.Lookup(t.Context(), guess, time.Now(), h.src); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("err = %v", err)
	}
	if n := h.src.calls.Load(); n != 1 {
		t.Fatalf("loads = %d, want 1 (no filter yet)", n)
	}
	if s := c.Stats(); s.UnknownLoads != 1 {
		t.Fatalf("cache stats = %+v, want 1 unknown load", s)
	}

	h.set(nil, nil)
	f.Invalidate(accounts.InvalidateAll)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if !f.WaitReady(ctx) {
		t.Fatal("not ready after the store came back")
	}
	if _, err := c.Lookup(t.Context(), randomKey(accounts.PoolKeyPrefix), time.Now(), h.src); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("err = %v", err)
	}
	if n := h.src.calls.Load(); n != 1 {
		t.Fatalf("loads = %d, want still 1", n)
	}

	// A user's read failing makes the filter pass again: it may have missed
	// that user's new key.
	h.set(nil, errors.New("store down"))
	key := randomKey(accounts.PoolKeyPrefix)
	want := h.create("u1", key)
	f.Invalidate("u1")
	e, err := c.Lookup(t.Context(), key, time.Now(), h.src)
	if err != nil || e != want {
		t.Fatalf("key after a failed read: %+v, %v; want it served from the source", e, err)
	}
	if s := f.Stats(); s.Ready || s.ReadErrors < 2 {
		t.Errorf("filter stats = %+v, want not ready with read errors", s)
	}
}

func TestFilterRejectAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	h := newHashStore()
	h.create("u1", keyA)
	c, _ := newFilteredCache(t, h)
	guess := randomKey(accounts.PoolKeyPrefix)
	ctx := context.Background()
	now := time.Now()
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := c.Lookup(ctx, guess, now, h.src); !errors.Is(err, ErrUnknownKey) {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("a refused guess allocates %v times, want 0", allocs)
	}
}

func TestFilterKey(t *testing.T) {
	// The filter and the cache must agree on the bits of a key.
	for _, key := range []string{keyA, keyB, randomKey(accounts.PoolKeyPrefix)} {
		k, ok := filterKey(accounts.HashKey(key))
		if !ok {
			t.Fatalf("filterKey(HashKey(%q)) not ok", key)
		}
		if want := cacheKey(key); k != want {
			t.Errorf("filterKey = %x, cache key = %x", k, want)
		}
	}
	for _, bad := range []string{"", "key-hash-1", strings.Repeat("g", 64), accounts.HashKey(keyA)[:63]} {
		if _, ok := filterKey(bad); ok {
			t.Errorf("filterKey(%q) ok, want not a hash", bad)
		}
	}
}

func cacheKey(key string) uint64 {
	d := sha256.Sum256([]byte(key))
	return binary.LittleEndian.Uint64(d[:8])
}

func TestCacheInvalidateAll(t *testing.T) {
	clock := newTestClock()
	c := newTestCache(t, clock)
	src := newFakeSource()
	src.put(keyA, &accounts.Entitlement{KeyID: "key_a", UserID: "u1"})
	src.put(keyB, &accounts.Entitlement{KeyID: "key_b", UserID: "u2"})
	lookup(t, c, keyA, src)
	lookup(t, c, keyB, src)
	c.InvalidateUser(accounts.InvalidateAll)
	lookup(t, c, keyA, src)
	lookup(t, c, keyB, src)
	if n := src.calls.Load(); n != 4 {
		t.Fatalf("loads = %d, want 4: InvalidateAll must make every entry stale", n)
	}
}
