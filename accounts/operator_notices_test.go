package accounts_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// idleWebhook is a webhook that is never posted to: the tests read the outbox.
type idleWebhook struct{}

func (idleWebhook) Post(context.Context, []byte) error { return nil }

// withOperatorOutbox replaces the environment's service by one that queues
// operator events for a webhook, so the test finds them in the outbox.
func (e *env) withOperatorOutbox() {
	e.t.Helper()
	svc, err := accounts.NewService(accounts.Config{Store: e.st, Secret: envSecret, TermsVersion: envTerms, Processor: e.proc,
		Notifier: e.notifier, GracePeriod: 7 * 24 * time.Hour, Now: e.clock.Now, OperatorWebhook: idleWebhook{}})
	e.must(err)
	e.svc = svc
}

// opEvents returns the queued operator events of type typ, with their data
// decoded, oldest first.
func (e *env) opEvents(typ string) []map[string]any {
	e.t.Helper()
	var out []map[string]any
	for _, ev := range pendingEvents(e.t, e.st) {
		if ev.Type != typ {
			continue
		}
		var data map[string]any
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			e.t.Fatalf("event %s data %s: %v", ev.ID, ev.Data, err)
		}
		out = append(out, data)
	}
	return out
}

// wantOpEvent checks that exactly one event of typ concerns subID and has
// the fields of want; it returns its data.
func (e *env) wantOpEvent(typ, subID string, want map[string]any) map[string]any {
	e.t.Helper()
	var found []map[string]any
	for _, d := range e.opEvents(typ) {
		if d["subscriptionId"] == subID {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		e.t.Fatalf("%d %s events for %s, want 1 (all of that type: %v)", len(found), typ, subID, e.opEvents(typ))
	}
	for k, v := range want {
		if found[0][k] != v {
			e.t.Errorf("%s of %s: %s = %v, want %v (data %v)", typ, subID, k, found[0][k], v, found[0])
		}
	}
	return found[0]
}

// TestOperatorNoticesOfPurchasesAndCharges follows buyers through the
// places that tell the operator: a purchase on a manual pool (created, and
// pending_key with the deliver endpoint), one on a self-service pool, a
// renewal declined and recovered, a renewal paid, a 3-D Secure payment
// completed, a paid purchase canceled (refunded).
func TestOperatorNoticesOfPurchasesAndCharges(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.withOperatorOutbox()
		e.pool("hand", accounts.PoolActive, 2, true)
		e.pool("auto", accounts.PoolActive, 4, false)
		ann, annToken := e.user("ann@example.test", billing.TestCardVisa)
		bob, bobToken := e.user("bob@example.test", billing.TestCardVisa)

		manual := e.subscribe(ann, "hand", 1, "europe")
		e.wantOpEvent(accounts.OpSubscriptionCreated, manual.ID, map[string]any{"status": accounts.SubPendingKey, "poolSlug": "hand",
			"email": "ann@example.test", "userId": ann.ID, "kind": "purchase", "amount": "96"})
		pk := e.wantOpEvent(accounts.OpSubscriptionPendingKey, manual.ID, map[string]any{"poolSlug": "hand",
			"deliverEndpoint": "/timeblock/subscriptions/" + manual.ID + "/deliver"})
		if todo, _ := pk["todo"].(string); !strings.Contains(todo, "POST /timeblock/subscriptions/"+manual.ID+"/deliver") {
			t.Errorf("pending_key todo %q does not name the deliver endpoint", todo)
		}

		self := e.subscribe(bob, "auto", 1, "asia")
		e.wantOpEvent(accounts.OpSubscriptionCreated, self.ID, map[string]any{"status": accounts.SubActive, "poolSlug": "auto"})
		if n := len(e.opEvents(accounts.OpSubscriptionPendingKey)); n != 1 {
			t.Errorf("%d pending_key events, want only the manual pool's", n)
		}

		// Renewal declined, then recovered by a new card, then paid.
		_, err := e.svc.SetupIntent(e.ctx, bob.ID, billing.TestCardDeclined)
		e.must(err)
		e.clock.Set(self.CurrentPeriodEnd.Add(time.Minute))
		e.lifecycle()
		e.wantOpEvent(accounts.OpChargeFailed, self.ID, map[string]any{"kind": "renewal", "amount": "80", "status": accounts.SubPastDue})
		_, err = e.svc.SetupIntent(e.ctx, bob.ID, billing.TestCardVisa)
		e.must(err)
		e.wantOpEvent(accounts.OpChargeSucceeded, self.ID, map[string]any{"kind": "recovery", "amount": "80", "status": accounts.SubActive})
		e.clock.Set(e.getSub(self.ID).CurrentPeriodEnd.Add(time.Minute))
		e.lifecycle()
		var renewals int
		for _, d := range e.opEvents(accounts.OpChargeSucceeded) {
			if d["subscriptionId"] == self.ID && d["kind"] == "renewal" && d["amount"] == "80" {
				renewals++
			}
		}
		if renewals != 1 {
			t.Errorf("%d charge.succeeded renewal events, want 1: %v", renewals, e.opEvents(accounts.OpChargeSucceeded))
		}

		// A payment that waited for 3-D Secure, completed and confirmed.
		cat, _ := e.user("cat@example.test", billing.TestCardAuthentication)
		data := e.incompleteSubscribe(cat, e.poolByslug("auto"))
		e.must(e.proc.Authenticate(e.ctx, data.ClientSecret[:len(data.ClientSecret)-len("_secret_test")]))
		_, err = e.svc.ConfirmSubscription(e.ctx, cat.ID, data.SubscriptionID)
		e.must(err)
		e.wantOpEvent(accounts.OpSubscriptionCreated, data.SubscriptionID, map[string]any{"status": accounts.SubActive, "email": "cat@example.test"})

		// Paid while its cancel ran: refunded.
		dan, _ := e.user("dan@example.test", billing.TestCardAuthentication)
		data = e.incompleteSubscribe(dan, e.poolByslug("auto"))
		ref := data.ClientSecret[:len(data.ClientSecret)-len("_secret_test")]
		e.must(e.proc.Authenticate(e.ctx, ref))
		_, err = e.svc.CancelIncomplete(e.ctx, dan.ID, data.SubscriptionID)
		e.must(err)
		e.wantOpEvent(accounts.OpChargeRefunded, data.SubscriptionID, map[string]any{"kind": "purchase", "processorRef": ref})

		// Nothing secret in any event.
		for _, ev := range pendingEvents(t, st) {
			for _, secret := range []string{annToken, bobToken, "sk_", "pm_card"} {
				if strings.Contains(string(ev.Data), secret) {
					t.Errorf("event %s %s carries %q: %s", ev.ID, ev.Type, secret, ev.Data)
				}
			}
		}
	})
}

