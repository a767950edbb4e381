package api

import (
	"net/http"

	"github.com/timeblock/timeblock/accounts"
)

// GET /api/keys
func (h *Handler) listKeys(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	rows, err := h.svc.ListKeys(r.Context(), p.UserID)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, rows)
	return nil
}

// POST /api/keys/subscription {subscriptionId?, name?} → 201 with the key's
// row (a superset of API.md's id, apiKey, isActive).
func (h *Handler) createKey(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	var body struct {
		SubscriptionID string `json:"subscriptionId"`
		Name           string `json:"name"`
	}
	if err := decodeBody(w, r, h.opts.MaxBody, &body, true); err != nil {
		return err
	}
	row, err := h.svc.CreateKey(r.Context(), p.UserID, body.SubscriptionID, body.Name)
	if err != nil {
		return err
	}
	writeData(w, http.StatusCreated, row)
	return nil
}

// PUT /api/keys/{id} {name?, isActive?} → the updated row.
func (h *Handler) updateKey(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	var body struct {
		Name     *string `json:"name"`
		IsActive *bool   `json:"isActive"`
	}
	if err := decodeBody(w, r, h.opts.MaxBody, &body, false); err != nil {
		return err
	}
	row, err := h.svc.UpdateKey(r.Context(), p.UserID, r.PathValue("id"), body.Name, body.IsActive)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, row)
	return nil
}

// DELETE /api/keys/{id} → {deleted: true}
func (h *Handler) deleteKey(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	if err := h.svc.DeleteKey(r.Context(), p.UserID, r.PathValue("id")); err != nil {
		return err
	}
	writeData(w, http.StatusOK, deleted{Deleted: true})
	return nil
}

// deleted answers every DELETE of a key.
type deleted struct {
	Deleted bool `json:"deleted"`
}
