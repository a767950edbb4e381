package e2e_test

// The account page (/account/) driven in headless Chromium against the real
// caddy: sign in through the e-mail link read from Caddy's log, save a card,
// buy a seat, create a key and use it with the OpenAI SDK against the
// simulator, revoke it and see inference refused, cancel at period end,
// build combined keys (one refused by a rule, with the server's reason on
// the page), the phone-sized page, and the security of the sign-in: other
// users' objects, cross-site POSTs, used and expired links, the session
// cookie. Every test fails on a console error or warning of the page
// (browser_harness_test.go). The Stripe path is in browser_stripe_test.go.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/security"
	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/embedded"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

const browserSecret = "TIMEBLOCK_SECRET=browser-e2e-secret-0123456789abcdef"

// alphaPrices are the monthly seat prices of the pool "alpha", by block.
var alphaPrices = map[string]string{"asia": "30", "europe": "40", "americas": "45"}

// browserCaddyfile: "alpha" sells every block (so one is open whatever the
// hour) with a yearly discount, "beta" only the block open now. The page and
// the API are on one site with the gate and the simulator behind /v1/.
// billing is an extra line of the timeblock options (the Stripe test's).
const browserCaddyfile = `{
	timeblock {
		store embedded {{.Dir}}/timeblock.db
		secret {$TIMEBLOCK_SECRET}
		terms_version 2026-11
		%BILLING%
		pool alpha {
			model m-alpha
			name "Alpha 70B"
			description "General chat, served by the simulator"
			status active
			slots 4
			block asia 30
			block europe 40
			block americas 45
			annual_discount 0.15
		}
		pool beta {
			model m-beta
			name "Beta 8B"
			status active
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
	# Slow enough that a streamed answer holds its lane while the page
	# shows it (max_tokens 8 answers still take under half a second).
	timeblock_simulator {
		token_rate 20
		reply_tokens 400
	}
}
`

// nowBlock is the block holding the current UTC hour; the test skips when
// the block ends within a few minutes (the windows would move under it).
func nowBlock(t *testing.T) string {
	t.Helper()
	now := time.Now().UTC()
	if left := time.Duration(8-now.Hour()%8)*time.Hour - time.Duration(now.Minute())*time.Minute; left < 4*time.Minute {
		t.Skipf("too close to the end of the %s block; the windows would change mid-test", blockNames[now.Hour()/8])
	}
	return blockNames[now.Hour()/8]
}

func startBrowserCaddy(t *testing.T, billing string, opts ...e2e.Option) (*e2e.Caddy, string) {
	t.Helper()
	block := nowBlock(t)
	cf := strings.NewReplacer("%NOW%", block, "%BILLING%", billing).Replace(browserCaddyfile)
	return e2e.Start(t, cf, append([]e2e.Option{e2e.WithEnv(browserSecret)}, opts...)...), block
}

// signIn signs email in as a person does: the form on /account/, the link
// from Caddy's log (the notifier's, no smtp), the page opening it.
func signIn(t *testing.T, tb *tab, c *e2e.Caddy, email string) {
	t.Helper()
	tb.navigate(c.URL() + "/account/")
	tb.waitFor("the sign-in form", visible("#signin-form"))
	tb.typeInto("#signin-email", email)
	tb.click("#signin-submit")
	tb.waitText("#signin-sent", email)
	link := linkInLog(t, c, email)
	if !strings.HasPrefix(link, c.URL()+"/account/sign-in#token=tok_") {
		t.Fatalf("the logged link %q does not open %s/account/sign-in#token=tok_…", link, c.URL())
	}
	tb.navigate(link)
	tb.waitText("#who-email", email)
	var loc string
	tb.js(`location.href`, &loc)
	if strings.Contains(loc, "token=") {
		t.Errorf("after sign-in the address bar still holds the link's token: %s", loc)
	}
}

// revealed clicks "Reveal" in scope and returns the secret shown.
func revealed(t *testing.T, tb *tab, scope string) string {
	t.Helper()
	tb.clickText(scope, "Reveal")
	tb.waitFor("the secret to be revealed in "+scope, `!document.querySelector(`+jsq(scope+" code.secret")+`).innerText.includes('•')`)
	return strings.TrimSpace(tb.text(scope + " code.secret"))
}

// chat sends one chat completion with the OpenAI Go SDK.
func chat(t *testing.T, c *e2e.Caddy, key, model string) (*openai.ChatCompletion, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := c.OpenAIClient(key)
	return client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:     model,
		MaxTokens: openai.Int(8),
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
	})
}

// wantChat fails unless the key gets an answer for model.
func wantChat(t *testing.T, c *e2e.Caddy, key, model, when string) {
	t.Helper()
	resp, err := chat(t, c, key, model)
	if err != nil {
		t.Fatalf("%s: chat on %s: %v", when, model, err)
	}
	if len(resp.Choices) == 0 || resp.Choices[0].Message.Content == "" {
		t.Fatalf("%s: chat on %s answered no text: %+v", when, model, resp)
	}
}

// wantRefused waits until the key is refused with 401 or 403.
func wantRefused(t *testing.T, c *e2e.Caddy, key, model, when string) {
	t.Helper()
	eventually(t, 5*time.Second, when, func() error {
		_, err := chat(t, c, key, model)
		var apiErr *openai.Error
		switch {
		case err == nil:
			return errors.New("the key still gets answers")
		case errors.As(err, &apiErr) && (apiErr.StatusCode == 401 || apiErr.StatusCode == 403):
			return nil
		}
		return fmt.Errorf("refused, but not with 401/403: %v", err)
	})
}

