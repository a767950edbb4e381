package e2e_test

// The operator's console on the account page, in headless Chromium: an
// operator (named by `operators`) sees the Operator tab; the heatmap shows
// the seats a buyer bought in the hour open now; the manual pool's order
// waits in Orders and "Deliver" gives the buyer a key that works; pausing a
// pool and canceling a subscription land in the audit log; the ledger lists
// the charges with a CSV export. A buyer sees no Operator tab, and
// #/operator shows them the pools.

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// operatorBrowserCaddyfile: "alpha" sells every block, "handmade" the block
// open now with keys delivered by hand, "gamma" is being funded, "soon" is
// a draft.
const operatorBrowserCaddyfile = `{
	timeblock {
		store embedded {{.Dir}}/timeblock.db
		secret {$TIMEBLOCK_SECRET}
		terms_version 2026-11
		operators ops@example.com
		pool alpha {
			model m-alpha
			name "Alpha 70B"
			status active
			slots 4
			block asia 30
			block europe 40
			block americas 45
		}
		pool handmade {
			model m-hand
			name "Handmade 8B"
			status active
			manual_provisioning
			slots 2
			block %NOW% 25
		}
		pool gamma {
			model m-gamma
			name "Gamma 32B"
			status funding
			funding_goal 100
			slots 2
			block %NOW% 25
		}
		pool soon {
			model m-soon
			name "Soon 1B"
			status draft
			slots 2
			block %NOW% 10
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

func TestBrowserOperatorConsole(t *testing.T) {
	block := nowBlock(t)
	c := e2e.Start(t, strings.ReplaceAll(operatorBrowserCaddyfile, "%NOW%", block), e2e.WithEnv(browserSecret))
	site := c.URL()
	br := startChromium(t, desktop)

	// A buyer buys two seats on alpha and one on the manual pool.
	ada := br.newTab(t, "ada")
	signIn(t, ada, c, "ada@example.com")
	token := ada.sessionToken(site)
	mustUser(t, site, token, "POST", "/api/billing/setup-intent", map[string]any{"paymentMethod": "pm_card_visa"}, 200)
	alphaSub := mustUser(t, site, token, "POST", "/api/pools/alpha/subscribe", map[string]any{"blocks": []string{block}, "quantity": 2}, 201).Get("id").Str
	handSub := mustUser(t, site, token, "POST", "/api/pools/handmade/subscribe", map[string]any{"blocks": []string{block}}, 201).Get("id").Str
	mustUser(t, site, token, "POST", "/api/pools/gamma/subscribe", map[string]any{"blocks": []string{block}}, 201) // a pledge
	if alphaSub == "" || handSub == "" {
		t.Fatalf("the purchases answered no subscription ids (%q, %q)", alphaSub, handSub)
	}

	// The buyer has no Operator tab, and #/operator shows the pools.
	ada.waitFor("the pools", visible("#pools"))
	if ada.count("#nav-operator") != 0 {
		t.Errorf("a buyer sees the Operator tab")
	}
	ada.route("#/operator")
	ada.waitFor("the pools instead of the console", visible("#pools")+" && "+`document.querySelector('#operator').hidden`)
	var leaked string
	ada.js(`document.querySelector('#operator .body').textContent`, &leaked)
	if leaked != "" {
		t.Errorf("#/operator filled the console for a buyer: %q", leaked)
	}
	if status, _ := asUser(t, site, token, "GET", "/api/operator/pools", nil); status != 404 {
		t.Errorf("a buyer's GET /api/operator/pools = %d, want 404", status)
	}

	// The operator signs in and opens the tab; focus lands on its heading.
	ops := br.newTab(t, "ops")
	signIn(t, ops, c, "ops@example.com")
	ops.waitFor("the Operator tab", visible("#nav-operator"))
	ops.click("#nav-operator")
	ops.waitFor("the pools table", visible(`#op-pools tr.op-pool[data-slug="alpha"]`))
	ops.waitFor("focus on the console's heading", `document.activeElement === document.querySelector('#operator h1')`)

	// Pools: drafts too, revenue, actions by status.
	if n := ops.count("#op-pools tr.op-pool"); n != 4 {
		t.Errorf("the pools table has %d rows, want 4 (drafts too)", n)
	}
	price := map[string]int{"asia": 30, "europe": 40, "americas": 45}[block]
	alphaRow := `#op-pools tr.op-pool[data-slug="alpha"]`
	ops.waitText(alphaRow+" td.op-revenue", fmt.Sprintf("$%d.00", 2*price))
	ops.waitText(alphaRow+" td.op-mrr", fmt.Sprintf("$%d.00", 2*price))
	ops.waitText(`#op-pools tr.op-pool[data-slug="soon"]`, "draft")
	ops.waitText(`#op-pools tr.op-pool[data-slug="soon"]`, "Activate")
	ops.waitText(`#op-pools tr.op-pool[data-slug="gamma"] .op-funding`, "$25.00 of $100.00 (25%)")

	// The heatmap: the hour open now holds the seats sold, and says so.
	hour := time.Now().UTC().Hour()
	cell := func(pool string) string {
		return fmt.Sprintf(`#op-heatmap td[data-pool="%s"][data-hour="%d"]`, pool, hour)
	}
	for pool, want := range map[string]string{"alpha": "2 of 4 seats sold", "handmade": "1 of 2 seats sold", "soon": "0 of 2 seats sold", "gamma": "0 of 2 seats sold"} {
		var title string
		ops.js(`document.querySelector(`+jsq(cell(pool))+`).title`, &title)
		if wantTitle := fmt.Sprintf("%s %02d:00 UTC: %s · 0 requests served today", block, hour, want); title != wantTitle {
			t.Errorf("the heatmap cell of %s now says %q, want %q", pool, title, wantTitle)
		}
	}
	if n := ops.count("#op-heatmap td.now"); n != 4 {
		t.Errorf("%d heatmap cells are marked as the current hour, want 4", n)
	}
	if n := ops.count("#op-heatmap td.heat:not(.heat-0)"); n != 16 {
		t.Errorf("%d heatmap cells show seats sold, want 16 (8 hours of alpha and of handmade)", n)
	}
	ops.waitText("#op-heatmap-legend", "sold out")
	if path, png := ops.screenshot("console"); os.Getenv("TIMEBLOCK_UPDATE_SCREENSHOT") == "1" {
		dst := repoFile(t, "docs/operator-console.png")
		if err := os.WriteFile(dst, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (from %s)", dst, path)
	}

	ops.js(`document.querySelector('#op-heatmap-card').scrollIntoView()`, nil)
	ops.screenshot("heatmap")

	// Orders: the manual pool's purchase waits for its key; Deliver.
	order := `#op-orders tr.op-order[data-id="` + handSub + `"]`
	ops.waitText(order, "ada@example.com")
	ops.waitText(order, "pending key")
	ops.js(`document.querySelector('#op-orders').scrollIntoView()`, nil)
	ops.screenshot("orders")
	ops.click(order + " button.op-deliver")
	ops.waitText("#op-orders .msg.ok", "Key delivered for ada@example.com")
	ops.waitFor("the order to leave the queue", `!document.querySelector(`+jsq(order)+`)`)

	// The buyer's key appears on their page, and works.
	ada.route("#/subscriptions")
	key := revealed(t, ada, `.sub[data-id="`+handSub+`"]`)
	wantChat(t, c, key, "m-hand", "with the key the operator delivered")

	// Pause alpha (confirmed in the dialog).
	ops.clickText(alphaRow, "Pause")
	ops.waitFor("the confirm dialog", visible("#confirm-dialog"))
	ops.click("#confirm-ok")
	ops.waitFor("alpha paused", `document.querySelector(`+jsq(alphaRow)+`).dataset.status === 'paused'`)
	ops.waitText(alphaRow, "Resume")
	if st := mustUser(t, site, token, "GET", "/api/pools/alpha", nil, 200).Get("status").Str; st != "paused" {
		t.Errorf("after Pause, alpha is %s", st)
	}

	// Subscribers: find ada, cancel alpha at the end of its period.
	ops.typeInto("#op-sub-email", "ADA@example.com")
	ops.click("#op-sub-submit")
	subRow := `#op-subscribers tr.op-sub[data-id="` + alphaSub + `"]`
	ops.waitText(subRow, "Alpha 70B")
	if n := ops.count("#op-subscribers tr.op-sub"); n != 3 {
		t.Errorf("ada has %d subscriptions and pledges in Subscribers, want 3", n)
	}
	ops.js(`document.querySelector('#op-subscribers').scrollIntoView()`, nil)
	ops.screenshot("subscribers")
	ops.clickText(subRow, "Cancel at period end")
	ops.click("#confirm-ok")
	ops.waitText("#op-subscribers .msg.ok", "it will not renew")
	ops.waitText(subRow, "ends at period end")

	// Revoke the delivered key (confirmed in the dialog): the gate refuses
	// it at once, and the row offers no second revocation.
	handRow := `#op-subscribers tr.op-sub[data-id="` + handSub + `"]`
	ops.waitText(handRow, "Active")
	ops.clickText(handRow, "Revoke key")
	ops.waitFor("the confirm dialog", visible("#confirm-dialog"))
	ops.screenshot("revoke-dialog")
	ops.click("#confirm-ok")
	ops.waitText("#op-subscribers .msg.ok", "is revoked")
	ops.waitText(handRow, "Revoked")
	if n := ops.count(handRow + " button.op-revoke"); n != 0 {
		t.Errorf("a revoked key's row still offers Revoke key")
	}
	wantRefused(t, c, key, "m-hand", "after the operator revoked the key")
	ops.screenshot("revoked")

	// The audit log, newest first.
	ops.waitFor("four audit rows", `document.querySelectorAll('#op-audit tr.op-audit-row').length === 4`)
	var actions []string
	ops.js(`[...document.querySelectorAll('#op-audit tr.op-audit-row')].map((r) => r.dataset.action)`, &actions)
	if strings.Join(actions, " ") != "key.revoke subscription.cancel pool.status subscription.deliver" {
		t.Errorf("the audit log lists %v, want revoke, cancel, pool status, deliver (newest first)", actions)
	}
	ops.waitText("#op-audit", "ops@example.com")
	ops.waitText("#op-audit", "Alpha 70B")
	ops.js(`document.querySelector('#op-audit').scrollIntoView()`, nil)
	ops.screenshot("audit")

	// The ledger: both purchases this month, and the CSV.
	ops.waitFor("two charges", `document.querySelectorAll('#op-ledger tr.op-charge').length === 2`)
	ops.waitText("#op-ledger-totals", fmt.Sprintf("2 charges shown: $%d.00 taken", 2*price+25))
	var csv string
	ops.js(`fetch(document.querySelector('#op-ledger-csv').href, {credentials: 'same-origin'}).then((r) => r.text())`, &csv)
	if !strings.HasPrefix(csv, "number,") || strings.Count(csv, "ada@example.com") != 2 {
		t.Errorf("the ledger's Download CSV link gives:\n%s", csv)
	}
	ops.js(`document.querySelector('#op-ledger').scrollIntoView()`, nil)
	ops.screenshot("ledger")

	// Refund part of the newest charge: the dialog offers what remains,
	// refuses more, and the row and the message show the outcome.
	var chargeID, amount string
	ops.js(`document.querySelector('#op-ledger tr.op-charge').dataset.id`, &chargeID)
	chargeRow := `#op-ledger tr.op-charge[data-id="` + chargeID + `"]`
	ops.click(chargeRow + " button.op-refund")
	ops.waitFor("the refund dialog", visible("#op-refund-dialog"))
	ops.js(`document.querySelector('#op-refund-amount').value`, &amount)
	if amount != "25" && amount != fmt.Sprint(price) {
		t.Errorf("the refund dialog offers %q, want what remains of the charge", amount)
	}
	ops.typeInto("#op-refund-amount", "1000")
	ops.click("#op-refund-ok")
	ops.waitText("#op-refund-error", "remains to refund")
	ops.typeInto("#op-refund-amount", "5")
	ops.screenshot("refund-dialog")
	ops.click("#op-refund-ok")
	ops.waitText("#op-ledger .msg.ok", "Refunded $5.00 of receipt")
	ops.waitText(chargeRow, "Partly refunded")
	ops.waitText("#op-ledger-totals", "$5.00 refunded")
	ops.screenshot("refunded")
	for _, c := range mustUser(t, site, ops.sessionToken(site), "GET", "/api/operator/charges", nil, 200).Get("data").Array() {
		if c.Get("id").Str == chargeID && (c.Get("refundedAmount").Str != "5" || c.Get("status").Str != "partially_refunded") {
			t.Errorf("after the console's refund, the charge is %s", c.Raw)
		}
	}

	// A refused action says why in words: another operator canceled the
	// subscription meanwhile, so "Cancel now" on the stale row gets the
	// server's message.
	opsToken := ops.sessionToken(site)
	mustUser(t, site, opsToken, "POST", "/api/operator/subscriptions/"+handSub+"/cancel", map[string]any{"atPeriodEnd": false}, 200)
	_, refused := asUser(t, site, opsToken, "POST", "/api/operator/subscriptions/"+handSub+"/cancel", map[string]any{"atPeriodEnd": false})
	if refused.Get("error").Str == "" {
		t.Fatalf("canceling a canceled subscription answered %s, want an error", refused.Raw)
	}
	ops.allowHTTPError("/api/operator/subscriptions/"+handSub+"/cancel", 409)
	ops.clickText(`#op-subscribers tr.op-sub[data-id="`+handSub+`"]`, "Cancel now")
	ops.click("#confirm-ok")
	ops.waitText("#op-subscribers .msg.error", refused.Get("error").Str)
	ops.waitFor("the row to show the cancellation", `document.querySelector(`+jsq(`#op-subscribers tr.op-sub[data-id="`+handSub+`"]`)+`).dataset.status === 'canceled'`)
	ops.js(`document.querySelector('#op-subscribers').scrollIntoView()`, nil)
	ops.screenshot("refused")
	ops.checkConsole()
	ada.checkConsole()

	// At phone width the console fits: tables scroll inside their cards.
	phoneBr := startChromium(t, phone)
	pt := phoneBr.newTab(t, "ops-phone")
	signIn(t, pt, c, "ops@example.com")
	pt.route("#/operator")
	pt.waitFor("the heatmap", visible("#op-heatmap"))
	var overflow bool
	pt.js(`document.documentElement.scrollWidth > document.documentElement.clientWidth`, &overflow)
	if overflow {
		t.Errorf("the operator console is wider than the phone's screen")
	}
	pt.screenshot("phone")
	var nowShown bool
	pt.js(`(() => { const s = document.querySelector('#op-heatmap-card .scroll').getBoundingClientRect();
		const c = document.querySelector('#op-heatmap thead th.now').getBoundingClientRect();
		return c.left >= s.left && c.right <= s.right; })()`, &nowShown)
	if !nowShown {
		t.Errorf("at phone width the heatmap does not open at the current hour")
	}
	pt.js(`document.querySelector('#op-heatmap-card').scrollIntoView()`, nil)
	pt.screenshot("phone-heatmap")
	pt.checkConsole()
}
