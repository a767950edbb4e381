package accounts_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// Entitlement tests: pure functions, no store. Day 0 is 2032-05-10 (UTC).

func entAt(day, hour, minute int) time.Time {
	return time.Date(2032, 5, 10+day, hour, minute, 0, 0, time.UTC)
}

func entPool(id, model string) *accounts.Pool {
	return &accounts.Pool{
		ID: id, Slug: "slug-" + id, ModelID: model, Status: accounts.PoolActive, Slots: 5,
		BlockPrices:     map[accounts.Block]string{accounts.BlockAsia: "80", accounts.BlockEurope: "96", accounts.BlockAmericas: "120"},
		MaxOutputTokens: 4096,
	}
}

// entSub is an active subscription whose period ends in 20 days.
func entSub(id, poolID string, q int, blocks ...accounts.Block) *accounts.Subscription {
	return &accounts.Subscription{
		ID: id, UserID: "u1", PoolID: poolID, Status: accounts.SubActive, Blocks: blocks, Quantity: q,
		BillingCycle: accounts.CycleMonth, CurrentPeriodStart: entAt(-10, 0, 0), CurrentPeriodEnd: entAt(20, 0, 0),
	}
}

func entKey(subID string) *accounts.Key {
	return &accounts.Key{ID: "k-" + subID, UserID: "u1", SubscriptionID: subID, Active: true}
}

func TestEntitlementBlockHours(t *testing.T) {
	pool := entPool("p1", "m1")
	cases := []struct {
		block      accounts.Block
		openHours  []int
		firstHour  int
		closedHour int
	}{
		{accounts.BlockAsia, []int{0, 1, 2, 3, 4, 5, 6, 7}, 0, 8},
		{accounts.BlockEurope, []int{8, 9, 10, 11, 12, 13, 14, 15}, 8, 16},
		{accounts.BlockAmericas, []int{16, 17, 18, 19, 20, 21, 22, 23}, 16, 0},
	}
	for _, c := range cases {
		t.Run(string(c.block), func(t *testing.T) {
			sub := entSub("s1", pool.ID, 1, c.block)
			e := accounts.ResolveKeyEntitlement(entKey(sub.ID), sub, pool, entAt(0, 12, 0))
			if e.Denied != "" {
				t.Fatalf("denied: %s", e.Denied)
			}
			open := map[int]bool{}
			for _, h := range c.openHours {
				open[h] = true
			}
			for h := 0; h < 24; h++ {
				for _, minute := range []int{0, 59} {
					a := e.At(entAt(1, h, minute), "m1")
					if !a.ModelHeld || a.PoolID != pool.ID || a.PoolSlug != pool.Slug || a.MaxOutputTokens != 4096 {
						t.Fatalf("%02d:%02d: admission %+v", h, minute, a)
					}
					if want := map[bool]int{true: 1, false: 0}[open[h]]; a.Lanes != want {
						t.Errorf("%02d:%02d: lanes %d, want %d", h, minute, a.Lanes, want)
					}
					if open[h] && !a.NextOpen.IsZero() {
						t.Errorf("%02d:%02d: open, but NextOpen %v", h, minute, a.NextOpen)
					}
					if !open[h] {
						// The next opening is the block's first hour, today or tomorrow.
						want := entAt(1, c.firstHour, 0)
						if h >= c.firstHour {
							want = entAt(2, c.firstHour, 0)
						}
						if !a.NextOpen.Equal(want) {
							t.Errorf("%02d:%02d: NextOpen %v, want %v", h, minute, a.NextOpen, want)
						}
					}
				}
			}
			// Block edges, to the second.
			last := entAt(1, c.firstHour+7, 59).Add(59 * time.Second)
			if a := e.At(last, "m1"); a.Lanes != 1 {
				t.Errorf("last second of the block closed: %+v", a)
			}
			if a := e.At(last.Add(time.Second), "m1"); a.Lanes != 0 {
				t.Errorf("first second after the block open: %+v", a)
			}
			if a := e.At(entAt(1, c.firstHour, 0).Add(-time.Nanosecond), "m1"); a.Lanes != 0 || !a.NextOpen.Equal(entAt(1, c.firstHour, 0)) {
				t.Errorf("just before the block: %+v", a)
			}
		})
	}
}

