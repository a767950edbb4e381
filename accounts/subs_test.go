package accounts_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// The whole life of a subscription with a clock the test moves: subscribe,
// renew, a declined renewal (past_due, key suspended), a new card (active,
// key restored, next period paid).
func TestSubscriptionLifecycle(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("alpha", accounts.PoolActive, 2, false)
		u, _ := e.user("ada@example.test", "")

		_, err := e.svc.Subscribe(e.ctx, u.ID, "alpha", accounts.SubscribeRequest{Blocks: []string{"europe"}})
		if ae := wantStatus(t, err, 400); ae.Message != "No payment method found - add a card first" {
			t.Errorf("message %q", ae.Message)
		}
		si, err := e.svc.SetupIntent(e.ctx, u.ID, billing.TestCardVisa)
		e.must(err)
		if si.PaymentMethod != (accounts.PaymentMethodView{ID: "pm_card_visa", Brand: "visa", Last4: "4242"}) || len(si.Recovered) != 0 || len(si.PastDue) != 0 {
			t.Errorf("setup intent %+v", si)
		}

		res := e.subscribe(u, p.ID, 1, "europe")                  // by UUID
		periodEnd := time.Date(2033, 3, 3, 9, 15, 0, 0, time.UTC) // Jan 31 + 1 calendar month
		if res.Status != accounts.SubActive || res.PoolID != p.ID || res.PoolSlug != "alpha" || res.MonthlyPrice != "96" ||
			res.AmountCharged != "96" || res.BillingCycle != "month" || res.CancelAtPeriodEnd || res.Key != nil ||
			res.Quantity != 1 || !slices.Equal(res.Blocks, []accounts.Block{"europe"}) || !res.CurrentPeriodEnd.Equal(periodEnd) ||
			!res.CreatedAt.Equal(envStart) {
			t.Fatalf("subscription %+v", res.SubscriptionView)
		}
		if len(res.Hours) != 8 {
			t.Fatalf("hours %+v", res.Hours)
		}
		for i, h := range res.Hours {
			if h.Hour != 8+i || h.SlotIndex != 0 || h.PricePerDay != "12" {
				t.Errorf("hour %d: %+v", i, h)
			}
		}
		sub := e.getSub(res.ID)
		if sub.AckVia != "api" || sub.TermsVersion != "" || !sub.CurrentPeriodStart.Equal(envStart) {
			t.Errorf("stored %+v", sub)
		}
		cs := e.charges(res.ID)
		if len(cs) != 1 || cs[0].Status != accounts.ChargeSucceeded || cs[0].Amount != "96" || !cs[0].PeriodStart.Equal(envStart) || cs[0].ProcessorRef == "" || cs[0].UserID != u.ID {
			t.Fatalf("charges %+v", cs)
		}
		if l := e.chargesFor(res.ID); len(l) != 1 || l[0].Amount != "96" || l[0].Ref != cs[0].ProcessorRef {
			t.Fatalf("ledger %+v", l)
		}

		row, err := e.svc.CreateKey(e.ctx, u.ID, res.ID, "main")
		e.must(err)
		if a := e.entitlement(row.APIKey).At(e.clock.Now(), "model-alpha"); a.Lanes != 1 || a.PoolID != p.ID {
			t.Fatalf("fresh key: %+v", a)
		}
		if rep := e.lifecycle(); rep != (accounts.LifecycleReport{}) {
			t.Errorf("nothing is due yet: %+v", rep)
		}

		// Renewal at the period end.
		inv := e.invalidationsOf(u.ID, 0)
		e.clock.Set(periodEnd)
		if rep := e.lifecycle(); rep.Renewed != 1 || rep.Acted() && rep.Renewed+rep.PastDue+rep.Canceled+rep.Expired+rep.Failed != 1 {
			t.Fatalf("renewal pass %+v", rep)
		}
		sub = e.getSub(res.ID)
		next := time.Date(2033, 4, 3, 9, 15, 0, 0, time.UTC)
		if sub.Status != accounts.SubActive || !sub.CurrentPeriodStart.Equal(periodEnd) || !sub.CurrentPeriodEnd.Equal(next) {
			t.Fatalf("after renewal %s %v-%v", sub.Status, sub.CurrentPeriodStart, sub.CurrentPeriodEnd)
		}
		if cs := e.charges(res.ID); len(cs) != 2 || cs[1].Status != accounts.ChargeSucceeded || !cs[1].PeriodStart.Equal(periodEnd) || cs[1].Amount != "96" {
			t.Fatalf("charges after renewal %+v", cs)
		}
		if n := e.invalidationsOf(u.ID, inv+1); n <= inv {
			t.Error("renewal published no invalidation")
		}
		if rep := e.lifecycle(); rep != (accounts.LifecycleReport{}) {
			t.Errorf("second pass at the same time: %+v", rep)
		}

		// The card now declines: the next renewal makes it past_due.
		_, err = e.svc.SetupIntent(e.ctx, u.ID, billing.TestCardDeclined)
		e.must(err)
		e.clock.Set(next)
		if rep := e.lifecycle(); rep.PastDue != 1 || rep.Renewed != 0 {
			t.Fatalf("declined renewal pass %+v", rep)
		}
		sub = e.getSub(res.ID)
		if sub.Status != accounts.SubPastDue || !sub.PastDueSince.Equal(next) || !sub.CurrentPeriodEnd.Equal(next) {
			t.Fatalf("after decline %s since %v end %v", sub.Status, sub.PastDueSince, sub.CurrentPeriodEnd)
		}
		if cs := e.charges(res.ID); len(cs) != 3 || cs[2].Status != accounts.ChargeFailed || !cs[2].PeriodStart.Equal(next) {
			t.Fatalf("charges after decline %+v", cs)
		}
		ent := e.entitlement(row.APIKey)
		if ent.DeniedStatus != 403 || !strings.Contains(ent.Denied, "payment past due") {
			t.Fatalf("past-due key: %+v", ent)
		}
		keys, err := e.svc.ListKeys(e.ctx, u.ID)
		e.must(err)
		if len(keys) != 1 || !keys[0].IsActive || keys[0].SubscriptionStatus != accounts.SubPastDue {
			t.Errorf("the key flag stays as the user set it: %+v", keys)
		}
		bs, err := e.svc.BillingStatus(e.ctx, u.ID)
		e.must(err)
		if !bs.HasPaymentMethod || bs.PaymentMethod == nil || bs.PaymentMethod.Last4 != "0341" || bs.Processor != "test" || !slices.Equal(bs.PastDue, []string{res.ID}) {
			t.Errorf("billing status %+v", bs)
		}

		// Within the grace period nothing more happens, and no charge is retried.
		calls := e.proc.Calls()
		e.clock.Advance(time.Hour)
		if rep := e.lifecycle(); rep.Skipped != 1 || rep.Acted() {
			t.Errorf("pass in grace %+v", rep)
		}
		if e.proc.Calls() != calls {
			t.Error("the worker charged a past-due subscription again without a new card")
		}
		// Saving the same failing card again retries and fails again.
		si, err = e.svc.SetupIntent(e.ctx, u.ID, billing.TestCardDeclined)
		e.must(err)
		if len(si.Recovered) != 0 || !slices.Equal(si.PastDue, []string{res.ID}) {
			t.Errorf("retry with the failing card %+v", si)
		}

		// A working card recovers it at once: active, next period paid.
		inv = e.invalidationsOf(u.ID, 0)
		si, err = e.svc.SetupIntent(e.ctx, u.ID, billing.TestCardMastercard)
		e.must(err)
		if !slices.Equal(si.Recovered, []string{res.ID}) || len(si.PastDue) != 0 || si.PaymentMethod.Brand != "mastercard" {
			t.Fatalf("recovery %+v", si)
		}
		sub = e.getSub(res.ID)
		if sub.Status != accounts.SubActive || !sub.PastDueSince.IsZero() || !sub.CurrentPeriodStart.Equal(next) ||
			!sub.CurrentPeriodEnd.Equal(time.Date(2033, 5, 3, 9, 15, 0, 0, time.UTC)) {
			t.Fatalf("after recovery %s %v-%v", sub.Status, sub.CurrentPeriodStart, sub.CurrentPeriodEnd)
		}
		if cs := e.charges(res.ID); len(cs) != 3 || cs[2].Status != accounts.ChargeSucceeded || cs[2].ProcessorRef == "" {
			t.Fatalf("charges after recovery %+v", cs)
		}
		if n := e.invalidationsOf(u.ID, inv+1); n <= inv {
			t.Error("recovery published no invalidation")
		}
		if a := e.entitlement(row.APIKey).At(e.clock.Now(), "model-alpha"); a.Lanes != 1 {
			t.Errorf("restored key: %+v", a)
		}
		bs, err = e.svc.BillingStatus(e.ctx, u.ID)
		e.must(err)
		if len(bs.PastDue) != 0 {
			t.Errorf("still past due: %+v", bs)
		}
		// Every successful charge is in the ledger, none refunded.
		for _, c := range e.chargesFor(res.ID) {
			if c.Refunded {
				t.Errorf("refunded %+v", c)
			}
		}
		if n := len(e.chargesFor(res.ID)); n != 3 {
			t.Errorf("%d successful charges, want 3 (subscribe, renewal, recovery)", n)
		}
	})
}

