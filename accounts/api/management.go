package api

import (
	"net/http"

	"github.com/timeblock/timeblock/accounts"
)

// GET /api/keys/management
func (h *Handler) listManagementKeys(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	rows, err := h.svc.ListManagementKeys(r.Context(), p.UserID)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, rows)
	return nil
}

// POST /api/keys/management {name} → 201 {id, name, keyPrefix, apiKey}; the
// only time the full key is shown.
func (h *Handler) createManagementKey(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	var body struct {
		Name string `json:"name"`
	}
	if err := decodeBody(w, r, h.opts.MaxBody, &body, false); err != nil {
		return err
	}
	created, err := h.svc.CreateManagementKey(r.Context(), p.UserID, body.Name)
	if err != nil {
		return err
	}
	writeData(w, http.StatusCreated, created)
	return nil
}

// DELETE /api/keys/management/{id} → {deleted: true}
func (h *Handler) deleteManagementKey(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	if err := h.svc.DeleteManagementKey(r.Context(), p.UserID, r.PathValue("id")); err != nil {
		return err
	}
	writeData(w, http.StatusOK, deleted{Deleted: true})
	return nil
}