func TestEntitlementQuantityAndModel(t *testing.T) {
	pool := entPool("p1", "m1")
	sub := entSub("s1", pool.ID, 3, accounts.BlockEurope, accounts.BlockAmericas)
	e := accounts.ResolveKeyEntitlement(entKey(sub.ID), sub, pool, entAt(0, 9, 0))
	if e.Combined || e.KeyID != "k-s1" || e.UserID != "u1" || len(e.Grants) != 1 {
		t.Fatalf("entitlement %+v", e)
	}
	g := e.Grants[0]
	if g.Seats != 3 || g.Boost || g.Model != "m1" || g.Hours != accounts.MaskOf([]accounts.Block{accounts.BlockEurope, accounts.BlockAmericas}) || !g.Renews || !g.Until.Equal(sub.CurrentPeriodEnd) {
		t.Fatalf("grant %+v", g)
	}
	if !e.ValidUntil.Equal(sub.CurrentPeriodEnd) {
		t.Errorf("ValidUntil %v, want the period end %v", e.ValidUntil, sub.CurrentPeriodEnd)
	}
	for _, h := range []int{8, 15, 16, 23} {
		if a := e.At(entAt(0, h, 30), "m1"); a.Lanes != 3 || a.Boosts != 0 || a.Model != "m1" {
			t.Errorf("%02d:30: %+v, want 3 lanes of m1", h, a)
		}
	}
	// Closed at 03:00: opens at 08:00.
	if a := e.At(entAt(1, 3, 0), "m1"); a.Lanes != 0 || !a.NextOpen.Equal(entAt(1, 8, 0)) {
		t.Errorf("03:00: %+v", a)
	}
	// Another model: not held at all.
	if a := e.At(entAt(0, 9, 0), "other"); a.ModelHeld || a.Lanes != 0 || a.PoolID != "" || a.Model != "" || !a.NextOpen.IsZero() {
		t.Errorf("other model: %+v", a)
	}
	// Quantity 0 (legacy) counts as one seat.
	sub0 := entSub("s0", pool.ID, 0, accounts.BlockEurope)
	if a := accounts.ResolveKeyEntitlement(entKey("s0"), sub0, pool, entAt(0, 9, 0)).At(entAt(0, 9, 0), "m1"); a.Lanes != 1 {
		t.Errorf("quantity 0: %+v", a)
	}
	// A time in another zone is read as UTC: 11:00+02:00 is 09:00 UTC.
	cest := time.FixedZone("CEST", 2*3600)
	if a := e.At(time.Date(2032, 5, 10, 11, 0, 0, 0, cest), "m1"); a.Lanes != 3 {
		t.Errorf("zoned time: %+v", a)
	}
	if a := e.At(time.Date(2032, 5, 10, 9, 0, 0, 0, cest), "m1"); a.Lanes != 0 || !a.NextOpen.Equal(entAt(0, 8, 0)) {
		t.Errorf("zoned time 07:00 UTC: %+v", a)
	}
}