func TestCancelAtPeriodEnd(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("solo", accounts.PoolActive, 1, false)
		u, _ := e.user("bea@example.test", billing.TestCardVisa)
		other, _ := e.user("cy@example.test", billing.TestCardVisa)

		_, err := e.svc.CancelPledge(e.ctx, u.ID, "solo")
		wantStatus(t, err, 404, "no subscription")

		res := e.subscribe(u, "solo", 1, "europe")
		row, err := e.svc.CreateKey(e.ctx, u.ID, res.ID, "")
		e.must(err)
		_, err = e.svc.Subscribe(e.ctx, other.ID, "solo", accounts.SubscribeRequest{Blocks: []string{"europe"}})
		wantStatus(t, err, 409, "sold out", "08:00", "15:00")

		inv := e.invalidationsOf(u.ID, 0)
		cr, err := e.svc.CancelPledge(e.ctx, u.ID, p.Slug)
		e.must(err)
		if !cr.Canceled || cr.SubscriptionID != res.ID || !cr.CurrentPeriodEnd.Equal(res.CurrentPeriodEnd) {
			t.Fatalf("cancel %+v", cr)
		}
		if e.invalidationsOf(u.ID, inv+1) <= inv {
			t.Error("cancel published no invalidation")
		}
		if sub := e.getSub(res.ID); !sub.CancelAtPeriodEnd || sub.Status != accounts.SubActive {
			t.Fatalf("after cancel %+v", sub)
		}
		_, err = e.svc.CancelPledge(e.ctx, u.ID, "solo")
		wantStatus(t, err, 404)
		// Another user's cancellation does not touch it.
		_, err = e.svc.CancelPledge(e.ctx, other.ID, "solo")
		wantStatus(t, err, 404)

		// The key works until the period end; nothing is charged.
		e.clock.Set(res.CurrentPeriodEnd.Add(-time.Second))
		if rep := e.lifecycle(); rep != (accounts.LifecycleReport{}) {
			t.Errorf("before the end: %+v", rep)
		}
		ent := e.entitlement(row.APIKey)
		if a := ent.At(e.clock.Now(), "model-solo"); a.Lanes != 1 {
			t.Errorf("last second: %+v", a)
		}
		if g := ent.Grants[0]; g.Renews || !g.Until.Equal(res.CurrentPeriodEnd) {
			t.Errorf("grant %+v", g)
		}

		e.clock.Set(res.CurrentPeriodEnd)
		calls := e.proc.Calls()
		if rep := e.lifecycle(); rep.Canceled != 1 || rep.Renewed != 0 {
			t.Fatalf("period end: %+v", rep)
		}
		if e.proc.Calls() != calls {
			t.Error("a canceled subscription was charged")
		}
		sub := e.getSub(res.ID)
		if sub.Status != accounts.SubCanceled || len(sub.Seats) != 0 {
			t.Fatalf("after the end: %s, %d seats", sub.Status, len(sub.Seats))
		}
		if n := len(e.taken(p.ID)); n != 0 {
			t.Errorf("%d seats still held", n)
		}
		keys, err := e.svc.ListKeys(e.ctx, u.ID)
		e.must(err)
		if len(keys) != 1 || keys[0].IsActive || keys[0].SubscriptionStatus != accounts.SubCanceled {
			t.Errorf("key after the end %+v", keys)
		}
		if ent := e.entitlement(row.APIKey); ent.DeniedStatus != 401 {
			t.Errorf("canceled key: %+v", ent)
		}
		if rep := e.lifecycle(); rep != (accounts.LifecycleReport{}) {
			t.Errorf("pass after cancel: %+v", rep)
		}
		_, err = e.svc.CancelPledge(e.ctx, u.ID, "solo")
		wantStatus(t, err, 404)

		// The seats are free again.
		res2 := e.subscribe(other, "solo", 1, "europe")
		if res2.Hours[0].SlotIndex != 0 {
			t.Errorf("freed seat not reused: %+v", res2.Hours[0])
		}
		// The most recent of several is the one canceled.
		e.clock.Advance(time.Second)
		res3 := e.subscribe(other, "solo", 1, "asia")
		cr, err = e.svc.CancelPledge(e.ctx, other.ID, "solo")
		e.must(err)
		if cr.SubscriptionID != res3.ID {
			t.Errorf("canceled %s, want the most recent %s", cr.SubscriptionID, res3.ID)
		}
		cr, err = e.svc.CancelPledge(e.ctx, other.ID, "solo")
		e.must(err)
		if cr.SubscriptionID != res2.ID {
			t.Errorf("second cancel took %s, want %s", cr.SubscriptionID, res2.ID)
		}
	})
}

