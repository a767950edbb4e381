package admission

import (
	"net/netip"
	"testing"
	"time"
)

func TestThrottleLimitAndRetryAfter(t *testing.T) {
	th := NewFailureThrottle(0)
	a := netip.MustParseAddr("192.0.2.7")
	b := netip.MustParseAddr("192.0.2.8")
	t0 := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	const limit = 5
	for i := range limit {
		if w := th.Check(a, limit, t0); w != 0 {
			t.Fatalf("after %d failures: wait %v, want none", i, w)
		}
		th.Fail(a, t0.Add(time.Duration(i)*time.Second))
	}
	now := t0.Add(20 * time.Second)
	if w := th.Check(a, limit, now); w != 40*time.Second {
		t.Errorf("after %d failures: wait %v, want 40s (until the window that began at the first failure ends)", limit, w)
	}
	if w := th.Check(b, limit, now); w != 0 {
		t.Errorf("another address waits %v", w)
	}
	if w := th.Check(a, 0, now); w != 0 {
		t.Errorf("limit 0 (off) waits %v", w)
	}
	if w := th.Check(a, limit+1, now); w != 0 {
		t.Errorf("a higher limit waits %v", w)
	}
	if w := th.Check(a, limit, t0.Add(FailureWindow)); w != 0 {
		t.Errorf("after the window: wait %v", w)
	}
	// A failure after the window starts a new one.
	th.Fail(a, t0.Add(FailureWindow))
	if w := th.Check(a, 1, t0.Add(FailureWindow+time.Second)); w != FailureWindow-time.Second {
		t.Errorf("new window: wait %v", w)
	}
	if s := th.Stats(); s.Failures != limit+1 || s.Throttled != 2 || s.Addresses != 1 {
		t.Errorf("stats = %+v", s)
	}
}

func TestThrottleIPv6CountsBySlash64(t *testing.T) {
	th := NewFailureThrottle(0)
	t0 := time.Now()
	th.Fail(netip.MustParseAddr("2001:db8:1:2::1"), t0)
	th.Fail(netip.MustParseAddr("2001:db8:1:2:ffff::9"), t0)
	if w := th.Check(netip.MustParseAddr("2001:db8:1:2::77"), 2, t0); w == 0 {
		t.Error("two failures in one /64 did not count together")
	}
	if w := th.Check(netip.MustParseAddr("2001:db8:1:3::1"), 2, t0); w != 0 {
		t.Error("another /64 is throttled")
	}
	// IPv4-mapped IPv6 is the IPv4 address.
	th.Fail(netip.MustParseAddr("::ffff:192.0.2.1"), t0)
	if w := th.Check(netip.MustParseAddr("192.0.2.1"), 1, t0); w == 0 {
		t.Error("a mapped address did not count as its IPv4 address")
	}
}

func TestThrottleIsBounded(t *testing.T) {
	const bound = 1024
	th := NewFailureThrottle(bound)
	t0 := time.Now()
	for i := range 100_000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		th.Fail(a, t0)
	}
	if n := th.Stats().Addresses; n > bound {
		t.Fatalf("tracks %d addresses, bound %d", n, bound)
	}
	th.Sweep(t0.Add(FailureWindow))
	if n := th.Stats().Addresses; n != 0 {
		t.Fatalf("after a sweep: %d addresses", n)
	}
}

func TestThrottleCheckAllocatesNothing(t *testing.T) {
	th := NewFailureThrottle(0)
	a := netip.MustParseAddr("2001:db8::1")
	now := time.Now()
	th.Fail(a, now)
	allocs := testing.AllocsPerRun(1000, func() { th.Check(a, 60, now) })
	if allocs != 0 {
		t.Fatalf("Check allocates %v times", allocs)
	}
}

// BenchmarkThrottleCheck is the throttle's cost on every gate request from
// an address without failures (the common case).
func BenchmarkThrottleCheck(b *testing.B) {
	th := NewFailureThrottle(0)
	a := netip.MustParseAddr("192.0.2.7")
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			th.Check(a, 60, now)
		}
	})
}
