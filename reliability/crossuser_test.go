//go:build reliability

package reliability

// Cross-user access: user B, with their own session token and management
// key, calls every /api route with the ids of user A's objects (keys,
// combined keys, subscriptions, management keys) in the path and in the
// body, reads and writes, and every operator route on the public site. The
// routes come from the router's source, so a route added without a case
// here fails the test.

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// routePatterns reads the patterns ("METHOD /path/{id}") registered in the
// non-test files of accounts/api: calls of route, public, operatorRoute and
// handle with a string literal first argument.
func routePatterns(t *testing.T) (api, operator []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "accounts", "api", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("accounts/api sources: %v (%d files)", err, len(files))
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			lit, isLit := call.Args[0].(*ast.BasicLit)
			if !ok || !isLit || lit.Kind != token.STRING {
				return true
			}
			pattern, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			method, path, found := strings.Cut(pattern, " ")
			if !found || method == "" || method != strings.ToUpper(method) {
				return true
			}
			switch {
			case (sel.Sel.Name == "route" || sel.Sel.Name == "public" || sel.Sel.Name == "operatorRoute") && strings.HasPrefix(path, "/api/"):
				api = append(api, pattern)
			case sel.Sel.Name == "handle" && strings.HasPrefix(path, "/timeblock/"):
				operator = append(operator, pattern)
			}
			return true
		})
	}
	if len(api) < 10 || len(operator) < 2 {
		t.Fatalf("found %d /api and %d operator routes in accounts/api; the parser no longer sees the router", len(api), len(operator))
	}
	sort.Strings(api)
	sort.Strings(operator)
	return api, operator
}

// crossWorld is what A owns and what B owns, by id and secret.
type crossWorld struct {
	a, b *user
	// A's objects.
	aKeyID, aKey              string // consumption key of aSubKeyed
	aSubKeyed, aFree1, aFree2 string // a subscription with a key; two keyless ones
	aCombinedID, aCombinedTok string // combined key of two more subscriptions
	aMgmtID, aMgmtKey         string
	aPastDue                  string // a subscription the operator marked past due
	aWaitRef                  string // the payment of A's purchase waiting for 3-D Secure (the test bank's ref)
	aChargeID                 string // one of A's charges in the ledger (its receipt)
	// B's objects.
	bMgmtKey      string
	bCombinedID   string
	bFree, bFree2 string // keyless subscriptions of B
	bSpare        string // a second session of B's, for signing out
}

// secrets lists every id and secret of A's that B must never see.
func (w *crossWorld) secrets() map[string]string {
	return map[string]string{
		"A's user id": w.a.id, "A's email": w.a.email, "A's session token": w.a.token,
		"A's key id": w.aKeyID, "A's key": w.aKey,
		"A's subscription (keyed)": w.aSubKeyed, "A's subscription (free 1)": w.aFree1, "A's subscription (free 2)": w.aFree2,
		"A's combined key id": w.aCombinedID, "A's combined key": w.aCombinedTok,
		"A's management key id": w.aMgmtID, "A's management key": w.aMgmtKey,
		"A's past-due subscription": w.aPastDue, "A's waiting payment": w.aWaitRef,
		"A's charge": w.aChargeID,
	}
}

// A cross-user call: B's request, and whether it names a foreign object
// (then only 404 is right) or is B's own business (then 2xx or 4xx is
// fine, but nothing of A's may be in the answer).
type crossCall struct {
	method, path string
	body         any
	foreign      bool
	// forged: a call that is not B's to make at all (a processor's
	// webhook): any refusal is right, 2xx is not.
	forged bool
	header []string
}