func TestPastDueGraceExpiry(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("gr", accounts.PoolActive, 3, false)
		u, _ := e.user("dee@example.test", billing.TestCardVisa)
		res := e.subscribe(u, "gr", 2, "asia", "americas")
		row, err := e.svc.CreateKey(e.ctx, u.ID, res.ID, "")
		e.must(err)
		_, err = e.svc.SetupIntent(e.ctx, u.ID, billing.TestCardDeclined)
		e.must(err)

		e.clock.Set(res.CurrentPeriodEnd)
		if rep := e.lifecycle(); rep.PastDue != 1 {
			t.Fatalf("%+v", rep)
		}
		e.clock.Set(res.CurrentPeriodEnd.Add(7*24*time.Hour - time.Minute))
		if rep := e.lifecycle(); rep.Acted() {
			t.Fatalf("inside the grace period: %+v", rep)
		}
		if s := e.getSub(res.ID); s.Status != accounts.SubPastDue || len(s.Seats) != 32 {
			t.Fatalf("%s with %d seats", s.Status, len(s.Seats))
		}
		e.clock.Set(res.CurrentPeriodEnd.Add(7 * 24 * time.Hour))
		if rep := e.lifecycle(); rep.Expired != 1 {
			t.Fatalf("grace over: %+v", rep)
		}
		s := e.getSub(res.ID)
		if s.Status != accounts.SubCanceled || len(s.Seats) != 0 {
			t.Fatalf("after grace %s, %d seats", s.Status, len(s.Seats))
		}
		if n := len(e.taken(p.ID)); n != 0 {
			t.Errorf("%d seats held", n)
		}
		if ent := e.entitlement(row.APIKey); ent.DeniedStatus != 401 {
			t.Errorf("entitlement %+v", ent)
		}
		// A card saved afterwards recovers nothing.
		si, err := e.svc.SetupIntent(e.ctx, u.ID, billing.TestCardVisa)
		e.must(err)
		if len(si.Recovered) != 0 || len(si.PastDue) != 0 {
			t.Errorf("%+v", si)
		}
		if e.getSub(res.ID).Status != accounts.SubCanceled {
			t.Error("a canceled subscription came back")
		}
	})
}

