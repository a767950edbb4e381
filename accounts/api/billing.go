package api

import (
	"net/http"

	"github.com/timeblock/timeblock/accounts"
)

// POST /api/billing/setup-intent {paymentMethod} → {paymentMethod: {id,
// brand, last4}, recovered, pastDue}. Saving a card retries the user's
// past-due charges at once. A card whose bank wants 3-D Secure first is a
// 402 with data {status: "requires_action", setupIntentId, clientSecret};
// the page confirms it and sends {setupIntent} to save the card.
func (h *Handler) setupIntent(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	var body struct {
		PaymentMethod string `json:"paymentMethod"`
		SetupIntent   string `json:"setupIntent"`
	}
	if err := decodeBody(w, r, h.opts.MaxBody, &body, false); err != nil {
		return err
	}
	var (
		res *accounts.SetupIntentResult
		err error
	)
	switch {
	case body.SetupIntent != "" && body.PaymentMethod != "":
		return accounts.Invalid("send either paymentMethod (a card to save) or setupIntent (a card setup the bank asked to confirm), not both")
	case body.SetupIntent != "":
		res, err = h.svc.FinishSetupIntent(r.Context(), p.UserID, body.SetupIntent)
	default:
		res, err = h.svc.SetupIntent(r.Context(), p.UserID, body.PaymentMethod)
	}
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, res)
	return nil
}

// POST /api/billing/test-bank/{ref} {approve} → {ref, status}: the
// built-in test processor's simulated bank approves (status "succeeded") or
// fails ("failed") the caller's payment waiting for 3-D Secure; the page
// then confirms the purchase. 404 with any other processor, for an unknown
// reference and for another user's payment.
func (h *Handler) testBank(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	var body struct {
		Approve *bool `json:"approve"`
	}
	if err := decodeBody(w, r, h.opts.MaxBody, &body, false); err != nil {
		return err
	}
	if body.Approve == nil {
		return accounts.Invalid(`send {"approve": true} to pass the bank's check or {"approve": false} to fail it`)
	}
	res, err := h.svc.AnswerTestBank(r.Context(), p.UserID, r.PathValue("ref"), *body.Approve)
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
