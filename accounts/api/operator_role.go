package api

// The operator's endpoints on /api/operator/* (SPEC.md §8), served by the
// operator service (accounts/operator). Only an operator's session or
// identity-provider sign-in reaches them; every other request — no
// credentials, a buyer's session, any management key — gets the answer an
// unknown endpoint gets, so that they are not revealed. They are therefore
// not in the route table either: a wrong method is a 404 too, not a 405
// naming the right one. The handler's cross-origin protection covers them
// like the rest of /api, and their POSTs honour Idempotency-Key.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/operator"
)

// operatorFunc handles a request of an operator.
type operatorFunc func(w http.ResponseWriter, r *http.Request, a *operator.Actor) error

func (h *Handler) operatorRoutes() {
	h.operatorRoute("GET /api/operator/pools", h.operatorPools)
	h.operatorRoute("GET /api/operator/subscriptions", h.operatorSubscriptions)
	h.operatorRoute("POST /api/operator/subscriptions/{id}/deliver", h.operatorIdempotent(h.operatorDeliver))
	h.operatorRoute("POST /api/operator/subscriptions/{id}/cancel", h.operatorIdempotent(h.operatorCancel))
	h.operatorRoute("POST /api/operator/pools/{slug}/status", h.operatorIdempotent(h.operatorPoolStatus))
	h.operatorRoute("GET /api/operator/audit", h.operatorAudit)
	h.operatorRoute("GET /api/operator/charges", h.operatorCharges)
	h.operatorRoute("POST /api/operator/charges/{id}/refund", h.operatorIdempotent(h.operatorRefund))
	h.operatorRoute("POST /api/operator/keys/{id}/revoke", h.operatorIdempotent(h.operatorRevokeKey))
}

// operatorRoute registers an operator endpoint (see the top of this file).
func (h *Handler) operatorRoute(pattern string, fn operatorFunc) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		a, err := h.operatorOf(r)
		if errors.Is(err, operator.ErrNotOperator) {
			h.noEndpoint(w, r)
			return
		}
		if err == nil {
			err = fn(w, r, a)
		}
		if err != nil {
			writeError(w, h.logger, err)
		}
	})
}

// operatorOf is the operator the request acts for, or ErrNotOperator.
func (h *Handler) operatorOf(r *http.Request) (*operator.Actor, error) {
	if h.opts.Operator == nil {
		return nil, operator.ErrNotOperator
	}
	p, err := h.authenticate(r)
	if err != nil {
		return nil, operator.ErrNotOperator
	}
	token := ""
	if p.Via == accounts.ViaSession {
		token = sessionToken(r)
	}
	return h.opts.Operator.Authorize(r.Context(), p, token)
}

// operatorIdempotent makes an operator action honour Idempotency-Key as
// purchases do (idempotency.go): the same key and request within 24 hours
// get the first answer again and act once. The fingerprint is the method,
// the path (which names the target) and the body.
func (h *Handler) operatorIdempotent(fn operatorFunc) operatorFunc {
	return func(w http.ResponseWriter, r *http.Request, a *operator.Actor) error {
		key := r.Header.Get(IdempotencyHeader)
		if key == "" {
			return fn(w, r, a)
		}
		if err := accounts.CheckIdempotencyKey(key); err != nil {
			return err
		}
		body, err := h.idempotentBody(r)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(append([]byte("operator\n"+r.Method+" "+r.URL.Path+"\n"), body...))
		return h.runIdempotent(w, r, a.UserID, key, hex.EncodeToString(sum[:]), func(w http.ResponseWriter, _ string) error {
			return fn(w, r, a)
		})
	}
}

// pagedEnvelope is the success envelope of a paged list: data stays an
// array, and the next page's cursor sits beside it (null on the last page).
type pagedEnvelope struct {
	Success    bool    `json:"success"`
	Data       any     `json:"data"`
	NextCursor *string `json:"nextCursor"`
}

func writePage(w http.ResponseWriter, data any, next string) {
	env := pagedEnvelope{Success: true, Data: data}
	if next != "" {
		env.NextCursor = &next
	}
	writeJSON(w, http.StatusOK, env)
}

