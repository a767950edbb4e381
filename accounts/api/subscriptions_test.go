package api_test

import (
	"testing"

	"github.com/timeblock/timeblock/accounts"
)

func TestSubscriptionCancelAndResume(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 0)
		ada, adaTok := e.user("ada@example.com", "")
		_, bobTok := e.user("bob@example.com", "")
		a := e.pool("alpha", accounts.PoolActive, 4, false)
		b := e.pool("beta", accounts.PoolActive, 4, false)
		s1 := e.sub(ada, a, accounts.SubActive, 1, accounts.BlockEurope)
		s2 := e.sub(ada, b, accounts.SubActive, 2, accounts.BlockAsia)

		// Every pool's subscriptions in one list, oldest first.
		rows := e.call("GET", "/api/subscriptions", adaTok, "").want(t, 200).array(t)
		if len(rows) != 2 || rows[0]["id"] != s1.ID || rows[1]["id"] != s2.ID {
			t.Fatalf("subscriptions %v, want %s then %s", rows, s1.ID, s2.ID)
		}
		if got := e.call("GET", "/api/subscriptions", bobTok, "").want(t, 200).array(t); len(got) != 0 {
			t.Fatalf("bob sees %v", got)
		}

		// Another user's subscription is not found, and is left alone.
		e.call("POST", "/api/subscriptions/"+s2.ID+"/cancel", bobTok, "").want(t, 404)
		m := e.call("POST", "/api/subscriptions/"+s2.ID+"/cancel", adaTok, "").want(t, 200).object(t, "canceled", "subscriptionId", "currentPeriodEnd")
		if m["canceled"] != true || m["subscriptionId"] != s2.ID {
			t.Fatalf("cancel: %v", m)
		}
		rows = e.call("GET", "/api/subscriptions", adaTok, "").want(t, 200).array(t)
		if rows[1]["cancelAtPeriodEnd"] != true || rows[0]["cancelAtPeriodEnd"] != false {
			t.Fatalf("after cancel: %v", rows)
		}
		// Taken back, it renews again.
		e.call("POST", "/api/subscriptions/"+s2.ID+"/resume", adaTok, "").want(t, 200)
		rows = e.call("GET", "/api/subscriptions", adaTok, "").want(t, 200).array(t)
		if rows[1]["cancelAtPeriodEnd"] != false {
			t.Fatalf("after resume: %v", rows[1])
		}
		// A canceled subscription cannot be set to renew.
		s3 := e.sub(ada, a, accounts.SubCanceled, 1, accounts.BlockAsia)
		e.call("POST", "/api/subscriptions/"+s3.ID+"/resume", adaTok, "").want(t, 409, "canceled")
	})
}