func TestEntitlementKeyStates(t *testing.T) {
	pool := entPool("p1", "m1")
	now := entAt(0, 9, 0)
	type tc struct {
		name   string
		key    func(*accounts.Key)
		sub    func(*accounts.Subscription)
		noSub  bool
		noPool bool
		status int
		msg    string
	}
	cases := []tc{
		{name: "active"},
		{name: "revoked key", key: func(k *accounts.Key) { k.Active = false }, status: 401, msg: "revoked"},
		{name: "canceled", sub: func(s *accounts.Subscription) { s.Status = accounts.SubCanceled }, status: 401, msg: "canceled"},
		{name: "past due", sub: func(s *accounts.Subscription) { s.Status = accounts.SubPastDue }, status: 403, msg: "payment past due"},
		{name: "pending key", sub: func(s *accounts.Subscription) { s.Status = accounts.SubPendingKey }, status: 401, msg: "not been delivered"},
		{name: "revoked and past due", key: func(k *accounts.Key) { k.Active = false }, sub: func(s *accounts.Subscription) { s.Status = accounts.SubPastDue }, status: 401, msg: "revoked"},
		{name: "subscription gone", noSub: true, status: 401, msg: "no longer exists"},
		{name: "pool gone", noPool: true, status: 401, msg: "pool"},
		{name: "cancel scheduled, before period end", sub: func(s *accounts.Subscription) {
			s.CancelAtPeriodEnd = true
			s.CurrentPeriodEnd = now.Add(time.Hour)
		}},
		{name: "cancel scheduled, period ended", sub: func(s *accounts.Subscription) {
			s.CancelAtPeriodEnd = true
			s.CurrentPeriodEnd = now
		}, status: 401, msg: "canceled"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sub := entSub("s1", pool.ID, 1, accounts.BlockEurope)
			k := entKey(sub.ID)
			if c.key != nil {
				c.key(k)
			}
			if c.sub != nil {
				c.sub(sub)
			}
			s, p := sub, pool
			if c.noSub {
				s = nil
			}
			if c.noPool {
				p = nil
			}
			e := accounts.ResolveKeyEntitlement(k, s, p, now)
			if e.KeyID != k.ID || e.UserID != "u1" {
				t.Errorf("ids %q %q", e.KeyID, e.UserID)
			}
			if c.status == 0 {
				if e.Denied != "" || e.At(now, "m1").Lanes != 1 {
					t.Fatalf("want open, got %+v", e)
				}
				return
			}
			if e.DeniedStatus != c.status || !strings.Contains(e.Denied, c.msg) || len(e.Grants) != 0 {
				t.Fatalf("got %d %q (%d grants), want %d containing %q", e.DeniedStatus, e.Denied, len(e.Grants), c.status, c.msg)
			}
			if a := e.At(now, "m1"); a != (accounts.Admission{}) {
				t.Errorf("a denied entitlement admits: %+v", a)
			}
		})
	}
	if e := accounts.ResolveKeyEntitlement(nil, nil, nil, now); e.DeniedStatus != http.StatusUnauthorized {
		t.Errorf("nil key: %+v", e)
	}
	var nilEnt *accounts.Entitlement
	if a := nilEnt.At(now, "m1"); a != (accounts.Admission{}) {
		t.Errorf("nil entitlement admits: %+v", a)
	}
}

func TestEntitlementPeriodEnd(t *testing.T) {
	pool := entPool("p1", "m1")

	// A scheduled cancellation at 10:30 inside the europe block: open until
	// then, never again after.
	sub := entSub("s1", pool.ID, 1, accounts.BlockEurope)
	sub.CancelAtPeriodEnd = true
	sub.CurrentPeriodEnd = entAt(0, 10, 30)
	e := accounts.ResolveKeyEntitlement(entKey(sub.ID), sub, pool, entAt(0, 9, 0))
	if e.Denied != "" || e.Grants[0].Renews {
		t.Fatalf("%+v", e)
	}
	if a := e.At(entAt(0, 10, 29), "m1"); a.Lanes != 1 {
		t.Errorf("10:29: %+v", a)
	}
	if a := e.At(entAt(0, 10, 30), "m1"); a.Lanes != 0 || !a.ModelHeld || !a.NextOpen.IsZero() {
		t.Errorf("10:30 (period over, not renewing): %+v", a)
	}
	if a := e.At(entAt(0, 5, 0), "m1"); a.Lanes != 0 || !a.NextOpen.Equal(entAt(0, 8, 0)) {
		t.Errorf("05:00: %+v", a)
	}
	// A period ending at 09:00 before the window: no next opening.
	sub.CurrentPeriodEnd = entAt(0, 8, 0)
	e = accounts.ResolveKeyEntitlement(entKey(sub.ID), sub, pool, entAt(0, 5, 0))
	if a := e.At(entAt(0, 5, 0), "m1"); a.Lanes != 0 || !a.NextOpen.IsZero() {
		t.Errorf("ending at the window start: %+v", a)
	}

	// A renewing subscription whose period ended before the worker renewed
	// it: closed, but the next opening counts (it will renew).
	sub = entSub("s2", pool.ID, 2, accounts.BlockEurope)
	sub.CurrentPeriodEnd = entAt(0, 9, 0)
	e = accounts.ResolveKeyEntitlement(entKey(sub.ID), sub, pool, entAt(0, 9, 15))
	if e.Denied != "" {
		t.Fatalf("renewing subscription past its end denied: %s", e.Denied)
	}
	if !e.ValidUntil.IsZero() {
		t.Errorf("ValidUntil %v: nothing ends in the future", e.ValidUntil)
	}
	if a := e.At(entAt(0, 9, 15), "m1"); a.Lanes != 0 || !a.ModelHeld || !a.NextOpen.Equal(entAt(0, 10, 0)) {
		t.Errorf("renewing, period over: %+v", a)
	}
	if a := e.At(entAt(0, 8, 59), "m1"); a.Lanes != 2 {
		t.Errorf("before the end: %+v", a)
	}
}