func TestSubscribeValidation(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.pool("alpha", accounts.PoolActive, 2, false)
		e.pool("fund", accounts.PoolFunding, 2, false)
		e.pool("paused", accounts.PoolPaused, 2, false)
		e.pool("hidden", accounts.PoolDraft, 2, false)
		euOnly := e.pool("eu", accounts.PoolActive, 2, false)
		euOnly.BlockPrices = map[accounts.Block]string{accounts.BlockEurope: "50"}
		e.must(st.Update(e.ctx, func(tx accounts.Tx) error { return tx.UpsertPool(euOnly) }))
		u, _ := e.user("eve@example.test", billing.TestCardVisa)

		q := func(n int) *int { return &n }
		cases := []struct {
			name   string
			pool   string
			req    accounts.SubscribeRequest
			status int
			frags  []string
		}{
			{"no blocks", "alpha", accounts.SubscribeRequest{}, 400, []string{"blocks is required"}},
			{"empty blocks", "alpha", accounts.SubscribeRequest{Blocks: []string{}}, 400, []string{"blocks is required"}},
			{"unknown block", "alpha", accounts.SubscribeRequest{Blocks: []string{"mars"}}, 400, []string{`unknown block "mars"`, "asia, europe or americas"}},
			{"duplicate block", "alpha", accounts.SubscribeRequest{Blocks: []string{"europe", "asia", "europe"}}, 400, []string{`"europe" is listed twice`}},
			{"block not sold", "eu", accounts.SubscribeRequest{Blocks: []string{"asia"}}, 400, []string{"does not sell the asia block", "it sells europe"}},
			{"quantity 0", "alpha", accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: q(0)}, 400, []string{"between 1 and 20", "got 0"}},
			{"quantity 21", "alpha", accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: q(21)}, 400, []string{"between 1 and 20"}},
			{"negative quantity", "alpha", accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: q(-1)}, 400, []string{"between 1 and 20"}},
			{"billing cycle", "alpha", accounts.SubscribeRequest{Blocks: []string{"asia"}, BillingCycle: "week"}, 400, []string{`"month" or "year"`, `"week"`}},
			{"stale terms", "alpha", accounts.SubscribeRequest{Blocks: []string{"asia"}, Acknowledgment: &accounts.Acknowledgment{Version: "2020-01"}}, 409, []string{"2020-01", envTerms, "/api/pools/disclosure"}},
			{"empty terms version", "alpha", accounts.SubscribeRequest{Blocks: []string{"asia"}, Acknowledgment: &accounts.Acknowledgment{}}, 409, []string{envTerms}},
			{"paused pool", "paused", accounts.SubscribeRequest{Blocks: []string{"asia"}}, 409, []string{"paused", "no new subscriptions or pledges", "keep working"}},
			{"draft pool", "hidden", accounts.SubscribeRequest{Blocks: []string{"asia"}}, 404, []string{"hidden"}},
			{"unknown pool", "nope", accounts.SubscribeRequest{Blocks: []string{"asia"}}, 404, []string{"nope"}},
			{"too many seats", "alpha", accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: q(3)}, 409, []string{"sold out", "00:00", "07:00"}},
		}
		calls := e.proc.Calls()
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				_, err := e.svc.Subscribe(e.ctx, u.ID, c.pool, c.req)
				ae := wantStatus(t, err, c.status, c.frags...)
				if strings.HasPrefix(c.name, "stale") || strings.HasPrefix(c.name, "empty terms") {
					if d, ok := ae.Data.(accounts.TermsVersionData); !ok || d.Version != envTerms {
						t.Errorf("data %#v, want the current version", ae.Data)
					}
				}
			})
		}
		if e.proc.Calls() != calls || len(e.userSubs(u.ID)) != 0 {
			t.Fatal("a refused subscription charged or created something")
		}

		// The current terms, a yearly cycle, two blocks, two seats.
		res, err := e.svc.Subscribe(e.ctx, u.ID, "alpha", accounts.SubscribeRequest{
			Blocks: []string{"americas", "europe"}, Quantity: q(2), BillingCycle: "year",
			Acknowledgment: &accounts.Acknowledgment{Version: envTerms},
		})
		e.must(err)
		if res.MonthlyPrice != "432" || res.AmountCharged != "4406.4" || res.BillingCycle != "year" ||
			!res.CurrentPeriodEnd.Equal(envStart.AddDate(1, 0, 0)) || !slices.Equal(res.Blocks, []accounts.Block{"europe", "americas"}) || len(res.Hours) != 32 {
			t.Fatalf("yearly %+v", res.SubscriptionView)
		}
		for _, h := range res.Hours {
			want := "12"
			if h.Hour >= 16 {
				want = "15"
			}
			if h.PricePerDay != want || h.SlotIndex > 1 {
				t.Errorf("seat %+v", h)
			}
		}
		if s := e.getSub(res.ID); s.AckVia != "terms" || s.TermsVersion != envTerms {
			t.Errorf("acknowledgment recorded as %q %q", s.AckVia, s.TermsVersion)
		}
		if l := e.chargesFor(res.ID); len(l) != 1 || l[0].Amount != "4406.4" {
			t.Errorf("ledger %+v", l)
		}
		// Europe is now sold out (2 seats), asia is not.
		other, _ := e.user("fay@example.test", billing.TestCardVisa)
		_, err = e.svc.Subscribe(e.ctx, other.ID, "alpha", accounts.SubscribeRequest{Blocks: []string{"asia", "europe"}})
		wantStatus(t, err, 409, "sold out", "08:00")
		if s := e.subscribe(other, "alpha", 1, "asia"); s.Hours[0].SlotIndex != 0 {
			t.Errorf("asia seat %+v", s.Hours[0])
		}
	})
}

func TestSubscribeDeclinedCreatesNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("alpha", accounts.PoolActive, 2, false)
		u, _ := e.user("gil@example.test", billing.TestCardDeclined)
		_, err := e.svc.Subscribe(e.ctx, u.ID, "alpha", accounts.SubscribeRequest{Blocks: []string{"europe"}})
		wantStatus(t, err, 402, "declined", "nothing was created", "setup-intent")
		if subs := e.userSubs(u.ID); len(subs) != 0 {
			t.Errorf("subscriptions after a decline: %+v", subs)
		}
		if n := len(e.taken(p.ID)); n != 0 {
			t.Errorf("%d seats held after a decline", n)
		}
		if l := e.proc.Ledger(); len(l) != 0 {
			t.Errorf("ledger %+v", l)
		}
		bs, err := e.svc.BillingStatus(e.ctx, u.ID)
		e.must(err)
		if len(bs.PastDue) != 0 {
			t.Errorf("status %+v", bs)
		}
	})
}

func TestManualProvisioningAndOperator(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.pool("hand", accounts.PoolActive, 2, true)
		u, _ := e.user("hal@example.test", billing.TestCardVisa)
		res := e.subscribe(u, "hand", 1, "europe")
		if res.Status != accounts.SubPendingKey || res.Key != nil {
			t.Fatalf("manual pool subscription %+v", res.SubscriptionView)
		}
		_, err := e.svc.CreateKey(e.ctx, u.ID, res.ID, "")
		wantStatus(t, err, 409)
		// A pending_key subscription cannot be marked failed, nor renewed.
		_, err = e.svc.PaymentFailed(e.ctx, res.ID)
		wantStatus(t, err, 409, "pending_key")

		inv := e.invalidationsOf(u.ID, 0)
		d, err := e.svc.DeliverKey(e.ctx, res.ID)
		e.must(err)
		if d.Subscription.Status != accounts.SubActive || d.Subscription.Key == nil || d.Subscription.Key.ID != d.Key.ID ||
			!strings.HasPrefix(d.Key.APIKey, "sk_pool_") || d.Key.APIKey != d.Subscription.Key.APIKey || !d.Key.IsActive || !d.NoticeSent {
			t.Fatalf("delivery %+v", d)
		}
		if got := e.notifier.Notices(); !slices.Equal(got, []string{res.ID}) {
			t.Errorf("notices %v", got)
		}
		if e.invalidationsOf(u.ID, inv+1) <= inv {
			t.Error("delivery published no invalidation")
		}
		if a := e.entitlement(d.Key.APIKey).At(e.clock.Now(), "model-hand"); a.Lanes != 1 {
			t.Errorf("delivered key: %+v", a)
		}
		_, err = e.svc.DeliverKey(e.ctx, res.ID)
		wantStatus(t, err, 409, "active")
		_, err = e.svc.DeliverKey(e.ctx, "5ab5c0de-dead-4000-8000-000000000000")
		wantStatus(t, err, 404)

		// Marking the payment failed suspends the key.
		pf, err := e.svc.PaymentFailed(e.ctx, res.ID)
		e.must(err)
		if pf.Subscription.Status != accounts.SubPastDue || pf.Subscription.Key == nil || !pf.Subscription.Key.IsActive {
			t.Fatalf("payment failed %+v", pf.Subscription)
		}
		if ent := e.entitlement(d.Key.APIKey); ent.DeniedStatus != 403 {
			t.Errorf("suspended key %+v", ent)
		}
		if cs := e.charges(res.ID); len(cs) != 1 || cs[0].Status != accounts.ChargeFailed {
			t.Errorf("charges %+v", cs)
		}
		_, err = e.svc.PaymentFailed(e.ctx, res.ID)
		wantStatus(t, err, 409, "past_due")
		_, err = e.svc.PaymentFailed(e.ctx, "5ab5c0de-dead-4000-8000-000000000000")
		wantStatus(t, err, 404)

		// A new card pays the current period again; the period stays.
		si, err := e.svc.SetupIntent(e.ctx, u.ID, billing.TestCardMastercard)
		e.must(err)
		if !slices.Equal(si.Recovered, []string{res.ID}) {
			t.Fatalf("recovery %+v", si)
		}
		s := e.getSub(res.ID)
		if s.Status != accounts.SubActive || !s.CurrentPeriodEnd.Equal(res.CurrentPeriodEnd) {
			t.Errorf("after recovery %s until %v", s.Status, s.CurrentPeriodEnd)
		}
		if a := e.entitlement(d.Key.APIKey).At(e.clock.Now(), "model-hand"); a.Lanes != 1 {
			t.Errorf("restored key: %+v", a)
		}

		// A failing notice does not undo the delivery.
		e.notifier.fail = true
		res2 := e.subscribe(u, "hand", 1, "asia")
		d2, err := e.svc.DeliverKey(e.ctx, res2.ID)
		e.must(err)
		if d2.NoticeSent || d2.Subscription.Status != accounts.SubActive {
			t.Errorf("delivery with a failing notifier %+v", d2)
		}
	})
}

