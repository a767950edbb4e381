package accounts_test

import (
	"testing"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// What a subscription pays at renewal is fixed when it is bought: a reload
// that changes the pool's prices or annual discount (UpsertPool, as
// provisioning does) changes nothing for it, yearly or monthly; a
// subscription stored before the amount was kept renews at what its first
// charge says.
func TestRenewalChargesWhatWasBought(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("fixed", accounts.PoolActive, 3, false) // asia 80, europe 96, 0.15 off yearly
		u, _ := e.user("fixed@example.com", billing.TestCardVisa)
		q := 1
		yearly, err := e.svc.Subscribe(e.ctx, u.ID, p.Slug, accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: &q, BillingCycle: accounts.CycleYear})
		e.must(err)
		monthly := e.subscribe(u, p.Slug, 1, "europe")
		legacy := e.subscribe(u, p.Slug, 1, "americas")
		if yearly.AmountCharged != "816" || monthly.AmountCharged != "96" || legacy.AmountCharged != "120" {
			t.Fatalf("charged %s, %s, %s; want 816 (80×12×0.85), 96, 120", yearly.AmountCharged, monthly.AmountCharged, legacy.AmountCharged)
		}
		// A subscription from before the amount was kept.
		e.update(func(tx accounts.Tx) error {
			sub, err := tx.GetSubscription(legacy.ID)
			if err != nil {
				return err
			}
			sub.PeriodAmount = ""
			return tx.UpdateSubscription(sub)
		})

		// The reload: every price and the discount change.
		p.AnnualDiscount = "0.5"
		p.BlockPrices = map[accounts.Block]string{accounts.BlockAsia: "10", accounts.BlockEurope: "10", accounts.BlockAmericas: "10"}
		e.update(func(tx accounts.Tx) error { return tx.UpsertPool(p) })

		// The monthly ones renew first, the yearly one a year on (by then
		// the monthly ones have renewed again: only its last charge counts).
		for _, c := range []struct {
			id, want string
		}{{monthly.ID, "96"}, {legacy.ID, "120"}, {yearly.ID, "816"}} {
			sub := e.getSub(c.id)
			e.clock.Set(sub.CurrentPeriodEnd)
			e.lifecycle()
			charges := e.charges(c.id)
			last := charges[len(charges)-1]
			if len(charges) < 2 || !last.PeriodStart.Equal(sub.CurrentPeriodEnd) || last.Status != accounts.ChargeSucceeded {
				t.Fatalf("subscription %s: last charge %+v, want its renewal from %s", c.id, last, sub.CurrentPeriodEnd)
			}
			if last.Amount != c.want {
				t.Errorf("subscription %s renewed at %s after the reload, want %s (what it was bought at)", c.id, last.Amount, c.want)
			}
		}
	})
}

// A yearly subscription stored before the amount was kept renews at what
// its first succeeded charge paid, when that is a year's price of its
// monthly price; without one it can only take today's annual discount.
func TestRenewalOfYearlySubscriptionsStoredBefore(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("before", accounts.PoolActive, 3, false) // asia 80, europe 96, 0.15 off yearly
		u, _ := e.user("before@example.com", billing.TestCardVisa)
		q := 1
		paid, err := e.svc.Subscribe(e.ctx, u.ID, p.Slug, accounts.SubscribeRequest{Blocks: []string{"asia"}, Quantity: &q, BillingCycle: accounts.CycleYear})
		e.must(err)
		// Stored straight, monthly price 96, no charge at all; and another
		// whose only payment is more than a year of it could cost.
		unpaid := e.sub(u, p, accounts.SubActive, 1, accounts.BlockEurope)
		odd := e.sub(u, p, accounts.SubActive, 1, accounts.BlockEurope)
		e.update(func(tx accounts.Tx) error {
			for _, id := range []string{paid.ID, unpaid.ID, odd.ID} {
				sub, err := tx.GetSubscription(id)
				if err != nil {
					return err
				}
				sub.PeriodAmount, sub.BillingCycle = "", accounts.CycleYear
				sub.CurrentPeriodEnd = sub.CurrentPeriodStart.AddDate(1, 0, 0)
				if err := tx.UpdateSubscription(sub); err != nil {
					return err
				}
			}
			return tx.CreateCharge(&accounts.Charge{ID: "odd-charge", UserID: u.ID, SubscriptionID: odd.ID,
				PeriodStart: odd.CurrentPeriodStart, Amount: "1200", Status: accounts.ChargeSucceeded, CreatedAt: e.clock.Now()})
		})

		p.AnnualDiscount = "0.5"
		e.update(func(tx accounts.Tx) error { return tx.UpsertPool(p) })

		for _, c := range []struct {
			id, want string
		}{{paid.ID, "816"}, {unpaid.ID, "576"}, {odd.ID, "576"}} { // 96 × 12 × 0.5
			sub := e.getSub(c.id)
			e.clock.Set(sub.CurrentPeriodEnd)
			e.lifecycle()
			charges := e.charges(c.id)
			last := charges[len(charges)-1]
			if !last.PeriodStart.Equal(sub.CurrentPeriodEnd) || last.Status != accounts.ChargeSucceeded {
				t.Fatalf("subscription %s: last charge %+v, want its renewal from %s", c.id, last, sub.CurrentPeriodEnd)
			}
			if last.Amount != c.want {
				t.Errorf("subscription %s renewed at %s, want %s", c.id, last.Amount, c.want)
			}
		}
	})
}

// The operator's payment-failed records the period's charge, when there is
// none, at what the subscription was bought at, not at today's prices: the
// amount a new card then pays.
func TestPaymentFailedChargesWhatWasBought(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		p := e.pool("failed", accounts.PoolActive, 3, false)
		u, _ := e.user("failed@example.com", billing.TestCardVisa)
		yearly := e.sub(u, p, accounts.SubActive, 1, accounts.BlockAsia)
		legacy := e.sub(u, p, accounts.SubActive, 1, accounts.BlockEurope) // monthly 96, amount not kept
		e.update(func(tx accounts.Tx) error {
			sub, err := tx.GetSubscription(yearly.ID)
			if err != nil {
				return err
			}
			sub.BillingCycle, sub.MonthlyPrice, sub.PeriodAmount = accounts.CycleYear, "80", "816"
			return tx.UpdateSubscription(sub)
		})
		p.AnnualDiscount = "0.5"
		p.BlockPrices = map[accounts.Block]string{accounts.BlockAsia: "10", accounts.BlockEurope: "10"}
		e.update(func(tx accounts.Tx) error { return tx.UpsertPool(p) })

		for _, c := range []struct {
			id, want string
		}{{yearly.ID, "816"}, {legacy.ID, "96"}} {
			_, err := e.svc.PaymentFailed(e.ctx, c.id)
			e.must(err)
			charges := e.charges(c.id)
			if len(charges) != 1 || charges[0].Status != accounts.ChargeFailed || charges[0].Amount != c.want {
				t.Errorf("subscription %s: charges %+v, want one failed charge of %s", c.id, charges, c.want)
			}
		}
	})
}
