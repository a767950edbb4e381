package accounts

import (
	"context"
	"errors"
	"time"

	"github.com/timeblock/timeblock/accounts/billing"
)

// Sentinel errors every Store returns, so callers never see a backend's own errors.
var (
	// ErrNotFound: no record with that id (or hash, or email).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a unique constraint would be violated (duplicate email, seat
	// already taken, a second key for one subscription, a renewal already claimed).
	ErrConflict = errors.New("conflict")
)

// Store is the durable home of every account entity. Both backends (embedded
// bbolt and PostgreSQL) satisfy it and pass the same conformance suite
// (accounts/storetest).
type Store interface {
	// Update runs fn in one read-write transaction: either everything fn wrote
	// is committed (and durable) or nothing is. fn may run more than once when
	// the backend retries a serialization conflict, so it must have no side
	// effects outside tx. An error from fn rolls back and is returned as is.
	Update(ctx context.Context, fn func(tx Tx) error) error
	// View runs fn in a read-only transaction with a consistent snapshot.
	View(ctx context.Context, fn func(tx Tx) error) error
	// TouchLastUsed records last-use times in one batch, off the request path.
	// Unknown ids are ignored.
	TouchLastUsed(ctx context.Context, batch LastUsedBatch) error
	// PublishInvalidation tells every node sharing this store (this one
	// included) that what the user's keys may do has changed. Call it after the
	// transaction that made the change has committed.
	PublishInvalidation(ctx context.Context, userID string) error
	// OnInvalidation registers fn to be called for every published
	// invalidation, from any node; the returned func unregisters it. fn must
	// not block.
	OnInvalidation(fn func(userID string)) (cancel func())
	// Close releases the backend. It is safe to call more than once.
	Close() error
}

// LastUsedBatch maps ids to their latest use time, per kind of credential.
type LastUsedBatch struct {
	Keys           map[string]time.Time
	CombinedKeys   map[string]time.Time
	ManagementKeys map[string]time.Time
}

