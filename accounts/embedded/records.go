package embedded

import (
	"cmp"
	"slices"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// The records below are the on-disk JSON form of the domain types. They are
// separate types so that renaming a field in package accounts cannot silently
// change the file format.

type userRecord struct {
	ID            string               `json:"id"`
	Email         string               `json:"email"`
	Name          string               `json:"name,omitempty"`
	PaymentMethod *paymentMethodRecord `json:"payment_method,omitempty"`
	CreatedAt     time.Time            `json:"created_at"`
}

type paymentMethodRecord struct {
	ID    string `json:"id"`
	Brand string `json:"brand,omitempty"`
	Last4 string `json:"last4,omitempty"`
}

type sessionRecord struct {
	TokenHash string    `json:"token_hash"`
	UserID    string    `json:"user_id"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

type mgmtKeyRecord struct {
	ID         string    `json:"id"`
	UserID     string    `json:"user_id"`
	Name       string    `json:"name,omitempty"`
	Prefix     string    `json:"prefix"`
	Hash       string    `json:"hash"`
	Active     bool      `json:"active"`
	CreatedAt  time.Time `json:"created_at"`
	LastUsedAt time.Time `json:"last_used_at"`
}

type poolRecord struct {
	ID                 string            `json:"id"`
	Seq                uint64            `json:"seq"` // first-insert order, for ListPools
	Slug               string            `json:"slug"`
	ModelID            string            `json:"model_id"`
	ModelName          string            `json:"model_name,omitempty"`
	Description        string            `json:"description,omitempty"`
	Status             string            `json:"status"`
	Slots              int               `json:"slots"`
	BlockPrices        map[string]string `json:"block_prices,omitempty"`
	AnnualDiscount     string            `json:"annual_discount,omitempty"`
	ManualProvisioning bool              `json:"manual_provisioning,omitempty"`
	MaxOutputTokens    int               `json:"max_output_tokens,omitempty"`
	// Funding and run-time state (funding.go): absent in files written
	// before them, which read as no goal and a status set by the config.
	FundingGoal     string    `json:"funding_goal,omitempty"`
	FundingDeadline time.Time `json:"funding_deadline,omitzero"`
	ConfigStatus    string    `json:"config_status,omitempty"`
	StatusReason    string    `json:"status_reason,omitempty"`
	StatusChangedAt time.Time `json:"status_changed_at,omitzero"`
	// MaxPledgeSeats: absent (0) in older files, the default limit.
	MaxPledgeSeats int       `json:"max_pledge_seats,omitempty"`
	UpdatedAt      time.Time `json:"updated_at"`
}

type subscriptionRecord struct {
	ID                 string    `json:"id"`
	UserID             string    `json:"user_id"`
	PoolID             string    `json:"pool_id"`
	Status             string    `json:"status"`
	Blocks             []string  `json:"blocks,omitempty"`
	Quantity           int       `json:"quantity"`
	BillingCycle       string    `json:"billing_cycle"`
	MonthlyPrice       string    `json:"monthly_price"`
	PeriodAmount       string    `json:"period_amount,omitempty"`
	CancelAtPeriodEnd  bool      `json:"cancel_at_period_end,omitempty"`
	CurrentPeriodStart time.Time `json:"current_period_start"`
	CurrentPeriodEnd   time.Time `json:"current_period_end"`
	PastDueSince       time.Time `json:"past_due_since"`
	TermsVersion       string    `json:"terms_version,omitempty"`
	AckVia             string    `json:"ack_via,omitempty"`
	Seats              [][2]int  `json:"seats,omitempty"` // (hour, slot index), sorted
	CreatedAt          time.Time `json:"created_at"`
	UpdatedAt          time.Time `json:"updated_at"`
}

type keyRecord struct {
	ID             string    `json:"id"`
	UserID         string    `json:"user_id"`
	SubscriptionID string    `json:"subscription_id"`
	Name           string    `json:"name,omitempty"`
	Hash           string    `json:"hash"`
	Ciphertext     []byte    `json:"ciphertext"`
	Active         bool      `json:"active"`
	CreatedAt      time.Time `json:"created_at"`
	LastUsedAt     time.Time `json:"last_used_at"`
}

type combinedKeyRecord struct {
	ID         string         `json:"id"`
	UserID     string         `json:"user_id"`
	Label      string         `json:"label,omitempty"`
	Hash       string         `json:"hash"`
	Ciphertext []byte         `json:"ciphertext"`
	Active     bool           `json:"active"`
	Members    []memberRecord `json:"members"`
	CreatedAt  time.Time      `json:"created_at"`
	LastUsedAt time.Time      `json:"last_used_at"`
}

type memberRecord struct {
	SubscriptionID string `json:"subscription_id"`
	Role           string `json:"role"`
}

type chargeRecord struct {
	ID             string    `json:"id"`
	UserID         string    `json:"user_id"`
	SubscriptionID string    `json:"subscription_id"`
	PeriodStart    time.Time `json:"period_start"`
	Amount         string    `json:"amount"`
	Status         string    `json:"status"`
	ProcessorRef   string    `json:"processor_ref,omitempty"`
	MethodID       string    `json:"method_id,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
}

// ts normalizes a time as PostgreSQL would store it: UTC, microseconds.
// Both backends do this so that they return identical values.
func ts(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func newUserRecord(u *accounts.User) *userRecord {
	r := &userRecord{ID: u.ID, Email: u.Email, Name: u.Name, CreatedAt: ts(u.CreatedAt)}
	if pm := u.PaymentMethod; pm != nil {
		r.PaymentMethod = &paymentMethodRecord{ID: pm.ID, Brand: pm.Brand, Last4: pm.Last4}
	}
	return r
}

func (r *userRecord) user() *accounts.User {
	u := &accounts.User{ID: r.ID, Email: r.Email, Name: r.Name, CreatedAt: r.CreatedAt.UTC()}
	if pm := r.PaymentMethod; pm != nil {
		u.PaymentMethod = &billing.PaymentMethod{ID: pm.ID, Brand: pm.Brand, Last4: pm.Last4}
	}
	return u
}

func newSessionRecord(s *accounts.Session) *sessionRecord {
	return &sessionRecord{TokenHash: s.TokenHash, UserID: s.UserID, CreatedAt: ts(s.CreatedAt), ExpiresAt: ts(s.ExpiresAt)}
}

func (r *sessionRecord) session() *accounts.Session {
	return &accounts.Session{TokenHash: r.TokenHash, UserID: r.UserID, CreatedAt: r.CreatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC()}
}

func newMgmtKeyRecord(k *accounts.ManagementKey) *mgmtKeyRecord {
	return &mgmtKeyRecord{
		ID: k.ID, UserID: k.UserID, Name: k.Name, Prefix: k.Prefix, Hash: k.Hash, Active: k.Active,
		CreatedAt: ts(k.CreatedAt), LastUsedAt: ts(k.LastUsedAt),
	}
}

func (r *mgmtKeyRecord) managementKey() *accounts.ManagementKey {
	return &accounts.ManagementKey{
		ID: r.ID, UserID: r.UserID, Name: r.Name, Prefix: r.Prefix, Hash: r.Hash, Active: r.Active,
		CreatedAt: r.CreatedAt.UTC(), LastUsedAt: r.LastUsedAt.UTC(),
	}
}

func newPoolRecord(p *accounts.Pool, seq uint64) *poolRecord {
	r := &poolRecord{
		ID: p.ID, Seq: seq, Slug: p.Slug, ModelID: p.ModelID, ModelName: p.ModelName, Description: p.Description,
		Status: p.Status, Slots: p.Slots, AnnualDiscount: p.AnnualDiscount, ManualProvisioning: p.ManualProvisioning,
		MaxOutputTokens: p.MaxOutputTokens, UpdatedAt: ts(p.UpdatedAt),
		FundingGoal: p.FundingGoal, FundingDeadline: ts(p.FundingDeadline), ConfigStatus: p.ConfigStatus,
		StatusReason: p.StatusReason, StatusChangedAt: ts(p.StatusChangedAt), MaxPledgeSeats: p.MaxPledgeSeats,
	}
	if len(p.BlockPrices) > 0 {
		r.BlockPrices = make(map[string]string, len(p.BlockPrices))
		for b, price := range p.BlockPrices {
			r.BlockPrices[string(b)] = price
		}
	}
	return r
}

func (r *poolRecord) pool() *accounts.Pool {
	p := &accounts.Pool{
		ID: r.ID, Slug: r.Slug, ModelID: r.ModelID, ModelName: r.ModelName, Description: r.Description,
		Status: r.Status, Slots: r.Slots, AnnualDiscount: r.AnnualDiscount, ManualProvisioning: r.ManualProvisioning,
		MaxOutputTokens: r.MaxOutputTokens, UpdatedAt: r.UpdatedAt.UTC(),
		BlockPrices: make(map[accounts.Block]string, len(r.BlockPrices)),
		FundingGoal: r.FundingGoal, FundingDeadline: r.FundingDeadline.UTC(), ConfigStatus: r.ConfigStatus,
		StatusReason: r.StatusReason, StatusChangedAt: r.StatusChangedAt.UTC(), MaxPledgeSeats: r.MaxPledgeSeats,
	}
	for b, price := range r.BlockPrices {
		p.BlockPrices[accounts.Block(b)] = price
	}
	return p
}

func newSubscriptionRecord(s *accounts.Subscription) *subscriptionRecord {
	r := &subscriptionRecord{
		ID: s.ID, UserID: s.UserID, PoolID: s.PoolID, Status: s.Status, Quantity: s.Quantity,
		BillingCycle: s.BillingCycle, MonthlyPrice: s.MonthlyPrice, PeriodAmount: s.PeriodAmount, CancelAtPeriodEnd: s.CancelAtPeriodEnd,
		CurrentPeriodStart: ts(s.CurrentPeriodStart), CurrentPeriodEnd: ts(s.CurrentPeriodEnd),
		PastDueSince: ts(s.PastDueSince), TermsVersion: s.TermsVersion, AckVia: s.AckVia,
		CreatedAt: ts(s.CreatedAt), UpdatedAt: ts(s.UpdatedAt),
	}
	for _, b := range s.Blocks {
		r.Blocks = append(r.Blocks, string(b))
	}
	for _, seat := range s.Seats {
		r.Seats = append(r.Seats, [2]int{seat.Hour, seat.SlotIndex})
	}
	slices.SortFunc(r.Seats, func(a, b [2]int) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	})
	return r
}

func (r *subscriptionRecord) subscription() *accounts.Subscription {
	s := &accounts.Subscription{
		ID: r.ID, UserID: r.UserID, PoolID: r.PoolID, Status: r.Status, Quantity: r.Quantity,
		BillingCycle: r.BillingCycle, MonthlyPrice: r.MonthlyPrice, PeriodAmount: r.PeriodAmount, CancelAtPeriodEnd: r.CancelAtPeriodEnd,
		CurrentPeriodStart: r.CurrentPeriodStart.UTC(), CurrentPeriodEnd: r.CurrentPeriodEnd.UTC(),
		PastDueSince: r.PastDueSince.UTC(), TermsVersion: r.TermsVersion, AckVia: r.AckVia,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		Blocks: make([]accounts.Block, 0, len(r.Blocks)),
		Seats:  make([]accounts.Seat, 0, len(r.Seats)),
	}
	for _, b := range r.Blocks {
		s.Blocks = append(s.Blocks, accounts.Block(b))
	}
	for _, seat := range r.Seats {
		s.Seats = append(s.Seats, accounts.Seat{Hour: seat[0], SlotIndex: seat[1]})
	}
	return s
}

func newKeyRecord(k *accounts.Key) *keyRecord {
	return &keyRecord{
		ID: k.ID, UserID: k.UserID, SubscriptionID: k.SubscriptionID, Name: k.Name, Hash: k.Hash,
		Ciphertext: k.Ciphertext, Active: k.Active, CreatedAt: ts(k.CreatedAt), LastUsedAt: ts(k.LastUsedAt),
	}
}

func (r *keyRecord) key() *accounts.Key {
	return &accounts.Key{
		ID: r.ID, UserID: r.UserID, SubscriptionID: r.SubscriptionID, Name: r.Name, Hash: r.Hash,
		Ciphertext: nonNil(r.Ciphertext), Active: r.Active, CreatedAt: r.CreatedAt.UTC(), LastUsedAt: r.LastUsedAt.UTC(),
	}
}

func newCombinedKeyRecord(k *accounts.CombinedKey) *combinedKeyRecord {
	r := &combinedKeyRecord{
		ID: k.ID, UserID: k.UserID, Label: k.Label, Hash: k.Hash, Ciphertext: k.Ciphertext, Active: k.Active,
		CreatedAt: ts(k.CreatedAt), LastUsedAt: ts(k.LastUsedAt),
	}
	for _, m := range k.Members {
		r.Members = append(r.Members, memberRecord{SubscriptionID: m.SubscriptionID, Role: m.Role})
	}
	return r
}

func (r *combinedKeyRecord) combinedKey() *accounts.CombinedKey {
	k := &accounts.CombinedKey{
		ID: r.ID, UserID: r.UserID, Label: r.Label, Hash: r.Hash, Ciphertext: nonNil(r.Ciphertext), Active: r.Active,
		CreatedAt: r.CreatedAt.UTC(), LastUsedAt: r.LastUsedAt.UTC(),
		Members: make([]accounts.Member, 0, len(r.Members)),
	}
	for _, m := range r.Members {
		k.Members = append(k.Members, accounts.Member{SubscriptionID: m.SubscriptionID, Role: m.Role})
	}
	return k
}

func newChargeRecord(c *accounts.Charge) *chargeRecord {
	return &chargeRecord{
		ID: c.ID, UserID: c.UserID, SubscriptionID: c.SubscriptionID, PeriodStart: ts(c.PeriodStart),
		Amount: c.Amount, Status: c.Status, ProcessorRef: c.ProcessorRef, MethodID: c.MethodID, CreatedAt: ts(c.CreatedAt),
	}
}

func (r *chargeRecord) charge() *accounts.Charge {
	return &accounts.Charge{
		ID: r.ID, UserID: r.UserID, SubscriptionID: r.SubscriptionID, PeriodStart: r.PeriodStart.UTC(),
		Amount: r.Amount, Status: r.Status, ProcessorRef: r.ProcessorRef, MethodID: r.MethodID, CreatedAt: r.CreatedAt.UTC(),
	}
}

// nonNil returns b, or an empty slice for nil, as PostgreSQL returns bytea.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
