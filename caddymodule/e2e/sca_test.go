package e2e_test

// 3-D Secure on a subscribe through the real caddy with the built-in
// processor's pm_card_authenticationRequired: the 402 carries an incomplete
// subscription with a client secret, which holds the seat, has no key, and
// is confirmed only by its owner. (Completing the payment needs the
// customer's bank: accounts and accounts/billing/stripe test that part.)

import (
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

const scaCaddyfile = `{
	timeblock {
		secret {$TIMEBLOCK_SECRET}
		pool one {
			model m-one
			slots 1
			block europe 96
		}
	}
}

:{{.HTTP}} {
	handle /api/* {
		timeblock_accounts
	}
}
`

func TestSubscribeWaitingForAuthentication(t *testing.T) {
	c := e2e.Start(t, scaCaddyfile, e2e.WithEnv("TIMEBLOCK_SECRET=sca-secret-0123456789abcdef"))
	user := func(email, card string) *client {
		u := &client{t: t, base: c.URL(), admin: c.AdminURL()}
		created := u.do("POST", c.AdminURL()+"/timeblock/users", map[string]any{"email": email}, 201)
		u.token = created.Get("data.sessionToken").Str
		u.api("POST", "/api/billing/setup-intent", map[string]any{"paymentMethod": card}, 200)
		return u
	}
	a := user("sca@example.com", "pm_card_authenticationRequired")
	res := a.api("POST", "/api/pools/one/subscribe", map[string]any{"blocks": []string{"europe"}}, 402)
	id := res.Get("data.subscriptionId").Str
	if res.Get("data.status").Str != "incomplete" || id == "" || res.Get("data.clientSecret").Str == "" ||
		res.Get("data.amount").Str != "96" || !strings.Contains(res.Get("error").Str, "3-D Secure") {
		t.Fatalf("402 = %s", res.Raw)
	}
	hold, err := time.Parse(time.RFC3339Nano, res.Get("data.holdExpiresAt").Str)
	if err != nil || hold.Before(time.Now().Add(9*time.Minute)) || hold.After(time.Now().Add(11*time.Minute)) {
		t.Fatalf("holdExpiresAt = %q (%v), want in 10 minutes", res.Get("data.holdExpiresAt").Str, err)
	}
	subs := a.api("GET", "/api/pools/one/my-subscriptions", nil, 200)
	if subs.Get("data.#").Int() != 1 || subs.Get("data.0.status").Str != "incomplete" || subs.Get("data.0.id").Str != id {
		t.Fatalf("my-subscriptions = %s", subs.Raw)
	}
	a.api("POST", "/api/keys/subscription", map[string]any{"subscriptionId": id}, 409)
	waiting := a.api("POST", "/api/subscriptions/"+id+"/confirm", nil, 402)
	if waiting.Get("data.status").Str != "incomplete" || waiting.Get("data.clientSecret").Exists() {
		t.Fatalf("confirm while waiting = %s", waiting.Raw)
	}

	// The seat is held; another user cannot confirm it.
	b := user("other@example.com", "pm_card_visa")
	b.api("POST", "/api/pools/one/subscribe", map[string]any{"blocks": []string{"europe"}}, 409)
	b.api("POST", "/api/subscriptions/"+id+"/confirm", nil, 404)
}
