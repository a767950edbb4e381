package accounts

// Subscribing to a pool: validation, seat allocation, the immediate charge.
//
// Ordering of the charge and the transaction. A charge intent is committed
// first (intents.go), the processor is called outside any transaction, and
// everything (subscription, seats, charge record, the intent marked done)
// is then created in one Update; when that transaction fails
// (the seats were taken meanwhile, the pool left `active`, the store is
// down) the charge is refunded. Before charging, a read-only pass checks
// everything that can be checked (pool, terms, card, free seats), so the
// refund path is only taken when a concurrent request wins the last seats.
//
// Why not reserve first and charge second: a reservation is a subscription
// in a non-public state that every reader would have to filter out, that has
// to be deleted on a decline (the store has no such delete, and a leftover
// canceled record would violate "nothing created"), and that a crash would
// leave holding seats. Charging first keeps a decline trivially clean — no
// transaction ran, so nothing exists and no seat was held — and the charge's
// idempotency key ("subscribe:<new subscription id>") makes a repeated call
// harmless. The remaining window, a crash between a successful charge and
// the commit, leaves a pending charge intent: settlement (intents.go) asks
// the processor about its idempotency key and refunds the charge.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"
)

// Subscribe limits.
const (
	MinQuantity = 1
	MaxQuantity = 20
)

// seatAttempts bounds how often a subscription is retried when a concurrent
// one took the seats it picked.
const seatAttempts = 5

// SubscribeRequest is the body of POST /api/pools/:id/subscribe.
type SubscribeRequest struct {
	Blocks         []string        `json:"blocks"`
	Quantity       *int            `json:"quantity"`     // default 1
	BillingCycle   string          `json:"billingCycle"` // month (default) or year
	Acknowledgment *Acknowledgment `json:"acknowledgment"`
}

// Acknowledgment records which purchase terms the subscriber accepted.
type Acknowledgment struct {
	Version string `json:"version"`
}

// TermsVersionData is the payload of a 409 for a stale acknowledgment.
type TermsVersionData struct {
	Version string `json:"version"`
}

// SubscribeResult answers a subscription: the subscription and what was charged.
type SubscribeResult struct {
	SubscriptionView
	AmountCharged string `json:"amountCharged"`
}

// MsgNoPaymentMethod is API.md's answer to a subscription without a saved card.
const MsgNoPaymentMethod = "No payment method found - add a card first"

// subscribeOrder is a validated subscription request.
type subscribeOrder struct {
	blocks   []Block // hour order
	quantity int
	cycle    string
	terms    string // acknowledged version, "" when omitted
	monthly  string // monthly price, fixed when the charge is computed
}

// validate checks a request against a pool (400s).
func (req *SubscribeRequest) validate(p *Pool) (*subscribeOrder, error) {
	o := &subscribeOrder{quantity: 1, cycle: CycleMonth}
	if len(req.Blocks) == 0 {
		return nil, Invalid("blocks is required: choose one or more of asia, europe, americas")
	}
	seen := make(map[Block]bool, len(req.Blocks))
	for _, name := range req.Blocks {
		b := Block(name)
		if !b.Valid() {
			return nil, Invalid("unknown block %q: use asia, europe or americas", name)
		}
		if seen[b] {
			return nil, Invalid("block %q is listed twice; list each block once and use quantity for more seats", name)
		}
		seen[b] = true
		if _, ok := p.BlockPrices[b]; !ok {
			return nil, Invalid("pool %s does not sell the %s block; it sells %s", p.Slug, b, blockList(poolBlocks(p)))
		}
	}
	for _, b := range Blocks {
		if seen[b] {
			o.blocks = append(o.blocks, b)
		}
	}
	if req.Quantity != nil {
		o.quantity = *req.Quantity
		if o.quantity < MinQuantity || o.quantity > MaxQuantity {
			return nil, Invalid("quantity must be between %d and %d seats per block, got %d", MinQuantity, MaxQuantity, o.quantity)
		}
	}
	switch req.BillingCycle {
	case "", CycleMonth:
	case CycleYear:
		o.cycle = CycleYear
	default:
		return nil, Invalid("billingCycle must be %q or %q, got %q", CycleMonth, CycleYear, req.BillingCycle)
	}
	return o, nil
}

func blockList(bs []Block) string {
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = string(b)
	}
	return strings.Join(names, ", ")
}

// allocateSeats picks, for every hour of the blocks, the quantity lowest
// free seat indexes. It returns the hours that have too few free seats.
func allocateSeats(p *Pool, blocks []Block, quantity int, taken map[Seat]string) ([]Seat, []int) {
	var (
		seats   []Seat
		soldOut []int
	)
	for _, b := range blocks {
		first := b.FirstHour()
		for h := first; h < first+HoursPerBlock; h++ {
			got := 0
			for i := 0; i < p.Slots && got < quantity; i++ {
				st := Seat{Hour: h, SlotIndex: i}
				if _, ok := taken[st]; !ok {
					seats = append(seats, st)
					got++
				}
			}
			if got < quantity {
				soldOut = append(soldOut, h)
			}
		}
	}
	return seats, soldOut
}

