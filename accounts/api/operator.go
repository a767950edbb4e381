package api

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
)

// Operator serves the operator endpoints (mounted under /timeblock/ on
// Caddy's admin API, which is where access to them is controlled).
type Operator struct {
	svc    *accounts.Service
	opts   Options
	mux    *http.ServeMux
	routes routeTable
	logger *zap.Logger
}

// NewOperator builds the operator endpoints handler.
func NewOperator(svc *accounts.Service, opts Options) *Operator {
	opts = opts.withDefaults()
	o := &Operator{svc: svc, opts: opts, mux: http.NewServeMux(), routes: newRouteTable(), logger: opts.Logger}
	o.handle("POST /timeblock/users", o.createUser)
	o.handle("POST /timeblock/users/{id}/sessions", o.createSession)
	o.handle("GET /timeblock/pools/{slug}/occupancy", o.occupancy) // occupancy.go
	o.handle("POST /timeblock/subscriptions/{id}/deliver", o.deliver)
	o.handle("POST /timeblock/subscriptions/{id}/payment-failed", o.paymentFailed)
	o.handle("POST /timeblock/pools/{slug}/status", o.setPoolStatus)
	if opts.Operator != nil {
		// The operator's lists, for scripts (operator_role.go).
		o.handle("GET /timeblock/pools", func(w http.ResponseWriter, r *http.Request) error {
			return servePools(w, r, opts.Operator)
		})
		o.handle("GET /timeblock/subscriptions", func(w http.ResponseWriter, r *http.Request) error {
			return serveSubscriptions(w, r, opts.Operator)
		})
		o.handle("GET /timeblock/audit", func(w http.ResponseWriter, r *http.Request) error {
			return serveAudit(w, r, opts.Operator)
		})
		o.handle("GET /timeblock/charges", func(w http.ResponseWriter, r *http.Request) error {
			return serveCharges(w, r, opts.Operator)
		})
		o.handle("POST /timeblock/charges/{id}/refund", func(w http.ResponseWriter, r *http.Request) error {
			key := r.Header.Get(IdempotencyHeader)
			if key != "" {
				if err := accounts.CheckIdempotencyKey(key); err != nil {
					return err
				}
				key = accounts.AuditAdminAPI + "\x00" + key
			}
			return serveRefund(w, r, opts.MaxBody, opts.Operator, accounts.AuditAdminAPI, key)
		})
	}
	o.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if o.routes.wrongMethod(w, r, o.logger) {
			return
		}
		writeError(w, o.logger, accounts.NotFound("no such operator endpoint: %s %s", r.Method, r.URL.Path))
	})
	return o
}

// ServeHTTP serves one operator request.
func (o *Operator) ServeHTTP(w http.ResponseWriter, r *http.Request) { o.mux.ServeHTTP(w, r) }

func (o *Operator) handle(pattern string, fn func(w http.ResponseWriter, r *http.Request) error) {
	o.routes.register(pattern)
	o.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			writeError(w, o.logger, err)
		}
	})
}
