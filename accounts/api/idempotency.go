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
		body, err := io.ReadAll(io.LimitReader(r.Body, h.opts.MaxBody+1))
		if err != nil {
			return accounts.Invalid("reading request body: %v", err)
		}
		if int64(len(body)) > h.opts.MaxBody {
			return &accounts.Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body is larger than %d bytes", h.opts.MaxBody)}
		}
		pool := h.svc.PoolID(r.Context(), r.PathValue("id"))
		sum := sha256.Sum256(append([]byte(r.Pattern+"\n"+pool+"\n"), body...))
		fingerprint := hex.EncodeToString(sum[:])

		start, err := h.svc.BeginIdempotent(r.Context(), p.UserID, key, fingerprint)
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
		r.Body = io.NopCloser(bytes.NewReader(body))
		err = fn(rec, r, p, start.PurchaseID)
		if err != nil {
			writeError(rec, h.logger, err)
		}
		// A purchase that settlement is still ending has no outcome to keep:
		// a retry after settlement gets it.
		if !errors.Is(err, accounts.ErrPurchaseSettling) {
			if err := h.svc.FinishIdempotent(r.Context(), p.UserID, key, fingerprint, rec.Code, rec.Body.Bytes()); err != nil {
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
}