// queryLimit reads the limit query parameter (0 when absent).
func queryLimit(r *http.Request) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > operator.MaxLimit {
		return 0, accounts.Invalid("limit must be a whole number between 1 and %d", operator.MaxLimit)
	}
	return n, nil
}

// GET /api/operator/pools → [{id, slug, name, status, seatsPerHour,
// soldPerHour, lanesInUse, revenueThisMonth, monthlyRecurring, fundingGoal,
// fundingPledged}]: every pool, drafts included.
func (h *Handler) operatorPools(w http.ResponseWriter, r *http.Request, _ *operator.Actor) error {
	return servePools(w, r, h.opts.Operator)
}

func servePools(w http.ResponseWriter, r *http.Request, op *operator.Service) error {
	pools, err := op.Pools(r.Context())
	if err != nil {
		return err
	}
	if pools == nil {
		pools = []operator.Pool{}
	}
	writeData(w, http.StatusOK, pools)
	return nil
}

// GET /api/operator/subscriptions?pool=&status=&email=&limit=&before= →
// {data: [{id, email, userId, poolId, pool, status, blocks, quantity,
// billingCycle, monthlyPrice, periodAmount, currentPeriodEnd,
// cancelAtPeriodEnd, keyId, createdAt}], nextCursor}, newest first.
func (h *Handler) operatorSubscriptions(w http.ResponseWriter, r *http.Request, _ *operator.Actor) error {
	return serveSubscriptions(w, r, h.opts.Operator)
}

func serveSubscriptions(w http.ResponseWriter, r *http.Request, op *operator.Service) error {
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	page, err := op.Subscriptions(r.Context(), operator.Filter{Pool: q.Get("pool"), Status: q.Get("status"),
		Email: q.Get("email"), Limit: limit, Before: q.Get("before")})
	if err != nil {
		return err
	}
	rows := page.Subscriptions
	if rows == nil {
		rows = []operator.Subscription{}
	}
	writePage(w, rows, page.NextCursor)
	return nil
}

// POST /api/operator/subscriptions/{id}/deliver → {subscriptionId, status,
// keyId, noticeSent}: pending_key → active, key created, the buyer told.
// The key itself is the buyer's: it is not in the answer.
func (h *Handler) operatorDeliver(w http.ResponseWriter, r *http.Request, a *operator.Actor) error {
	d, err := h.opts.Operator.Deliver(r.Context(), a.Email, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, map[string]any{"subscriptionId": d.Subscription.ID, "status": d.Subscription.Status,
		"keyId": d.Key.ID, "noticeSent": d.NoticeSent})
	return nil
}

// POST /api/operator/subscriptions/{id}/cancel {atPeriodEnd} →
// {canceled, subscriptionId, currentPeriodEnd, withdrawn?}: at the end of
// the period (the key works until then) or now (seats freed, key revoked).
// Nothing is refunded.
func (h *Handler) operatorCancel(w http.ResponseWriter, r *http.Request, a *operator.Actor) error {
	var body struct {
		AtPeriodEnd *bool `json:"atPeriodEnd"`
	}
	if err := decodeBody(w, r, h.opts.MaxBody, &body, false); err != nil {
		return err
	}
	if body.AtPeriodEnd == nil {
		return accounts.Invalid("atPeriodEnd is required: true to cancel at the end of the current period, false to cancel now (seats freed, key revoked, nothing refunded)")
	}
	res, err := h.opts.Operator.Cancel(r.Context(), a.Email, r.PathValue("id"), *body.AtPeriodEnd)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, res)
	return nil
}

// POST /api/operator/keys/{id}/revoke → {keyId, subscriptionId, isActive,
// changed}: the consumption key deactivated, as the buyer's PUT
// /api/keys/{id} {isActive:false}; an already revoked key answers changed
// false.
func (h *Handler) operatorRevokeKey(w http.ResponseWriter, r *http.Request, a *operator.Actor) error {
	res, err := h.opts.Operator.RevokeKey(r.Context(), a.Email, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, res)
	return nil
}

// POST /api/operator/pools/{slug}/status {status} → the pool with
// previousStatus and changed (as POST /timeblock/pools/{slug}/status).
func (h *Handler) operatorPoolStatus(w http.ResponseWriter, r *http.Request, a *operator.Actor) error {
	return servePoolStatus(w, r, h.opts.MaxBody, h.opts.Operator, a.Email)
}

