package accounts

import "time"

// Entitlement is what one inference credential (a consumption key or a
// combined-key token) may do. The gate caches it by key hash and evaluates it
// on every request with At, which neither allocates nor touches the store.
type Entitlement struct {
	KeyID    string // consumption key or combined key id (safe to log)
	UserID   string
	Combined bool
	// Denied, when not empty, says why the credential admits nothing at all
	// (revoked, deleted, subscription canceled, payment past due); DeniedStatus
	// is 401 or 403 accordingly.
	Denied       string
	DeniedStatus int
	Grants       []Grant
	// ValidUntil is when this entitlement must be recomputed at the latest
	// (the earliest period end among its grants): the gate's cache never
	// serves it past that time.
	ValidUntil time.Time
}

// Grant is what one member subscription gives its key.
type Grant struct {
	SubscriptionID  string
	PoolID          string
	PoolSlug        string
	Model           string
	ModelName       string // the pool's display name of the model
	Hours           HourMask
	Seats           int  // simultaneous requests while open; 0 for a boost member
	Boost           bool // a boost member raises priority and adds no lane
	MaxOutputTokens int
	// Until is the end of the paid period: the grant is not open at or after
	// it. Renews says the subscription will renew then (no cancellation is
	// scheduled), so hours after Until still count as a next opening.
	Until  time.Time
	Renews bool
	// Since is when the subscription began (model lists show it as the
	// model's creation time).
	Since time.Time
}

// Admission is the outcome of evaluating an entitlement for one request.
type Admission struct {
	PoolID          string // the pool serving the model ("" when the key holds none)
	PoolSlug        string
	Model           string // the grant's name for the model: a string of the entitlement's own
	Lanes           int    // simultaneous requests allowed now in that pool
	Boosts          int    // boost members open now in that pool
	MaxOutputTokens int
	// ModelHeld is false when the key holds no grant for the model at all (404);
	// when it is true but Lanes is 0, the window is closed and NextOpen says
	// when it opens (403 with retry-after).
	ModelHeld bool
	NextOpen  time.Time
}
