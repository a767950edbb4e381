package api

import (
	"net/http"
	"net/netip"
	"strings"

	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/ledger"
	"github.com/timeblock/timeblock/accounts/operator"
)

// Options configures the handlers.
type Options struct {
	MaxBody int64 // request body limit in bytes (default 32 MiB)
	Logger  *zap.Logger
	// Webhook reads the payment processor's webhook deliveries at
	// POST /api/billing/webhook; nil: no such endpoint (test processor).
	Webhook WebhookSource
	// IdentityHeader names the request header an identity provider (Caddy's
	// forward_auth) sets to the signed-in user's e-mail. Only set it on a
	// route that passes through forward_auth: the header is then trusted,
	// and e-mail sign-in links are off.
	IdentityHeader string
	// IdentityProviderOnSite reports whether the site signs people in
	// through an identity provider (some handler of it has IdentityHeader).
	// E-mail sign-in is then off on this handler too, whatever its own
	// IdentityHeader. nil: only IdentityHeader decides. Asked per request,
	// as the site's other handlers may be set up after this one.
	IdentityProviderOnSite func() bool
	// SiteAddress is the base URL sign-in links point to (https://seats.example);
	// empty: the request's own address, on loopback hosts only.
	SiteAddress string
	// StripePublishableKey is given to the page for Stripe.js (pk_...).
	StripePublishableKey string
	// ClientAddr returns the client's address for sign-in throttling
	// (default: the connection's peer).
	ClientAddr func(*http.Request) netip.Addr
	// LanesInUse counts a key's requests in flight, on every node, for
	// GET /api/keys/{id} and /api/meta-keys/{id} (keystatus.go); nil: 0.
	LanesInUse LanesInUseFunc
	// KeyLanes streams a key's lanes in use for GET /api/keys/{id}/lanes
	// and /api/meta-keys/{id}/lanes (keylanes.go); nil: 404.
	KeyLanes KeyLanesFunc
	// Ledger serves GET /api/billing/charges and the receipts (charges.go);
	// nil: 404 there.
	Ledger *ledger.Service
	// Operator serves /api/operator/* to the operators it names
	// (operator_role.go), and the admin API's lists and audited actions;
	// nil: no operators, and /api/operator/* is 404 for everyone.
	Operator *operator.Service
}

// Handler serves /api/*.
type Handler struct {
	svc    *accounts.Service
	opts   Options
	mux    *http.ServeMux
	logger *zap.Logger

	routes routeTable

	// crossOrigin refuses state-changing requests a browser made from
	// another origin (the cookie would otherwise ride along).
	crossOrigin *http.CrossOriginProtection
	// Sign-in link requests, throttled per client address (the domain
	// limits them per e-mail address).
	signInByAddr *windowLimiter
}

// authedFunc handles a request made with a session token or management key.
type authedFunc func(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error

// withDefaults fills the options left zero.
func (o Options) withDefaults() Options {
	if o.MaxBody <= 0 {
		o.MaxBody = 32 << 20
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}

// New builds the account API handler.
func New(svc *accounts.Service, opts Options) *Handler {
	opts = opts.withDefaults()
	h := &Handler{svc: svc, opts: opts, mux: http.NewServeMux(), logger: opts.Logger,
		routes:       newRouteTable(),
		crossOrigin:  http.NewCrossOriginProtection(),
		signInByAddr: newWindowLimiter(signInPerAddress, accounts.SignInWindow, signInMaxKeys)}
	h.crossOrigin.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, h.logger, &accounts.Error{Status: http.StatusForbidden,
			Message: "cross-origin request refused: this endpoint only takes requests from this site's own pages (or from scripts, which send no Origin)"})
	}))

	// Sign-in (auth.go).
	h.public("GET /api/auth/config", h.authConfig)
	h.public("POST /api/auth/email", h.signInEmail)
	h.public("POST /api/auth/verify", h.signInVerify)
	h.public("GET /api/auth/session", h.session)
	h.route("POST /api/auth/sign-out", h.signOut)

	// Consumption keys (keys.go).
	h.route("GET /api/keys", h.listKeys)
	h.route("GET /api/keys/{id}", h.keyStatus) // keystatus.go
	// GET /api/keys/{id}/usage (usage.go) and /lanes (keylanes.go).
	// {id}/usage would conflict with management/{id} (neither is more
	// specific for management/usage), so the last segment is a wildcard
	// that keyView checks.
	h.route("GET /api/keys/{id}/{view}", h.keyView)
	h.route("POST /api/keys/subscription", h.createKey)
	h.route("PUT /api/keys/{id}", h.updateKey)
	h.route("DELETE /api/keys/{id}", h.deleteKey)

	// Management keys (management.go).
	h.route("GET /api/keys/management", h.listManagementKeys)
	h.route("POST /api/keys/management", h.createManagementKey)
	h.route("DELETE /api/keys/management/{id}", h.deleteManagementKey)

	// Combined keys (metakeys.go).
	h.route("GET /api/meta-keys", h.listCombinedKeys)
	h.route("GET /api/meta-keys/{id}", h.combinedKeyStatus)      // keystatus.go
	h.route("GET /api/meta-keys/{id}/usage", h.combinedKeyUsage) // usage.go
	h.route("GET /api/meta-keys/{id}/lanes", h.combinedKeyLanes) // keylanes.go
	h.route("POST /api/meta-keys", h.createCombinedKey)
	h.route("PATCH /api/meta-keys/{id}/member-roles", h.setMemberRoles)
	h.route("PUT /api/meta-keys/{id}/members", h.replaceMembers)
	h.route("PATCH /api/meta-keys/{id}", h.relabelCombinedKey)
	h.route("DELETE /api/meta-keys/{id}", h.deleteCombinedKey)

	// Pools and subscriptions (pools.go).
	h.public("GET /api/pools/disclosure", h.disclosure)
	h.route("GET /api/pools", h.listPools)
	h.route("GET /api/pools/{id}", h.getPool)
	h.route("POST /api/pools/{id}/subscribe", h.idempotent(h.subscribe)) // idempotency.go
	h.route("GET /api/pools/{id}/my-subscriptions", h.mySubscriptions)
	h.route("GET /api/pools/{id}/my-keys", h.myKeys)
	h.route("DELETE /api/pools/{id}/pledge", h.cancelPledge)
	h.route("POST /api/subscriptions/{id}/confirm", h.confirmSubscription)
	h.route("GET /api/subscriptions", h.allSubscriptions)
	h.route("POST /api/subscriptions/{id}/cancel", h.cancelSubscription)
	h.route("POST /api/subscriptions/{id}/resume", h.cancelAtPeriodEnd(false))

	// Billing (billing.go).
	h.route("POST /api/billing/setup-intent", h.setupIntent)
	h.route("GET /api/billing/status", h.billingStatus)
	h.route("GET /api/billing/charges", h.listCharges)                // charges.go
	h.route("GET /api/billing/charges/{id}/receipt", h.chargeReceipt) // charges.go
	if svc.HasTestBank() {
		// The built-in test processor's simulated 3-D Secure (billing.go).
		h.route("POST /api/billing/test-bank/{ref}", h.testBank)
	}
	if opts.Webhook != nil {
		h.public("POST /api/billing/webhook", h.webhook) // webhook.go
	}

	// The operator's endpoints (operator_role.go).
	h.operatorRoutes()

	h.mux.HandleFunc("/", h.noEndpoint)
	return h
}

