package accounts_test

import (
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

func TestValidateCombination(t *testing.T) {
	const (
		A  = accounts.BlockAsia
		E  = accounts.BlockEurope
		Am = accounts.BlockAmericas
	)
	sub := func(id, pool string, blocks ...accounts.Block) *accounts.Subscription {
		return &accounts.Subscription{ID: id, PoolID: pool, Status: accounts.SubActive, Quantity: 1, Blocks: blocks}
	}
	subs := map[string]*accounts.Subscription{
		"p1-asia":   sub("p1-asia", "p1", A),
		"p1-eu":     sub("p1-eu", "p1", E),
		"p1-eu2":    sub("p1-eu2", "p1", E),
		"p1-eu-am":  sub("p1-eu-am", "p1", E, Am),
		"p1-all":    sub("p1-all", "p1", A, E, Am),
		"p2-eu":     sub("p2-eu", "p2", E),
		"p2-asia":   sub("p2-asia", "p2", A),
		"p1-asiaEU": sub("p1-asiaEU", "p1", A, E),
	}
	m := func(pairs ...string) []accounts.Member {
		var ms []accounts.Member
		for i := 0; i < len(pairs); i += 2 {
			ms = append(ms, accounts.Member{SubscriptionID: pairs[i], Role: pairs[i+1]})
		}
		return ms
	}
	cases := []struct {
		name    string
		members []accounts.Member
		want    string // "" = valid; else a fragment of the 400 message
	}{
		{"two lanes, one pool", m("p1-eu", "lane", "p1-eu2", "lane"), ""},
		{"lanes across pools", m("p1-eu", "lane", "p2-eu", "lane"), ""},
		{"lanes across pools and blocks", m("p1-asia", "lane", "p2-eu", "lane", "p1-eu-am", "lane"), ""},
		{"boost covered by one lane", m("p1-eu", "lane", "p1-eu2", "boost"), ""},
		{"boost covered by a wider lane", m("p1-all", "lane", "p1-eu", "boost"), ""},
		{"boost covered by two lanes together", m("p1-asia", "lane", "p1-eu", "lane", "p1-asiaEU", "boost"), ""},
		{"several boosts", m("p1-all", "lane", "p1-eu", "boost", "p1-asia", "boost"), ""},
		{"no lane", m("p1-eu", "boost", "p1-eu2", "boost"), "rule 2: at least one member must be a lane"},
		{"boost across pools", m("p1-eu", "lane", "p2-eu", "boost"), "rule 3: boost roles require all members to be in the same pool"},
		{"boost with a lane in another pool", m("p1-eu", "lane", "p1-eu2", "boost", "p2-asia", "lane"), "rule 3"},
		{"boost hours uncovered", m("p1-eu", "lane", "p1-eu-am", "boost"), "rule 4: boost member p1-eu-am covers UTC hours 16-23"},
		{"boost disjoint from lane", m("p1-asia", "lane", "p1-eu", "boost"), "UTC hours 8-15"},
		{"boost not covered by another boost", m("p1-asia", "lane", "p1-all", "boost", "p1-eu", "boost"), "rule 4"},
		{"unknown role", m("p1-eu", "lane", "p1-eu2", "turbo"), `must be lane or boost, not "turbo"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := accounts.ValidateCombination(c.members, subs)
			if c.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			wantStatus(t, err, http.StatusBadRequest, c.want)
		})
	}
	if err := accounts.ValidateCombination(m("ghost", "lane"), subs); err == nil {
		t.Error("a member without its subscription validated")
	}
}

var combinedTokenRE = regexp.MustCompile(`^sk-compat-meta-[A-Za-z0-9_-]{43}$`)

func TestCombinedKeyLifecycle(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, _ := e.user("ada@example.com", "")
		alpha, beta := e.pool("alpha", accounts.PoolActive, 10, false), e.pool("beta", accounts.PoolActive, 10, false)
		euA := e.sub(u, alpha, accounts.SubActive, 2, accounts.BlockEurope)
		allA := e.sub(u, alpha, accounts.SubActive, 1, accounts.BlockAsia, accounts.BlockEurope, accounts.BlockAmericas)
		amB := e.sub(u, beta, accounts.SubActive, 1, accounts.BlockAmericas)
		e.settle()

		created, err := e.svc.CreateCombinedKey(e.ctx, u.ID, []string{euA.ID, allA.ID}, " team ", map[string]string{euA.ID: "boost"})
		if err != nil {
			t.Fatal(err)
		}
		if created.ID == "" || created.Label != "team" || !combinedTokenRE.MatchString(created.Token) || !created.CreatedAt.Equal(e.clock.Now()) {
			t.Errorf("created = %+v", created)
		}
		e.wantPublished(u.ID)
		// Stored sealed, found by hash.
		e.view(func(tx accounts.Tx) error {
			ck, err := tx.GetCombinedKeyByHash(accounts.HashKey(created.Token))
			if err != nil || ck.ID != created.ID {
				t.Fatalf("by hash: %v, %v", ck, err)
			}
			if strings.Contains(string(ck.Ciphertext), strings.TrimPrefix(created.Token, "sk-compat-meta-")) {
				t.Error("ciphertext holds the token")
			}
			return nil
		})

		rows, err := e.svc.ListCombinedKeys(e.ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 {
			t.Fatalf("%d rows", len(rows))
		}
		row := rows[0]
		if row.ID != created.ID || row.Token != created.Token || row.Label != "team" || !row.IsActive ||
			!row.CreatedAt.Equal(created.CreatedAt) || !row.RolesSelectable {
			t.Errorf("row = %+v", row)
		}
		end := euA.CurrentPeriodEnd
		keysMembersEqual(t, row.Members, []accounts.MemberRow{
			{PledgeID: euA.ID, Role: "boost", PoolSlug: "alpha", PledgeLabel: "Model alpha europe x2", PledgeStatus: "active",
				KeyActive: true, Hours: hoursRange(8, 16), CurrentPeriodEnd: &end, WindowOpenNow: true, MaxParallel: 0},
			{PledgeID: allA.ID, Role: "lane", PoolSlug: "alpha", PledgeLabel: "Model alpha asia+europe+americas", PledgeStatus: "active",
				KeyActive: true, Hours: hoursRange(0, 24), CurrentPeriodEnd: &allA.CurrentPeriodEnd, WindowOpenNow: true, MaxParallel: 1},
		})

		// Rule 5: role changes validated as at creation.
		_, err = e.svc.SetMemberRoles(e.ctx, u.ID, created.ID, map[string]string{allA.ID: "boost"})
		wantStatus(t, err, http.StatusBadRequest, "rule 2", "rule 5")
		_, err = e.svc.SetMemberRoles(e.ctx, u.ID, created.ID, map[string]string{allA.ID: "boost", euA.ID: "lane"})
		wantStatus(t, err, http.StatusBadRequest, "rule 4", "rule 5")
		_, err = e.svc.SetMemberRoles(e.ctx, u.ID, created.ID, map[string]string{amB.ID: "lane"})
		wantStatus(t, err, http.StatusBadRequest, "rule 5", "not a member")
		_, err = e.svc.SetMemberRoles(e.ctx, u.ID, created.ID, map[string]string{euA.ID: "parallel"})
		wantStatus(t, err, http.StatusBadRequest, "lane or boost")
		e.settle()
		row, err = e.svc.SetMemberRoles(e.ctx, u.ID, created.ID, map[string]string{euA.ID: "lane"})
		if err != nil {
			t.Fatal(err)
		}
		if row.Members[0].Role != "lane" || row.Members[0].MaxParallel != 2 || row.Members[1].Role != "lane" {
			t.Errorf("after roles: %+v", row.Members)
		}
		e.wantPublished(u.ID)
		// An empty roles object changes nothing.
		if _, err := e.svc.SetMemberRoles(e.ctx, u.ID, created.ID, map[string]string{}); err != nil {
			t.Error(err)
		}

		// Relabel.
		row, err = e.svc.RelabelCombinedKey(e.ctx, u.ID, created.ID, "renamed")
		if err != nil || row.Label != "renamed" || row.Token != created.Token {
			t.Errorf("relabel = %+v, %v", row, err)
		}
		_, err = e.svc.RelabelCombinedKey(e.ctx, u.ID, created.ID, " ")
		wantStatus(t, err, http.StatusBadRequest, "label is required")

		// Rule 6: replace members. euA is retained (lane), allA removed, amB added as lane.
		e.clock.Set(time.Date(2033, 1, 31, 17, 0, 0, 0, time.UTC)) // the start day, americas block
		row, err = e.svc.ReplaceMembers(e.ctx, u.ID, created.ID, []string{euA.ID, amB.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(row.Members) != 2 || row.Members[0].PledgeID != euA.ID || row.Members[0].Role != "lane" ||
			row.Members[1].PledgeID != amB.ID || row.Members[1].Role != "lane" || row.RolesSelectable {
			t.Errorf("after replace: %+v", row)
		}
		if row.Members[0].WindowOpenNow || !row.Members[1].WindowOpenNow || row.Members[1].PoolSlug != "beta" {
			t.Errorf("windows at 17:00: %+v", row.Members)
		}
		// The removed subscription is keyless: it can get a standalone key now.
		if _, err := e.svc.CreateKey(e.ctx, u.ID, allA.ID, ""); err != nil {
			t.Errorf("removed member cannot get a key: %v", err)
		}
		// ...and, keyed, it cannot come back (rule 6).
		_, err = e.svc.ReplaceMembers(e.ctx, u.ID, created.ID, []string{euA.ID, amB.ID, allA.ID})
		wantStatus(t, err, http.StatusBadRequest, "rule 6", allA.ID, "has a key")

		// Rule 7: deleting leaves the subscriptions active and keyless.
		e.settle()
		if err := e.svc.DeleteCombinedKey(e.ctx, u.ID, created.ID); err != nil {
			t.Fatal(err)
		}
		e.wantPublished(u.ID)
		wantStatus(t, e.svc.DeleteCombinedKey(e.ctx, u.ID, created.ID), http.StatusNotFound)
		if rows, _ := e.svc.ListCombinedKeys(e.ctx, u.ID); len(rows) != 0 {
			t.Errorf("%d combined keys left", len(rows))
		}
		e.view(func(tx accounts.Tx) error {
			for _, id := range []string{euA.ID, amB.ID} {
				s, err := tx.GetSubscription(id)
				if err != nil || s.Status != accounts.SubActive {
					t.Errorf("subscription %s after delete: %+v, %v", id, s, err)
				}
				if _, err := tx.GetKeyBySubscription(id); err == nil {
					t.Errorf("subscription %s got a key", id)
				}
				if _, err := tx.GetCombinedKeyBySubscription(id); err == nil {
					t.Errorf("subscription %s still a member", id)
				}
			}
			if _, err := tx.GetCombinedKeyByHash(accounts.HashKey(created.Token)); err == nil {
				t.Error("deleted combined key still found by hash")
			}
			return nil
		})
		if _, err := e.svc.CreateKey(e.ctx, u.ID, euA.ID, ""); err != nil {
			t.Errorf("former member cannot get a key: %v", err)
		}
	})
}

func TestCombinedKeyRules(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, _ := e.user("ada@example.com", "")
		v, _ := e.user("eve@example.com", "")
		alpha, beta := e.pool("alpha", accounts.PoolActive, 10, false), e.pool("beta", accounts.PoolActive, 10, false)
		a1 := e.sub(u, alpha, accounts.SubActive, 1, accounts.BlockEurope)
		a2 := e.sub(u, alpha, accounts.SubActive, 1, accounts.BlockEurope)
		a3 := e.sub(u, alpha, accounts.SubActive, 1, accounts.BlockEurope, accounts.BlockAmericas)
		b1 := e.sub(u, beta, accounts.SubActive, 1, accounts.BlockEurope)
		keyed := e.sub(u, alpha, accounts.SubActive, 1, accounts.BlockAsia)
		if _, err := e.svc.CreateKey(e.ctx, u.ID, keyed.ID, ""); err != nil {
			t.Fatal(err)
		}
		pending := e.sub(u, alpha, accounts.SubPendingKey, 1, accounts.BlockAsia)
		pastDue := e.sub(u, alpha, accounts.SubPastDue, 1, accounts.BlockAsia)
		canceled := e.sub(u, alpha, accounts.SubCanceled, 1, accounts.BlockAsia)
		theirs := e.sub(v, alpha, accounts.SubActive, 1, accounts.BlockAsia)

		cases := []struct {
			name   string
			ids    []string
			roles  map[string]string
			status int
			want   []string
		}{
			{"none", nil, nil, 400, []string{"rule 1: a combined key needs at least 2 subscriptions"}},
			{"one", []string{a1.ID}, nil, 400, []string{"rule 1", "at least 2"}},
			{"duplicate", []string{a1.ID, a1.ID}, nil, 400, []string{"rule 1", a1.ID, "listed twice"}},
			{"empty id", []string{a1.ID, ""}, nil, 400, []string{"empty"}},
			{"keyed", []string{a1.ID, keyed.ID}, nil, 400, []string{"rule 1", keyed.ID, "has a key", "DELETE /api/keys/"}},
			{"pending_key", []string{a1.ID, pending.ID}, nil, 400, []string{"rule 1", "pending_key", "only active"}},
			{"past_due", []string{a1.ID, pastDue.ID}, nil, 400, []string{"rule 1", "past_due"}},
			{"canceled", []string{a1.ID, canceled.ID}, nil, 400, []string{"rule 1", "canceled"}},
			{"no lane", []string{a1.ID, a2.ID}, map[string]string{a1.ID: "boost", a2.ID: "boost"}, 400, []string{"rule 2"}},
			{"boost across pools", []string{a1.ID, b1.ID}, map[string]string{b1.ID: "boost"}, 400, []string{"rule 3"}},
			{"boost uncovered", []string{a1.ID, a3.ID}, map[string]string{a3.ID: "boost"}, 400, []string{"rule 4", a3.ID, "16-23"}},
			{"role for a non-member", []string{a1.ID, a2.ID}, map[string]string{b1.ID: "lane"}, 400, []string{b1.ID, "not in pledgeIds"}},
			{"bad role", []string{a1.ID, a2.ID}, map[string]string{a2.ID: "Boost"}, 400, []string{"lane or boost"}},
			{"unknown subscription", []string{a1.ID, "nope"}, nil, 404, []string{"subscription nope not found"}},
			{"another user's subscription", []string{a1.ID, theirs.ID}, nil, 404, []string{theirs.ID, "not found"}},
		}
		for _, c := range cases {
			_, err := e.svc.CreateCombinedKey(e.ctx, u.ID, c.ids, "", c.roles)
			t.Run(c.name, func(t *testing.T) { wantStatus(t, err, c.status, c.want...) })
		}
		if rows, _ := e.svc.ListCombinedKeys(e.ctx, u.ID); len(rows) != 0 {
			t.Fatalf("a refused creation left %d combined keys", len(rows))
		}

		// Lanes across pools are fine; the default label counts members.
		ck, err := e.svc.CreateCombinedKey(e.ctx, u.ID, []string{a1.ID, b1.ID}, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if ck.Label != "combined key (2 subscriptions)" {
			t.Errorf("default label %q", ck.Label)
		}
		rows, _ := e.svc.ListCombinedKeys(e.ctx, u.ID)
		if rows[0].RolesSelectable {
			t.Error("rolesSelectable with one member per pool")
		}
		// A member of one combined key cannot join another.
		_, err = e.svc.CreateCombinedKey(e.ctx, u.ID, []string{a1.ID, a2.ID}, "", nil)
		wantStatus(t, err, http.StatusBadRequest, "rule 1", a1.ID, "already belongs to combined key "+ck.ID)

		// Replace members: the same rule-1 shape checks, 404s, and rules 2-4 on the result.
		_, err = e.svc.ReplaceMembers(e.ctx, u.ID, ck.ID, []string{a1.ID})
		wantStatus(t, err, http.StatusBadRequest, "rule 1")
		_, err = e.svc.ReplaceMembers(e.ctx, u.ID, ck.ID, []string{a1.ID, b1.ID, b1.ID})
		wantStatus(t, err, http.StatusBadRequest, "listed twice")
		_, err = e.svc.ReplaceMembers(e.ctx, u.ID, ck.ID, []string{a1.ID, theirs.ID})
		wantStatus(t, err, http.StatusNotFound)
		_, err = e.svc.ReplaceMembers(e.ctx, u.ID, ck.ID, []string{a1.ID, pastDue.ID})
		wantStatus(t, err, http.StatusBadRequest, "rule 6", "past_due")
		_, err = e.svc.ReplaceMembers(e.ctx, u.ID, ck.ID, []string{a1.ID, keyed.ID})
		wantStatus(t, err, http.StatusBadRequest, "rule 6", "has a key")

		// Boost, then drop the lane that covered it: rule 2/4 on the new set.
		ck2, err := e.svc.CreateCombinedKey(e.ctx, u.ID, []string{a2.ID, a3.ID}, "", map[string]string{a2.ID: "boost"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.svc.ReplaceMembers(e.ctx, u.ID, ck2.ID, []string{a2.ID, canceled.ID})
		wantStatus(t, err, http.StatusBadRequest, "rule 6", "canceled")
		e.setStatus(pending.ID, accounts.SubActive) // now an active, keyless asia subscription
		_, err = e.svc.ReplaceMembers(e.ctx, u.ID, ck2.ID, []string{a2.ID, pending.ID})
		wantStatus(t, err, http.StatusBadRequest, "rule 4", a2.ID, "8-15")
		row, err := e.svc.ReplaceMembers(e.ctx, u.ID, ck2.ID, []string{a3.ID, a2.ID, pending.ID})
		if err != nil {
			t.Fatal(err)
		}
		if roles := []string{row.Members[0].Role, row.Members[1].Role, row.Members[2].Role}; !reflect.DeepEqual(roles, []string{"lane", "boost", "lane"}) {
			t.Errorf("roles after replace = %v (retained keep theirs, added are lanes)", roles)
		}

		// Other users' combined keys are 404 on every operation.
		_, err = e.svc.SetMemberRoles(e.ctx, v.ID, ck.ID, map[string]string{})
		wantStatus(t, err, http.StatusNotFound, "combined key "+ck.ID+" not found")
		_, err = e.svc.ReplaceMembers(e.ctx, v.ID, ck.ID, []string{theirs.ID, theirs.ID + "x"})
		wantStatus(t, err, http.StatusNotFound)
		_, err = e.svc.RelabelCombinedKey(e.ctx, v.ID, ck.ID, "mine")
		wantStatus(t, err, http.StatusNotFound)
		wantStatus(t, e.svc.DeleteCombinedKey(e.ctx, v.ID, ck.ID), http.StatusNotFound)
		if rows, _ := e.svc.ListCombinedKeys(e.ctx, v.ID); len(rows) != 0 {
			t.Errorf("other user lists %d combined keys", len(rows))
		}
	})
}

func TestCombinedKeyMemberState(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, _ := e.user("ada@example.com", "")
		alpha := e.pool("alpha", accounts.PoolActive, 10, false)
		a := e.sub(u, alpha, accounts.SubActive, 3, accounts.BlockEurope)
		b := e.sub(u, alpha, accounts.SubActive, 1, accounts.BlockAsia)
		ck, err := e.svc.CreateCombinedKey(e.ctx, u.ID, []string{a.ID, b.ID}, "x", nil)
		if err != nil {
			t.Fatal(err)
		}
		member := func() []accounts.MemberRow {
			rows, err := e.svc.ListCombinedKeys(e.ctx, u.ID)
			if err != nil {
				t.Fatal(err)
			}
			return rows[0].Members
		}
		ms := member()
		if !ms[0].KeyActive || !ms[0].WindowOpenNow || ms[0].MaxParallel != 3 || !ms[1].KeyActive || ms[1].WindowOpenNow {
			t.Errorf("at 10:30: %+v", ms)
		}
		// past_due: still a member, contributes nothing.
		e.setStatus(a.ID, accounts.SubPastDue)
		ms = member()
		if ms[0].PledgeStatus != "past_due" || ms[0].KeyActive || ms[0].WindowOpenNow {
			t.Errorf("past_due member: %+v", ms[0])
		}
		// Past the paid period, even an active subscription's window is shut.
		e.setStatus(a.ID, accounts.SubActive)
		e.clock.Set(a.CurrentPeriodEnd.Add(time.Hour))
		ms = member()
		if ms[0].KeyActive || ms[0].WindowOpenNow {
			t.Errorf("member past its period end: %+v", ms[0])
		}
		_ = ck
	})
}

func hoursRange(from, to int) []int {
	var hs []int
	for h := from; h < to; h++ {
		hs = append(hs, h)
	}
	return hs
}

// keysMembersEqual compares member rows field by field.
func keysMembersEqual(t *testing.T, got, want []accounts.MemberRow) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d members, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		endEq := g.CurrentPeriodEnd == nil && w.CurrentPeriodEnd == nil ||
			g.CurrentPeriodEnd != nil && w.CurrentPeriodEnd != nil && g.CurrentPeriodEnd.Equal(*w.CurrentPeriodEnd)
		g.CurrentPeriodEnd, w.CurrentPeriodEnd = nil, nil
		if !endEq || !reflect.DeepEqual(g, w) {
			t.Errorf("member %d\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}
