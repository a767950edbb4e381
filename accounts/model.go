// Package accounts holds Timeblock's account domain: users, pools, subscriptions,
// keys and combined keys, the store they live in, and the rules that govern them.
// It imports no Caddy package.
package accounts

import (
	"fmt"
	"time"

	"github.com/timeblock/timeblock/accounts/billing"
)

// Block is one of the three fixed UTC time blocks a seat is sold in.
type Block string

const (
	BlockAsia     Block = "asia"     // 00:00-07:59 UTC
	BlockEurope   Block = "europe"   // 08:00-15:59 UTC
	BlockAmericas Block = "americas" // 16:00-23:59 UTC
)

// Blocks lists the blocks in hour order.
var Blocks = []Block{BlockAsia, BlockEurope, BlockAmericas}

// HoursPerBlock is the number of UTC hours in a block.
const HoursPerBlock = 8

// FirstHour returns the first UTC hour of the block, or -1 for an unknown block.
func (b Block) FirstHour() int {
	switch b {
	case BlockAsia:
		return 0
	case BlockEurope:
		return 8
	case BlockAmericas:
		return 16
	}
	return -1
}

// Valid reports whether b names a known block.
func (b Block) Valid() bool { return b.FirstHour() >= 0 }

// CheckBlockName reports a configured block name that names no block.
func CheckBlockName(name string) error {
	if !Block(name).Valid() {
		return fmt.Errorf("unknown block %q (use asia, europe or americas)", name)
	}
	return nil
}

// HourMask is a set of UTC hours: bit h is set when hour h is included.
type HourMask uint32

// Has reports whether hour h is in the set.
func (m HourMask) Has(h int) bool { return h >= 0 && h < 24 && m&(1<<uint(h)) != 0 }

// Hours lists the hours in the set in ascending order.
func (m HourMask) Hours() []int {
	hours := make([]int, 0, 24)
	for h := 0; h < 24; h++ {
		if m.Has(h) {
			hours = append(hours, h)
		}
	}
	return hours
}

// NextOpen returns the start of the first hour of the set after t's hour,
// within a day, or zero when the set is empty.
func (m HourMask) NextOpen(t time.Time) time.Time {
	start := t.UTC().Truncate(time.Hour)
	for i := 1; i <= 24; i++ {
		if c := start.Add(time.Duration(i) * time.Hour); m.Has(c.Hour()) {
			return c
		}
	}
	return time.Time{}
}

// MaskOf returns the hours covered by the given blocks.
func MaskOf(blocks []Block) HourMask {
	var m HourMask
	for _, b := range blocks {
		if first := b.FirstHour(); first >= 0 {
			m |= HourMask(0xFF) << uint(first)
		}
	}
	return m
}

// Pool status values.
const (
	PoolDraft      = "draft"
	PoolFunding    = "funding"
	PoolActivating = "activating"
	PoolActive     = "active"
	PoolPaused     = "paused"
)

// CheckPoolStatus reports a configured pool status that is none of these.
func CheckPoolStatus(status string) error {
	switch status {
	case PoolDraft, PoolFunding, PoolActivating, PoolActive, PoolPaused:
		return nil
	}
	return fmt.Errorf("unknown status %q (use draft, funding, activating, active or paused)", status)
}

// Pool is a plan for one model, offering seats in time blocks. Pools come from
// the Caddy configuration and are written to the store when the app starts (SyncConfiguredPools).
type Pool struct {
	ID                 string // UUID, stable across config reloads (derived from the slug)
	Slug               string // unique
	ModelID            string // the model clients name in requests
	ModelName          string // display name
	Description        string
	Status             string           // one of the Pool* status values
	Slots              int              // seats per hour
	BlockPrices        map[Block]string // monthly USD per seat, exact decimal string; absent = block not sold
	AnnualDiscount     string           // fraction as an exact decimal string, e.g. "0.15"
	ManualProvisioning bool
	MaxOutputTokens    int // 0 = no ceiling
	// FundingGoal is the monthly amount (the sum of pledged monthly prices,
	// exact decimal) at which a funding pool moves to activating by itself;
	// "" = no goal (the operator moves it). FundingDeadline: when a funding
	// pool still below its goal returns to draft, its pledges released;
	// zero = none (funding.go).
	FundingGoal     string
	FundingDeadline time.Time
	// MaxPledgeSeats is the most seats one user may pledge per block of a
	// funding pool (all their pledges on the pool together); 0 = the
	// default, PledgeSeatLimit (funding.go).
	MaxPledgeSeats int
	// ConfigStatus is the status the configuration last gave the pool, and
	// StatusReason what set Status (StatusByConfig until the pool moves at
	// run time: the operator endpoint, goal reached, deadline passed). Once
	// it has moved the store holds its state and a reload leaves it
	// (SyncConfiguredPools).
	ConfigStatus    string
	StatusReason    string
	StatusChangedAt time.Time
	UpdatedAt       time.Time
}