// combined builds a combined key of the given members.
func combined(members ...accounts.Member) *accounts.CombinedKey {
	return &accounts.CombinedKey{ID: "ck1", UserID: "u1", Active: true, Members: members}
}

func lane(id string) accounts.Member {
	return accounts.Member{SubscriptionID: id, Role: accounts.RoleLane}
}
func boost(id string) accounts.Member {
	return accounts.Member{SubscriptionID: id, Role: accounts.RoleBoost}
}

func subsOf(subs ...*accounts.Subscription) map[string]*accounts.Subscription {
	m := map[string]*accounts.Subscription{}
	for _, s := range subs {
		m[s.ID] = s
	}
	return m
}

func poolsOf(pools ...*accounts.Pool) map[string]*accounts.Pool {
	m := map[string]*accounts.Pool{}
	for _, p := range pools {
		m[p.ID] = p
	}
	return m
}

func TestCombinedEntitlementLanes(t *testing.T) {
	pa, pb := entPool("pa", "ma"), entPool("pb", "mb")
	eu1 := entSub("eu1", pa.ID, 1, accounts.BlockEurope)
	eu2 := entSub("eu2", pa.ID, 2, accounts.BlockEurope)
	am := entSub("am", pa.ID, 1, accounts.BlockAmericas)
	euBoost := entSub("eub", pa.ID, 1, accounts.BlockEurope)
	asiaB := entSub("asb", pb.ID, 4, accounts.BlockAsia)
	subs := subsOf(eu1, eu2, am, euBoost, asiaB)
	pools := poolsOf(pa, pb)
	now := entAt(0, 9, 0)

	type probe struct {
		at     time.Time
		model  string
		lanes  int
		boosts int
		held   bool
		pool   string
		next   time.Time
	}
	cases := []struct {
		name    string
		members []accounts.Member
		probes  []probe
	}{
		{"overlapping lanes stack", []accounts.Member{lane("eu1"), lane("eu2")}, []probe{
			{at: entAt(0, 9, 0), model: "ma", lanes: 3, held: true, pool: "pa"},
			{at: entAt(0, 16, 0), model: "ma", lanes: 0, held: true, pool: "pa", next: entAt(1, 8, 0)},
		}},
		{"coverage windows add up", []accounts.Member{lane("eu1"), lane("am")}, []probe{
			{at: entAt(0, 9, 0), model: "ma", lanes: 1, held: true, pool: "pa"},
			{at: entAt(0, 17, 0), model: "ma", lanes: 1, held: true, pool: "pa"},
			{at: entAt(1, 2, 0), model: "ma", lanes: 0, held: true, pool: "pa", next: entAt(1, 8, 0)},
			{at: entAt(0, 23, 59), model: "ma", lanes: 1, held: true, pool: "pa"},
		}},
		{"boost adds no lane", []accounts.Member{lane("eu1"), lane("eu2"), boost("eub")}, []probe{
			{at: entAt(0, 9, 0), model: "ma", lanes: 3, boosts: 1, held: true, pool: "pa"},
			{at: entAt(0, 20, 0), model: "ma", lanes: 0, boosts: 0, held: true, pool: "pa", next: entAt(1, 8, 0)},
		}},
		{"mixed pools and models", []accounts.Member{lane("eu1"), lane("asb")}, []probe{
			{at: entAt(0, 9, 0), model: "ma", lanes: 1, held: true, pool: "pa"},
			{at: entAt(0, 9, 0), model: "mb", lanes: 0, held: true, pool: "pb", next: entAt(1, 0, 0)},
			{at: entAt(1, 3, 0), model: "mb", lanes: 4, held: true, pool: "pb"},
			{at: entAt(1, 3, 0), model: "ma", lanes: 0, held: true, pool: "pa", next: entAt(1, 8, 0)},
			{at: entAt(0, 9, 0), model: "mc", held: false},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := accounts.ResolveCombinedEntitlement(combined(c.members...), subs, pools, now)
			if e.Denied != "" || !e.Combined || e.KeyID != "ck1" || e.UserID != "u1" {
				t.Fatalf("%+v", e)
			}
			for _, p := range c.probes {
				a := e.At(p.at, p.model)
				if a.Lanes != p.lanes || a.Boosts != p.boosts || a.ModelHeld != p.held || a.PoolID != p.pool || !a.NextOpen.Equal(p.next) {
					t.Errorf("%s at %s: got %+v, want lanes %d boosts %d held %v pool %q next %v",
						p.model, p.at.Format("Jan 2 15:04"), a, p.lanes, p.boosts, p.held, p.pool, p.next)
				}
			}
		})
	}

	// Boost grants carry no seats.
	e := accounts.ResolveCombinedEntitlement(combined(lane("eu1"), boost("eub")), subs, pools, now)
	for _, g := range e.Grants {
		if g.Boost != (g.SubscriptionID == "eub") || (g.Boost && g.Seats != 0) || (!g.Boost && g.Seats != 1) {
			t.Errorf("grant %+v", g)
		}
	}
}

