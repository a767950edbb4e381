package api

import (
	"context"
	"net/http"

	"github.com/timeblock/timeblock/accounts"
)

// POST /timeblock/subscriptions/{id}/deliver → {subscription, key,
// noticeSent}: pending_key → active, key created, notice sent.
func (o *Operator) deliver(w http.ResponseWriter, r *http.Request) error {
	deliver := o.svc.DeliverKey
	if o.opts.Operator != nil { // audited, as the admin API's action
		deliver = func(ctx context.Context, id string) (*accounts.Delivery, error) {
			return o.opts.Operator.Deliver(ctx, accounts.AuditAdminAPI, id)
		}
	}
	d, err := deliver(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, d)
	return nil
}

// POST /timeblock/subscriptions/{id}/payment-failed → {subscription}:
// active → past_due, key suspended.
func (o *Operator) paymentFailed(w http.ResponseWriter, r *http.Request) error {
	res, err := o.svc.PaymentFailed(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, res)
	return nil
}

// POST /timeblock/pools/{slug}/status {status} → the pool row with
// previousStatus and changed: the operator moves a pool (accounts/funding.go
// says which moves are allowed and what they do).
func (o *Operator) setPoolStatus(w http.ResponseWriter, r *http.Request) error {
	if o.opts.Operator != nil { // audited, as the admin API's action
		return servePoolStatus(w, r, o.opts.MaxBody, o.opts.Operator, accounts.AuditAdminAPI)
	}
	var body struct {
		Status *string `json:"status"`
	}
	if err := decodeBody(w, r, o.opts.MaxBody, &body, false); err != nil {
		return err
	}
	if body.Status == nil {
		return accounts.Invalid("status is required: one of draft, funding, activating, active, paused")
	}
	res, err := o.svc.SetPoolStatus(r.Context(), r.PathValue("slug"), *body.Status)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, res)
	return nil
}