func TestMySubscriptionsAndKeys(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("alpha", accounts.PoolActive, 3, false)
		e.pool("beta", accounts.PoolActive, 3, false)
		u, _ := e.user("ida@example.test", billing.TestCardVisa)
		other, _ := e.user("jo@example.test", billing.TestCardVisa)
		a1 := e.subscribe(u, "alpha", 1, "asia")
		e.clock.Advance(time.Second)
		a2 := e.subscribe(u, "alpha", 2, "europe")
		e.subscribe(u, "beta", 1, "asia")
		e.subscribe(other, "alpha", 1, "asia")
		row, err := e.svc.CreateKey(e.ctx, u.ID, a2.ID, "second")
		e.must(err)

		subs, err := e.svc.MySubscriptions(e.ctx, u.ID, p.ID)
		e.must(err)
		if len(subs) != 2 || subs[0].ID != a1.ID || subs[1].ID != a2.ID {
			t.Fatalf("my subscriptions %+v", subs)
		}
		if subs[0].Key != nil || subs[1].Key == nil || subs[1].Key.ID != row.ID || subs[1].Key.APIKey != row.APIKey || !subs[1].Key.IsActive {
			t.Errorf("keys %+v %+v", subs[0].Key, subs[1].Key)
		}
		if subs[1].MonthlyPrice != "192" || len(subs[1].Hours) != 16 || subs[1].Hours[0] != (accounts.SeatView{Hour: 8, SlotIndex: 0, PricePerDay: "12"}) ||
			subs[1].Hours[1] != (accounts.SeatView{Hour: 8, SlotIndex: 1, PricePerDay: "12"}) {
			t.Errorf("second subscription %+v", subs[1])
		}
		if subs[0].Hours[0].SlotIndex != 0 {
			t.Errorf("first %+v", subs[0].Hours[0])
		}
		keys, err := e.svc.MyKeys(e.ctx, u.ID, "alpha")
		e.must(err)
		if len(keys) != 1 || keys[0].ID != row.ID || keys[0].APIKey != row.APIKey || keys[0].SubscriptionID != a2.ID || keys[0].KeyPlan != "pool" {
			t.Errorf("my keys %+v", keys)
		}
		if keys, err := e.svc.MyKeys(e.ctx, u.ID, "beta"); err != nil || len(keys) != 0 {
			t.Errorf("beta keys %+v %v", keys, err)
		}
		if subs, err := e.svc.MySubscriptions(e.ctx, other.ID, "alpha"); err != nil || len(subs) != 1 {
			t.Errorf("other's %+v %v", subs, err)
		}
		_, err = e.svc.MySubscriptions(e.ctx, u.ID, "nope")
		wantStatus(t, err, 404)
		_, err = e.svc.MyKeys(e.ctx, u.ID, "nope")
		wantStatus(t, err, 404)
	})
}