func TestCombinedEntitlementMemberStates(t *testing.T) {
	pa := entPool("pa", "ma")
	now := entAt(0, 9, 0)
	mk := func(id string, status string, blocks ...accounts.Block) *accounts.Subscription {
		s := entSub(id, pa.ID, 1, blocks...)
		s.Status = status
		return s
	}
	eu := mk("eu", accounts.SubActive, accounts.BlockEurope)
	euCanceled := mk("euc", accounts.SubCanceled, accounts.BlockEurope)
	euDue := mk("eud", accounts.SubPastDue, accounts.BlockEurope)
	amDue := mk("amd", accounts.SubPastDue, accounts.BlockAmericas)
	am := mk("am", accounts.SubActive, accounts.BlockAmericas)
	amCanceled := mk("amc", accounts.SubCanceled, accounts.BlockAmericas)
	euEnded := mk("eue", accounts.SubActive, accounts.BlockEurope)
	euEnded.CancelAtPeriodEnd, euEnded.CurrentPeriodEnd = true, entAt(0, 8, 0)
	euSoon := mk("eus", accounts.SubActive, accounts.BlockEurope)
	euSoon.CurrentPeriodEnd = entAt(0, 12, 0)
	subs := subsOf(eu, euCanceled, euDue, amDue, am, amCanceled, euEnded, euSoon)
	pools := poolsOf(pa)

	cases := []struct {
		name    string
		members []accounts.Member
		status  int // 0: not denied
		lanes   int // at 09:00
		next    time.Time
	}{
		{"canceled member contributes nothing", []accounts.Member{lane("euc"), lane("am")}, 0, 0, entAt(0, 16, 0)},
		{"past-due member contributes nothing", []accounts.Member{lane("eud"), lane("eu")}, 0, 1, time.Time{}},
		{"ended member contributes nothing", []accounts.Member{lane("eue"), lane("eu")}, 0, 1, time.Time{}},
		{"missing member contributes nothing", []accounts.Member{lane("gone"), lane("eu")}, 0, 1, time.Time{}},
		{"every lane past due", []accounts.Member{lane("eud"), lane("amd")}, 403, 0, time.Time{}},
		{"past due and canceled", []accounts.Member{lane("eud"), lane("amc")}, 403, 0, time.Time{}},
		{"every lane canceled", []accounts.Member{lane("euc"), lane("amc")}, 401, 0, time.Time{}},
		{"only a boost left", []accounts.Member{lane("euc"), boost("eu")}, 401, 0, time.Time{}},
		{"past-due boost, lanes canceled", []accounts.Member{lane("euc"), boost("eud")}, 401, 0, time.Time{}},
		{"past-due boost does not deny", []accounts.Member{lane("eu"), boost("eud")}, 0, 1, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := accounts.ResolveCombinedEntitlement(combined(c.members...), subs, pools, now)
			if e.DeniedStatus != c.status || (c.status == 0) != (e.Denied == "") {
				t.Fatalf("got %d %q, want status %d", e.DeniedStatus, e.Denied, c.status)
			}
			if c.status == 403 && !strings.Contains(e.Denied, "payment past due") {
				t.Errorf("403 message %q", e.Denied)
			}
			if c.status != 0 {
				return
			}
			a := e.At(now, "ma")
			if a.Lanes != c.lanes || !a.NextOpen.Equal(c.next) {
				t.Errorf("at 09:00: %+v, want %d lanes, next %v", a, c.lanes, c.next)
			}
		})
	}

	// The earliest future period end bounds the cache.
	e := accounts.ResolveCombinedEntitlement(combined(lane("eu"), lane("eus")), subs, pools, now)
	if !e.ValidUntil.Equal(entAt(0, 12, 0)) {
		t.Errorf("ValidUntil %v", e.ValidUntil)
	}
	if a := e.At(entAt(0, 12, 0), "ma"); a.Lanes != 1 {
		t.Errorf("after one member's period end: %+v", a)
	}
	// An inactive combined key admits nothing.
	ck := combined(lane("eu"), lane("am"))
	ck.Active = false
	if e := accounts.ResolveCombinedEntitlement(ck, subs, pools, now); e.DeniedStatus != 401 || !e.Combined {
		t.Errorf("inactive: %+v", e)
	}
	if e := accounts.ResolveCombinedEntitlement(nil, subs, pools, now); e.DeniedStatus != 401 {
		t.Errorf("nil: %+v", e)
	}
}

