package api

import (
	"net/http"

	"github.com/timeblock/timeblock/accounts"
)

// GET /api/meta-keys
func (h *Handler) listCombinedKeys(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	rows, err := h.svc.ListCombinedKeys(r.Context(), p.UserID)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, rows)
	return nil
}

// POST /api/meta-keys {pledgeIds, label?, roles?} → 201 {id, token, label, createdAt}
func (h *Handler) createCombinedKey(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	var body struct {
		PledgeIDs []string          `json:"pledgeIds"`
		Label     string            `json:"label"`
		Roles     map[string]string `json:"roles"`
	}
	if err := decodeBody(w, r, h.opts.MaxBody, &body, false); err != nil {
		return err
	}
	created, err := h.svc.CreateCombinedKey(r.Context(), p.UserID, body.PledgeIDs, body.Label, body.Roles)
	if err != nil {
		return err
	}
	writeData(w, http.StatusCreated, created)
	return nil
}

// PATCH /api/meta-keys/{id}/member-roles {roles} → the updated list row.
func (h *Handler) setMemberRoles(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	var body struct {
		Roles map[string]string `json:"roles"`
	}
	if err := decodeBody(w, r, h.opts.MaxBody, &body, false); err != nil {
		return err
	}
	if body.Roles == nil {
		return accounts.Invalid("roles is required: an object mapping subscription ids to lane or boost")
	}
	row, err := h.svc.SetMemberRoles(r.Context(), p.UserID, r.PathValue("id"), body.Roles)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, row)
	return nil
}

// PUT /api/meta-keys/{id}/members {pledgeIds} → the updated list row.
func (h *Handler) replaceMembers(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	var body struct {
		PledgeIDs []string `json:"pledgeIds"`
	}
	if err := decodeBody(w, r, h.opts.MaxBody, &body, false); err != nil {
		return err
	}
	if body.PledgeIDs == nil {
		return accounts.Invalid("pledgeIds is required: the complete new list of member subscription ids")
	}
	row, err := h.svc.ReplaceMembers(r.Context(), p.UserID, r.PathValue("id"), body.PledgeIDs)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, row)
	return nil
}

// PATCH /api/meta-keys/{id} {label} → the updated list row.
func (h *Handler) relabelCombinedKey(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	var body struct {
		Label *string `json:"label"`
	}
	if err := decodeBody(w, r, h.opts.MaxBody, &body, false); err != nil {
		return err
	}
	if body.Label == nil {
		return accounts.Invalid("label is required")
	}
	row, err := h.svc.RelabelCombinedKey(r.Context(), p.UserID, r.PathValue("id"), *body.Label)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, row)
	return nil
}

// DELETE /api/meta-keys/{id} → {deleted: true}; the subscriptions stay
// active and keyless.
func (h *Handler) deleteCombinedKey(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	if err := h.svc.DeleteCombinedKey(r.Context(), p.UserID, r.PathValue("id")); err != nil {
		return err
	}
	writeData(w, http.StatusOK, deleted{Deleted: true})
	return nil
}
