package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// taggedSource is a fakeSource that vouches for keys by their tag, as
// accounts.Service does.
type taggedSource struct {
	*fakeSource
	tags *accounts.KeyTags
}

func (s *taggedSource) ValidKeyTag(key string) bool { return s.tags.Valid(key) }

var _ TagChecker = (*taggedSource)(nil)

func newTaggedSource(t testing.TB, src *fakeSource) *taggedSource {
	t.Helper()
	tags, err := accounts.NewKeyTags("admission test secret")
	if err != nil {
		t.Fatal(err)
	}
	return &taggedSource{fakeSource: src, tags: tags}
}

// A key made on another node a moment ago: in the store, but its
// invalidation has not reached this node, so the loaded filter lacks it.
func TestFilterTaggedKeyMadeElsewhereIsLoaded(t *testing.T) {
	h := newHashStore()
	h.create("u1", keyA)
	c, f := newFilteredCache(t, h)
	src := newTaggedSource(t, h.src)

	for i, prefix := range []string{accounts.PoolKeyPrefix, accounts.CombinedTokenPrefix} {
		key := src.tags.Mint(prefix)
		want := h.create("u2", key) // no Invalidate: the news is still on its way
		before := h.src.calls.Load()
		e, err := c.Lookup(t.Context(), key, time.Now(), src)
		if err != nil || e != want {
			t.Fatalf("%s key made elsewhere: %+v, %v; want its entitlement", prefix, e, err)
		}
		if n := h.src.calls.Load() - before; n != 1 {
			t.Errorf("%s key made elsewhere: %d store reads, want 1", prefix, n)
		}
		if s := f.Stats(); s.Tagged != uint64(i+1) || s.Rejects != 0 {
			t.Errorf("filter stats = %+v, want %d tagged and no reject", s, i+1)
		}
		// Then it is cached like any key.
		if got := lookup(t, c, key, src); got != want {
			t.Errorf("second lookup = %+v", got)
		}
		if n := h.src.calls.Load() - before; n != 1 {
			t.Errorf("%s key: %d store reads after a second lookup, want 1", prefix, n)
		}
	}

	// Without the tag check (the behaviour before tags), the same case is
	// refused: what the check is for.
	key := src.tags.Mint(accounts.PoolKeyPrefix)
	h.create("u2", key)
	if _, err := c.Lookup(t.Context(), key, time.Now(), h.src); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("untagged-aware source: err = %v, want the filter's refusal", err)
	}
}

func TestFilterUntaggedUnknownKeyCostsNoRead(t *testing.T) {
	h := newHashStore()
	h.create("u1", keyA)
	c, f := newFilteredCache(t, h)
	src := newTaggedSource(t, h.src)
	other, err := accounts.NewKeyTags("another operator's secret")
	if err != nil {
		t.Fatal(err)
	}

	const guesses = 5000
	for i := range guesses {
		prefix := accounts.PoolKeyPrefix
		if i%2 == 1 {
			prefix = accounts.CombinedTokenPrefix
		}
		guess := randomKey(prefix) // the shape of a key minted before tags
		if i%5 == 0 {
			guess = other.Mint(prefix) // tagged, but not under this secret
		}
		if _, err := c.Lookup(t.Context(), guess, time.Now(), src); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("guess %d: err = %v, want ErrUnknownKey", i, err)
		}
	}
	if n := h.src.calls.Load(); n != 0 {
		t.Errorf("%d untagged unknown keys caused %d store reads, want 0", guesses, n)
	}
	if s := f.Stats(); s.Rejects != guesses || s.Tagged != 0 {
		t.Errorf("filter stats = %+v, want %d rejects, none tagged", s, guesses)
	}

	// Keys issued before tags keep working through the filter.
	if got := lookup(t, c, keyA, src); got == nil {
		t.Fatal("old key not served")
	}
	old := randomKey(accounts.PoolKeyPrefix)
	want := h.create("u1", old)
	f.Invalidate("u1")
	if got := lookup(t, c, old, src); got != want {
		t.Errorf("old-format key announced on this node = %+v, want its entitlement", got)
	}
}

// A tagged key that is not in the store (deleted, or never committed) costs
// one read, then the negative cache answers.
func TestFilterTaggedUnknownKeyIsRemembered(t *testing.T) {
	h := newHashStore()
	c, _ := newFilteredCache(t, h)
	src := newTaggedSource(t, h.src)
	key := src.tags.Mint(accounts.PoolKeyPrefix)
	for range 5 {
		if _, err := c.Lookup(t.Context(), key, time.Now(), src); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("err = %v, want ErrUnknownKey", err)
		}
	}
	if n := h.src.calls.Load(); n != 1 {
		t.Errorf("store reads = %d, want 1", n)
	}
}

func TestTagCheckAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	h := newHashStore()
	h.create("u1", keyA)
	c, _ := newFilteredCache(t, h)
	src := newTaggedSource(t, h.src)
	guess := randomKey(accounts.PoolKeyPrefix)
	tagged := src.tags.Mint(accounts.CombinedTokenPrefix)
	ctx := context.Background()
	now := time.Now()
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := c.Lookup(ctx, guess, now, src); !errors.Is(err, ErrUnknownKey) {
			t.Fatal(err)
		}
		if !src.ValidKeyTag(tagged) {
			t.Fatal("tagged key does not verify")
		}
	})
	if allocs != 0 {
		t.Fatalf("a guess refused after the tag check, and a tag check, allocate %v times, want 0", allocs)
	}
}

func BenchmarkTagCheck(b *testing.B) {
	src := newTaggedSource(b, newFakeSource())
	guess := randomKey(accounts.PoolKeyPrefix)
	b.ReportAllocs()
	for b.Loop() {
		if src.ValidKeyTag(guess) {
			b.Fatal("a random key verifies")
		}
	}
}
