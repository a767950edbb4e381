package api

// Idempotency-Key on purchases (accounts/idempotency.go has the rules):
// the request body is read once, fingerprinted with the method, the pool
// (by id, however the path named it) and the body, and the answer — a
// success or a client error, but not "still being processed" — is kept for
// 24 hours and sent again, byte for byte, for a retry with the same key and
// body; after a 5xx the retry carries the same purchase on.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
)

// IdempotencyHeader is the request header that makes a purchase idempotent.
const IdempotencyHeader = "Idempotency-Key"

// ReplayHeader marks an answer sent again for a repeated Idempotency-Key.
const ReplayHeader = "Idempotent-Replayed"

// purchaseFunc is a purchase endpoint; purchaseID is the purchase an
// Idempotency-Key names ("" without one).
type purchaseFunc func(w http.ResponseWriter, r *http.Request, p *accounts.Principal, purchaseID string) error

// idempotent wraps a purchase endpoint on /api/pools/{id}/...: without an
// Idempotency-Key header it runs as is.
func (h *Handler) idempotent(fn purchaseFunc) authedFunc {
	return func(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
		key := r.Header.Get(IdempotencyHeader)
		if key == "" {
			return fn(w, r, p, "")
		}
		if err := accounts.CheckIdempotencyKey(key); err != nil {
			return err
		}
		body, err := h.idempotentBody(r)
		if err != nil {
			return err
		}
		pool := h.svc.PoolID(r.Context(), r.PathValue("id"))
		sum := sha256.Sum256(append([]byte(r.Pattern+"\n"+pool+"\n"), body...))
		return h.runIdempotent(w, r, p.UserID, key, hex.EncodeToString(sum[:]), func(w http.ResponseWriter, id string) error {
			return fn(w, r, p, id)
		})
	}
}

// idempotentBody reads the body of a request with an Idempotency-Key (to
// fingerprint it) and puts it back for the endpoint.
func (h *Handler) idempotentBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, h.opts.MaxBody+1))
	if err != nil {
		return nil, accounts.Invalid("reading request body: %v", err)
	}
	if int64(len(body)) > h.opts.MaxBody {
		return nil, &accounts.Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body is larger than %d bytes", h.opts.MaxBody)}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// runIdempotent runs fn (with the id BeginIdempotent gives the request)
// under the user's Idempotency-Key and the request's fingerprint, or
// replays the answer an earlier request under them got.
func (h *Handler) runIdempotent(w http.ResponseWriter, r *http.Request, userID, key, fingerprint string, fn func(w http.ResponseWriter, id string) error) error {
	start, err := h.svc.BeginIdempotent(r.Context(), userID, key, fingerprint)
	if err != nil {
		return err
	}
	if start.Replay != nil {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set(ReplayHeader, "true")
		w.WriteHeader(start.Replay.Status)
		_, _ = w.Write(start.Replay.Body)
		return nil
	}

	rec := httptest.NewRecorder()
	err = fn(rec, start.PurchaseID)
	if err != nil {
		writeError(rec, h.logger, err)
	}
	// A purchase that settlement is still ending has no outcome to keep:
	// a retry after settlement gets it.
	if !errors.Is(err, accounts.ErrPurchaseSettling) {
		if err := h.svc.FinishIdempotent(r.Context(), userID, key, fingerprint, rec.Code, rec.Body.Bytes()); err != nil {
			// The purchase is done; only its replay is missing: a retry
			// gets its outcome (accounts/idempotency.go).
			h.logger.Error("recording the answer of an idempotent request", zap.Error(err))
		}
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
	return nil
}