// crossCases maps every /api route to B's calls. A route missing here fails
// TestCrossUserAccess.
func crossCases(w *crossWorld) map[string][]crossCall {
	f := func(method, path string, body any) crossCall {
		return crossCall{method: method, path: path, body: body, foreign: true}
	}
	own := func(method, path string, body any) crossCall {
		return crossCall{method: method, path: path, body: body}
	}
	return map[string][]crossCall{
		"GET /api/auth/config":  {own("GET", "/api/auth/config", nil)},
		"POST /api/auth/email":  {own("POST", "/api/auth/email", map[string]any{"email": w.b.email})},
		"POST /api/auth/verify": {own("POST", "/api/auth/verify", map[string]any{"token": "tok_not-a-link-we-sent"})},
		"GET /api/auth/session": {own("GET", "/api/auth/session", nil)},
		// B's spare session: the one that authenticates every other call lives on.
		"POST /api/auth/sign-out": {{method: "POST", path: "/api/auth/sign-out", header: []string{"Authorization", "Bearer " + w.bSpare}}},

		"GET /api/keys": {own("GET", "/api/keys", nil)},
		"POST /api/keys/subscription": {
			f("POST", "/api/keys/subscription", map[string]any{"subscriptionId": w.aFree1}),
			f("POST", "/api/keys/subscription", map[string]any{"subscriptionId": w.aSubKeyed, "name": "mine"}),
		},
		"PUT /api/keys/{id}": {
			f("PUT", "/api/keys/"+w.aKeyID, map[string]any{"isActive": false}),
			f("PUT", "/api/keys/"+w.aKeyID, map[string]any{"name": "taken"}),
		},
		"DELETE /api/keys/{id}": {f("DELETE", "/api/keys/"+w.aKeyID, nil)},
		"GET /api/keys/{id}":    {f("GET", "/api/keys/"+w.aKeyID, nil)},
		"GET /api/keys/{id}/{view}": {f("GET", "/api/keys/"+w.aKeyID+"/usage", nil),
			f("GET", "/api/keys/"+w.aKeyID+"/usage?from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z", nil),
			f("GET", "/api/keys/"+w.aKeyID+"/lanes", nil)},

		"GET /api/keys/management":         {own("GET", "/api/keys/management", nil)},
		"POST /api/keys/management":        {own("POST", "/api/keys/management", map[string]any{"name": "b-extra"})},
		"DELETE /api/keys/management/{id}": {f("DELETE", "/api/keys/management/"+w.aMgmtID, nil)},

		"GET /api/meta-keys": {own("GET", "/api/meta-keys", nil)},
		"POST /api/meta-keys": {
			f("POST", "/api/meta-keys", map[string]any{"pledgeIds": []string{w.aFree1, w.aFree2}, "label": "stolen"}),
			f("POST", "/api/meta-keys", map[string]any{"pledgeIds": []string{w.bFree, w.aFree1}, "label": "mixed"}),
		},
		"PATCH /api/meta-keys/{id}/member-roles": {
			f("PATCH", "/api/meta-keys/"+w.aCombinedID+"/member-roles", map[string]any{"roles": map[string]string{w.aFree1: "boost"}}),
		},
		"PUT /api/meta-keys/{id}/members": {
			f("PUT", "/api/meta-keys/"+w.aCombinedID+"/members", map[string]any{"pledgeIds": []string{w.bFree, w.bFree2}}),
			// B's own combined key, A's subscriptions as members.
			f("PUT", "/api/meta-keys/"+w.bCombinedID+"/members", map[string]any{"pledgeIds": []string{w.aFree1, w.aFree2}}),
		},
		"PATCH /api/meta-keys/{id}":     {f("PATCH", "/api/meta-keys/"+w.aCombinedID, map[string]any{"label": "renamed by b"})},
		"DELETE /api/meta-keys/{id}":    {f("DELETE", "/api/meta-keys/"+w.aCombinedID, nil)},
		"GET /api/meta-keys/{id}":       {f("GET", "/api/meta-keys/"+w.aCombinedID, nil)},
		"GET /api/meta-keys/{id}/usage": {f("GET", "/api/meta-keys/"+w.aCombinedID+"/usage", nil)},
		"GET /api/meta-keys/{id}/lanes": {f("GET", "/api/meta-keys/"+w.aCombinedID+"/lanes", nil)},

		"GET /api/pools/disclosure": {own("GET", "/api/pools/disclosure", nil)},
		"GET /api/pools":            {own("GET", "/api/pools", nil)},
		"GET /api/pools/{id}":       {own("GET", "/api/pools/open", nil), own("GET", "/api/pools/race", nil)},
		"POST /api/pools/{id}/subscribe": {
			own("POST", "/api/pools/open/subscribe", map[string]any{"blocks": []string{"asia"}, "quantity": 1}),
		},
		"GET /api/pools/{id}/my-subscriptions": {
			own("GET", "/api/pools/open/my-subscriptions", nil), own("GET", "/api/pools/race/my-subscriptions", nil),
		},
		"GET /api/pools/{id}/my-keys": {own("GET", "/api/pools/open/my-keys", nil), own("GET", "/api/pools/race/my-keys", nil)},
		// B holds nothing on "race", where A does: nothing of A's is canceled.
		"DELETE /api/pools/{id}/pledge": {f("DELETE", "/api/pools/race/pledge", nil), own("DELETE", "/api/pools/open/pledge", nil)},

		// Finishing a 3-D Secure purchase: only the subscription's owner may.
		// The built-in processor's bank step: only the payment's buyer may
		// answer it.
		"POST /api/billing/test-bank/{ref}": {
			f("POST", "/api/billing/test-bank/"+w.aWaitRef, map[string]any{"approve": true}),
			f("POST", "/api/billing/test-bank/"+w.aWaitRef, map[string]any{"approve": false}),
		},

		"POST /api/subscriptions/{id}/confirm": {
			f("POST", "/api/subscriptions/"+w.aSubKeyed+"/confirm", nil),
			f("POST", "/api/subscriptions/"+w.aFree1+"/confirm", nil),
		},

		"GET /api/subscriptions": {own("GET", "/api/subscriptions", nil)},
		"POST /api/subscriptions/{id}/cancel": {
			f("POST", "/api/subscriptions/"+w.aSubKeyed+"/cancel", nil),
			f("POST", "/api/subscriptions/"+w.aPastDue+"/cancel", nil),
		},
		"POST /api/subscriptions/{id}/resume": {f("POST", "/api/subscriptions/"+w.aFree1+"/resume", nil)},

		// The operator's endpoints: B is no operator, so each is an unknown
		// endpoint to B, whatever it names (A's objects or none).
		"GET /api/operator/pools": {f("GET", "/api/operator/pools", nil)},
		"GET /api/operator/subscriptions": {f("GET", "/api/operator/subscriptions?email="+w.a.email, nil),
			f("GET", "/api/operator/subscriptions?status=active", nil)},
		"POST /api/operator/subscriptions/{id}/deliver": {f("POST", "/api/operator/subscriptions/"+w.aFree1+"/deliver", nil)},
		"POST /api/operator/subscriptions/{id}/cancel": {
			f("POST", "/api/operator/subscriptions/"+w.aSubKeyed+"/cancel", map[string]any{"atPeriodEnd": false}),
			f("POST", "/api/operator/subscriptions/"+w.aPastDue+"/cancel", map[string]any{"atPeriodEnd": true}),
		},
		"POST /api/operator/pools/{slug}/status": {f("POST", "/api/operator/pools/open/status", map[string]any{"status": "paused"})},
		"GET /api/operator/audit":                {f("GET", "/api/operator/audit", nil)},
		"GET /api/operator/charges": {f("GET", "/api/operator/charges", nil),
			f("GET", "/api/operator/charges?format=csv&from=2020-01-01T00:00:00Z", nil)},
		"POST /api/operator/charges/{id}/refund": {f("POST", "/api/operator/charges/"+w.aChargeID+"/refund", map[string]any{"amount": "1"}),
			f("POST", "/api/operator/charges/"+w.aChargeID+"/refund", nil)},
		"POST /api/operator/keys/{id}/revoke": {f("POST", "/api/operator/keys/"+w.aKeyID+"/revoke", nil)},

		// The ledger: B's own list; A's receipt is an unknown charge to B.
		"GET /api/billing/charges":              {own("GET", "/api/billing/charges", nil), own("GET", "/api/billing/charges?limit=1", nil)},
		"GET /api/billing/charges/{id}/receipt": {f("GET", "/api/billing/charges/"+w.aChargeID+"/receipt", nil)},

		"POST /api/billing/setup-intent": {own("POST", "/api/billing/setup-intent", map[string]any{"paymentMethod": "pm_card_mastercard"})},
		"GET /api/billing/status":        {own("GET", "/api/billing/status", nil)},
		// Registered only with a processor that has webhooks (not the
		// test processor this node runs): a forged event about A's
		// subscription, with a made-up signature.
		"POST /api/billing/webhook": {{method: "POST", path: "/api/billing/webhook", foreign: true, forged: true,
			header: []string{"Stripe-Signature", "t=1,v1=00"},
			body: map[string]any{"id": "evt_forged", "type": "invoice.payment_failed",
				"data": map[string]any{"object": map[string]any{"metadata": map[string]any{"subscriptionId": w.aSubKeyed, "userId": w.a.id}}}}}},
	}
}

