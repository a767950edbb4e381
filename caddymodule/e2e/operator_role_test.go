package e2e_test

// The operator role through the real plugin: `operators` in the Caddyfile
// opens /api/operator/* to those users' sessions only, and Caddy's admin API
// lists the same pools (drafts too) and subscriptions for scripts.

import (
	"net/http"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

const operatorCaddyfile = `{
	timeblock {
		secret {$TIMEBLOCK_SECRET}
		operators Ops@Example.com
		pool alpha {
			model m-alpha
			slots 3
			block asia 40
		}
		pool later {
			model m-later
			slots 2
			block europe 50
			status draft
		}
	}
}

:{{.HTTP}} {
	handle /api/* {
		timeblock_accounts
	}
}
`

func TestOperatorRoleAndAdminLists(t *testing.T) {
	c := e2e.Start(t, operatorCaddyfile, e2e.WithEnv("TIMEBLOCK_SECRET=operator-e2e-secret-0123456789"))
	newUser := func(email string) string {
		t.Helper()
		code, body := postJSON(t, http.DefaultClient, c.AdminURL()+"/timeblock/users", `{"email":"`+email+`"}`)
		if code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", email, code, body)
		}
		return gjson.Get(body, "data.sessionToken").Str
	}
	ops, ann := newUser("ops@example.com"), newUser("ann@example.com")
	if code, body := postJSON(t, http.DefaultClient, c.URL()+"/api/billing/setup-intent", `{"paymentMethod":"pm_card_visa"}`, "Authorization", "Bearer "+ann); code != 200 {
		t.Fatalf("ann's card: %d %s", code, body)
	}
	code, body := postJSON(t, http.DefaultClient, c.URL()+"/api/pools/alpha/subscribe", `{"blocks":["asia"]}`, "Authorization", "Bearer "+ann)
	if code != http.StatusCreated {
		t.Fatalf("ann's purchase: %d %s", code, body)
	}
	subID := gjson.Get(body, "data.id").Str

	// Caddy's admin API: every pool, the draft too; the subscriptions by pool.
	resp, body := getBody(t, http.DefaultClient, c.AdminURL()+"/timeblock/pools")
	if resp.StatusCode != 200 || gjson.Get(body, "data.#").Int() != 2 || gjson.Get(body, `data.#(slug=="later").status`).Str != "draft" {
		t.Fatalf("GET /timeblock/pools: %d %s", resp.StatusCode, body)
	}
	if got := gjson.Get(body, `data.#(slug=="alpha").monthlyRecurring`).Str; got != "40" {
		t.Errorf("alpha's monthlyRecurring on the admin API: %q, want 40", got)
	}
	resp, body = getBody(t, http.DefaultClient, c.AdminURL()+"/timeblock/subscriptions?pool=alpha&status=active")
	if resp.StatusCode != 200 || gjson.Get(body, "data.#").Int() != 1 || gjson.Get(body, "data.0.id").Str != subID ||
		gjson.Get(body, "data.0.email").Str != "ann@example.com" {
		t.Fatalf("GET /timeblock/subscriptions?pool=alpha: %d %s", resp.StatusCode, body)
	}

	// The public site: the operator's session reaches /api/operator/*, the
	// buyer's gets the unknown endpoint's 404.
	resp, body = getBody(t, http.DefaultClient, c.URL()+"/api/operator/pools", "Authorization", "Bearer "+ops)
	if resp.StatusCode != 200 || gjson.Get(body, "data.#").Int() != 2 {
		t.Fatalf("operator GET /api/operator/pools: %d %s", resp.StatusCode, body)
	}
	resp, body = getBody(t, http.DefaultClient, c.URL()+"/api/operator/pools", "Authorization", "Bearer "+ann)
	if resp.StatusCode != 404 || gjson.Get(body, "error").Str == "" || !gjson.Valid(body) {
		t.Fatalf("buyer GET /api/operator/pools: %d %s", resp.StatusCode, body)
	}
	if want := "no such endpoint: GET /api/operator/pools"; len(gjson.Get(body, "error").Str) < len(want) || gjson.Get(body, "error").Str[:len(want)] != want {
		t.Errorf("buyer's 404: %s, want the unknown endpoint's answer", body)
	}
}
