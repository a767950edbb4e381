package api

// The status of a key for its owner: the same data as the gate's GET /v1/key
// (accounts.KeyStatus), under the session or management key instead of the
// key itself.

import (
	"context"
	"net/http"

	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
)

// LanesInUseFunc counts the requests of a key in flight now in the given
// pools, on every node (see Options.LanesInUse).
type LanesInUseFunc func(ctx context.Context, keyID string, poolIDs []string) (int, error)

// GET /api/keys/{id} → the consumption key's status.
func (h *Handler) keyStatus(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	id := r.PathValue("id")
	st, pools, err := h.svc.KeyStatus(r.Context(), p.UserID, id)
	if err != nil {
		return err
	}
	return h.writeKeyStatus(w, r, id, st, pools)
}

// GET /api/meta-keys/{id} → the combined key's status.
func (h *Handler) combinedKeyStatus(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	id := r.PathValue("id")
	st, pools, err := h.svc.CombinedKeyStatus(r.Context(), p.UserID, id)
	if err != nil {
		return err
	}
	return h.writeKeyStatus(w, r, id, st, pools)
}

func (h *Handler) writeKeyStatus(w http.ResponseWriter, r *http.Request, keyID string, st accounts.KeyStatus, pools []string) error {
	if h.opts.LanesInUse != nil && len(pools) > 0 {
		n, err := h.opts.LanesInUse(r.Context(), keyID, pools)
		if err != nil {
			h.logger.Error("counting the lanes in use of a key", zap.String("key_id", keyID), zap.Error(err))
			w.Header().Set("Retry-After", "1")
			return &accounts.Error{Status: http.StatusServiceUnavailable,
				Message: "the lanes in use of this key could not be counted right now; retry in a moment"}
		}
		st.LanesInUse = n
	}
	writeData(w, http.StatusOK, st)
	return nil
}