func TestPoolsView(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("zeta", accounts.PoolActive, 2, true)
		e.pool("alpha", accounts.PoolActive, 1, false)
		e.pool("fund", accounts.PoolFunding, 1, false)
		e.pool("hidden", accounts.PoolDraft, 1, false)
		pools, err := e.svc.ListPools(e.ctx)
		e.must(err)
		// Funding pools are listed with their figures, drafts never.
		if len(pools) != 3 || pools[0].Slug != "alpha" || pools[1].Slug != "fund" || pools[2].Slug != "zeta" {
			t.Fatalf("pools %+v", pools)
		}
		z := pools[2]
		if z.ID != p.ID || z.ModelID != "model-zeta" || z.ModelName != "Model zeta" || z.Status != "active" || z.TotalSlots != 48 ||
			z.SeatsPerHour != 2 || z.MinPricePerDay != "80" || !z.ManualProvisioning || z.AnnualDiscount != "0.15" || len(z.Blocks) != 3 ||
			z.Blocks[1] != (accounts.BlockView{Block: "europe", StartHour: 8, EndHour: 15, MonthlyPrice: "96", PricePerDay: "12"}) {
			t.Errorf("pool %+v", z)
		}
		u, _ := e.user("kai@example.test", billing.TestCardVisa)
		e.subscribe(u, "zeta", 1, "americas")
		for _, id := range []string{p.ID, "zeta"} {
			d, err := e.svc.GetPool(e.ctx, id)
			e.must(err)
			if len(d.HourSlots) != 48 || d.ID != p.ID {
				t.Fatalf("detail %d slots", len(d.HourSlots))
			}
			taken := 0
			for _, s := range d.HourSlots {
				if s.Status == accounts.SlotTaken {
					taken++
					if s.Hour < 16 || s.SlotIndex != 0 || s.PricePerDay != "15" {
						t.Errorf("taken slot %+v", s)
					}
				} else if s.Status != accounts.SlotAvailable {
					t.Errorf("slot status %q", s.Status)
				}
			}
			if taken != 8 || d.HourSlots[0].Hour != 0 || d.HourSlots[1].SlotIndex != 1 || d.HourSlots[0].ID == d.HourSlots[1].ID {
				t.Errorf("%d taken; first %+v %+v", taken, d.HourSlots[0], d.HourSlots[1])
			}
		}
		if d, err := e.svc.GetPool(e.ctx, "fund"); err != nil || d.Status != "funding" {
			t.Errorf("funding detail %v", err)
		}
		_, err = e.svc.GetPool(e.ctx, "hidden")
		wantStatus(t, err, 404)
		terms := e.svc.Terms()
		if terms.Version != envTerms || len(terms.Bullets) == 0 || terms.CheckboxLabel == "" || !strings.HasPrefix(terms.TermsURL, "/") {
			t.Errorf("terms %+v", terms)
		}
	})
}