func soldOutError(p *Pool, quantity int, hours []int) *Error {
	names := make([]string, len(hours))
	for i, h := range hours {
		names[i] = fmt.Sprintf("%02d:00", h)
	}
	return Conflict("sold out: pool %s has fewer than %d free seat(s) at %s UTC; see the free seats with GET /api/pools/%s",
		p.Slug, quantity, strings.Join(names, ", "), p.Slug)
}

// checkSubscribable returns the 409 for a pool that takes no subscriptions.
func checkSubscribable(p *Pool) error {
	switch p.Status {
	case PoolActive:
		return nil
	case PoolFunding:
		return Conflict("pool %s is funding: it takes no charge in this version; subscribe once it is active", p.Slug)
	}
	return Conflict("pool %s is %s; subscriptions open when it is active", p.Slug, p.Status)
}

// Subscribe buys seats on a pool for the user and charges the first period
// at once. A decline is a 402 with nothing created; the new subscription is
// active (pending_key on manual-provisioning pools) and has no key yet. A
// payment that waits for the customer's authentication is a 402 with an
// incomplete subscription holding the seats (incomplete.go).
func (s *Service) Subscribe(ctx context.Context, userID, poolIDOrSlug string, req SubscribeRequest) (*SubscribeResult, error) {
	// 1. Everything that can be checked before money moves.
	var (
		pool  *Pool
		user  *User
		taken map[Seat]string
	)
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		if pool, err = findPoolTx(tx, poolIDOrSlug); err != nil {
			return poolError(poolIDOrSlug, err)
		}
		if user, err = tx.GetUser(userID); err != nil {
			if errors.Is(err, ErrNotFound) {
				return NotFound("no user %s", userID)
			}
			return err
		}
		taken, err = tx.TakenSeats(pool.ID)
		return err
	})
	if err != nil {
		return nil, passClientError("subscribe", err)
	}
	order, err := req.validate(pool)
	if err != nil {
		return nil, err
	}
	if err := checkSubscribable(pool); err != nil {
		return nil, err
	}
	current := s.currentTermsVersion()
	if req.Acknowledgment != nil {
		if req.Acknowledgment.Version != current {
			return nil, &Error{
				Status: 409,
				Message: fmt.Sprintf("the purchase terms you acknowledged (version %q) are not the current ones (version %q); read GET /api/pools/disclosure and acknowledge version %q",
					req.Acknowledgment.Version, current, current),
				Data: TermsVersionData{Version: current},
			}
		}
		order.terms = current
	}
	if user.PaymentMethod == nil {
		return nil, Invalid(MsgNoPaymentMethod)
	}
	if _, soldOut := allocateSeats(pool, order.blocks, order.quantity, taken); len(soldOut) > 0 {
		return nil, soldOutError(pool, order.quantity, soldOut)
	}
	if order.monthly, err = MonthlyPrice(pool, order.blocks, order.quantity); err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", pool.Slug, err)
	}
	amount, err := ChargeAmount(order.monthly, order.cycle, pool.AnnualDiscount)
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", pool.Slug, err)
	}

	// 2. The charge intent, committed before money moves (intents.go), then
	// the charge, outside any transaction.
	subID := newSubscriptionID(ctx) // the Idempotency-Key's, or a new one
	idem := subscribeIdempotencyKey(subID)
	intent := &ChargeIntent{UserID: userID, SubscriptionID: subID, Kind: IntentSubscribe, Amount: amount, IdempotencyKey: idem}
	if err := s.writeIntent(ctx, intent); err != nil {
		return nil, passClientError("subscribe", err)
	}
	ref, err := s.processor.Charge(ctx, ChargeRequest{
		UserID:         userID,
		MethodID:       user.PaymentMethod.ID,
		Amount:         amount,
		IdempotencyKey: idem,
		Description:    fmt.Sprintf("Timeblock %s: %s x%d, first %s", pool.Slug, blockList(order.blocks), order.quantity, order.cycle),
	})
	if action, ok := errors.AsType[*ActionRequiredError](err); ok {
		// The payment waits for the customer (3-D Secure): incomplete.go.
		return nil, s.holdIncomplete(ctx, subID, userID, pool, intent, order, amount, action)
	}
	if errors.Is(err, ErrDeclined) {
		s.finishIntent(ctx, intent.ID, IntentVoid, "")
		why := ""
		if r := DeclineReason(err); r != "" {
			why = " The processor says: " + r
		}
		return nil, PaymentDeclined("your card (%s ending %s) was declined; nothing was created and no seat is held.%s Save another card with POST /api/billing/setup-intent and try again",
			user.PaymentMethod.Brand, user.PaymentMethod.Last4, why)
	}
	if err != nil {
		// The intent stays pending: settlement refunds anything the
		// processor charged after all.
		s.logger.Error("subscribe charge failed", zap.String("user_id", userID), zap.String("intent_id", intent.ID), zap.Error(err))
		return nil, &Error{Status: 502, Message: "the payment could not be completed; nothing was created, and any charge made will be refunded. Try again in a moment"}
	}

	// 3. Everything else in one transaction, which marks the intent done;
	// refund when it fails.
	var sub *Subscription
	for attempt := 1; ; attempt++ {
		sub, err = s.createSubscription(ctx, subID, userID, pool.ID, intent.ID, order, amount, ref)
		if !errors.Is(err, ErrConflict) || attempt == seatAttempts {
			break
		}
	}
	if err != nil {
		if s.refundIntent(ctx, intent.ID, idem, ref, "the subscription could not be created") {
			// The commit went through after all (its answer was lost).
			s.logger.Error("subscribe: the subscription was created although its transaction reported an error",
				zap.String("subscription_id", subID), zap.Error(err))
			return nil, &Error{Status: 503, Message: "the subscription may have been created; look at GET /api/subscriptions before trying again"}
		}
		if errors.Is(err, ErrConflict) {
			return nil, Conflict("sold out: other subscriptions took the seats while yours was being charged; your charge was refunded. Look at GET /api/pools/%s and try again", pool.Slug)
		}
		if errors.Is(err, errIntentTaken) {
			return nil, &Error{Status: 503, Message: "the payment took too long to be recorded; your charge was refunded and nothing was created. Try again"}
		}
		return nil, passClientError("subscribe", err)
	}
	s.logger.Info("subscribed",
		zap.String("user_id", userID), zap.String("subscription_id", sub.ID),
		zap.String("pool", pool.Slug), zap.String("status", sub.Status), zap.String("amount", amount))
	v, err := s.subscriptionView(sub, pool, nil)
	if err != nil {
		return nil, err
	}
	return &SubscribeResult{SubscriptionView: v, AmountCharged: amount}, nil
}

