package e2e_test

// 3-D Secure in the buyer's page with the built-in test processor: a card
// whose bank asks for it (pm_card_authenticationRequired) buys, the page
// shows the test bank's dialog, and the whole flow is played as a buyer
// sees it: the unpaid purchase's row says what it waits for and cancels at
// once; a failed check says so and buying again works at once; an approved
// one ends active with a key that works.

import (
	"strings"
	"testing"
)

func TestBrowserThreeDSecureTestBank(t *testing.T) {
	c, block := startBrowserCaddy(t, "")
	site := c.URL()
	br := startChromium(t, desktop)
	ada := br.newTab(t, "ada")
	signIn(t, ada, c, "sca@example.com")
	token := ada.sessionToken(site)
	// The answers the page shows: the subscribe's 402 (waiting for the
	// bank) and the confirm's 402 after a failed check.
	ada.allowHTTPError("/subscribe", 402)
	ada.allowHTTPError("/confirm", 402)

	betaID := mustUser(t, site, token, "GET", "/api/pools", nil, 200).Get(`#(slug=="beta").id`).Str
	ada.clickText(`.pool[data-id="`+betaID+`"]`, "View hours & buy")
	ada.waitFor("the buy form", visible("#buy-form"))
	ada.choose("#card-test-card", "pm_card_authenticationRequired")
	ada.click("#card-save")
	ada.waitText("#buy", "Paying with Visa •••• 3184")
	buy := func() {
		t.Helper()
		ada.waitFor("the buy form", visible("#buy-form"))
		ada.waitFor("the "+block+" block", visible("#buy-block-"+block))
		ada.js(`(() => { const b = document.querySelector('#buy-block-`+block+`'); if (!b.checked) b.click(); const tc = document.querySelector('#buy-terms'); if (!tc.checked) tc.click(); return true; })()`, new(bool))
		ada.click("#buy-submit")
		ada.waitFor("the test bank's dialog", `(() => { const d = document.querySelector('#test-bank'); return !!d && d.open; })()`)
	}
	subs := func() []map[string]string {
		res := mustUser(t, site, token, "GET", "/api/subscriptions", nil, 200)
		var out []map[string]string
		for _, s := range res.Array() {
			out = append(out, map[string]string{"id": s.Get("id").Str, "status": s.Get("status").Str,
				"seats": s.Get("hours.#").String(), "key": s.Get("key.apiKey").Str})
		}
		return out
	}
	// seatsFree opens beta's page and waits for its map to show every seat
	// of the block free again (2 seats × 8 hours).
	seatsFree := func() {
		t.Helper()
		ada.route("#/pools/beta")
		ada.waitFor("the seat map", visible("#pool-map"))
		ada.waitFor("every seat of the block free", `document.querySelectorAll('#pool-map td[data-status="free"]').length === 16`)
	}

	// 1. The bank's dialog; closed unanswered, the purchase waits: its row
	// says for what and until when, and cancels at once.
	buy()
	ada.waitText("#test-bank", "Test bank: confirm this payment")
	ada.waitText("#test-bank", "$25.00")
	ada.screenshot("sca-test-bank")
	ada.js(`document.querySelector('#test-bank').close(), true`, new(bool))
	ada.waitText("#buy-waiting", "the payment still waits")
	ada.waitText("#buy-waiting", "Open the test bank")
	ada.route("#/subscriptions")
	ada.waitText(".sub", "Waiting for your bank's confirmation — confirm or cancel by")
	if txt := ada.text(".sub"); strings.Contains(txt, "Renews") {
		t.Errorf("the unpaid purchase's row says it renews:\n%s", txt)
	}
	ada.screenshot("sca-waiting-row")
	if s := subs(); len(s) != 1 || s[0]["status"] != "incomplete" || s[0]["seats"] != "8" {
		t.Fatalf("while waiting: %v", s)
	}
	// The row's "Confirm payment" opens the test bank again; closed
	// unanswered, the payment still waits.
	ada.clickText(".sub", "Confirm payment")
	ada.waitFor("the test bank's dialog from the row", `(() => { const d = document.querySelector('#test-bank'); return !!d && d.open; })()`)
	ada.js(`document.querySelector('#test-bank').close(), true`, new(bool))
	ada.waitText(".sub p.msg", "still waits for your bank's confirmation")
	ada.clickText(".sub", "Cancel purchase")
	ada.waitText(".sub", "canceled")
	ada.waitText(".sub", "Ended. Its seats are free again.")
	if s := subs(); s[0]["status"] != "canceled" || s[0]["seats"] != "0" {
		t.Fatalf("after the cancel: %v", s)
	}

	// 2. Bought again at once; the bank's check fails: the page says so,
	// nothing is charged, the row is canceled.
	seatsFree()
	buy()
	ada.click("#test-bank-fail")
	ada.waitText("#buy-unpaid", "Payment not confirmed")
	ada.waitText("#buy-unpaid", "nothing was charged and the seats are free again")
	ada.screenshot("sca-failed")
	if s := subs(); len(s) != 2 || s[0]["status"] != "canceled" || s[1]["status"] != "canceled" || s[1]["seats"] != "0" {
		t.Fatalf("after the failed check: %v", s)
	}
	ada.route("#/subscriptions")
	ada.waitFor("two canceled rows", `document.querySelectorAll('.sub').length === 2 && [...document.querySelectorAll('.sub')].every(r => r.innerText.includes('canceled') && r.innerText.includes('Ended') && !r.innerText.includes('Renews'))`)
	ada.screenshot("sca-failed-rows")

	// 3. Bought again, approved: active, with a key that works.
	seatsFree()
	buy()
	ada.click("#test-bank-approve")
	ada.waitText("#buy-result", "You are subscribed")
	ada.waitText("#buy-result", "charged $25.00")
	ada.click("#buy-create-key")
	key := revealed(t, ada, "#buy-result")
	ada.screenshot("sca-approved")
	s := subs()
	if len(s) != 3 || s[2]["status"] != "active" || s[2]["key"] != key || !strings.HasPrefix(key, "sk_pool_") {
		t.Fatalf("after approving: %v (page's key %q)", s, key)
	}
	wantChat(t, c, key, "m-beta", "with the key of a purchase confirmed in the test bank")
	ada.route("#/subscriptions")
	ada.waitText(`.sub[data-id="`+s[2]["id"]+`"]`, "Renews")
	ada.checkConsole()
}