func TestCrossUserAccess(t *testing.T) {
	apiRoutes, operatorRoutes := routePatterns(t)
	c := startNode(t, nodeOpts{})
	w := buildCrossWorld(t, c)
	before := snapshot(t, w.a)

	cases := crossCases(w)
	missing := 0
	for _, r := range apiRoutes {
		if len(cases[r]) == 0 {
			t.Errorf("route %s has no cross-user case in crossCases: add one", r)
			missing++
		}
	}
	for r := range cases {
		if !contains(apiRoutes, r) {
			t.Errorf("crossCases has %s, which the router no longer has", r)
		}
	}

	secrets := w.secrets()
	calls, foreignCalls, readLeaks, not404, distinct := 0, 0, 0, 0, 0
	for _, cred := range []struct{ name, token string }{{"session", w.b.token}, {"management key", w.bMgmtKey}} {
		for _, r := range apiRoutes {
			for _, cc := range cases[r] {
				body := ""
				if cc.body != nil {
					j, _ := json.Marshal(cc.body)
					body = string(j)
				}
				hdr := append(bearer(cred.token), cc.header...)
				a := do(t, cc.method, c.URL()+cc.path, nilIfEmpty(body), hdr...)
				calls++
				// What B sent may be echoed ("subscription <id> not found");
				// anything else of A's is a leak.
				if what := leaked(a.body, secrets, cc.path+body); what != "" {
					t.Errorf("B (%s) %s %s: the answer holds %s: %.300s", cred.name, cc.method, cc.path, what, a.body)
					readLeaks++
				}
				if cc.foreign {
					foreignCalls++
					switch {
					case cc.forged && a.status/100 == 2:
						t.Errorf("B (%s) %s %s (forged): %s, want a refusal", cred.name, cc.method, cc.path, a)
						not404++
					case !cc.forged && a.status != http.StatusNotFound:
						t.Errorf("B (%s) %s %s (A's object): %s, want 404", cred.name, cc.method, cc.path, a)
						not404++
					}
					// The same call with unknown ids in place of A's must
					// get the same answer: A's objects are not told apart.
					path, ubody := unknownIDs(cc.path, w), unknownIDs(body, w)
					u := do(t, cc.method, c.URL()+path, nilIfEmpty(ubody), hdr...)
					if u.status != a.status || unknownIDs(string(a.body), w) != string(u.body) {
						t.Errorf("B (%s) %s %s: A's ids answer %s, unknown ids %s", cred.name, cc.method, cc.path, a, u)
						distinct++
					}
				} else if a.status >= 500 {
					t.Errorf("B (%s) %s %s: %s", cred.name, cc.method, cc.path, a)
				}
			}
		}
	}

	// Operator routes on the public site, as B, with A's management key,
	// and with none; also through path tricks into the account API.
	operatorOK := 0
	operatorCalls := 0
	for _, r := range operatorRoutes {
		method, path, _ := strings.Cut(r, " ")
		path = strings.NewReplacer("/users/{id}", "/users/"+w.a.id, "/subscriptions/{id}", "/subscriptions/"+w.aSubKeyed,
			"/pools/{slug}", "/pools/open", "/charges/{id}", "/charges/"+w.aChargeID).Replace(path)
		if strings.Contains(path, "{") {
			t.Errorf("operator route %s: no id to fill in; extend the replacer", r)
			continue
		}
		var body any
		if strings.HasSuffix(path, "/users") {
			body = map[string]any{"email": "intruder@example.com"}
		}
		if strings.HasSuffix(path, "/status") {
			body = map[string]any{"status": "paused"}
		}
		for _, url := range []string{c.URL() + path, c.URL() + "/api" + path, c.URL() + "/api/.." + path, c.URL() + "/api/%2e%2e" + path} {
			for _, hdr := range [][]string{bearer(w.b.token), bearer(w.bMgmtKey), bearer(w.aMgmtKey), nil} {
				a := do(t, method, url, body, hdr...)
				operatorCalls++
				if a.status/100 == 2 {
					t.Errorf("non-operator %s %s: %s", method, url, a)
					operatorOK++
				}
			}
		}
	}
	// The operator's user list did not grow (no intruder was created).
	if a := do(t, http.MethodPost, c.AdminURL()+"/timeblock/users", map[string]any{"email": "intruder@example.com"}); a.status != http.StatusCreated {
		t.Errorf("creating intruder@example.com through the admin API: %s (was it created by a non-operator?)", a)
		operatorOK++
	}

	after := snapshot(t, w.a)
	changed := 0
	for part, v := range before {
		if after[part] != v {
			t.Errorf("A's %s changed:\nbefore %s\nafter  %s", part, v, after[part])
			changed++
		}
	}
	// A's key still works.
	if r, err := chat(c, w.aKey, "m-open", 1); err != nil || r.status != http.StatusOK {
		t.Errorf("A's key after B's calls: %v %s", err, r)
		changed++
	}

	Zero(t, "/api routes without a cross-user case", missing, "routes")
	Zero(t, "foreign objects read (A's ids or secrets in B's answers)", readLeaks, "answers")
	Zero(t, "foreign objects changed (A's view before/after)", changed, "objects")
	Zero(t, "answers other than 404 for foreign objects (forged: not refused)", not404, "answers")
	Zero(t, "answers telling A's objects from unknown ids", distinct, "answers")
	Zero(t, "operator routes: successes for a non-operator", operatorOK, "answers")
	Info(t, "cross-user calls (B's session and management key)", float64(calls), "calls")
	Info(t, "of which name A's objects", float64(foreignCalls), "calls")
	Info(t, "operator calls by non-operators", float64(operatorCalls), "calls")
	Info(t, "routes covered (/api + operator)", float64(len(apiRoutes)+len(operatorRoutes)), "routes")
}

