package e2e_test

// The buyer's ledger on the account page, in headless Chromium: a yearly
// purchase shows what it charged and what it will charge next and when,
// the billing history lists the charge with its receipt, and the receipt
// opens with the seller block of the Caddyfile on top.

import (
	"strings"
	"testing"
	"time"
)

const sellerBlock = `seller {
			name "Example Seats Ltd"
			address "1 Main Street"
			address "Springfield 12345"
			email billing@seats.example
			tax_id EU123456789
		}`

func TestBrowserBillingHistory(t *testing.T) {
	c, block := startBrowserCaddy(t, sellerBlock)
	site := c.URL()
	br := startChromium(t, desktop)
	ada := br.newTab(t, "ada")
	signIn(t, ada, c, "ada@example.com")
	token := ada.sessionToken(site)
	mustUser(t, site, token, "POST", "/api/billing/setup-intent", map[string]any{"paymentMethod": "pm_card_visa"}, 200)

	// Buy a year of the block open now on the page.
	ada.route("#/pools/alpha")
	ada.waitFor("the buy form", visible("#buy-block-"+block))
	ada.click("#buy-block-" + block)
	ada.click("#buy-cycle-year")
	yearly := map[string]string{"30": "306", "40": "408", "45": "459"}[alphaPrices[block]] // price × 12 × 0.85
	ada.waitFor("the yearly price", `document.querySelector('#buy-charge').dataset.amount === `+jsq(yearly))
	ada.click("#buy-terms")
	ada.click("#buy-submit")
	ada.waitText("#buy-result", "You are subscribed")

	subs := mustUser(t, site, token, "GET", "/api/subscriptions", nil, 200)
	sub := subs.Get("0")
	if sub.Get("periodAmount").Str != yearly || sub.Get("nextChargeAt").Str == "" || sub.Get("nextChargeAt").Str != sub.Get("currentPeriodEnd").Str {
		t.Fatalf("GET /api/subscriptions = %s: want periodAmount %s and the next charge at the period end", subs.Raw, yearly)
	}
	charges := mustUser(t, site, token, "GET", "/api/billing/charges", nil, 200)
	if charges.Get("#").Int() != 1 || charges.Get("0.kind").Str != "purchase" || charges.Get("0.amount").Str != yearly ||
		charges.Get("0.subscriptionId").Str != sub.Get("id").Str {
		t.Fatalf("GET /api/billing/charges = %s: want the one purchase of %s", charges.Raw, yearly)
	}
	number := charges.Get("0.number").Str
	today := time.Now().UTC().Format("2006-01-02")
	next := sub.Get("nextChargeAt").Str[:10]

	// The Subscriptions tab: what it charged, what it will charge and when.
	ada.route("#/subscriptions")
	row := `.sub[data-id="` + sub.Get("id").Str + `"]`
	ada.waitText(row+" .sub-charged", "$"+yearly+".00 on "+today)
	ada.waitText(row+" .sub-next-charge", "$"+yearly+".00 on "+next)
	ada.waitText("#billing-history", number)
	if n := ada.count("#billing-history tr.charge-row"); n != 1 {
		t.Errorf("the billing history has %d rows, want 1", n)
	}
	history := ada.text("#billing-history")
	for _, want := range []string{today, "Purchase", "Alpha 70B", "$" + yearly + ".00", "Paid", "Receipt"} {
		if !strings.Contains(history, want) {
			t.Errorf("the billing history does not say %q:\n%s", want, history)
		}
	}
	var link struct{ Href, Target string }
	ada.js(`(() => { const a = document.querySelector('#billing-history a.receipt-link'); return {Href: a.getAttribute('href'), Target: a.target}; })()`, &link)
	if link.Href != "/api/billing/charges/"+charges.Get("0.id").Str+"/receipt" || link.Target != "_blank" {
		t.Errorf("the receipt link is %+v", link)
	}
	ada.screenshot("billing-history")

	// The receipt opens (the session cookie rides along) with the seller on top.
	ada.navigate(site + link.Href)
	ada.waitText("main", "Example Seats Ltd")
	receipt := ada.text("main")
	for _, want := range []string{"Receipt", number, "1 Main Street", "Springfield 12345", "billing@seats.example", "Tax ID: EU123456789",
		"ada@example.com", "$" + yearly + ".00", "Total paid", today} {
		if !strings.Contains(receipt, want) {
			t.Errorf("the receipt does not say %q:\n%s", want, receipt)
		}
	}
	ada.screenshot("receipt")
}
