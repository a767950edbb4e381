package api

import (
	"net/http"
	"strconv"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/ledger"
)

// chargesEnvelope is the success envelope of GET /api/billing/charges: data
// stays the array SPEC.md §8 fixes, and the cursor of the next page sits
// beside it (null on the last page).
type chargesEnvelope struct {
	Success    bool            `json:"success"`
	Data       []ledger.Charge `json:"data"`
	NextCursor *string         `json:"nextCursor"`
}

// GET /api/billing/charges?limit=&before= → {data: [{id, number, kind,
// amount, currency, status, refundedAmount, subscriptionId, poolId,
// description, createdAt}], nextCursor}: the caller's charges, newest first.
// limit defaults to 50 (at most 200); before is a previous page's
// nextCursor.
func (h *Handler) listCharges(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	if h.opts.Ledger == nil {
		return accounts.NotFound("this site keeps no ledger")
	}
	limit := 0
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return accounts.Invalid("limit must be a whole number between 1 and %d", ledger.MaxLimit)
		}
		limit = n
	}
	page, err := h.opts.Ledger.List(r.Context(), p.UserID, limit, r.URL.Query().Get("before"))
	if err != nil {
		return err
	}
	env := chargesEnvelope{Success: true, Data: page.Charges}
	if page.NextCursor != "" {
		env.NextCursor = &page.NextCursor
	}
	writeJSON(w, http.StatusOK, env)
	return nil
}

// GET /api/billing/charges/{id}/receipt → the printable receipt (text/html)
// of one of the caller's charges; 404 for another user's.
func (h *Handler) chargeReceipt(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	if h.opts.Ledger == nil {
		return accounts.NotFound("this site keeps no ledger")
	}
	page, err := h.opts.Ledger.Receipt(r.Context(), p.UserID, r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "private, no-store")
	// The page is self-contained: nothing may load or run in it.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(page)
	return nil
}