// Tx is the view of the store inside one transaction. Create* return
// ErrConflict on a unique violation; Get*, Update* and Delete* return
// ErrNotFound for a missing id. Lists are ordered by creation time, oldest
// first, and return an empty (non-nil is not required) slice when nothing matches.
type Tx interface {
	// Billing records of a real payment processor (billing_records.go).
	BillingTx
	// The outbox of operator events (operator_events.go).
	OperatorEventTx
	// The ledger of money taken (ledger_records.go).
	LedgerTx
	// The operator's audit log (audit.go).
	AuditTx

	// Users. Email is unique.
	CreateUser(u *User) error
	GetUser(id string) (*User, error)
	GetUserByEmail(email string) (*User, error)
	UpdateUser(u *User) error
	ListUsers() ([]*User, error)

	// Sessions, by token hash.
	CreateSession(s *Session) error
	GetSession(tokenHash string) (*Session, error)
	DeleteSession(tokenHash string) error

	// Sign-in link tokens, by token hash. TakeSignInToken deletes the token
	// and returns it, so that of two uses at once exactly one gets it;
	// DeleteSignInTokensExpired removes those expired at now and says how many.
	// CountSignInTokens counts the tokens of email created at or after since,
	// and returns the oldest one's creation time (zero when none).
	CreateSignInToken(t *SignInToken) error
	TakeSignInToken(tokenHash string) (*SignInToken, error)
	DeleteSignInTokensExpired(now time.Time) (int, error)
	CountSignInTokens(email string, since time.Time) (int, time.Time, error)

	// Hourly usage of keys (usage.go). AddKeyUsage adds each row's counters
	// to the stored ones of its (key, hour), creating them when absent;
	// ListKeyUsage returns a key's hours in [from, to), oldest first;
	// DeleteKeyUsageBefore removes the hours before t and says how many.
	AddKeyUsage(rows []KeyUsage) error
	ListKeyUsage(keyID string, from, to time.Time) ([]KeyUsage, error)
	DeleteKeyUsageBefore(t time.Time) (int, error)

	// Management keys. Hash is unique.
	CreateManagementKey(k *ManagementKey) error
	GetManagementKey(id string) (*ManagementKey, error)
	GetManagementKeyByHash(hash string) (*ManagementKey, error)
	ListManagementKeys(userID string) ([]*ManagementKey, error)
	DeleteManagementKey(id string) error

	// Pools. ID and Slug are unique; UpsertPool inserts or replaces by ID.
	UpsertPool(p *Pool) error
	GetPool(id string) (*Pool, error)
	GetPoolBySlug(slug string) (*Pool, error)
	ListPools() ([]*Pool, error)

	// Subscriptions with their seats. CreateSubscription and UpdateSubscription
	// also write the seats: each (pool, hour, slotIndex) is held by at most one
	// subscription, so a seat already held by another returns ErrConflict.
	CreateSubscription(s *Subscription) error
	GetSubscription(id string) (*Subscription, error)
	UpdateSubscription(s *Subscription) error
	ListSubscriptionsByUser(userID string) ([]*Subscription, error)
	// DeleteSubscription removes a subscription and releases its seats. Only
	// a purchase that never completed is deleted (a declined or abandoned
	// reservation, which has no key, charge or combined-key membership).
	DeleteSubscription(id string) error
	// ListSubscriptionsDue lists live (active or past_due) subscriptions whose
	// CurrentPeriodEnd is at or before t, and past_due ones whose PastDueSince is
	// at or before pastDueBefore.
	ListSubscriptionsDue(t, pastDueBefore time.Time) ([]*Subscription, error)
	// ListSubscriptionsByPool lists the pool's subscriptions in status
	// (a funding pool's pledges, funding.go).
	ListSubscriptionsByPool(poolID, status string) ([]*Subscription, error)
	// TakenSeats returns every held seat of the pool, mapped to its subscription id.
	TakenSeats(poolID string) (map[Seat]string, error)

	// Consumption keys. Hash and SubscriptionID are unique.
	CreateKey(k *Key) error
	GetKey(id string) (*Key, error)
	GetKeyByHash(hash string) (*Key, error)
	GetKeyBySubscription(subscriptionID string) (*Key, error)
	UpdateKey(k *Key) error
	ListKeys(userID string) ([]*Key, error)
	DeleteKey(id string) error

	// Combined keys. Hash is unique; a subscription is a member of at most one
	// combined key (ErrConflict otherwise).
	CreateCombinedKey(k *CombinedKey) error
	GetCombinedKey(id string) (*CombinedKey, error)
	GetCombinedKeyByHash(hash string) (*CombinedKey, error)
	GetCombinedKeyBySubscription(subscriptionID string) (*CombinedKey, error)
	UpdateCombinedKey(k *CombinedKey) error
	ListCombinedKeys(userID string) ([]*CombinedKey, error)
	DeleteCombinedKey(id string) error

	// ListCredentialHashes returns the lookup hashes of the consumption keys
	// and combined keys (active or not) of the user, or of every user when
	// userID is InvalidateAll (""), in no particular order. The gate keeps
	// them in memory so that an unknown key costs no store read.
	ListCredentialHashes(userID string) ([]string, error)

	// Charges. (SubscriptionID, PeriodStart) is unique, which makes the charge
	// for a period claimable by exactly one node.
	CreateCharge(c *Charge) error
	UpdateCharge(c *Charge) error
	ListCharges(subscriptionID string) ([]*Charge, error)
	// ListPendingCharges lists the charges still pending (claimed renewals)
	// created at or before t, oldest first.
	ListPendingCharges(t time.Time) ([]*Charge, error)

	// Charge intents, written before a processor call (see intents.go). ID and
	// IdempotencyKey are unique. ListOpenChargeIntents lists the intents still
	// pending or settling whose UpdatedAt is at or before t.
	CreateChargeIntent(ci *ChargeIntent) error
	GetChargeIntent(id string) (*ChargeIntent, error)
	UpdateChargeIntent(ci *ChargeIntent) error
	ListOpenChargeIntents(t time.Time) ([]*ChargeIntent, error)
}

// TestLedgerTx is the built-in test processor's ledger (billing.TestProcessor)
// inside a store transaction. It is not part of Tx: no account code reads or
// writes it. Both stores' transactions implement it, so that the test
// processor keeps its ledger durable and shared between nodes, as an outside
// processor keeps its records, in transactions of its own (never inside an
// account transaction): TestLedger runs them. IdempotencyKey and Ref are
// unique; GetTestCharge finds by idempotency key.
type TestLedgerTx interface {
	CreateTestCharge(c *billing.TestCharge) error
	GetTestCharge(idempotencyKey string) (*billing.TestCharge, error)
	GetTestChargeByRef(ref string) (*billing.TestCharge, error)
	UpdateTestCharge(c *billing.TestCharge) error
	ListTestCharges() ([]*billing.TestCharge, error)
}