func servePoolStatus(w http.ResponseWriter, r *http.Request, maxBody int64, op *operator.Service, actor string) error {
	var body struct {
		Status *string `json:"status"`
	}
	if err := decodeBody(w, r, maxBody, &body, false); err != nil {
		return err
	}
	if body.Status == nil {
		return accounts.Invalid("status is required: one of draft, funding, activating, active, paused")
	}
	res, err := op.SetPoolStatus(r.Context(), actor, r.PathValue("slug"), *body.Status)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, res)
	return nil
}

// GET /api/operator/audit?limit=&before= → {data: [{id, at, actor, action,
// target, detail}], nextCursor}: every operator action, newest first.
func (h *Handler) operatorAudit(w http.ResponseWriter, r *http.Request, _ *operator.Actor) error {
	return serveAudit(w, r, h.opts.Operator)
}

func serveAudit(w http.ResponseWriter, r *http.Request, op *operator.Service) error {
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	page, err := op.Audit(r.Context(), limit, r.URL.Query().Get("before"))
	if err != nil {
		return err
	}
	writePage(w, page.Entries, page.NextCursor)
	return nil
}

// POST /api/operator/charges/{id}/refund {amount?} → the charge as
// GET /api/operator/charges lists it, refundedAmount and status updated:
// amount (a decimal string, at most two decimals) or, absent, what remains
// is refunded through the processor, once per Idempotency-Key however often
// the request is retried. The subscription is not changed.
func (h *Handler) operatorRefund(w http.ResponseWriter, r *http.Request, a *operator.Actor) error {
	key := r.Header.Get(IdempotencyHeader)
	if key != "" {
		key = a.UserID + "\x00" + key // one operator's key is not another's
	}
	return serveRefund(w, r, h.opts.MaxBody, h.opts.Operator, a.Email, key)
}

func serveRefund(w http.ResponseWriter, r *http.Request, maxBody int64, op *operator.Service, actor, key string) error {
	var body struct {
		Amount *string `json:"amount"`
	}
	if err := decodeBody(w, r, maxBody, &body, true); err != nil {
		return err
	}
	amount := ""
	if body.Amount != nil {
		if amount = *body.Amount; amount == "" {
			return accounts.Invalid("amount must be a decimal string such as \"12.50\", or absent to refund what remains")
		}
	}
	c, err := op.Refund(r.Context(), actor, r.PathValue("id"), amount, key)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, c)
	return nil
}

// GET /api/operator/charges?from=&to=&limit=&before= → {data: [{id, number,
// kind, amount, currency, status, refundedAmount, subscriptionId, poolId,
// description, createdAt, userId, email, processorRef}], nextCursor}: the
// site's ledger, newest first; &format=csv → every charge in the range as
// text/csv.
func (h *Handler) operatorCharges(w http.ResponseWriter, r *http.Request, _ *operator.Actor) error {
	return serveCharges(w, r, h.opts.Operator)
}

func serveCharges(w http.ResponseWriter, r *http.Request, op *operator.Service) error {
	q := r.URL.Query()
	var rg operator.ChargeRange
	for _, b := range []struct {
		name string
		dst  *time.Time
	}{{"from", &rg.From}, {"to", &rg.To}} {
		if v := q.Get(b.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return accounts.Invalid("%s must be an RFC 3339 time such as 2026-11-01T00:00:00Z, got %q", b.name, v)
			}
			*b.dst = t
		}
	}
	switch q.Get("format") {
	case "", "json":
	case "csv":
		var buf bytes.Buffer
		if err := op.WriteChargesCSV(r.Context(), &buf, rg); err != nil {
			return err
		}
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="timeblock-charges.csv"`)
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(buf.Bytes())
		return nil
	default:
		return accounts.Invalid("format must be csv or json, got %q", q.Get("format"))
	}
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	rg.Limit, rg.Before = limit, q.Get("before")
	page, err := op.Charges(r.Context(), rg)
	if err != nil {
		return err
	}
	rows := page.Charges
	if rows == nil {
		rows = []operator.Charge{}
	}
	writePage(w, rows, page.NextCursor)
	return nil
}
