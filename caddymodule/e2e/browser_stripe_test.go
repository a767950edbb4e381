package e2e_test

// The account page with the Stripe processor: Stripe.js is the harness's
// stand-in (served through the browser's request interception), and Stripe
// itself a small stateful fake that both Caddy (with the secret key, through
// api_base) and the stand-in (with the publishable key, intercepted) talk
// to. A card whose setup asks for 3-D Secure is saved after the buyer
// completes the check in the page; a purchase that asks for it again is
// confirmed in the page; a declined card says so.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

const browserPublishableKey = "pk_test_browser0123456789abcdef"

// stripeCard is how a test card number behaves.
type stripeCard struct {
	brand, last4 string
	setupAuth    bool   // its setup asks for 3-D Secure; on-session payments do too
	decline      string // "" works; else the setup is declined with this message
}

var stripeCards = map[string]stripeCard{
	"4242424242424242": {brand: "visa", last4: "4242"},
	"4000002500003155": {brand: "visa", last4: "3155", setupAuth: true},
	"4000000000000002": {brand: "visa", last4: "0002", decline: "Your card was declined."},
}

// fakeStripe answers the Stripe API calls of the processor (secret key) and
// of Stripe.js (publishable key, "key" form field).
type fakeStripe struct {
	mu       sync.Mutex
	n        int
	cards    map[string]stripeCard // payment method → card
	owner    map[string]string     // payment method → customer
	sis      map[string]map[string]string
	pis      map[string]map[string]string
	setUp    map[string]bool // payment methods set up off session
	browser  []string        // the calls Stripe.js made, "METHOD path"
	replays  map[string][]byte
	problems []string
}

func newFakeStripe() *fakeStripe {
	return &fakeStripe{cards: map[string]stripeCard{}, owner: map[string]string{}, sis: map[string]map[string]string{},
		pis: map[string]map[string]string{}, setUp: map[string]bool{}, replays: map[string][]byte{}}
}

func (f *fakeStripe) id(prefix string) string {
	f.n++
	return fmt.Sprintf("%s_browser%d", prefix, f.n)
}

func stripeError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"type": typ, "code": code, "message": msg}})
}

func stripeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (f *fakeStripe) pmJSON(id string) map[string]any {
	c := f.cards[id]
	return map[string]any{"id": id, "object": "payment_method", "type": "card", "customer": f.owner[id],
		"card": map[string]any{"brand": c.brand, "last4": c.last4}}
}

func (f *fakeStripe) siJSON(si map[string]string, expand bool) map[string]any {
	o := map[string]any{"id": si["id"], "object": "setup_intent", "status": si["status"], "customer": si["customer"],
		"payment_method": si["pm"], "usage": "off_session", "client_secret": si["id"] + "_secret_x"}
	if expand {
		o["payment_method"] = f.pmJSON(si["pm"])
	}
	if si["error"] != "" {
		o["last_setup_error"] = map[string]any{"type": "card_error", "code": "card_declined", "message": si["error"]}
	}
	return o
}

func piJSON(pi map[string]string) map[string]any {
	amount, _ := strconv.ParseInt(pi["amount"], 10, 64)
	return map[string]any{"id": pi["id"], "object": "payment_intent", "status": pi["status"], "amount": amount,
		"currency": "usd", "customer": pi["customer"], "client_secret": pi["id"] + "_secret_x"}
}

