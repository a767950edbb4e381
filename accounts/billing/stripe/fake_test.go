package stripe_test

// fakeStripe is a small stateful Stripe for the tests where state matters:
// customers, attached payment methods, SetupIntents, PaymentIntents with
// idempotent replays, declines, cards that require authentication, refunds
// and search.
// It answers the way Stripe's API does for the calls the processor makes.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

type fakeCard struct {
	brand, last4 string
	declineCode  string // "" charges succeed
	message      string
	authRequired bool // every payment and setup needs 3-D Secure
	// setupAuth: the setup needs 3-D Secure; once set up, off-session
	// payments succeed, on-session ones still need it.
	setupAuth    bool
	setupDecline bool // a SetupIntent's confirmation is declined (card_declined)
	setupFails   bool // a SetupIntent's confirmation ends requires_payment_method
}

// fakeCards are Stripe's test tokens the fake knows.
var fakeCards = map[string]fakeCard{
	"pm_card_visa":                                     {brand: "visa", last4: "4242"},
	"pm_card_mastercard":                               {brand: "mastercard", last4: "4444"},
	"pm_card_chargeCustomerFail":                       {brand: "visa", last4: "0341", declineCode: "generic_decline", message: "Your card was declined."},
	"pm_card_visa_chargeDeclinedInsufficientFunds":     {brand: "visa", last4: "9995", declineCode: "insufficient_funds", message: "Your card has insufficient funds."},
	"pm_card_authenticationRequired":                   {brand: "visa", last4: "3184", authRequired: true},
	"pm_card_authenticationRequiredSetupForOffSession": {brand: "visa", last4: "3155", setupAuth: true},
	"pm_card_visa_chargeDeclined":                      {brand: "visa", last4: "0002", setupDecline: true, declineCode: "generic_decline", message: "Your card was declined."},
	// Not a Stripe token: a setup whose confirmation answers 200 with
	// requires_payment_method and a last_setup_error.
	"pm_card_fake_setupFails": {brand: "visa", last4: "0069", setupFails: true, declineCode: "expired_card", message: "Your card has expired."},
}

type fakeSI struct {
	ID, Customer, PaymentMethod, Status, Usage string
	LastError                                  string
	Metadata                                   map[string]string
}

type fakePI struct {
	ID, Customer, PaymentMethod, Status string
	Amount                              int64
	Metadata                            map[string]string
	Refunded                            bool
	AmountRefunded                      int64 // cents refunded in all
	Refunds                             int   // refunds made (not replays)
}

type fakeRequest struct {
	Method, Path, IdempotencyKey string
	Form                         map[string]string
}

type fakeStripe struct {
	t   *testing.T
	srv *httptest.Server

	mu        sync.Mutex
	n         int
	customers map[string]string    // id → default payment method
	methods   map[string]string    // pm id → card token
	owner     map[string]string    // pm id → customer
	pis       map[string]*fakePI   // by id
	sis       map[string]*fakeSI   // SetupIntents by id
	setUp     map[string]bool      // pm ids set up for off-session payments
	replays   map[string]fakeReply // idempotency key → first answer
	disputes  map[string][2]string // dispute id → status, payment intent id
	requests  []fakeRequest
	failNext  int // answer the next n requests 500 (after doing nothing)
	// loseNext makes the next n payment-intent creations happen (kept for
	// replay under their key) and answers 500 instead of their result, as
	// an answer lost on its way back.
	loseNext int
	// loseRefunds: the same for the next n refunds.
	loseRefunds int
}

type fakeReply struct {
	status int
	body   []byte
	params string // the request's path and form, compared as Stripe does
}