// noEndpoint answers a request no endpoint takes, in the envelope: 405 with
// Allow when the path exists with other methods, else 404.
func (h *Handler) noEndpoint(w http.ResponseWriter, r *http.Request) {
	if h.routes.wrongMethod(w, r, h.logger) {
		return
	}
	writeError(w, h.logger, accounts.NotFound("no such endpoint: %s %s (the account API's endpoints are "+
		"/api/auth, /api/keys, /api/keys/management, /api/meta-keys, /api/pools and /api/billing)", r.Method, r.URL.Path))
}

// public registers an endpoint that needs no credentials.
func (h *Handler) public(pattern string, fn http.HandlerFunc) {
	h.register(pattern)
	h.mux.HandleFunc(pattern, fn)
}

// register notes an endpoint's method under its path, for noEndpoint.
func (h *Handler) register(pattern string) { h.routes.register(pattern) }

// routeTable matches a request's path against the endpoints' paths whatever
// its method, and lists each path's methods: a known path with the wrong
// method is a 405 naming the right ones, not a 404.
type routeTable struct {
	paths   *http.ServeMux
	methods map[string][]string
}

func newRouteTable() routeTable {
	return routeTable{paths: http.NewServeMux(), methods: make(map[string][]string)}
}

func (t routeTable) register(pattern string) {
	method, path, _ := strings.Cut(pattern, " ")
	if _, ok := t.methods[path]; !ok {
		t.paths.HandleFunc(path, http.NotFound)
	}
	t.methods[path] = append(t.methods[path], method)
	if method == http.MethodGet {
		t.methods[path] = append(t.methods[path], http.MethodHead)
	}
}

// wrongMethod answers 405 with Allow when r's path is known with other
// methods, and reports whether it did.
func (t routeTable) wrongMethod(w http.ResponseWriter, r *http.Request, logger *zap.Logger) bool {
	_, pattern := t.paths.Handler(r)
	methods := t.methods[pattern]
	if pattern == "" || len(methods) == 0 {
		return false
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeError(w, logger, &accounts.Error{Status: http.StatusMethodNotAllowed,
		Message: "method " + r.Method + " is not allowed on " + r.URL.Path + "; use " + strings.Join(methods, " or ")})
	return true
}

// ServeHTTP serves one account API request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.crossOrigin.Handler(h.mux).ServeHTTP(w, r)
}

// route registers an endpoint that needs a session token or management key.
func (h *Handler) route(pattern string, fn authedFunc) {
	h.register(pattern)
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		p, err := h.authenticate(r)
		if err == nil {
			err = fn(w, r, p)
		}
		if err != nil {
			writeError(w, h.logger, err)
		}
	})
}

// bearerToken returns the credential of an Authorization: Bearer header.
func bearerToken(r *http.Request) string {
	const prefix = "Bearer "
	v := r.Header.Get("Authorization")
	if len(v) > len(prefix) && (v[:len(prefix)] == prefix || v[:len(prefix)] == "bearer ") {
		return v[len(prefix):]
	}
	return ""
}