// TestOperatorNoticesOfFunding: a pledge, the goal reached, the pledges
// charged (one declined) when the pool goes live.
func TestOperatorNoticesOfFunding(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		e.withOperatorOutbox()
		e.fundingPool("fund", "150", 4)
		ann, _ := e.user("ann@example.test", billing.TestCardVisa)
		bob, _ := e.user("bob@example.test", billing.TestCardVisa)
		a := e.pledge(ann, "fund", 1, "asia")
		e.wantOpEvent(accounts.OpPledgeCreated, a.ID, map[string]any{"amountDueAtActivation": "80", "poolSlug": "fund", "status": accounts.SubPledged})
		if n := len(e.opEvents(accounts.OpPoolGoalReached)); n != 0 {
			t.Fatalf("%d goal events under the goal", n)
		}
		b := e.pledge(bob, "fund", 1, "americas")
		goal := e.opEvents(accounts.OpPoolGoalReached)
		if len(goal) != 1 || goal[0]["poolSlug"] != "fund" || goal[0]["pledged"] != "200" || goal[0]["fundingGoal"] != "150" ||
			!strings.Contains(goal[0]["todo"].(string), "/timeblock/pools/fund/status") {
			t.Fatalf("goal events %v", goal)
		}
		_, err := e.svc.SetupIntent(e.ctx, bob.ID, billing.TestCardDeclined)
		e.must(err)
		_, err = e.svc.SetPoolStatus(e.ctx, "fund", accounts.PoolActive)
		e.must(err)
		e.funding()
		e.wantOpEvent(accounts.OpChargeSucceeded, a.ID, map[string]any{"kind": "pledge", "amount": "80"})
		failed := e.wantOpEvent(accounts.OpChargeFailed, b.ID, map[string]any{"kind": "pledge", "amount": "120"})
		if failed["reason"] == nil || failed["todo"] == nil {
			t.Errorf("a declined pledge's event lacks reason or todo: %v", failed)
		}
	})
}

// poolByslug reads a pool from the store.
func (e *env) poolByslug(slug string) *accounts.Pool {
	e.t.Helper()
	return read(e, func(tx accounts.Tx) (*accounts.Pool, error) { return tx.GetPoolBySlug(slug) })
}
