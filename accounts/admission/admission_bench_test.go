package admission

import (
	"context"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// benchSetup builds what the gate holds: a cache with one combined key (two
// lane members of 1 and 2 seats and a boost member, open every hour) already
// loaded, a lane registry and a last-used batcher.
func benchSetup(tb testing.TB) (*Cache, *fakeSource, *Registry, *Batcher) {
	tb.Helper()
	c, err := NewCache(CacheConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	src := newFakeSource()
	all := accounts.HourMask(1<<24 - 1)
	src.put(keyB, &accounts.Entitlement{
		KeyID: "ck_bench", UserID: "u_bench", Combined: true,
		Grants: []accounts.Grant{
			{SubscriptionID: "s1", PoolID: "pool-1", PoolSlug: "qwen", Model: "qwen3", Hours: all, Seats: 1, MaxOutputTokens: 8192},
			{SubscriptionID: "s2", PoolID: "pool-1", PoolSlug: "qwen", Model: "qwen3", Hours: all, Seats: 2, MaxOutputTokens: 8192},
			{SubscriptionID: "s3", PoolID: "pool-1", PoolSlug: "qwen", Model: "qwen3", Hours: all, Boost: true, MaxOutputTokens: 8192},
		},
	})
	if _, err := c.Lookup(context.Background(), keyB, clockNow(c), src); err != nil {
		tb.Fatal(err)
	}
	b := NewBatcher(&fakeToucher{}, time.Hour, nil)
	tb.Cleanup(func() { b.Close(context.Background()) })
	return c, src, NewRegistry(), b
}

// admitOnce is the gate's admission path on a cache hit: look the key up,
// evaluate it now, take a lane, note the use, give the lane back.
func admitOnce(ctx context.Context, c *Cache, src Source, r *Registry, b *Batcher) bool {
	now := time.Now()
	ent, err := c.Lookup(ctx, keyB, now, src)
	if err != nil {
		return false
	}
	a := ent.At(now, "qwen3")
	lease, _, err := r.Acquire(ctx, LaneKey{KeyID: ent.KeyID, PoolID: a.PoolID}, a.PoolSlug, a.Lanes, time.Second)
	if err != nil {
		return false
	}
	b.Record(ent.KeyID, ent.Combined, now)
	lease.Release()
	return a.Lanes == 3 && a.Boosts == 1
}

func BenchmarkAdmission(b *testing.B) {
	c, src, r, bt := benchSetup(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if !admitOnce(ctx, c, src, r, bt) {
			b.Fatal("not admitted")
		}
	}
}

func BenchmarkAdmissionParallel(b *testing.B) {
	c, src, r, bt := benchSetup(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			// With more goroutines than the key's 3 lanes some find them
			// full; both outcomes are the admission path.
			admitOnce(ctx, c, src, r, bt)
		}
	})
}

func TestAdmissionPathAllocatesNothing(t *testing.T) {
	c, src, r, bt := benchSetup(t)
	ctx := context.Background()
	if !admitOnce(ctx, c, src, r, bt) {
		t.Fatal("not admitted")
	}
	allocs := testing.AllocsPerRun(2000, func() {
		if !admitOnce(ctx, c, src, r, bt) {
			t.Fatal("not admitted")
		}
	})
	if allocs != 0 {
		t.Fatalf("the admission path allocates %v times per request on a cache hit, want 0", allocs)
	}
}