func (f *fakeStripe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		stripeError(w, 400, "invalid_request_error", "", err.Error())
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/") // v1, resource, id, action
	fromBrowser := r.Form.Get("key") != ""
	if fromBrowser {
		if r.Form.Get("key") != browserPublishableKey || r.Header.Get("Authorization") != "" {
			f.problems = append(f.problems, "Stripe.js call with key "+r.Form.Get("key"))
			stripeError(w, 401, "invalid_request_error", "", "Invalid API Key provided")
			return
		}
		f.browser = append(f.browser, r.Method+" "+r.URL.Path)
		f.serveBrowser(w, r, parts)
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer sk_test_") {
		f.problems = append(f.problems, "server call without the secret key: "+r.Method+" "+r.URL.Path)
		stripeError(w, 401, "invalid_request_error", "", "Invalid API Key provided")
		return
	}
	if idem := r.Header.Get("Idempotency-Key"); r.Method == "POST" && idem != "" {
		if b, ok := f.replays[idem]; ok {
			w.Header().Set("Content-Type", "application/json")
			w.Write(b)
			return
		}
		rec := httptest.NewRecorder()
		f.serveServer(rec, r, parts)
		if rec.Code == 200 {
			f.replays[idem] = rec.Body.Bytes()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		return
	}
	f.serveServer(w, r, parts)
}

// serveBrowser answers Stripe.js: a card becomes a payment method, and the
// card holder's 3-D Secure outcome confirms a SetupIntent or PaymentIntent.
func (f *fakeStripe) serveBrowser(w http.ResponseWriter, r *http.Request, parts []string) {
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/payment_methods":
		card, ok := stripeCards[r.Form.Get("card[number]")]
		if !ok {
			stripeError(w, 402, "card_error", "incorrect_number", "Your card number is incorrect.")
			return
		}
		id := f.id("pm")
		f.cards[id] = card
		stripeJSON(w, f.pmJSON(id))
	case r.Method == "POST" && len(parts) == 4 && parts[1] == "setup_intents" && parts[3] == "confirm":
		si, ok := f.sis[parts[2]]
		if !ok || r.Form.Get("client_secret") != si["id"]+"_secret_x" {
			stripeError(w, 404, "invalid_request_error", "resource_missing", "No such setupintent")
			return
		}
		if r.Form.Get("authentication") == "passed" {
			si["status"] = "succeeded"
			f.setUp[si["pm"]] = true
		} else {
			si["status"], si["error"] = "requires_payment_method", "We are unable to authenticate your payment method."
		}
		stripeJSON(w, f.siJSON(si, false))
	case r.Method == "POST" && len(parts) == 4 && parts[1] == "payment_intents" && parts[3] == "confirm":
		pi, ok := f.pis[parts[2]]
		if !ok || r.Form.Get("client_secret") != pi["id"]+"_secret_x" {
			stripeError(w, 404, "invalid_request_error", "resource_missing", "No such payment_intent")
			return
		}
		if r.Form.Get("authentication") == "passed" {
			pi["status"] = "succeeded"
		} else {
			pi["status"] = "requires_payment_method"
		}
		stripeJSON(w, piJSON(pi))
	default:
		f.problems = append(f.problems, "unexpected Stripe.js call "+r.Method+" "+r.URL.Path)
		stripeError(w, 404, "invalid_request_error", "", "Unrecognized request URL")
	}
}