// buildCrossWorld makes A's objects of every kind, and B's own.
func buildCrossWorld(t *testing.T, c *e2e.Caddy) *crossWorld {
	t.Helper()
	w := &crossWorld{a: newUser(t, c), b: newUser(t, c)}
	a, b := w.a, w.b
	w.aSubKeyed = a.subscribe(t, "open", 1)
	w.aKeyID, w.aKey = a.key(t, w.aSubKeyed)
	w.aFree1, w.aFree2 = a.subscribe(t, "open", 1), a.subscribe(t, "open", 1)
	c1, c2 := a.subscribe(t, "open", 1), a.subscribe(t, "open", 1)
	d := a.must(t, http.MethodPost, "/api/meta-keys", map[string]any{"pledgeIds": []string{c1, c2}, "label": "a's"})
	w.aCombinedID, w.aCombinedTok = d.Get("id").Str, d.Get("token").Str
	d = a.must(t, http.MethodPost, "/api/keys/management", map[string]any{"name": "a's"})
	w.aMgmtID, w.aMgmtKey = d.Get("id").Str, d.Get("apiKey").Str
	a.subscribe(t, "race", 1)
	w.aPastDue = a.subscribe(t, "open", 1)
	if r := do(t, http.MethodPost, c.AdminURL()+"/timeblock/subscriptions/"+w.aPastDue+"/payment-failed", nil); r.status != http.StatusOK {
		t.Fatalf("payment-failed: %s", r)
	}
	w.aChargeID = a.must(t, http.MethodGet, "/api/billing/charges", nil).Get("0.id").Str
	// A purchase of A's waiting for 3-D Secure, last: A's card is then one
	// whose bank asks for it.
	a.must(t, http.MethodPost, "/api/billing/setup-intent", map[string]any{"paymentMethod": "pm_card_authenticationRequired"})
	if r := a.call(t, http.MethodPost, "/api/pools/open/subscribe", map[string]any{"blocks": []string{"asia"}, "quantity": 1}); r.status != http.StatusPaymentRequired {
		t.Fatalf("a purchase waiting for 3-D Secure: %s", r)
	} else {
		w.aWaitRef = r.data().Get("paymentRef").Str
	}

	w.bMgmtKey = b.must(t, http.MethodPost, "/api/keys/management", map[string]any{"name": "b's"}).Get("apiKey").Str
	if r := do(t, http.MethodPost, c.AdminURL()+"/timeblock/users/"+b.id+"/sessions", nil); r.status != http.StatusCreated {
		t.Fatalf("a second session for B: %s", r)
	} else {
		w.bSpare = r.data().Get("sessionToken").Str
	}
	w.bFree, w.bFree2 = b.subscribe(t, "open", 1), b.subscribe(t, "open", 1)
	b1, b2 := b.subscribe(t, "open", 1), b.subscribe(t, "open", 1)
	w.bCombinedID = b.must(t, http.MethodPost, "/api/meta-keys", map[string]any{"pledgeIds": []string{b1, b2}, "label": "b's"}).Get("id").Str
	_, _ = b.key(t, b.subscribe(t, "open", 1))

	for name, v := range w.secrets() {
		if v == "" {
			t.Fatalf("%s is empty: the API's answers changed shape", name)
		}
	}
	return w
}