// Subscription status values.
const (
	SubActive     = "active"
	SubPendingKey = "pending_key"
	SubPastDue    = "past_due"
	SubCanceled   = "canceled"
	// SubIncomplete is a subscribe whose payment waits for the customer to
	// authenticate it (3-D Secure): it holds its seats for IncompleteHold,
	// has no key and admits nothing; paid, it becomes active (pending_key
	// on manual pools); otherwise canceled (subscribe.go).
	SubIncomplete = "incomplete"
	// SubPledged is a pledge on a funding (or activating) pool: seats held,
	// no charge, no key, no admission. When the pool goes active it is
	// charged once, off-session (funding.go): paid, it becomes active
	// (pending_key on manual pools); declined, past_due with its grace. A
	// pledge withdrawn, or released when the pool returns to draft, is
	// canceled with nothing charged.
	SubPledged = "pledged"
)

// Billing cycles.
const (
	CycleMonth = "month"
	CycleYear  = "year"
)

// Seat is one hour of one seat index in a pool.
type Seat struct {
	Hour      int
	SlotIndex int
}

// Subscription is a user's purchase of seats in one or more blocks of a pool.
type Subscription struct {
	ID           string
	UserID       string
	PoolID       string
	Status       string
	Blocks       []Block
	Quantity     int
	BillingCycle string
	MonthlyPrice string // exact decimal string
	// PeriodAmount is what each period costs (the whole year on a yearly
	// cycle), fixed at purchase: renewals charge it whatever the pool's
	// prices or annual discount become. "" on subscriptions bought before it
	// was kept (periodAmountTx).
	PeriodAmount       string
	CancelAtPeriodEnd  bool
	CurrentPeriodStart time.Time
	CurrentPeriodEnd   time.Time
	PastDueSince       time.Time // zero unless past_due
	TermsVersion       string    // acknowledged terms version; "" when the purchase was made through the API without one
	AckVia             string    // "terms" when acknowledged, "api" when the acknowledgment was omitted
	Seats              []Seat    // held seats, released on cancel
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

// User is an account holder.
type User struct {
	ID            string
	Email         string // unique, lower-cased
	Name          string
	PaymentMethod *billing.PaymentMethod // nil when no card is saved
	CreatedAt     time.Time
}

// Session is a logged-in session; only the token's hash is stored.
type Session struct {
	TokenHash string
	UserID    string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// SignInToken is a one-time e-mail sign-in link's token; only its hash is
// stored. It names an e-mail rather than a user, so that open sign-up creates
// the user only when the link is used, not when anyone types an address.
type SignInToken struct {
	TokenHash string
	Email     string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// ManagementKey authenticates scripts on /api/*; only the hash of its secret is stored.
type ManagementKey struct {
	ID         string
	UserID     string
	Name       string
	Prefix     string // "mk_" + 8 identifying chars, shown in lists
	Hash       string
	Active     bool
	CreatedAt  time.Time
	LastUsedAt time.Time
}

// Key is a consumption key bound to one subscription. The key itself is stored
// encrypted (it must stay retrievable) and found by its hash.
type Key struct {
	ID             string
	UserID         string
	SubscriptionID string
	Name           string
	Hash           string // lookup hash of the full key
	Ciphertext     []byte // the full key, sealed with the configured secret
	Active         bool
	CreatedAt      time.Time
	LastUsedAt     time.Time
}

// Member roles of a combined key.
const (
	RoleLane  = "lane"
	RoleBoost = "boost"
)

// Member is one subscription folded into a combined key.
type Member struct {
	SubscriptionID string
	Role           string
}

// CombinedKey is one credential spanning two or more subscriptions.
type CombinedKey struct {
	ID         string
	UserID     string
	Label      string
	Hash       string
	Ciphertext []byte
	Active     bool
	Members    []Member
	CreatedAt  time.Time
	LastUsedAt time.Time
}

// Charge records one attempt to charge a user, for audit and to make renewals
// happen exactly once per period even with several nodes.
type Charge struct {
	ID             string
	UserID         string
	SubscriptionID string
	PeriodStart    time.Time // start of the billing period this charge pays for
	Amount         string    // exact decimal USD
	Status         string    // "pending", "succeeded", "failed"
	ProcessorRef   string
	// MethodID is the card a renewal claim charges, fixed when the claim is
	// written: a takeover re-sends the same request (the processor refuses
	// its key with another card). "" on records made before it was kept.
	MethodID  string
	CreatedAt time.Time
}

// ChargeIntent is written, in its own transaction, before the processor is
// asked to charge a subscription or a past-due retry, so that a charge made
// by a node that died before recording it can be found and refunded (see
// intents.go). The transaction that records the charge marks the intent done.
type ChargeIntent struct {
	ID             string
	UserID         string
	SubscriptionID string // pre-allocated for a subscribe: it may not exist (yet)
	ChargeID       string // the Charge record a retry pays, "" for a subscribe
	Kind           string // IntentSubscribe or IntentRetry
	Amount         string // exact decimal USD
	// MethodID is the card the processor is asked to charge, fixed when the
	// intent is written: every retry under IdempotencyKey re-sends this
	// request, whatever card the user saves meanwhile. "" on intents
	// written before it was kept (a retry then asks FindCharge first).
	MethodID       string
	IdempotencyKey string // what the processor was asked to charge under
	Status         string // IntentPending → IntentDone | IntentSettling → IntentRefunded | IntentVoid
	ProcessorRef   string // set once known
	CreatedAt      time.Time
	UpdatedAt      time.Time // when the status last changed (a claim's age)
}