func newFakeStripe(t *testing.T) *fakeStripe {
	f := &fakeStripe{t: t, customers: map[string]string{}, methods: map[string]string{}, owner: map[string]string{},
		pis: map[string]*fakePI{}, sis: map[string]*fakeSI{}, setUp: map[string]bool{}, replays: map[string]fakeReply{}, disputes: map[string][2]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeStripe) URL() string { return f.srv.URL }

func (f *fakeStripe) id(prefix string) string {
	f.n++
	return fmt.Sprintf("%s_fake%d", prefix, f.n)
}

// calls returns the requests made to path prefix, oldest first.
func (f *fakeStripe) calls(method, prefix string) []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeRequest
	for _, r := range f.requests {
		if r.Method == method && strings.HasPrefix(r.Path, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// setDispute makes (or changes) a dispute of a PaymentIntent.
func (f *fakeStripe) setDispute(id, status, pi string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disputes[id] = [2]string{status, pi}
}

// setPIStatus changes a PaymentIntent's status (a payment that settles later).
func (f *fakeStripe) setPIStatus(id, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pis[id].Status = status
}

// setSIStatus changes a SetupIntent's status (the page confirmed it); a
// succeeded one sets its card up for off-session payments.
func (f *fakeStripe) setSIStatus(id, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	si := f.sis[id]
	si.Status = status
	if status == "succeeded" {
		f.setUp[si.PaymentMethod] = true
	}
}

// setupIntent returns a copy of a SetupIntent, or nil.
func (f *fakeStripe) setupIntent(id string) *fakeSI {
	f.mu.Lock()
	defer f.mu.Unlock()
	si, ok := f.sis[id]
	if !ok {
		return nil
	}
	c := *si
	return &c
}

// newestSetupIntent returns a copy of the last SetupIntent made, or nil.
func (f *fakeStripe) newestSetupIntent() *fakeSI {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := f.n; i > 0; i-- {
		if si, ok := f.sis[fmt.Sprintf("seti_fake%d", i)]; ok {
			c := *si
			return &c
		}
	}
	return nil
}

func (f *fakeStripe) paymentIntents() []*fakePI {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*fakePI
	for i := 1; i <= f.n; i++ {
		if pi, ok := f.pis[fmt.Sprintf("pi_fake%d", i)]; ok {
			c := *pi
			out = append(out, &c)
		}
	}
	return out
}

func (f *fakeStripe) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		f.t.Errorf("fake stripe: %v", err)
	}
	form := map[string]string{}
	for k, v := range r.Form {
		form[k] = v[0]
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer sk_test_") {
		f.reply(w, 401, errBody("invalid_request_error", "", "", "Invalid API Key provided"))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	idem := r.Header.Get("Idempotency-Key")
	f.requests = append(f.requests, fakeRequest{Method: r.Method, Path: r.URL.Path, IdempotencyKey: idem, Form: form})
	if f.failNext > 0 {
		f.failNext--
		f.reply(w, 500, errBody("api_error", "", "", "something went wrong"))
		return
	}
	if r.Method == http.MethodPost && idem != "" {
		if rep, ok := f.replays[idem]; ok {
			if rep.params != requestParams(r.URL.Path, form) {
				// Stripe's rule: a key names one request.
				f.reply(w, 400, errBody("idempotency_error", "", "", "Keys for idempotent requests can only be used with the same parameters they were first used with."))
				return
			}
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(rep.status)
			w.Write(rep.body)
			return
		}
	}
	status, body := f.route(r.Method, r.URL.Path, form)
	b, _ := json.Marshal(body)
	if r.Method == http.MethodPost && idem != "" && status != 500 {
		f.replays[idem] = fakeReply{status, b, requestParams(r.URL.Path, form)}
	}
	if f.loseRefunds > 0 && r.Method == http.MethodPost && r.URL.Path == "/v1/refunds" {
		f.loseRefunds--
		f.reply(w, 500, errBody("api_error", "", "", "the answer was lost"))
		return
	}
	if f.loseNext > 0 && r.Method == http.MethodPost && r.URL.Path == "/v1/payment_intents" {
		f.loseNext--
		f.reply(w, 500, errBody("api_error", "", "", "the answer was lost"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// requestParams is what makes two requests under one idempotency key the
// same request: the path and every form parameter.
func requestParams(path string, form map[string]string) string {
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(path)
	for _, k := range keys {
		b.WriteString("&" + k + "=" + form[k])
	}
	return b.String()
}

func (f *fakeStripe) reply(w http.ResponseWriter, status int, body any) {
	b, _ := json.Marshal(body)
	w.WriteHeader(status)
	w.Write(b)
}

func errBody(typ, code, decline, msg string) map[string]any {
	e := map[string]any{"type": typ, "message": msg}
	if code != "" {
		e["code"] = code
	}
	if decline != "" {
		e["decline_code"] = decline
	}
	return map[string]any{"error": e}
}

func (f *fakeStripe) piJSON(pi *fakePI) map[string]any {
	return map[string]any{"id": pi.ID, "object": "payment_intent", "status": pi.Status, "amount": pi.Amount,
		"currency": "usd", "customer": pi.Customer, "metadata": pi.Metadata, "client_secret": pi.ID + "_secret"}
}

// siJSON is a SetupIntent as Stripe answers it; expand puts the payment
// method's object in place of its id.
func (f *fakeStripe) siJSON(si *fakeSI, expand bool) map[string]any {
	o := map[string]any{"id": si.ID, "object": "setup_intent", "status": si.Status, "customer": si.Customer,
		"payment_method": si.PaymentMethod, "usage": si.Usage, "client_secret": si.ID + "_secret", "metadata": si.Metadata}
	if expand {
		card := fakeCards[f.methods[si.PaymentMethod]]
		o["payment_method"] = map[string]any{"id": si.PaymentMethod, "object": "payment_method", "type": "card",
			"card": map[string]any{"brand": card.brand, "last4": card.last4}}
	}
	if si.LastError != "" {
		o["last_setup_error"] = map[string]any{"type": "card_error", "code": "card_declined", "message": si.LastError}
	}
	return o
}

func (f *fakeStripe) route(method, path string, form map[string]string) (int, any) {
	parts := strings.Split(strings.Trim(path, "/"), "/") // v1, resource, ...
	switch {
	case method == "POST" && path == "/v1/customers":
		id := f.id("cus")
		f.customers[id] = ""
		return 200, map[string]any{"id": id, "object": "customer", "email": form["email"]}
	case method == "POST" && len(parts) == 3 && parts[1] == "customers":
		if _, ok := f.customers[parts[2]]; !ok {
			return 404, errBody("invalid_request_error", "resource_missing", "", "No such customer: '"+parts[2]+"'")
		}
		if pm := form["invoice_settings[default_payment_method]"]; pm != "" {
			if f.owner[pm] != parts[2] {
				return 400, errBody("invalid_request_error", "", "", "The customer does not have a payment method with the ID "+pm)
			}
			f.customers[parts[2]] = pm
		}
		return 200, map[string]any{"id": parts[2], "object": "customer"}
	case method == "POST" && len(parts) == 4 && parts[1] == "payment_methods" && parts[3] == "attach":
		token := parts[2]
		card, ok := fakeCards[token]
		if !ok {
			return 404, errBody("invalid_request_error", "resource_missing", "", "No such PaymentMethod: '"+token+"'")
		}
		id := f.id("pm")
		f.methods[id] = token
		f.owner[id] = form["customer"]
		return 200, map[string]any{"id": id, "object": "payment_method", "type": "card",
			"card": map[string]any{"brand": card.brand, "last4": card.last4}}
	case method == "POST" && path == "/v1/setup_intents":
		si := &fakeSI{ID: f.id("seti"), Customer: form["customer"], PaymentMethod: form["payment_method"], Usage: form["usage"],
			Status: "requires_confirmation", Metadata: metadata(form)}
		f.sis[si.ID] = si
		if f.owner[si.PaymentMethod] != si.Customer {
			si.Status = "requires_payment_method"
			return 400, errBody("invalid_request_error", "", "", "The provided PaymentMethod does not belong to the Customer")
		}
		if form["confirm"] != "true" {
			return 200, f.siJSON(si, false)
		}
		card := fakeCards[f.methods[si.PaymentMethod]]
		switch {
		case card.authRequired || card.setupAuth:
			si.Status = "requires_action"
		case card.setupDecline:
			si.Status = "requires_payment_method"
			e := errBody("card_error", "card_declined", card.declineCode, card.message)
			e["error"].(map[string]any)["setup_intent"] = f.siJSON(si, false)
			return 402, e
		case card.setupFails:
			si.Status, si.LastError = "requires_payment_method", card.message
		default:
			si.Status = "succeeded"
			f.setUp[si.PaymentMethod] = true
		}
		return 200, f.siJSON(si, false)
	case method == "POST" && len(parts) == 3 && parts[1] == "setup_intents":
		si, ok := f.sis[parts[2]]
		if !ok {
			return 404, errBody("invalid_request_error", "resource_missing", "", "No such setupintent: '"+parts[2]+"'")
		}
		for k, v := range metadata(form) {
			si.Metadata[k] = v
		}
		return 200, f.siJSON(si, false)
	case method == "GET" && path == "/v1/setup_intents":
		// Newest first, as Stripe lists; only the customer filter and limit.
		limit, _ := strconv.Atoi(form["limit"])
		var data []any
		for i := f.n; i > 0 && (limit == 0 || len(data) < limit); i-- {
			if si, ok := f.sis[fmt.Sprintf("seti_fake%d", i)]; ok && (form["customer"] == "" || si.Customer == form["customer"]) {
				data = append(data, f.siJSON(si, false))
			}
		}
		return 200, map[string]any{"object": "list", "data": data, "has_more": false, "url": path}
	case method == "GET" && len(parts) == 3 && parts[1] == "setup_intents":
		si, ok := f.sis[parts[2]]
		if !ok {
			return 404, errBody("invalid_request_error", "resource_missing", "", "No such setupintent: '"+parts[2]+"'")
		}
		return 200, f.siJSON(si, form["expand[0]"] == "payment_method")
	case method == "POST" && path == "/v1/payment_intents":
		amount, _ := strconv.ParseInt(form["amount"], 10, 64)
		pi := &fakePI{ID: f.id("pi"), Customer: form["customer"], PaymentMethod: form["payment_method"], Amount: amount, Metadata: metadata(form)}
		f.pis[pi.ID] = pi
		if f.owner[pi.PaymentMethod] != pi.Customer {
			pi.Status = "requires_payment_method"
			return 400, errBody("invalid_request_error", "", "", "The provided PaymentMethod does not belong to the Customer")
		}
		card := fakeCards[f.methods[pi.PaymentMethod]]
		if card.setupAuth {
			// Set up: off session the bank exempts it; on session it
			// still asks, as for a card that always does.
			card.authRequired = !f.setUp[pi.PaymentMethod] || form["off_session"] != "true"
		}
		switch {
		case card.authRequired && form["off_session"] == "true":
			pi.Status = "requires_payment_method"
			e := errBody("card_error", "authentication_required", "authentication_required", "Your card was declined. This transaction requires authentication.")
			e["error"].(map[string]any)["payment_intent"] = f.piJSON(pi)
			return 402, e
		case card.authRequired && form["error_on_requires_action"] == "true":
			pi.Status = "requires_payment_method"
			return 402, errBody("card_error", "authentication_required", "", "Your card was declined. This transaction requires authentication.")
		case card.authRequired:
			pi.Status = "requires_action"
			return 200, f.piJSON(pi)
		case card.declineCode != "":
			pi.Status = "requires_payment_method"
			e := errBody("card_error", "card_declined", card.declineCode, card.message)
			e["error"].(map[string]any)["payment_intent"] = f.piJSON(pi)
			return 402, e
		}
		pi.Status = "succeeded"
		return 200, f.piJSON(pi)
	case method == "POST" && len(parts) == 4 && parts[1] == "payment_intents" && parts[3] == "cancel":
		pi, ok := f.pis[parts[2]]
		if !ok {
			return 404, errBody("invalid_request_error", "resource_missing", "", "No such payment_intent")
		}
		if pi.Status == "succeeded" || pi.Status == "processing" {
			return 400, errBody("invalid_request_error", "payment_intent_unexpected_state", "", "You cannot cancel this PaymentIntent because it has a status of "+pi.Status+".")
		}
		pi.Status = "canceled"
		return 200, f.piJSON(pi)
	case method == "POST" && path == "/v1/refunds":
		pi, ok := f.pis[form["payment_intent"]]
		if !ok || pi.Status != "succeeded" {
			return 400, errBody("invalid_request_error", "resource_missing", "", "No such payment_intent")
		}
		if pi.Refunded {
			return 400, errBody("invalid_request_error", "charge_already_refunded", "", "Charge has already been refunded.")
		}
		amount := pi.Amount - pi.AmountRefunded
		if a, ok := form["amount"]; ok {
			n, err := strconv.ParseInt(a, 10, 64)
			if err != nil || n <= 0 {
				return 400, errBody("invalid_request_error", "parameter_invalid_integer", "amount", "Invalid positive integer")
			}
			if n > amount {
				return 400, errBody("invalid_request_error", "amount_too_large", "amount",
					fmt.Sprintf("Refund amount ($%.2f) is greater than unrefunded amount on charge ($%.2f)", float64(n)/100, float64(amount)/100))
			}
			amount = n
		}
		pi.AmountRefunded += amount
		pi.Refunded = pi.AmountRefunded == pi.Amount
		pi.Refunds++
		re := map[string]any{"id": f.id("re"), "object": "refund", "payment_intent": pi.ID, "status": "succeeded", "amount": amount}
		if form["expand[0]"] == "charge" {
			re["charge"] = map[string]any{"id": "ch_" + pi.ID, "object": "charge", "amount": pi.Amount,
				"amount_refunded": pi.AmountRefunded, "refunded": pi.Refunded, "payment_intent": pi.ID}
		} else {
			re["charge"] = "ch_" + pi.ID
		}
		return 200, re
	case method == "GET" && len(parts) == 3 && parts[1] == "payment_intents" && parts[2] != "search":
		pi, ok := f.pis[parts[2]]
		if !ok {
			return 404, errBody("invalid_request_error", "resource_missing", "", "No such payment_intent: '"+parts[2]+"'")
		}
		return 200, f.piJSON(pi)
	case method == "GET" && len(parts) == 3 && parts[1] == "disputes":
		d, ok := f.disputes[parts[2]]
		if !ok {
			return 404, errBody("invalid_request_error", "resource_missing", "", "No such dispute: '"+parts[2]+"'")
		}
		return 200, map[string]any{"id": parts[2], "object": "dispute", "status": d[0], "payment_intent": d[1]}
	case method == "GET" && path == "/v1/payment_intents/search":
		// Only the query form the processor sends: metadata['k']:'v'.
		q := form["query"]
		var data []any
		for i := 1; i <= f.n; i++ {
			pi, ok := f.pis[fmt.Sprintf("pi_fake%d", i)]
			if !ok {
				continue
			}
			for k, v := range pi.Metadata {
				esc := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v)
				if q == fmt.Sprintf("metadata['%s']:'%s'", k, esc) {
					data = append(data, f.piJSON(pi))
				}
			}
		}
		return 200, map[string]any{"object": "search_result", "data": data, "has_more": false, "url": path}
	}
	return 404, errBody("invalid_request_error", "", "", "Unrecognized request URL ("+method+": "+path+")")
}

// metadata reads the metadata[k] fields of a form.
func metadata(form map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range form {
		if strings.HasPrefix(k, "metadata[") {
			m[strings.TrimSuffix(strings.TrimPrefix(k, "metadata["), "]")] = v
		}
	}
	return m
}
