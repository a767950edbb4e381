package e2e_test

// A buyer pledges on a funding pool in the page, as people do before a
// model server exists: the pool card shows the funding, the form says
// nothing is charged now, the pledge is recorded (and can be withdrawn);
// then the operator activates the pool and the pledge is a subscription
// with a key that works.

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// fundingBrowserCaddyfile: "gamma" is funding, selling only the block open
// now, with a goal two pledges reach.
const fundingBrowserCaddyfile = `{
	timeblock {
		store embedded {{.Dir}}/timeblock.db
		secret {$TIMEBLOCK_SECRET}
		terms_version 2026-11
		lifecycle_interval 1s
		pool gamma {
			model m-gamma
			name "Gamma 32B"
			description "Being funded"
			status funding
			funding_goal 50
			slots 2
			block %NOW% 25
		}
	}
}

:{{.HTTP}} {
	@account path /api /api/* /account /account/*
	handle @account {
		timeblock_accounts
	}
	@inference path /v1/* /compat/v1/*
	handle @inference {
		timeblock_gate
		timeblock_translate chat
		reverse_proxy 127.0.0.1:{{.Upstream}}
	}
}

:{{.Upstream}} {
	timeblock_simulator
}
`

func TestBrowserPledge(t *testing.T) {
	block := nowBlock(t)
	c := e2e.Start(t, strings.ReplaceAll(fundingBrowserCaddyfile, "%NOW%", block), e2e.WithEnv(browserSecret))
	site := c.URL()
	br := startChromium(t, desktop)
	ada := br.newTab(t, "ada")
	signIn(t, ada, c, "ada@example.com")
	token := ada.sessionToken(site)

	// The card shows the funding and offers to pledge.
	gammaID := mustUser(t, site, token, "GET", "/api/pools", nil, 200).Get(`#(slug=="gamma").id`).Str
	card := `.pool[data-id="` + gammaID + `"]`
	ada.waitText(card, "Gamma 32B")
	for _, want := range []string{"$0.00 of $50.00 a month pledged (0%)", "nothing is charged unless the pool goes live", "View hours & pledge"} {
		ada.waitText(card, want)
	}
	ada.clickText(card, "View hours & pledge")
	ada.waitFor("the pledge form", visible("#buy-form"))
	ada.choose("#card-test-card", "pm_card_visa")
	ada.click("#card-save")
	ada.waitText("#buy-form", "Charged when the pool goes live, for the first month")
	ada.click("#buy-block-" + block)
	ada.click("#buy-terms")
	if got := ada.text("#buy-submit"); got != "Pledge" {
		t.Errorf("the submit button says %q, want Pledge", got)
	}
	ada.click("#buy-submit")
	ada.waitText("#pledge-result", "Your pledge is recorded")
	ada.waitText("#pledge-result", "Nothing is charged now")
	ada.waitText("#pledge-result", "$25.00")
	ada.waitText("#pool-funding", "$25.00 of $50.00 a month pledged (50%) · 8 hour slots held")
	if got := ada.text("#buy-heading"); got != "Pledge seats" {
		t.Errorf("the form's heading is %q, want Pledge seats", got)
	}
	ada.screenshot("pledged")
	subs := mustUser(t, site, token, "GET", "/api/subscriptions", nil, 200)
	if st := subs.Get("0.status").Str; st != "pledged" || subs.Get("0.key").Type.String() != "Null" {
		t.Fatalf("after pledging, subscriptions = %s", subs.Raw)
	}

	// Withdrawn in the page: seats free, nothing charged; then pledged again.
	ada.click("#pledge-withdraw")
	ada.waitText("#buy-result", "Pledge withdrawn")
	if st := mustUser(t, site, token, "GET", "/api/subscriptions", nil, 200).Get("0.status").Str; st != "canceled" {
		t.Fatalf("after withdrawing, the pledge is %s", st)
	}
	ada.clickText("#buy-result", "Pledge again")
	ada.waitFor("the pledge form", visible("#buy-form"))
	ada.click("#buy-block-" + block)
	ada.click("#buy-terms")
	ada.click("#buy-submit")
	ada.waitText("#pledge-result", "Your pledge is recorded")

	// My subscriptions says what a pledge is.
	ada.route("#/subscriptions")
	ada.waitText(".sub", "nothing is charged until the pool goes live")

	// A second buyer reaches the goal through the API; the operator makes
	// the pool live, which charges both pledges.
	bob := pledgeBuyer(t, c, "bob@example.com")
	mustUser(t, site, bob, "POST", "/api/pools/gamma/subscribe", map[string]any{"blocks": []string{block}}, 201)
	if st := mustUser(t, site, token, "GET", "/api/pools/gamma", nil, 200).Get("status").Str; st != "activating" {
		t.Fatalf("at the goal the pool is %s, want activating", st)
	}
	resp, err := http.Post(c.AdminURL()+"/timeblock/pools/gamma/status", "application/json", bytes.NewBufferString(`{"status":"active"}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("activating: %v %v", resp, err)
	}
	resp.Body.Close()
	eventually(t, 10*time.Second, "the pledge to be charged", func() error {
		if st := mustUser(t, site, token, "GET", "/api/subscriptions", nil, 200).Get("#(status==\"active\").id").Str; st == "" {
			return errors.New("no active subscription yet")
		}
		return nil
	})
	ada.route("#/pools")
	ada.route("#/subscriptions")
	ada.clickText(".sub", "Create key")
	key := revealed(t, ada, ".sub")
	wantChat(t, c, key, "m-gamma", "with the key of a pledge charged at activation")
	ada.checkConsole()
}

// pledgeBuyer creates a user on the operator endpoint, saves a test card
// and returns the session token.
func pledgeBuyer(t *testing.T, c *e2e.Caddy, email string) string {
	t.Helper()
	resp, err := http.Post(c.AdminURL()+"/timeblock/users", "application/json", strings.NewReader(`{"email":"`+email+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var created struct {
		Data struct {
			SessionToken string `json:"sessionToken"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&created); err != nil || resp.StatusCode != 201 {
		t.Fatalf("creating %s: %d %v", email, resp.StatusCode, err)
	}
	mustUser(t, c.URL(), created.Data.SessionToken, "POST", "/api/billing/setup-intent", map[string]any{"paymentMethod": "pm_card_visa"}, 200)
	return created.Data.SessionToken
}
