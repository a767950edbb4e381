package api

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
)

// Options configures the handlers.
type Options struct {
	MaxBody int64 // request body limit in bytes (default 32 MiB)
	Logger  *zap.Logger
}

// Handler serves /api/*.
type Handler struct {
	svc    *accounts.Service
	opts   Options
	mux    *http.ServeMux
	logger *zap.Logger
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
	h := &Handler{svc: svc, opts: opts, mux: http.NewServeMux(), logger: opts.Logger}

	// Consumption keys (keys.go).
	h.route("GET /api/keys", h.listKeys)
	h.route("POST /api/keys/subscription", h.createKey)
	h.route("PUT /api/keys/{id}", h.updateKey)
	h.route("DELETE /api/keys/{id}", h.deleteKey)

	// Management keys (management.go).
	h.route("GET /api/keys/management", h.listManagementKeys)
	h.route("POST /api/keys/management", h.createManagementKey)
	h.route("DELETE /api/keys/management/{id}", h.deleteManagementKey)

	// Combined keys (metakeys.go).
	h.route("GET /api/meta-keys", h.listCombinedKeys)
	h.route("POST /api/meta-keys", h.createCombinedKey)
	h.route("PATCH /api/meta-keys/{id}/member-roles", h.setMemberRoles)
	h.route("PUT /api/meta-keys/{id}/members", h.replaceMembers)
	h.route("PATCH /api/meta-keys/{id}", h.relabelCombinedKey)
	h.route("DELETE /api/meta-keys/{id}", h.deleteCombinedKey)

	// Pools and subscriptions (pools.go).
	h.mux.HandleFunc("GET /api/pools/disclosure", h.disclosure) // public
	h.route("GET /api/pools", h.listPools)
	h.route("GET /api/pools/{id}", h.getPool)
	h.route("POST /api/pools/{id}/subscribe", h.subscribe)
	h.route("GET /api/pools/{id}/my-subscriptions", h.mySubscriptions)
	h.route("GET /api/pools/{id}/my-keys", h.myKeys)
	h.route("DELETE /api/pools/{id}/pledge", h.cancelPledge)

	// Billing (billing.go).
	h.route("POST /api/billing/setup-intent", h.setupIntent)
	h.route("GET /api/billing/status", h.billingStatus)

	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, h.logger, accounts.NotFound("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return h
}

// ServeHTTP serves one account API request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// route registers an endpoint that needs a session token or management key.
func (h *Handler) route(pattern string, fn authedFunc) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		p, err := h.svc.Authenticate(r.Context(), bearerToken(r))
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