var lastUsed = regexp.MustCompile(`"lastUsedAt":("[^"]*"|null),?`)

// snapshot is A's own view of everything A owns, use times left out.
func snapshot(t *testing.T, a *user) map[string]string {
	t.Helper()
	parts := map[string]string{}
	for _, p := range []string{"/api/keys", "/api/keys/management", "/api/meta-keys", "/api/pools/open/my-subscriptions",
		"/api/pools/race/my-subscriptions", "/api/pools/open/my-keys", "/api/billing/status"} {
		parts[p] = lastUsed.ReplaceAllString(a.must(t, http.MethodGet, p, nil).Raw, "")
	}
	return parts
}

// leaked names the first of secrets found in body and not in sent, or "".
func leaked(body []byte, secrets map[string]string, sent string) string {
	s := string(body)
	for name, v := range secrets {
		if v != "" && strings.Contains(s, v) && !strings.Contains(sent, v) {
			return name
		}
	}
	return ""
}

// unknownIDs replaces each of A's object ids in s by an id that exists
// nowhere (the same one for the same id).
func unknownIDs(s string, w *crossWorld) string {
	for i, id := range []string{w.aKeyID, w.aSubKeyed, w.aFree1, w.aFree2, w.aCombinedID, w.aMgmtID, w.aPastDue, w.aWaitRef, w.aChargeID, w.a.id} {
		s = strings.ReplaceAll(s, id, fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1))
	}
	return s
}

func nilIfEmpty(body string) any {
	if body == "" {
		return nil
	}
	return body
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
