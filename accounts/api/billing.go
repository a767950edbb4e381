package api

import (
	"net/http"

	"github.com/timeblock/timeblock/accounts"
)

// POST /api/billing/setup-intent {paymentMethod} → {paymentMethod: {id,
// brand, last4}, recovered, pastDue}. Saving a card retries the user's
// past-due charges at once.
func (h *Handler) setupIntent(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	var body struct {
		PaymentMethod string `json:"paymentMethod"`
	}
	if err := decodeBody(w, r, h.opts.MaxBody, &body, false); err != nil {
		return err
	}
	res, err := h.svc.SetupIntent(r.Context(), p.UserID, body.PaymentMethod)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, res)
	return nil
}

// GET /api/billing/status → {hasPaymentMethod, paymentMethod, processor, pastDue}.
func (h *Handler) billingStatus(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	st, err := h.svc.BillingStatus(r.Context(), p.UserID)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, st)
	return nil
}