// createSubscription writes the paid subscription, its seats and its charge
// record in one transaction, and marks the charge intent done (refusing with
// errIntentTaken when settlement claimed it). ErrConflict means a concurrent subscription
// took a seat it picked: the caller tries again with fresh seats.
func (s *Service) createSubscription(ctx context.Context, subID, userID, poolID, intentID string, o *subscribeOrder, amount, ref string) (*Subscription, error) {
	var sub *Subscription
	err := s.store.Update(ctx, func(tx Tx) error {
		if err := markIntentDoneTx(tx, intentID, ref, s.clock()); err != nil {
			return err
		}
		var err error
		if sub, err = s.newSubscriptionTx(tx, subID, userID, poolID, o, SubActive); err != nil {
			return err
		}
		now := sub.CreatedAt
		if err := tx.CreateSubscription(sub); err != nil {
			return err
		}
		return tx.CreateCharge(&Charge{
			ID:             newID(),
			UserID:         userID,
			SubscriptionID: sub.ID,
			PeriodStart:    now,
			Amount:         amount,
			Status:         ChargeSucceeded,
			ProcessorRef:   ref,
			CreatedAt:      now,
		})
	})
	return sub, err
}

// newSubscriptionTx picks free seats for the order on the pool, as it is
// inside tx, and returns the subscription that would hold them, in status
// (an active one on a manual-provisioning pool waits for its key:
// pending_key). It writes nothing. A seat gone since the order was checked
// is a sold-out *Error; ErrConflict from the caller's write means another
// subscription took one in the meantime.
func (s *Service) newSubscriptionTx(tx Tx, subID, userID, poolID string, o *subscribeOrder, status string) (*Subscription, error) {
	pool, err := tx.GetPool(poolID)
	if err != nil {
		return nil, err
	}
	if err := checkSubscribable(pool); err != nil {
		return nil, err
	}
	taken, err := tx.TakenSeats(pool.ID)
	if err != nil {
		return nil, err
	}
	seats, soldOut := allocateSeats(pool, o.blocks, o.quantity, taken)
	if len(soldOut) > 0 {
		return nil, soldOutError(pool, o.quantity, soldOut)
	}
	if status == SubActive && pool.ManualProvisioning {
		status = SubPendingKey
	}
	now := s.clock()
	sub := &Subscription{
		ID:                 subID,
		UserID:             userID,
		PoolID:             pool.ID,
		Status:             status,
		Blocks:             slices.Clone(o.blocks),
		Quantity:           o.quantity,
		BillingCycle:       o.cycle,
		MonthlyPrice:       o.monthly,
		CurrentPeriodStart: now,
		CurrentPeriodEnd:   nextPeriodEnd(now, o.cycle),
		TermsVersion:       o.terms,
		AckVia:             "terms",
		Seats:              seats,
		CreatedAt:          now,
		UpdatedAt:          now,
	}
	if o.terms == "" {
		sub.AckVia = "api"
	}
	return sub, nil
}
