package api

import (
	"net/http"

	"github.com/timeblock/timeblock/accounts"
)

// GET /api/pools/disclosure → the purchase terms. Public: no credentials.
func (h *Handler) disclosure(w http.ResponseWriter, _ *http.Request) {
	writeData(w, http.StatusOK, h.svc.Terms())
}

// GET /api/pools → the active pools.
func (h *Handler) listPools(w http.ResponseWriter, r *http.Request, _ *accounts.Principal) error {
	pools, err := h.svc.ListPools(r.Context())
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, pools)
	return nil
}

// GET /api/pools/{id} → the pool (by UUID or slug) with its hourSlots.
func (h *Handler) getPool(w http.ResponseWriter, r *http.Request, _ *accounts.Principal) error {
	pool, err := h.svc.GetPool(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, pool)
	return nil
}

// POST /api/pools/{id}/subscribe {blocks, quantity?, billingCycle?,
// acknowledgment?} → 201 with the new subscription (key null) and the
// amount charged.
func (h *Handler) subscribe(w http.ResponseWriter, r *http.Request, p *accounts.Principal, purchaseID string) error {
	var body accounts.SubscribeRequest
	if err := decodeBody(w, r, h.opts.MaxBody, &body, false); err != nil {
		return err
	}
	res, err := h.svc.SubscribeAs(r.Context(), p.UserID, r.PathValue("id"), body, purchaseID)
	if err != nil {
		return err
	}
	writeData(w, http.StatusCreated, res)
	return nil
}

// POST /api/subscriptions/{id}/confirm → finishes an incomplete subscription
// once the customer authenticated its payment (200 with the subscription;
// 402 while it still waits or when the payment failed).
func (h *Handler) confirmSubscription(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	res, err := h.svc.ConfirmSubscription(r.Context(), p.UserID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, res)
	return nil
}

// POST /api/subscriptions/{id}/cancel → {canceled, subscriptionId,
// currentPeriodEnd, withdrawn?, refunded?}: an unpaid (incomplete) purchase
// is canceled at once, its seats freed and its payment canceled or
// refunded; any other subscription is set to cancel at the end of its
// period (a pledge is withdrawn at once).
func (h *Handler) cancelSubscription(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	res, err := h.svc.CancelSubscription(r.Context(), p.UserID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, res)
	return nil
}

// GET /api/pools/{id}/my-subscriptions → the user's subscriptions on the pool.
func (h *Handler) mySubscriptions(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	subs, err := h.svc.MySubscriptions(r.Context(), p.UserID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, subs)
	return nil
}

// GET /api/pools/{id}/my-keys → GET /api/keys rows of the user's keys on the pool.
func (h *Handler) myKeys(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	rows, err := h.svc.MyKeys(r.Context(), p.UserID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, rows)
	return nil
}

// DELETE /api/pools/{id}/pledge → {canceled: true, subscriptionId,
// currentPeriodEnd}: the most recent subscription ends at its period end.
func (h *Handler) cancelPledge(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	res, err := h.svc.CancelPledge(r.Context(), p.UserID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, res)
	return nil
}

// GET /api/subscriptions → the user's subscriptions on every pool, as
// my-subscriptions rows.
func (h *Handler) allSubscriptions(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	subs, err := h.svc.AllSubscriptions(r.Context(), p.UserID)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, subs)
	return nil
}

// POST /api/subscriptions/{id}/resume → {canceled, subscriptionId,
// currentPeriodEnd}: take a cancellation at period end back (the cancel
// itself is cancelSubscription).
func (h *Handler) cancelAtPeriodEnd(cancel bool) authedFunc {
	return func(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
		res, err := h.svc.SetCancelAtPeriodEnd(r.Context(), p.UserID, r.PathValue("id"), cancel)
		if err != nil {
			return err
		}
		writeData(w, http.StatusOK, res)
		return nil
	}
}