// Many users race for few seats: never oversold, every loser refunded.
func TestConcurrentSubscribeNeverOversells(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		const seats, racers = 3, 12
		p := e.pool("race", accounts.PoolActive, seats, false)
		users := make([]*accounts.User, racers)
		for i := range users {
			users[i], _ = e.user(envID()+"@example.test", billing.TestCardVisa)
		}
		type outcome struct {
			res *accounts.SubscribeResult
			q   int
			err error
		}
		out := make([]outcome, racers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range users {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				q := 1 + i%2
				<-start
				res, err := e.svc.Subscribe(context.Background(), users[i].ID, "race", accounts.SubscribeRequest{Blocks: []string{"europe", "americas"}, Quantity: &q})
				out[i] = outcome{res, q, err}
			}(i)
		}
		close(start)
		wg.Wait()

		held, won := 0, 0
		for i, o := range out {
			if o.err != nil {
				var ae *accounts.Error
				if !errors.As(o.err, &ae) || ae.Status != 409 {
					t.Errorf("racer %d: %v, want a 409 sold out", i, o.err)
				}
				continue
			}
			won++
			held += o.q
		}
		if held > seats || won == 0 {
			t.Fatalf("%d winners hold %d seats per hour of %d", won, held, seats)
		}
		taken := e.taken(p.ID)
		if len(taken) != held*16 {
			t.Errorf("%d seats taken, want %d", len(taken), held*16)
		}
		for st, subID := range taken {
			if st.SlotIndex >= seats {
				t.Errorf("seat %+v beyond the pool's %d", st, seats)
			}
			if !slices.ContainsFunc(out, func(o outcome) bool { return o.res != nil && o.res.ID == subID }) {
				t.Errorf("seat %+v held by %s, which no winner has", st, subID)
			}
		}
		// Money: each winner paid once; every other charge was refunded.
		kept := 0
		for _, c := range e.proc.Ledger() {
			if !c.Refunded {
				kept++
			}
		}
		if kept != won {
			t.Errorf("%d charges kept for %d winners", kept, won)
		}
		for _, o := range out {
			if o.res != nil && len(e.charges(o.res.ID)) != 1 {
				t.Errorf("subscription %s has %d charge records", o.res.ID, len(e.charges(o.res.ID)))
			}
		}
	})
}