// serveServer answers the processor in Caddy.
func (f *fakeStripe) serveServer(w http.ResponseWriter, r *http.Request, parts []string) {
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/customers":
		stripeJSON(w, map[string]any{"id": f.id("cus"), "object": "customer", "email": r.Form.Get("email")})
	case r.Method == "POST" && len(parts) == 3 && parts[1] == "customers":
		stripeJSON(w, map[string]any{"id": parts[2], "object": "customer"})
	case r.Method == "POST" && len(parts) == 4 && parts[1] == "payment_methods" && parts[3] == "attach":
		if _, ok := f.cards[parts[2]]; !ok {
			stripeError(w, 404, "invalid_request_error", "resource_missing", "No such PaymentMethod: '"+parts[2]+"'")
			return
		}
		f.owner[parts[2]] = r.Form.Get("customer")
		stripeJSON(w, f.pmJSON(parts[2]))
	case r.Method == "POST" && r.URL.Path == "/v1/setup_intents":
		pm := r.Form.Get("payment_method")
		card := f.cards[pm]
		si := map[string]string{"id": f.id("seti"), "customer": r.Form.Get("customer"), "pm": pm, "status": "succeeded"}
		f.sis[si["id"]] = si
		switch {
		case f.owner[pm] != si["customer"]:
			stripeError(w, 400, "invalid_request_error", "", "The provided PaymentMethod does not belong to the Customer")
			return
		case card.decline != "":
			stripeError(w, 402, "card_error", "card_declined", card.decline)
			return
		case card.setupAuth:
			si["status"] = "requires_action"
		default:
			f.setUp[pm] = true
		}
		stripeJSON(w, f.siJSON(si, false))
	case r.Method == "POST" && len(parts) == 3 && parts[1] == "setup_intents":
		si, ok := f.sis[parts[2]]
		if !ok {
			stripeError(w, 404, "invalid_request_error", "resource_missing", "No such setupintent")
			return
		}
		stripeJSON(w, f.siJSON(si, false))
	case r.Method == "GET" && len(parts) == 3 && parts[1] == "setup_intents":
		si, ok := f.sis[parts[2]]
		if !ok {
			stripeError(w, 404, "invalid_request_error", "resource_missing", "No such setupintent")
			return
		}
		stripeJSON(w, f.siJSON(si, r.Form.Get("expand[0]") == "payment_method"))
	case r.Method == "POST" && r.URL.Path == "/v1/payment_intents":
		pm := r.Form.Get("payment_method")
		pi := map[string]string{"id": f.id("pi"), "customer": r.Form.Get("customer"), "amount": r.Form.Get("amount"), "status": "succeeded"}
		f.pis[pi["id"]] = pi
		if f.owner[pm] != pi["customer"] {
			stripeError(w, 400, "invalid_request_error", "", "The provided PaymentMethod does not belong to the Customer")
			return
		}
		if f.cards[pm].setupAuth && r.Form.Get("off_session") != "true" {
			if r.Form.Get("error_on_requires_action") == "true" {
				pi["status"] = "requires_payment_method"
				stripeError(w, 402, "card_error", "authentication_required", "Your card was declined. This transaction requires authentication.")
				return
			}
			pi["status"] = "requires_action"
		}
		stripeJSON(w, piJSON(pi))
	case r.Method == "GET" && len(parts) == 3 && parts[1] == "payment_intents" && parts[2] != "search":
		pi, ok := f.pis[parts[2]]
		if !ok {
			stripeError(w, 404, "invalid_request_error", "resource_missing", "No such payment_intent")
			return
		}
		stripeJSON(w, piJSON(pi))
	case r.Method == "POST" && len(parts) == 4 && parts[1] == "payment_intents" && parts[3] == "cancel":
		pi, ok := f.pis[parts[2]]
		if !ok {
			stripeError(w, 404, "invalid_request_error", "resource_missing", "No such payment_intent")
			return
		}
		pi["status"] = "canceled"
		stripeJSON(w, piJSON(pi))
	case r.Method == "GET" && r.URL.Path == "/v1/payment_intents/search":
		stripeJSON(w, map[string]any{"object": "search_result", "data": []any{}, "has_more": false, "url": r.URL.Path})
	default:
		f.problems = append(f.problems, "unexpected server call "+r.Method+" "+r.URL.Path)
		stripeError(w, 404, "invalid_request_error", "", "Unrecognized request URL ("+r.Method+": "+r.URL.Path+")")
	}
}