// TestBrowserBuyerJourney is a buyer's first visit, all of it in the page:
// sign in by link, the pools, a pool's seat map, save a test card, buy a
// seat (prices as the API charges them), create a key and call the
// simulator with it through the OpenAI SDK, revoke it (refused) and
// reactivate it, cancel at period end (still works), build a combined key —
// first refused by rule 3 with the server's reason shown, then created and
// used — "Right now" (the window, a request in flight from the lanes
// stream, the usage of known requests), "Connect your agent", sign out. It
// writes docs/account-page.png and docs/account-now.png when
// TIMEBLOCK_UPDATE_SCREENSHOT=1.
func TestBrowserBuyerJourney(t *testing.T) {
	c, block := startBrowserCaddy(t, "")
	site := c.URL()
	br := startChromium(t, desktop)
	ada := br.newTab(t, "ada")
	const email = "ada@example.com"

	// Signed out: the sign-in form, which says how it works.
	signIn(t, ada, c, email)
	token := ada.sessionToken(site)
	if !strings.HasPrefix(token, "st_") {
		t.Fatalf("after sign-in the tb_session cookie is %q, want a session token st_…", token)
	}
	if got := mustUser(t, site, token, "GET", "/api/auth/session", nil, 200).Get("user.email").Str; got != email {
		t.Fatalf("the cookie's session belongs to %q, want %s", got, email)
	}
	checkSessionCookie(t, ada, site, false)

	// The pools: prices, seats free, the block open now.
	pools := mustUser(t, site, token, "GET", "/api/pools", nil, 200)
	alphaID := pools.Get(`#(slug=="alpha").id`).Str
	if alphaID == "" {
		t.Fatalf("GET /api/pools has no alpha: %s", pools.Raw)
	}
	card := `.pool[data-id="` + alphaID + `"]`
	ada.waitText(card, "Alpha 70B")
	cardText := ada.text(card)
	for _, want := range []string{"$30.00", "$40.00", "$45.00", "4 of 4", "open now", "15% off when billed yearly"} {
		if !strings.Contains(cardText, want) {
			t.Errorf("the alpha card does not say %q:\n%s", want, cardText)
		}
	}
	var openRow string
	ada.js(`[...document.querySelectorAll(`+jsq(card+" tbody tr")+`)].filter(r => r.innerText.includes('open now')).map(r => r.querySelector('th').innerText).join('|')`, &openRow)
	if !strings.HasPrefix(openRow, block) || strings.Contains(openRow, "|") {
		t.Errorf("the row marked open now is %q, want only %s", openRow, block)
	}

	// A pool's detail: 4 seats × 24 hours, the current hour and block marked.
	ada.clickText(card, "View hours & buy")
	ada.waitFor("the seat map", visible("#pool-map"))
	if n := ada.count("#pool-map td[data-hour]"); n != 4*24 {
		t.Errorf("the seat map has %d cells, want %d (4 seats × 24 hours)", n, 4*24)
	}
	if n := ada.count(`#pool-map td[data-status="free"]`); n != 4*24 {
		t.Errorf("the seat map shows %d free seats, want all %d", n, 4*24)
	}
	hour := time.Now().UTC().Hour()
	if got := ada.text("#pool-map th.now"); got != fmt.Sprintf("%02d", hour) {
		t.Errorf("the highlighted hour is %q, want %02d", got, hour)
	}
	if got := ada.text("#pool-map th.band.open"); !strings.HasPrefix(got, block) {
		t.Errorf("the block marked open is %q, want %s", got, block)
	}
	ada.waitText("#pool-open-now", "the "+block+" block is open")

	// Buy without a card or the terms: the page says what to do.
	ada.waitFor("the buy form", visible("#buy-form"))
	ada.click("#buy-block-" + block)
	ada.click("#buy-submit")
	ada.waitText("#buy-form p.msg", "Save a card first")

	// Save a test card (step 1).
	ada.choose("#card-test-card", "pm_card_visa")
	ada.click("#card-save")
	ada.waitText("#buy", "Paying with Visa •••• 4242")
	if st := mustUser(t, site, token, "GET", "/api/billing/status", nil, 200); !st.Get("hasPaymentMethod").Bool() || st.Get("paymentMethod.last4").Str != "4242" {
		t.Fatalf("after saving the card, billing status = %s", st.Raw)
	}

	// The price, as the API charges it: monthly, then yearly with the discount.
	price := alphaPrices[block]
	if got := ada.attr("#buy-charge", "data-amount"); got != price {
		t.Errorf("monthly charge shown %q, want %s", got, price)
	}
	ada.click("#buy-cycle-year")
	yearly := map[string]string{"30": "306", "40": "408", "45": "459"}[price] // price × 12 × 0.85
	ada.waitFor("the yearly price", `document.querySelector('#buy-charge').dataset.amount === `+jsq(yearly))
	ada.waitText("#buy-charge", "$"+yearly+".00")
	ada.click("#buy-cycle-month")
	ada.waitFor("the monthly price again", `document.querySelector('#buy-charge').dataset.amount === `+jsq(price))

	ada.click("#buy-submit")
	ada.waitText("#buy-form p.msg", "Tick the purchase terms box")
	ada.click("#buy-terms")
	ada.click("#buy-submit")
	ada.waitText("#buy-result", "You are subscribed")
	ada.waitText("#buy-result", "charged $"+price+".00")
	subs := mustUser(t, site, token, "GET", "/api/subscriptions", nil, 200)
	if subs.Get("#").Int() != 1 || subs.Get("0.status").Str != "active" || subs.Get("0.blocks.0").Str != block ||
		subs.Get("0.monthlyPrice").Str != price || subs.Get("0.key").Type != gjson.Null {
		t.Fatalf("after buying, GET /api/subscriptions = %s", subs.Raw)
	}
	subID := subs.Get("0.id").Str
	// The map now shows the seats of the block as the buyer's.
	ada.waitFor("8 seats shown as mine", `document.querySelectorAll('#pool-map td[data-status="mine"]').length === 8`)
	if path, png := ada.screenshot("account-page"); os.Getenv("TIMEBLOCK_UPDATE_SCREENSHOT") == "1" {
		dst := repoFile(t, "docs/account-page.png")
		if err := os.WriteFile(dst, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (from %s)", dst, path)
	}

	// Create the key, reveal it, and call the simulator with the SDK.
	ada.click("#buy-create-key")
	key := revealed(t, ada, "#buy-result")
	keys := mustUser(t, site, token, "GET", "/api/keys", nil, 200)
	if keys.Get("#").Int() != 1 || keys.Get("0.apiKey").Str != key || keys.Get("0.subscriptionId").Str != subID || !strings.HasPrefix(key, "sk_pool_") {
		t.Fatalf("the page revealed %q; GET /api/keys = %s", key, keys.Raw)
	}
	keyID := keys.Get("0.id").Str
	wantChat(t, c, key, "m-alpha", "the new key")

	// Keys: masked until revealed; revoke → inference refused; reactivate.
	ada.route("#/keys")
	row := `.key[data-id="` + keyID + `"]`
	ada.waitText(row, "active")
	if shown := ada.text(row + " code.secret"); strings.Contains(shown, key) || !strings.HasSuffix(shown, key[len(key)-4:]) {
		t.Errorf("the key list shows %q, want it masked with the last 4 characters", shown)
	}
	ada.clickText(row, "Revoke")
	ada.waitText(row, "revoked")
	ada.waitFor("the Reactivate button", `[...document.querySelectorAll(`+jsq(row+" button")+`)].some(b => b.textContent === 'Reactivate')`)
	if k := mustUser(t, site, token, "GET", "/api/keys", nil, 200); k.Get("0.isActive").Bool() {
		t.Fatalf("after Revoke the key is still active: %s", k.Raw)
	}
	wantRefused(t, c, key, "m-alpha", "the revoked key is refused")
	ada.clickText(row, "Reactivate")
	ada.waitFor("the Revoke button again", `[...document.querySelectorAll(`+jsq(row+" button")+`)].some(b => b.textContent === 'Revoke')`)
	eventually(t, 5*time.Second, "the reactivated key answers", func() error {
		_, err := chat(t, c, key, "m-alpha")
		return err
	})

	// Cancel at period end: confirmed in a dialog; the key keeps working.
	ada.route("#/subscriptions")
	sub := `.sub[data-id="` + subID + `"]`
	ada.waitText(sub, "Alpha 70B")
	ada.clickText(sub, "Cancel at period end")
	ada.waitFor("the confirmation dialog", `document.querySelector('#confirm-dialog').open`)
	if txt := ada.text("#confirm-dialog"); !strings.Contains(txt, "keeps working until") {
		t.Errorf("the cancel dialog does not say what it means: %q", txt)
	}
	ada.click("#confirm-ok")
	ada.waitFor("Keep renewing", `[...document.querySelectorAll(`+jsq(sub+" button")+`)].some(b => b.textContent === 'Keep renewing')`)
	ada.waitText(sub, "ends ")
	if s := mustUser(t, site, token, "GET", "/api/subscriptions", nil, 200); !s.Get("0.cancelAtPeriodEnd").Bool() || s.Get("0.status").Str != "active" {
		t.Fatalf("after cancel at period end: %s", s.Raw)
	}
	wantChat(t, c, key, "m-alpha", "a key whose subscription ends at period end")

	// Two keyless subscriptions (bought as a script would), then the
	// combined key builder: a boost across two pools is refused (rule 3)
	// with the server's reason on the page; as two lanes it is created.
	s2 := mustUser(t, site, token, "POST", "/api/pools/alpha/subscribe", map[string]any{"blocks": []string{block}}, 201).Get("id").Str
	s3 := mustUser(t, site, token, "POST", "/api/pools/beta/subscribe", map[string]any{"blocks": []string{block}}, 201).Get("id").Str
	ada.route("#/combined")
	ada.waitFor("the combined key form", visible("#combined-form"))
	ada.click("#combined-member-" + s2)
	ada.click("#combined-member-" + s3)
	ada.choose("#combined-role-"+s3, "boost")
	ada.waitText("#combined-hints", "rule 3")
	ada.allowHTTPError("/api/meta-keys", 400)
	ada.click("#combined-submit")
	ada.waitText("#combined-form p.msg", "rule 3: boost roles require all members to be in the same pool")
	if m := mustUser(t, site, token, "GET", "/api/meta-keys", nil, 200); m.Get("#").Int() != 0 {
		t.Fatalf("a refused combined key exists: %s", m.Raw)
	}
	ada.choose("#combined-role-"+s3, "lane")
	ada.waitFor("no rule hints", `document.querySelectorAll('#combined-hints li').length === 0`)
	for _, pool := range []string{"alpha", "beta"} {
		cell := fmt.Sprintf(`#combined-preview td[data-hour="%d"][data-pool="%s"]`, hour, pool)
		if got := ada.text(cell); got != "1" {
			t.Errorf("the preview gives %s %q lanes at %02d:00, want 1", pool, got, hour)
		}
	}
	ada.typeInto("#combined-label", "round the clock")
	ada.click("#combined-submit")
	metas := gjson.Result{}
	eventually(t, 5*time.Second, "the combined key on the server", func() error {
		metas = mustUser(t, site, token, "GET", "/api/meta-keys", nil, 200)
		if metas.Get("#").Int() != 1 {
			return fmt.Errorf("GET /api/meta-keys = %s", metas.Raw)
		}
		return nil
	})
	if metas.Get("0.label").Str != "round the clock" || metas.Get("0.members.#").Int() != 2 {
		t.Fatalf("the combined key = %s", metas.Raw)
	}
	metaID := metas.Get("0.id").Str
	combined := `.combined-key[data-id="` + metaID + `"]`
	ada.waitText(combined, "round the clock")
	meta := revealed(t, ada, combined)
	if meta != metas.Get("0.token").Str || !strings.HasPrefix(meta, "sk-compat-meta-") {
		t.Fatalf("the page revealed %q, the server has %q", meta, metas.Get("0.token").Str)
	}
	wantChat(t, c, meta, "m-beta", "the combined key on beta")
	wantChat(t, c, meta, "m-alpha", "the combined key on alpha")
	ada.screenshot("combined")

	// Usage: the combined key has made two requests (above); two more and
	// two for a model it does not hold, then a restart writes the gate's
	// counts (it writes every 30 s, and when it stops).
	var knownIn, knownOut int64
	for range 2 {
		resp, err := chat(t, c, meta, "m-alpha")
		if err != nil {
			t.Fatalf("the combined key on alpha: %v", err)
		}
		knownIn, knownOut = knownIn+resp.Usage.PromptTokens, knownOut+resp.Usage.CompletionTokens
	}
	for range 2 {
		if _, err := chat(t, c, meta, "m-nope"); err == nil {
			t.Fatal("the combined key was admitted for a model it does not hold")
		}
	}
	c.Restart()

	// Right now: from the key-status endpoint when the server has it, "—"
	// otherwise.
	ada.route("#/now")
	nowRow := `.now-row[data-id="` + keyID + `"]`
	ada.waitFor("the Right now row", visible(nowRow))
	if code, st := asUser(t, site, token, "GET", "/api/keys/"+keyID, nil); code == 200 {
		want := "closed"
		if st.Get("data.windowOpen").Bool() {
			want = "open"
		}
		ada.waitText(nowRow+" .now-window", want)
		ada.waitText(nowRow+" .now-lanes", fmt.Sprintf("%d of %d", st.Get("data.lanesInUse").Int(), st.Get("data.lanes").Int()))
		if !st.Get("data.windowOpen").Bool() {
			t.Errorf("GET /api/keys/%s says the window is closed in the %s block: %s", keyID, block, st.Raw)
		}
		// When the window closes, in UTC and in the viewer's time.
		if closes, err := time.Parse(time.RFC3339, st.Get("data.closesAt").Str); err != nil {
			t.Errorf("closesAt of an open window: %s", st.Raw)
		} else {
			ada.waitText(nowRow+" .now-when", "closes at "+closes.UTC().Format("15:04")+" UTC (")
			ada.waitText(nowRow+" .now-when", "your time), in ")
		}
		// Lanes in use, live from the key's stream: a request held open
		// shows with its model and endpoint, and goes.
		lanes := st.Get("data.lanes").Int()
		ada.waitFor("the key's lanes stream", `document.querySelector(`+jsq(nowRow)+`).dataset.stream === 'open'`)
		stop := holdStream(t, c, key, "m-alpha")
		ada.waitText(nowRow+" .now-lanes", fmt.Sprintf("1 of %d", lanes))
		ada.waitText(nowRow+" .now-flights", "m-alpha · /v1/chat/completions · since ")
		if _, png := ada.screenshot("now"); os.Getenv("TIMEBLOCK_UPDATE_SCREENSHOT") == "1" {
			if err := os.WriteFile(repoFile(t, "docs/account-now.png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		stop()
		ada.waitText(nowRow+" .now-lanes", fmt.Sprintf("0 of %d", lanes))
		if got := ada.text(nowRow + " .now-flights"); strings.TrimSpace(got) != "" {
			t.Errorf("after the request, the flights still list %q", got)
		}
		if n := len(ada.responsesTo("GET", "/api/keys/"+keyID+"/lanes")); n != 1 {
			t.Errorf("the page opened the key's lanes stream %d times, want once", n)
		}

		// The combined key's usage as the page shows it: what the API has,
		// which is the requests above.
		metaRow := `.now-row[data-id="` + metaID + `"]`
		usage := mustUser(t, site, token, "GET", "/api/meta-keys/"+metaID+"/usage", nil, 200)
		var in, out int64
		for _, r := range usage.Array() {
			in, out = in+r.Get("inputTokens").Int(), out+r.Get("outputTokens").Int()
		}
		if in < knownIn || out < knownOut || knownIn == 0 {
			t.Errorf("usage of the combined key: %d in / %d out tokens, the last two requests alone had %d / %d: %s", in, out, knownIn, knownOut, usage.Raw)
		}
		for _, cell := range []string{metaRow + " .now-usage-24h", metaRow + " .now-usage-7d"} {
			ada.waitText(cell, "4 requests")
			ada.waitText(cell, fmt.Sprintf("%s in / %s out tokens", thousands(in), thousands(out)))
			ada.waitText(cell, "2 refused (model not held 2)")
		}
		var data string
		ada.js(`JSON.stringify(document.querySelector(`+jsq(metaRow+" .now-usage-24h")+`).dataset)`, &data)
		if want := fmt.Sprintf(`{"requests":"4","input":"%d","output":"%d","refused":"2"}`, in, out); data != want {
			t.Errorf("the 24 h usage cell's data = %s, want %s", data, want)
		}
		ada.waitText(nowRow+" .now-usage-7d", "refused")
		if code, mst := asUser(t, site, token, "GET", "/api/meta-keys/"+metaID, nil); code == 200 {
			metaRow := `.now-row[data-id="` + metaID + `"]`
			ada.waitText(metaRow+" .now-lanes", fmt.Sprintf("%d of %d", mst.Get("data.lanesInUse").Int(), mst.Get("data.lanes").Int()))
			if mst.Get("data.lanes").Int() < 1 {
				t.Errorf("GET /api/meta-keys/%s gives the combined key no lanes in its open hour: %s", metaID, mst.Raw)
			}
		}
	} else {
		t.Logf("GET /api/keys/:id answers %d: the page must show —", code)
		ada.allowHTTPError("/api/keys/"+keyID, code)
		ada.allowHTTPError("/api/meta-keys/"+metaID, code)
		ada.waitFor("— for an unknown status", `document.querySelector(`+jsq(nowRow+" .now-lanes")+`).innerText.trim() === '—'`)
	}

	// Connect your agent: the snippets carry this key, site and model.
	ada.route("#/connect/" + keyID)
	ada.waitFor("the snippets", visible("#snippet-openai-py"))
	if got := ada.value("#connect-model"); got != "m-alpha" {
		t.Errorf("the model offered for the key is %q, want m-alpha", got)
	}
	for _, id := range []string{"#snippet-openai-py", "#snippet-openai-js"} {
		if s := ada.text(id); !strings.Contains(s, key) || !strings.Contains(s, site+"/v1") || !strings.Contains(s, "m-alpha") {
			t.Errorf("%s lacks the key, %s/v1 or m-alpha:\n%s", id, site, s)
		}
	}
	if s := ada.text("#snippet-claude"); !strings.Contains(s, "ANTHROPIC_BASE_URL="+site+"/compat") || !strings.Contains(s, key) {
		t.Errorf("the Claude Code snippet:\n%s", s)
	}
	if s := ada.text("#snippet-gemini"); !strings.Contains(s, "GOOGLE_GEMINI_BASE_URL="+site+"/gemini") ||
		!strings.Contains(s, "GEMINI_API_KEY="+key) || !strings.Contains(s, "--model m-alpha") {
		t.Errorf("the Gemini CLI snippet:\n%s", s)
	}
	if s := ada.text("#snippet-gemini-settings"); !strings.Contains(s, `"selectedType": "gemini-api-key"`) {
		t.Errorf("the Gemini CLI settings snippet:\n%s", s)
	}
	if s := ada.text("#snippet-genai-py"); !strings.Contains(s, `"base_url": "`+site+`/gemini"`) || !strings.Contains(s, key) {
		t.Errorf("the Gen AI SDK snippet:\n%s", s)
	}
	// Gemini CLI's two snippets, as a buyer scrolls to them.
	ada.js(`document.querySelector('#snippet-gemini-settings').scrollIntoView({block: 'center'})`, nil)
	ada.screenshot("connect-gemini")

	// Sign out: the server ends the session, the page shows the form.
	ada.click("#sign-out")
	ada.waitFor("the sign-in form after signing out", visible("#signin-form"))
	if code, env := asUser(t, site, token, "GET", "/api/auth/session", nil); code == 200 && env.Get("data.user.email").Str == email {
		t.Errorf("after signing out the session still works: %d %s", code, env.Raw)
	}
	if tok := ada.sessionToken(site); tok != "" {
		t.Errorf("after signing out the browser still has tb_session=%s…", tok[:6])
	}
}

// checkSessionCookie checks tb_session's attributes as the browser holds
// them: HttpOnly (and so out of document.cookie), SameSite=Lax, Path=/,
// Secure exactly on HTTPS, living about session_ttl (30 days).
func checkSessionCookie(t *testing.T, tb *tab, site string, https bool) {
	t.Helper()
	var found *network.Cookie
	for _, c := range tb.cookies(site + "/") {
		if c.Name == "tb_session" {
			found = c
		}
	}
	if found == nil {
		t.Fatalf("no tb_session cookie for %s", site)
	}
	if !found.HTTPOnly || found.SameSite != network.CookieSameSiteLax || found.Path != "/" || found.Secure != https {
		t.Errorf("tb_session: HttpOnly %v, SameSite %q, Path %q, Secure %v; want HttpOnly, Lax, /, Secure %v",
			found.HTTPOnly, found.SameSite, found.Path, found.Secure, https)
	}
	if exp := time.Unix(int64(found.Expires), 0); found.Session || exp.Before(time.Now().Add(29*24*time.Hour)) || exp.After(time.Now().Add(31*24*time.Hour)) {
		t.Errorf("tb_session expires %v (session cookie %v), want in 30 days", exp, found.Session)
	}
	var jsCookies string
	tb.js(`document.cookie`, &jsCookies)
	if strings.Contains(jsCookies, "tb_session") {
		t.Errorf("the page's script can read the session cookie: %q", jsCookies)
	}
}

// attr returns an attribute of the first element matching sel.
func (tb *tab) attr(sel, name string) string {
	tb.t.Helper()
	tb.waitFor(sel+" to exist", `document.querySelector(`+jsq(sel)+`)`)
	var s string
	tb.js(`document.querySelector(`+jsq(sel)+`).getAttribute(`+jsq(name)+`) || ''`, &s)
	return s
}

// value returns the value of a form control.
func (tb *tab) value(sel string) string {
	tb.t.Helper()
	tb.waitFor(sel+" to exist", `document.querySelector(`+jsq(sel)+`)`)
	var s string
	tb.js(`document.querySelector(`+jsq(sel)+`).value`, &s)
	return s
}

// TestBrowserPhone: the page at 390×844 (a phone, touch, device scale 2):
// signed in, the pools, a pool's detail with its seat map and the buy form,
// the keys — nothing wider than the screen (the seat map scrolls inside its
// own box), and the navigation reachable. Screenshots of each.
func TestBrowserPhone(t *testing.T) {
	c, block := startBrowserCaddy(t, "")
	br := startChromium(t, phone)
	tb := br.newTab(t, "phone")
	signIn(t, tb, c, "phone@example.com")
	// Nothing may stick out of the screen: on a phone the layout viewport
	// then grows past the device width and the page scrolls sideways.
	noOverflow := func(where string) {
		t.Helper()
		var got struct {
			Doc, Win int
			Wide     []string
		}
		tb.js(`(() => {
			const wide = [];
			for (const e of document.querySelectorAll('body *')) {
				if (e.closest('.scroll') && e !== e.closest('.scroll')) continue; // inside a box that scrolls sideways
				const r = e.getBoundingClientRect();
				if (r.width > 0 && r.right > `+fmt.Sprint(phone.w)+` + 1) {
					const p = e.parentElement && e.parentElement.getBoundingClientRect();
					if (!p || p.right <= `+fmt.Sprint(phone.w)+` + 1) wide.push(e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && typeof e.className === 'string' ? '.' + e.className.trim().split(/\s+/).join('.') : '') + ' (right edge ' + Math.round(r.right) + ')');
				}
			}
			return {Doc: document.documentElement.scrollWidth, Win: window.innerWidth, Wide: wide.slice(0, 8)};
		})()`, &got)
		if got.Doc > phone.w || got.Win > phone.w {
			t.Errorf("%s: the page is %d CSS pixels wide (layout viewport %d) on a %d-pixel phone, so it scrolls sideways; sticking out: %v",
				where, got.Doc, got.Win, phone.w, got.Wide)
		}
	}
	tb.waitText("#pools", "Alpha 70B")
	noOverflow("pools")
	tb.screenshot("phone-pools")

	tb.route("#/pools/alpha")
	tb.waitFor("the seat map", visible("#pool-map"))
	tb.waitFor("the buy form", visible("#buy-block-"+block))
	noOverflow("pool detail")
	var mapBox struct{ Client, Scroll int }
	tb.js(`(() => { const s = document.querySelector('#pool-map').closest('.scroll'); return {Client: s.clientWidth, Scroll: s.scrollWidth}; })()`, &mapBox)
	if mapBox.Client > phone.w || mapBox.Scroll <= mapBox.Client {
		t.Errorf("the seat map box is %d wide with %d of content: want it within the screen, scrolling sideways", mapBox.Client, mapBox.Scroll)
	}
	tb.screenshot("phone-pool-detail")

	// Every section is reachable from the navigation: each link is on the
	// screen or in a box that scrolls to it.
	var unreachable []string
	tb.js(`[...document.querySelectorAll('#nav a')].filter(a => {
		const r = a.getBoundingClientRect();
		if (r.width === 0 || r.height === 0) return true;
		if (r.right <= window.innerWidth && r.left >= 0) return false;
		const p = a.closest('#nav');
		return !(p && p.scrollWidth > p.clientWidth && getComputedStyle(p).overflowX !== 'visible');
	}).map(a => a.textContent)`, &unreachable)
	if len(unreachable) > 0 {
		t.Errorf("navigation links off the screen with no way to scroll to them: %v", unreachable)
	}
	tb.clickText("#nav", "Keys")
	tb.waitFor("the keys section", visible("#keys")+` && !document.querySelector('#keys .body').innerText.includes('Loading')`)
	noOverflow("keys")
	tb.screenshot("phone-keys")
}

// TestBrowserSecurity: two people signed in in two browser contexts; one
// never sees the other's subscriptions, keys, management keys or seats as
// hers, and the page cannot change them; a page on another origin cannot
// POST with the cookie; a used and an expired sign-in link are refused in
// the page; the session cookie's attributes.
func TestBrowserSecurity(t *testing.T) {
	c, block := startBrowserCaddy(t, "")
	site := c.URL()
	br := startChromium(t, desktop)
	ada := br.newTab(t, "ada")
	bob := br.newTab(t, "bob")
	signIn(t, ada, c, "ada@example.com")
	signIn(t, bob, c, "bob@example.com")
	adaToken, bobToken := ada.sessionToken(site), bob.sessionToken(site)
	if adaToken == "" || bobToken == "" || adaToken == bobToken {
		t.Fatalf("two browser contexts, two sessions: got %q and %q", adaToken, bobToken)
	}
	checkSessionCookie(t, bob, site, false)

	// Ada's objects, made as a script would.
	mustUser(t, site, adaToken, "POST", "/api/billing/setup-intent", map[string]any{"paymentMethod": "pm_card_visa"}, 200)
	adaSub := mustUser(t, site, adaToken, "POST", "/api/pools/alpha/subscribe", map[string]any{"blocks": []string{block}}, 201).Get("id").Str
	adaKey := mustUser(t, site, adaToken, "POST", "/api/keys/subscription", map[string]any{"subscriptionId": adaSub, "name": "ada-laptop"}, 201)
	adaKeyID, adaSecret := adaKey.Get("id").Str, adaKey.Get("apiKey").Str
	adaMK := mustUser(t, site, adaToken, "POST", "/api/keys/management", map[string]any{"name": "ada-ci"}, 201).Get("id").Str
	secrets := []string{adaSub, adaKeyID, adaSecret, adaSecret[len(adaSecret)-4:], adaMK, "ada-laptop", "ada-ci", "ada@example.com"}
	notShown := func(where string) {
		t.Helper()
		var html string
		bob.js(`document.documentElement.outerHTML`, &html)
		for _, s := range secrets {
			if strings.Contains(html, s) {
				t.Errorf("bob's %s shows ada's %q", where, s)
			}
		}
	}

	// Ada sees them in her page.
	ada.route("#/keys")
	ada.waitText(`.key[data-id="`+adaKeyID+`"]`, "ada-laptop")
	ada.waitText("#management-keys", "ada-ci")

	// Bob sees none of them, anywhere.
	bob.route("#/subscriptions")
	bob.waitText("#subscriptions", "No subscriptions yet")
	notShown("subscriptions")
	bob.route("#/keys")
	bob.waitText("#keys", "No keys yet")
	bob.waitText("#management-keys", "No management keys")
	notShown("keys")
	bob.route("#/combined")
	bob.waitText("#combined", "No combined keys yet")
	notShown("combined keys")
	bob.route("#/now")
	bob.waitText("#now", "No keys yet")
	notShown("right now")
	bob.route("#/connect")
	bob.waitText("#connect", "You need an active key first")
	notShown("connect")
	// On the seat map ada's seats are taken, not bob's.
	bob.route("#/pools/alpha")
	bob.waitFor("the seat map", visible("#pool-map"))
	if mine, taken := bob.count(`#pool-map td[data-status="mine"]`), bob.count(`#pool-map td[data-status="taken"]`); mine != 0 || taken != 8 {
		t.Errorf("bob's seat map: %d mine, %d taken; want 0 mine and ada's 8 taken", mine, taken)
	}
	notShown("pool detail")

	// Bob's page cannot change them: same-origin requests with his cookie,
	// as the page's own code sends them, are 404s.
	for _, r := range []struct{ method, path, body string }{
		{"PUT", "/api/keys/" + adaKeyID, `{"isActive":false}`},
		{"DELETE", "/api/keys/" + adaKeyID, ``},
		{"DELETE", "/api/keys/management/" + adaMK, ``},
		{"POST", "/api/subscriptions/" + adaSub + "/cancel", `{}`},
		{"POST", "/api/keys/subscription", `{"subscriptionId":"` + adaSub + `"}`},
	} {
		bob.allowHTTPError(r.path, 404)
		var status int
		bob.js(`fetch(`+jsq(r.path)+`, {method: `+jsq(r.method)+`, credentials: 'same-origin', headers: {'Content-Type': 'application/json'}`+
			map[bool]string{true: ``, false: `, body: ` + jsq(r.body)}[r.body == ""]+`}).then(r => r.status)`, &status)
		if status != 404 {
			t.Errorf("bob's page: %s %s → %d, want 404", r.method, r.path, status)
		}
	}
	keys := mustUser(t, site, adaToken, "GET", "/api/keys", nil, 200)
	subs := mustUser(t, site, adaToken, "GET", "/api/subscriptions", nil, 200)
	mks := mustUser(t, site, adaToken, "GET", "/api/keys/management", nil, 200)
	if keys.Get("#").Int() != 1 || !keys.Get("0.isActive").Bool() || subs.Get("0.cancelAtPeriodEnd").Bool() || mks.Get("#").Int() != 1 {
		t.Fatalf("bob's page changed ada's objects: keys %s, subscriptions %s, management keys %s", keys.Raw, subs.Raw, mks.Raw)
	}
	wantChat(t, c, adaSecret, "m-alpha", "ada's key after bob's attempts")

	// A page of another origin POSTs with ada's cookie: refused (403), and
	// nothing is created. Same site (127.0.0.1, another port: the Lax
	// cookie rides along) and cross-site (localhost).
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>evil</title><script>
window.done = fetch(%q, {method: 'POST', mode: 'no-cors', credentials: 'include',
	headers: {'Content-Type': 'text/plain'}, body: '{"name":"evil"}'}).then(() => 'sent', e => 'error: ' + e);
</script>`, site+"/api/keys/management")
	}))
	defer evil.Close()
	for _, origin := range []string{evil.URL, strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)} {
		ada.allowHTTPError("/api/keys/management", 403)
		before := len(ada.responsesTo("POST", "/api/keys/management"))
		ada.navigate(origin + "/")
		var done string
		ada.js(`window.done`, &done)
		var got []seenResponse
		eventually(t, 5*time.Second, "the cross-site POST's answer", func() error {
			if got = ada.responsesTo("POST", "/api/keys/management"); len(got) > before {
				return nil
			}
			return fmt.Errorf("no answer seen (the page's fetch: %s)", done)
		})
		if s := got[len(got)-1].status; s != 403 {
			t.Errorf("a POST from a page at %s with ada's cookie: %d, want 403", origin, s)
		}
	}
	if mks := mustUser(t, site, adaToken, "GET", "/api/keys/management", nil, 200); mks.Get("#").Int() != 1 {
		t.Fatalf("a cross-site POST created a management key: %s", mks.Raw)
	}
	// The same from Go: a browser's cross-site POST carrying the cookie is
	// 403; a script's (no Origin, no Sec-Fetch-Site) is not.
	post := func(hdr map[string]string) int {
		req, _ := http.NewRequest("POST", site+"/api/keys/management", strings.NewReader(`{"name":"from-go"}`))
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(&http.Cookie{Name: "tb_session", Value: adaToken})
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}); code != 403 {
		t.Errorf("cross-site POST with the cookie: %d, want 403", code)
	}
	if code := post(map[string]string{"Sec-Fetch-Site": "same-site", "Origin": evil.URL}); code != 403 {
		t.Errorf("same-site, cross-origin POST with the cookie: %d, want 403", code)
	}
	if code := post(nil); code != 201 {
		t.Errorf("the same POST from a script: %d, want 201", code)
	}

	// A used link: opened again (in a fresh browser context), refused with a
	// way to ask for a new one, and no session.
	carol := br.newTab(t, "carol")
	carol.allowHTTPError("/api/auth/verify", 401)
	used := linkInLog(t, c, "ada@example.com")
	carol.navigate(used)
	carol.waitText("#signin-error", "This sign-in link was already used or has expired")
	carol.waitFor("the form to ask for a new link", visible("#signin-form"))
	if tok := carol.sessionToken(site); tok != "" {
		t.Errorf("a used link gave a session")
	}

	// An expired link: asked for in the page, then aged in the store while
	// Caddy is stopped (as 16 minutes would), then opened.
	carol.navigate(site + "/account/")
	carol.typeInto("#signin-email", "late@example.com")
	carol.click("#signin-submit")
	carol.waitText("#signin-sent", "late@example.com")
	late := linkInLog(t, c, "late@example.com")
	c.Stop()
	ageSignInLink(t, filepath.Join(c.Dir, "timeblock.db"), strings.SplitN(late, "token=", 2)[1])
	c.Start()
	carol.navigate(late)
	carol.waitText("#signin-error", "This sign-in link was already used or has expired")
	if tok := carol.sessionToken(site); tok != "" {
		t.Errorf("an expired link gave a session")
	}
	if code, env := asUser(t, site, "", "POST", "/api/auth/verify", map[string]any{"token": strings.SplitN(late, "token=", 2)[1]}); code != 401 {
		t.Errorf("verify of the expired link from Go: %d %s", code, env.Raw)
	}
}

// ageSignInLink moves a sign-in link's expiry 1 minute into the past, in the
// embedded store file of a stopped Caddy.
func ageSignInLink(t *testing.T, path, token string) {
	t.Helper()
	st, err := embedded.Open(path)
	if err != nil {
		t.Fatalf("opening the store of the stopped caddy: %v", err)
	}
	defer st.Close()
	err = st.Update(context.Background(), func(tx accounts.Tx) error {
		rec, err := tx.TakeSignInToken(accounts.HashKey(token))
		if err != nil {
			return err
		}
		rec.CreatedAt = time.Now().Add(-16 * time.Minute)
		rec.ExpiresAt = time.Now().Add(-time.Minute)
		return tx.CreateSignInToken(rec)
	})
	if err != nil {
		t.Fatalf("aging the sign-in link: %v", err)
	}
}

// TestBrowserHarnessCatchesConsoleErrors: the harness itself sees what a
// broken page would write — console.error, console.warn, an uncaught
// exception, a rejected promise, a failed request — so "no console errors"
// in the tests above means something.
func TestBrowserHarnessCatchesConsoleErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>broken</title><link rel="icon" href="data:,"><body>
<script>console.error('boom'); console.warn('careful'); console.log('just-a-log-line');</script>
<script>Promise.reject(new Error('nobody caught me'));</script>
<script>fetch('/missing');</script>
<script>undefinedFunction();</script></body>`)
	}))
	defer srv.Close()
	br := startChromium(t, desktop)
	tb := br.newTab(t, "broken")
	tb.navigate(srv.URL + "/")
	want := []string{"console.error: boom", "console.warning: careful", "nobody caught me", "undefinedFunction", "status of 404"}
	eventually(t, 5*time.Second, "the console entries", func() error {
		var all []string
		for _, e := range tb.problems() {
			all = append(all, e.String())
		}
		joined := strings.Join(all, "\n")
		for _, w := range want {
			if !strings.Contains(joined, w) {
				return fmt.Errorf("missing %q in:\n%s", w, joined)
			}
		}
		if strings.Contains(joined, "just-a-log-line") {
			return fmt.Errorf("console.log counted as a problem:\n%s", joined)
		}
		return nil
	})
	tb.allowHTTPError("/missing", 404)
	if n := len(tb.problems()); n != 4 {
		t.Errorf("after allowing the 404, %d problems remain, want 4: %v", n, tb.problems())
	}
	// Clear them, or this test would fail at its end as it should for a page.
	tb.mu.Lock()
	tb.entries = nil
	tb.mu.Unlock()
}

