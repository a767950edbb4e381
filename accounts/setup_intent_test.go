package accounts_test

import (
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// The test processor's card whose bank asks for 3-D Secure when it is
// saved: saving answers 402 requires_action and saves nothing; once
// authenticated the follow-up saves it, and charges on it succeed, a
// subscribe and the off-session renewal alike.
func TestSaveCardWaitsForSetupAuthentication(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.pool("setup", accounts.PoolActive, 2, false)
		u, _ := e.user("sca@example.test", "")
		other, _ := e.user("eve@example.test", billing.TestCardVisa)

		_, err := e.svc.SetupIntent(e.ctx, u.ID, billing.TestCardSetupAuthentication)
		ae := wantStatus(t, err, 402, "confirmCardSetup", "not saved yet")
		action, ok := ae.Data.(*accounts.SetupActionView)
		if !ok || action.Status != accounts.SetupRequiresAction || action.SetupIntentID == "" || action.ClientSecret == "" {
			t.Fatalf("402 data = %#v, want requires_action with a setup id and client secret", ae.Data)
		}
		noCard := func() {
			t.Helper()
			bs, err := e.svc.BillingStatus(e.ctx, u.ID)
			e.must(err)
			if bs.HasPaymentMethod || bs.PaymentMethod != nil {
				t.Fatalf("a card waiting for 3-D Secure was saved: %+v", bs)
			}
		}
		noCard()
		_, err = e.svc.FinishSetupIntent(e.ctx, u.ID, action.SetupIntentID)
		if again := wantStatus(t, err, 402, "confirmCardSetup"); *again.Data.(*accounts.SetupActionView) != *action {
			t.Errorf("follow-up before authentication = %#v, want the same setup", again.Data)
		}
		noCard()
		_, err = e.svc.FinishSetupIntent(e.ctx, other.ID, action.SetupIntentID)
		wantStatus(t, err, 404)

		if err := e.proc.AuthenticateSetup(e.ctx, "seti_test_unknown"); err == nil {
			t.Error("AuthenticateSetup of an unknown setup succeeded")
		}
		e.must(e.proc.AuthenticateSetup(e.ctx, action.SetupIntentID))
		si, err := e.svc.FinishSetupIntent(e.ctx, u.ID, action.SetupIntentID)
		e.must(err)
		if si.PaymentMethod != (accounts.PaymentMethodView{ID: billing.TestCardSetupAuthentication, Brand: "visa", Last4: "3155"}) {
			t.Fatalf("saved %+v", si.PaymentMethod)
		}
		bs, err := e.svc.BillingStatus(e.ctx, u.ID)
		e.must(err)
		if !bs.HasPaymentMethod || bs.PaymentMethod.Last4 != "3155" {
			t.Fatalf("billing status %+v", bs)
		}

		res := e.subscribe(u, "setup", 1, "asia")
		if res.Status != accounts.SubActive || len(e.chargesFor(res.ID)) != 1 {
			t.Fatalf("subscribe on the set-up card: %s, charges %+v", res.Status, e.chargesFor(res.ID))
		}
		e.clock.Set(res.CurrentPeriodEnd.Add(time.Minute))
		if rep := e.lifecycle(); rep.Renewed != 1 {
			t.Fatalf("renewal on the set-up card: %+v", rep)
		}
		if sub := e.getSub(res.ID); sub.Status != accounts.SubActive || len(e.chargesFor(res.ID)) != 2 {
			t.Fatalf("after the renewal %s, charges %+v", sub.Status, e.chargesFor(res.ID))
		}
	})
}

// A payment method the processor cannot use (billing.MethodError) is a 400
// that says what to send; nothing is saved.
func TestSaveUnknownCardIsInvalid(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, _ := e.user("bogus@example.test", "")
		_, err := e.svc.SetupIntent(e.ctx, u.ID, "pm_card_bogus")
		wantStatus(t, err, 400, "unknown payment method", billing.TestCardVisa)
		bs, err := e.svc.BillingStatus(e.ctx, u.ID)
		e.must(err)
		if bs.HasPaymentMethod {
			t.Fatalf("an unknown card was saved: %+v", bs)
		}
	})
}
