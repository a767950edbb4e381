package api

import (
	"context"
	"errors"
	"io"
	"net/http"

	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
)

// WebhookSource verifies and reads a payment processor's webhook
// deliveries (accounts/billing/stripe.Processor).
type WebhookSource interface {
	// WebhookEvent checks the delivery's signature and reads it; a refused
	// delivery is a 400 *accounts.Error.
	WebhookEvent(ctx context.Context, payload []byte, signature string) (accounts.ProcessorEvent, error)
}

// maxWebhookBody bounds a webhook delivery; Stripe's events are far smaller.
const maxWebhookBody = 1 << 20

// WebhookResult answers a delivery that was applied (or was a duplicate).
type WebhookResult struct {
	Received  bool   `json:"received"`
	Duplicate bool   `json:"duplicate"`
	Effect    string `json:"effect"` // "past_due", "active" or ""
}

// POST /api/billing/webhook (no session; the processor's signature). The
// event is recorded and applied in one transaction before the 200, so a
// 2xx means the effect is durable; any failure is a 5xx and Stripe
// delivers again, and a delivery seen before is answered 200 with nothing
// done.
func (h *Handler) webhook(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		writeError(w, h.logger, accounts.Invalid("the event could not be read: %v", err))
		return
	}
	ev, err := h.opts.Webhook.WebhookEvent(r.Context(), body, r.Header.Get("Stripe-Signature"))
	if err != nil {
		if ae, ok := errors.AsType[*accounts.Error](err); ok && ae.Status == http.StatusBadRequest {
			h.logger.Warn("webhook delivery refused", zap.String("remote", r.RemoteAddr), zap.Error(err))
		}
		writeError(w, h.logger, err)
		return
	}
	res, err := h.svc.ApplyProcessorEvent(r.Context(), ev)
	if err != nil {
		writeError(w, h.logger, err)
		return
	}
	writeData(w, http.StatusOK, WebhookResult{Received: true, Duplicate: res.Duplicate, Effect: res.Effect})
}