// TestBrowserSessionCookieOverHTTPS: on an HTTPS site (Caddy's internal CA;
// the browser is told to accept its certificate through the protocol, not a
// flag) the link points at https and the session cookie is Secure, besides
// HttpOnly, SameSite=Lax and Path=/.
func TestBrowserSessionCookieOverHTTPS(t *testing.T) {
	c := e2e.Start(t, `{
	# The harness turns automatic HTTPS off; this site needs its
	# certificate management (not its redirects).
	auto_https disable_redirects
	skip_install_trust
	timeblock {
		store embedded {{.Dir}}/timeblock.db
		secret {$TIMEBLOCK_SECRET}
	}
}

:{{.HTTP}} {
	respond "plain HTTP site"
}

https://127.0.0.1:{{.HTTPS}} {
	tls internal
	@account path /api /api/* /account /account/*
	handle @account {
		timeblock_accounts
	}
}
`, e2e.WithEnv(browserSecret))
	site := fmt.Sprintf("https://127.0.0.1:%d", c.HTTPS)
	br := startChromium(t, desktop)
	tb := br.newTab(t, "https")
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	if _, err := chromedp.Call(ctx, security.SetIgnoreCertificateErrors, security.SetIgnoreCertificateErrorsParams{Ignore: true}); err != nil {
		t.Fatalf("Security.setIgnoreCertificateErrors: %v", err)
	}
	tb.navigate(site + "/account/")
	tb.waitFor("the sign-in form", visible("#signin-form"))
	tb.typeInto("#signin-email", "tls@example.com")
	tb.click("#signin-submit")
	tb.waitText("#signin-sent", "tls@example.com")
	link := linkInLog(t, c, "tls@example.com")
	if !strings.HasPrefix(link, site+"/account/sign-in#token=") {
		t.Fatalf("on an HTTPS site the link is %q, want %s/account/sign-in#token=…", link, site)
	}
	tb.navigate(link)
	tb.waitText("#who-email", "tls@example.com")
	checkSessionCookie(t, tb, site, true)
}

// thousands writes n as the page does (toLocaleString('en-US')): 12,345.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
