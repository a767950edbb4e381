package api

import (
	"net/http"
)

// POST /timeblock/subscriptions/{id}/deliver → {subscription, key,
// noticeSent}: pending_key → active, key created, notice sent.
func (o *Operator) deliver(w http.ResponseWriter, r *http.Request) error {
	d, err := o.svc.DeliverKey(r.Context(), r.PathValue("id"))
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