func TestCombinedEntitlementSameModelTwoPools(t *testing.T) {
	// Two pools serve one model: the pool open now serves it; when none is,
	// the first member's pool is named and the next opening is the earliest.
	p1, p2 := entPool("p1", "m"), entPool("p2", "m")
	a := entSub("a", p1.ID, 1, accounts.BlockEurope)
	b := entSub("b", p2.ID, 2, accounts.BlockAmericas)
	e := accounts.ResolveCombinedEntitlement(combined(lane("a"), lane("b")), subsOf(a, b), poolsOf(p1, p2), entAt(0, 9, 0))
	if got := e.At(entAt(0, 9, 0), "m"); got.PoolID != "p1" || got.Lanes != 1 {
		t.Errorf("09:00 %+v", got)
	}
	if got := e.At(entAt(0, 17, 0), "m"); got.PoolID != "p2" || got.Lanes != 2 {
		t.Errorf("17:00 %+v", got)
	}
	if got := e.At(entAt(1, 1, 0), "m"); got.PoolID != "p1" || got.Lanes != 0 || !got.NextOpen.Equal(entAt(1, 8, 0)) {
		t.Errorf("01:00 %+v", got)
	}
}

func TestEntitlementAtAllocatesNothing(t *testing.T) {
	pa, pb := entPool("pa", "ma"), entPool("pb", "mb")
	subs := subsOf(entSub("eu1", pa.ID, 1, accounts.BlockEurope), entSub("eu2", pa.ID, 2, accounts.BlockEurope),
		entSub("eub", pa.ID, 1, accounts.BlockEurope), entSub("as", pb.ID, 1, accounts.BlockAsia))
	e := accounts.ResolveCombinedEntitlement(combined(lane("eu1"), lane("eu2"), boost("eub"), lane("as")), subs, poolsOf(pa, pb), entAt(0, 9, 0))
	open, closed := entAt(0, 9, 0), entAt(0, 20, 0)
	var sink accounts.Admission
	for name, fn := range map[string]func(){
		"open":        func() { sink = e.At(open, "ma") },
		"closed":      func() { sink = e.At(closed, "ma") },
		"other model": func() { sink = e.At(open, "nope") },
		"next day":    func() { sink = e.At(open, "mb") },
	} {
		if n := testing.AllocsPerRun(200, fn); n != 0 {
			t.Errorf("At (%s) allocates %.1f times per call", name, n)
		}
	}
	_ = sink
}

func BenchmarkEntitlementAt(b *testing.B) {
	pa := entPool("pa", "ma")
	subs := subsOf(entSub("eu1", pa.ID, 1, accounts.BlockEurope), entSub("am", pa.ID, 2, accounts.BlockAmericas))
	e := accounts.ResolveCombinedEntitlement(combined(lane("eu1"), lane("am")), subs, poolsOf(pa), entAt(0, 9, 0))
	t := entAt(0, 9, 0)
	b.ReportAllocs()
	for b.Loop() {
		_ = e.At(t, "ma")
	}
}