// TestBrowserStripe: with billing stripe, the page loads Stripe.js (the
// stand-in, intercepted) and enters the card in its element. A declined
// card says so and saves nothing; a card whose bank asks for 3-D Secure is
// saved once the buyer completes the check in the page; buying with it asks
// again, and the purchase completes in the page. What the server holds is
// checked after each step, and what Stripe.js sent to "Stripe".
func TestBrowserStripe(t *testing.T) {
	fake := newFakeStripe()
	api := httptest.NewServer(fake)
	defer api.Close()
	c, block := startBrowserCaddy(t, `billing stripe {
			secret_key {env.STRIPE_SECRET_KEY}
			webhook_secret {env.STRIPE_WEBHOOK_SECRET}
			publishable_key `+browserPublishableKey+`
			api_base `+api.URL+`
		}`, e2e.WithEnv("STRIPE_SECRET_KEY="+e2eStripeKey, "STRIPE_WEBHOOK_SECRET="+e2eWebhookSecret))
	site := c.URL()
	br := startChromium(t, desktop)
	tb := br.newTab(t, "stripe")
	scriptLoads, apiCalls := tb.interceptStripe(fake)
	signIn(t, tb, c, "card@example.com")
	token := tb.sessionToken(site)
	if cfg := mustUser(t, site, "", "GET", "/api/auth/config", nil, 200); cfg.Get("processor").Str != "stripe" || cfg.Get("stripePublishableKey").Str != browserPublishableKey {
		t.Fatalf("GET /api/auth/config = %s", cfg.Raw)
	}

	tb.route("#/pools/alpha")
	tb.waitFor("the Stripe card element", visible("#card-element #stripe-standin-card"))
	if scriptLoads.Load() == 0 {
		t.Fatal("the page mounted a card element without loading Stripe.js from js.stripe.com")
	}
	if tb.count("#card-test-card") != 0 {
		t.Error("with Stripe the page still offers the test processor's cards")
	}

	// A declined card: Stripe's message, nothing saved.
	tb.allowHTTPError("/api/billing/setup-intent", 402)
	tb.typeInto("#stripe-standin-card", "4000 0000 0000 0002")
	tb.click("#card-save")
	tb.waitText("#card-form p.msg", "Your card was declined.")
	if st := mustUser(t, site, token, "GET", "/api/billing/status", nil, 200); st.Get("hasPaymentMethod").Bool() {
		t.Fatalf("a declined card was saved: %s", st.Raw)
	}

	// A card whose setup asks for 3-D Secure: the bank's check shows in the
	// page; once completed the card is saved.
	tb.typeInto("#stripe-standin-card", "4000 0025 0000 3155")
	tb.click("#card-save")
	tb.click("#stripe-standin-3ds-complete")
	tb.waitText("#buy", "Paying with Visa •••• 3155")
	st := mustUser(t, site, token, "GET", "/api/billing/status", nil, 200)
	if !st.Get("hasPaymentMethod").Bool() || st.Get("paymentMethod.last4").Str != "3155" || st.Get("processor").Str != "stripe" {
		t.Fatalf("after the 3-D Secure setup, billing status = %s", st.Raw)
	}

	// Buying asks for 3-D Secure again (on session): completed in the page,
	// the subscription is active and the key can be created.
	price := alphaPrices[block]
	tb.allowHTTPError("/api/pools/alpha/subscribe", 402) // 402 incomplete: 3-D Secure
	tb.click("#buy-block-" + block)
	tb.click("#buy-terms")
	tb.click("#buy-submit")
	tb.click("#stripe-standin-3ds-complete")
	tb.waitText("#buy-result", "You are subscribed")
	tb.waitText("#buy-result", "charged $"+price+".00")
	subs := mustUser(t, site, token, "GET", "/api/subscriptions", nil, 200)
	if subs.Get("#").Int() != 1 || subs.Get("0.status").Str != "active" || subs.Get("0.blocks.0").Str != block {
		t.Fatalf("after the 3-D Secure purchase, subscriptions = %s", subs.Raw)
	}
	tb.click("#buy-create-key")
	key := revealed(t, tb, "#buy-result")
	wantChat(t, c, key, "m-alpha", "a key bought through Stripe")

	fake.mu.Lock()
	defer fake.mu.Unlock()
	for _, p := range fake.problems {
		t.Errorf("fake Stripe: %s", p)
	}
	var paid []string
	for _, pi := range fake.pis {
		if pi["status"] == "succeeded" {
			paid = append(paid, pi["amount"])
		}
	}
	if len(paid) != 1 || paid[0] != price+"00" {
		t.Errorf("Stripe holds paid PaymentIntents %v, want one of %s00 cents", paid, price)
	}
	want := []string{"POST /v1/payment_methods", "POST /v1/payment_methods", "POST /v1/setup_intents/", "POST /v1/payment_intents/"}
	if len(fake.browser) != len(want) {
		t.Errorf("Stripe.js calls %v, want %d like %v", fake.browser, len(want), want)
	} else {
		for i, w := range want {
			if !strings.HasPrefix(fake.browser[i], w) {
				t.Errorf("Stripe.js call %d is %s, want %s…", i, fake.browser[i], w)
			}
		}
	}
	if int(apiCalls.Load()) != len(fake.browser) {
		t.Errorf("%d requests to api.stripe.com were intercepted, the fake saw %d", apiCalls.Load(), len(fake.browser))
	}
}
