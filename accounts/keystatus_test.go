package accounts_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// hoursOf builds a Hours array: n lanes in each hour of each [from, to) span.
func hoursOf(spans ...[3]int) [24]int {
	var h [24]int
	for _, s := range spans {
		for i := s[0]; i < s[1]; i++ {
			h[i] += s[2]
		}
	}
	return h
}

func timePtr(t time.Time) *time.Time { return &t }

func TestKeyStatus(t *testing.T) {
	p1, p2 := entPool("p1", "m1"), entPool("p2", "m2")
	europe1 := entSub("s-eu", "p1", 1, accounts.BlockEurope)
	asia2 := entSub("s-asia", "p1", 2, accounts.BlockAsia)
	americas1 := entSub("s-am", "p1", 1, accounts.BlockAmericas)
	europe2m2 := entSub("s-eu2", "p2", 2, accounts.BlockEurope)
	boostAsia := entSub("s-boost", "p2", 1, accounts.BlockAsia)
	allDay := entSub("s-all", "p1", 3, accounts.BlockAsia, accounts.BlockEurope, accounts.BlockAmericas)
	// Canceled at period end, 12:30 on day 0 (inside its europe hours).
	endsMidWindow := entSub("s-ends", "p1", 1, accounts.BlockEurope)
	endsMidWindow.CancelAtPeriodEnd, endsMidWindow.CurrentPeriodEnd = true, entAt(0, 12, 30)
	// Canceled at period end, 07:30 on day 0 (before its hours open).
	endsBefore := entSub("s-before", "p1", 1, accounts.BlockEurope)
	endsBefore.CancelAtPeriodEnd, endsBefore.CurrentPeriodEnd = true, entAt(0, 7, 30)
	// Every hour, canceled at the end of its period (day 20, 00:00).
	allDayEnding := entSub("s-all-end", "p1", 1, accounts.BlockAsia, accounts.BlockEurope, accounts.BlockAmericas)
	allDayEnding.CancelAtPeriodEnd = true
	pastDue := entSub("s-due", "p1", 1, accounts.BlockEurope)
	pastDue.Status = accounts.SubPastDue

	key := func(sub *accounts.Subscription, pool *accounts.Pool) func(time.Time) *accounts.Entitlement {
		return func(now time.Time) *accounts.Entitlement {
			return accounts.ResolveKeyEntitlement(entKey(sub.ID), sub, pool, now)
		}
	}
	revoked := func(now time.Time) *accounts.Entitlement {
		k := entKey(europe1.ID)
		k.Active = false
		return accounts.ResolveKeyEntitlement(k, europe1, p1, now)
	}
	comb := func(members []accounts.Member, subs ...*accounts.Subscription) func(time.Time) *accounts.Entitlement {
		return func(now time.Time) *accounts.Entitlement {
			return accounts.ResolveCombinedEntitlement(combined(members...), subsOf(subs...), poolsOf(p1, p2), now)
		}
	}
	// Americas then asia: one window from 16:00 to 08:00 the next day.
	wrap := comb([]accounts.Member{lane(americas1.ID), lane(asia2.ID)}, americas1, asia2)
	// Europe (m1, 1 lane) and europe (m2, 2 lanes), americas (m1), a boost.
	stacked := comb([]accounts.Member{lane(europe1.ID), lane(europe2m2.ID), lane(americas1.ID), boost(boostAsia.ID)},
		europe1, europe2m2, americas1, boostAsia)

	cases := []struct {
		name  string
		ent   func(time.Time) *accounts.Entitlement
		at    time.Time
		want  accounts.KeyStatus
		notes string
	}{
		{name: "open: closes at the end of the block", ent: key(europe1, p1), at: entAt(0, 9, 30), want: accounts.KeyStatus{
			Models: []string{"m1"}, WindowOpen: true, ClosesAt: timePtr(entAt(0, 16, 0)), Lanes: 1, Hours: hoursOf([3]int{8, 16, 1})}},
		{name: "last minute of the window", ent: key(europe1, p1), at: entAt(0, 15, 59), want: accounts.KeyStatus{
			Models: []string{"m1"}, WindowOpen: true, ClosesAt: timePtr(entAt(0, 16, 0)), Lanes: 1, Hours: hoursOf([3]int{8, 16, 1})}},
		{name: "closed: opens tomorrow", ent: key(europe1, p1), at: entAt(0, 16, 0), want: accounts.KeyStatus{
			Models: []string{"m1"}, NextOpensAt: timePtr(entAt(1, 8, 0)), Hours: hoursOf([3]int{8, 16, 1})}},
		{name: "closed: opens later today", ent: key(europe1, p1), at: entAt(0, 7, 59), want: accounts.KeyStatus{
			Models: []string{"m1"}, NextOpensAt: timePtr(entAt(0, 8, 0)), Hours: hoursOf([3]int{8, 16, 1})}},

		{name: "midnight wrap: open before midnight", ent: wrap, at: entAt(0, 22, 15), want: accounts.KeyStatus{
			Models: []string{"m1"}, WindowOpen: true, ClosesAt: timePtr(entAt(1, 8, 0)), Lanes: 1,
			Hours: hoursOf([3]int{0, 8, 2}, [3]int{16, 24, 1})}},
		{name: "midnight wrap: open after midnight", ent: wrap, at: entAt(1, 3, 0), want: accounts.KeyStatus{
			Models: []string{"m1"}, WindowOpen: true, ClosesAt: timePtr(entAt(1, 8, 0)), Lanes: 2,
			Hours: hoursOf([3]int{0, 8, 2}, [3]int{16, 24, 1})}},
		{name: "midnight wrap: closed", ent: wrap, at: entAt(1, 8, 0), want: accounts.KeyStatus{
			Models: []string{"m1"}, NextOpensAt: timePtr(entAt(1, 16, 0)),
			Hours: hoursOf([3]int{0, 8, 2}, [3]int{16, 24, 1})}},

		{name: "combined: lanes of both pools add, consecutive blocks make one window, boost adds none",
			ent: stacked, at: entAt(0, 10, 0), want: accounts.KeyStatus{
				Models: []string{"m1", "m2"}, WindowOpen: true, ClosesAt: timePtr(entAt(1, 0, 0)), Lanes: 3,
				Hours: hoursOf([3]int{8, 16, 3}, [3]int{16, 24, 1})}},
		{name: "combined: the boost's hours are not held", ent: stacked, at: entAt(0, 2, 0), want: accounts.KeyStatus{
			Models: []string{"m1", "m2"}, NextOpensAt: timePtr(entAt(0, 8, 0)),
			Hours: hoursOf([3]int{8, 16, 3}, [3]int{16, 24, 1})}},

		{name: "every hour: never closes", ent: key(allDay, p1), at: entAt(0, 23, 59), want: accounts.KeyStatus{
			Models: []string{"m1"}, WindowOpen: true, Lanes: 3, Hours: hoursOf([3]int{0, 24, 3})}},
		{name: "every hour, not renewing: closes when the period ends", ent: key(allDayEnding, p1), at: entAt(0, 12, 0),
			want: accounts.KeyStatus{Models: []string{"m1"}, WindowOpen: true, ClosesAt: timePtr(entAt(20, 0, 0)), Lanes: 1,
				Hours: hoursOf([3]int{0, 24, 1})}},
		{name: "not renewing: closes when the period ends inside the window", ent: key(endsMidWindow, p1), at: entAt(0, 9, 0),
			want: accounts.KeyStatus{Models: []string{"m1"}, WindowOpen: true, ClosesAt: timePtr(entAt(0, 12, 30)), Lanes: 1,
				Hours: hoursOf([3]int{8, 16, 1})}},
		{name: "not renewing: ends before its hours open again", ent: key(endsBefore, p1), at: entAt(0, 6, 0),
			want: accounts.KeyStatus{Models: []string{"m1"}, Hours: hoursOf([3]int{8, 16, 1})}},

		{name: "no hours: revoked", ent: revoked, at: entAt(0, 9, 0), want: accounts.KeyStatus{Models: []string{}}},
		{name: "no hours: past due", ent: key(pastDue, p1), at: entAt(0, 9, 0), want: accounts.KeyStatus{Models: []string{}}},
		{name: "no hours: pool gone", ent: key(europe1, nil), at: entAt(0, 9, 0), want: accounts.KeyStatus{Models: []string{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.ent(tc.at).Status(tc.at)
			if !slices.Equal(got.Models, tc.want.Models) || got.Models == nil {
				t.Errorf("models = %#v, want %#v", got.Models, tc.want.Models)
			}
			if got.WindowOpen != tc.want.WindowOpen || got.Lanes != tc.want.Lanes || got.LanesInUse != 0 {
				t.Errorf("windowOpen %v, lanes %d, lanesInUse %d; want %v, %d, 0",
					got.WindowOpen, got.Lanes, got.LanesInUse, tc.want.WindowOpen, tc.want.Lanes)
			}
			if !sameTime(got.ClosesAt, tc.want.ClosesAt) {
				t.Errorf("closesAt = %v, want %v", fmtTime(got.ClosesAt), fmtTime(tc.want.ClosesAt))
			}
			if !sameTime(got.NextOpensAt, tc.want.NextOpensAt) {
				t.Errorf("nextOpensAt = %v, want %v", fmtTime(got.NextOpensAt), fmtTime(tc.want.NextOpensAt))
			}
			if got.Hours != tc.want.Hours {
				t.Errorf("hours = %v, want %v", got.Hours, tc.want.Hours)
			}
		})
	}
}

// The status agrees with what the gate admits: open exactly when some
// model admits now, and the window opens when At says it does.
func TestKeyStatusAgreesWithAdmission(t *testing.T) {
	p1 := entPool("p1", "m1")
	sub := entSub("s1", "p1", 2, accounts.BlockAmericas)
	for h := range 24 {
		at := entAt(0, h, 30)
		ent := accounts.ResolveKeyEntitlement(entKey(sub.ID), sub, p1, at)
		st, adm := ent.Status(at), ent.At(at, "m1")
		if st.WindowOpen != (adm.Lanes > 0) || st.Lanes != adm.Lanes {
			t.Errorf("%02d:30: status open %v lanes %d, admission lanes %d", h, st.WindowOpen, st.Lanes, adm.Lanes)
		}
		if !st.WindowOpen && (st.NextOpensAt == nil || !st.NextOpensAt.Equal(adm.NextOpen)) {
			t.Errorf("%02d:30: nextOpensAt %v, admission opens %v", h, fmtTime(st.NextOpensAt), adm.NextOpen)
		}
	}
}

// The JSON shape is fixed by SPEC.md §7: nulls for absent times, 24 hours.
func TestKeyStatusJSON(t *testing.T) {
	sub := entSub("s1", "p1", 1, accounts.BlockEurope)
	at := entAt(0, 9, 0)
	b, err := json.Marshal(accounts.ResolveKeyEntitlement(entKey(sub.ID), sub, entPool("p1", "m1"), at).Status(at))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"models":["m1"],"windowOpen":true,"closesAt":"2032-05-10T16:00:00Z","nextOpensAt":null,"lanes":1,"lanesInUse":0,` +
		`"hours":[0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0]}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	b, _ = json.Marshal((*accounts.Entitlement)(nil).Status(at))
	if !strings.Contains(string(b), `"models":[],"windowOpen":false,"closesAt":null,"nextOpensAt":null`) {
		t.Errorf("nothing held: %s", b)
	}
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "null"
	}
	return t.Format(time.RFC3339)
}
