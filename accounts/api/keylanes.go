package api

// A key's lanes in use as a stream, for its owner: the SSE stream of the
// gate's GET /v1/key/lanes under the session or management key instead of
// the key itself. The lanes live in the gate's registry, which the server
// hands in (Options.KeyLanes).

import (
	"context"
	"net/http"

	"github.com/timeblock/timeblock/accounts"
)

// KeyStatusFunc reads a key's status now and the pools its lanes are in.
type KeyStatusFunc func(ctx context.Context) (accounts.KeyStatus, []string, error)

// KeyLanesFunc streams the lanes in use of keyID (see Options.KeyLanes). It
// calls status before writing anything, and answers with its error; once
// the stream has begun, it calls status again at each poll, and a 401 or
// 404 from it ends the stream. It returns an error only before the stream
// has begun.
type KeyLanesFunc func(w http.ResponseWriter, r *http.Request, keyID string, status KeyStatusFunc) error

// GET /api/keys/{id}/lanes → the consumption key's lanes stream.
func (h *Handler) keyLanes(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	id := r.PathValue("id")
	return h.streamLanes(w, r, id, func(ctx context.Context) (accounts.KeyStatus, []string, error) {
		return h.svc.KeyStatus(ctx, p.UserID, id)
	})
}

// GET /api/meta-keys/{id}/lanes → the combined key's lanes stream.
func (h *Handler) combinedKeyLanes(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	id := r.PathValue("id")
	return h.streamLanes(w, r, id, func(ctx context.Context) (accounts.KeyStatus, []string, error) {
		return h.svc.CombinedKeyStatus(ctx, p.UserID, id)
	})
}

// streamLanes checks, at each poll, that the credential the stream was
// opened with still holds (a session signed out ends it) before reading
// the key's status.
func (h *Handler) streamLanes(w http.ResponseWriter, r *http.Request, id string, status KeyStatusFunc) error {
	if h.opts.KeyLanes == nil {
		return accounts.NotFound("no lane stream on this server: lanes are counted by the gate, which this configuration does not run")
	}
	return h.opts.KeyLanes(w, r, id, func(ctx context.Context) (accounts.KeyStatus, []string, error) {
		if _, err := h.authenticate(r.WithContext(ctx)); err != nil {
			return accounts.KeyStatus{}, nil, err
		}
		return status(ctx)
	})
}
