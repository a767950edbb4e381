package accounts

// Records a real payment processor needs besides the account entities: the
// processor's customer of each user, the webhook events already handled, and
// the answers to purchase requests that carried an Idempotency-Key.

import (
	"time"
)

// BillingTx is the part of Tx that keeps billing records. Both backends
// implement it (embedded/stripe.go, postgres/stripe.go) and storetest checks
// them alike.
type BillingTx interface {
	// GetProcessorCustomer returns the processor's customer id of the user
	// (ErrNotFound when none is recorded).
	GetProcessorCustomer(processor, userID string) (string, error)
	// CreateProcessorCustomer records the processor's customer of a user:
	// ErrConflict when the user already has one with that processor,
	// ErrNotFound when the user does not exist.
	CreateProcessorCustomer(processor, userID, customerID string) error

	// RecordWebhookEvent records that a processor's event was handled:
	// ErrConflict when that event id was recorded before.
	RecordWebhookEvent(e *WebhookEvent) error

	// GetIdempotentRequest returns the user's request recorded under key
	// (ErrNotFound when none is).
	GetIdempotentRequest(userID, key string) (*IdempotentRequest, error)
	// PutIdempotentRequest inserts or replaces the request of (UserID, Key);
	// ErrNotFound when the user does not exist.
	PutIdempotentRequest(r *IdempotentRequest) error
	// DeleteIdempotentRequest removes it; a missing one is not an error.
	DeleteIdempotentRequest(userID, key string) error

	// PruneBillingRecords deletes the idempotent requests created before
	// requestsBefore and the webhook events received before eventsBefore,
	// and returns how many records it deleted.
	PruneBillingRecords(requestsBefore, eventsBefore time.Time) (int, error)
}

// WebhookEvent is a processor event that was acted on.
type WebhookEvent struct {
	ID         string // the processor's event id, e.g. evt_...
	Type       string
	ReceivedAt time.Time
}

// IdempotentRequest is a purchase request made with an Idempotency-Key and,
// once it has one, its answer.
type IdempotentRequest struct {
	UserID string
	Key    string
	// Fingerprint identifies what was asked (method, path and body hash): the
	// same key with another request is refused.
	Fingerprint string
	// ResourceID is what the request creates (the new subscription's id),
	// chosen before it runs, so that a retry after a crash can tell whether
	// the first attempt created it.
	ResourceID string
	// Status is the HTTP status of the answer, 0 while the request runs.
	Status    int
	Body      []byte
	CreatedAt time.Time
}
