package accounts

// Subscribing to a pool: validation, seat reservation, the charge.
//
// Seats first, money second. After a read-only pass has checked everything
// it can (pool, terms, card, free seats), one transaction reserves the
// seats — the subscription is created incomplete, holding them, with no key
// and no admission — and commits the charge intent (intents.go) beside it.
// Only then is the card charged, outside any transaction, under the
// processor idempotency key "subscribe:<subscription id>". So a buyer who
// loses the race for the last seats is refused before any charge, and no
// charge is ever made without a record of it. Then:
//
//   - paid: one transaction activates the reservation (active, pending_key
//     on manual-provisioning pools; the period starts then), records the
//     charge and marks the intent done;
//   - declined: one transaction deletes the reservation and voids the
//     intent, so nothing is created and no seat stays held (402);
//   - waiting for 3-D Secure: the reservation stays, incomplete, for
//     IncompleteHold (incomplete.go); a user holds one per pool at a time;
//   - no answer from the processor: the intent stays pending for settlement,
//     which refunds a charge made after all and deletes the reservation.
//     Under an Idempotency-Key the reservation stays until then, so that a
//     retry under the key (SubscribeAs) charges again under the same
//     processor key and the processor replays rather than charges twice;
//     without one the seats are released at once.
//
// A crash anywhere leaves an intent that settlement finishes, so a crash
// between a charge and its record is the one case that ends in a refund.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/timeblock/timeblock/accounts/billing"
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
	// AmountDue is what a pledge will be charged when its pool goes live
	// (the first period); absent on a purchase.
	AmountDue string `json:"amountDue,omitempty"`
	// WindowOpen tells whether the hours bought include the current one;
	// when they do not, OpensAt is when they next begin (a buyer of a
	// block that is closed now learns when the key starts to work).
	WindowOpen bool       `json:"windowOpen"`
	OpensAt    *time.Time `json:"opensAt"`
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
	amount   string // what the first period costs (the whole year on a yearly cycle)
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

// checkSubscribable returns the 409 for a pool that takes no subscriptions
// or pledges: an active pool sells, a funding or activating one takes
// pledges (funding.go).
func checkSubscribable(p *Pool) error {
	switch p.Status {
	case PoolActive, PoolFunding, PoolActivating:
		return nil
	case PoolPaused:
		return Conflict("pool %s is paused: it takes no new subscriptions or pledges for now (existing keys keep working); try again once the operator resumes it", p.Slug)
	}
	return Conflict("pool %s is %s; it takes no subscriptions", p.Slug, p.Status)
}

// Subscribe buys seats on a pool for the user and charges the first period
// at once (see the top of this file). A decline is a 402 with nothing
// created; the new subscription is active (pending_key on manual-provisioning
// pools) and has no key yet. A payment that waits for the customer's
// authentication is a 402 with an incomplete subscription holding the seats
// (incomplete.go).
func (s *Service) Subscribe(ctx context.Context, userID, poolIDOrSlug string, req SubscribeRequest) (*SubscribeResult, error) {
	return s.subscribe(ctx, userID, poolIDOrSlug, req, newID(), false)
}

// SubscribeAs is Subscribe under an Idempotency-Key: purchaseID is the id
// the key was given (BeginIdempotent), and becomes the subscription's id.
// Called again with the same id it carries on the purchase from where it
// stands instead of starting another: a reservation whose charge has no
// known outcome is charged again under the same processor idempotency key
// (the processor replays its first answer, so the card is charged at most
// once), a finished purchase answers with its outcome.
func (s *Service) SubscribeAs(ctx context.Context, userID, poolIDOrSlug string, req SubscribeRequest, purchaseID string) (*SubscribeResult, error) {
	if purchaseID == "" {
		return s.Subscribe(ctx, userID, poolIDOrSlug, req)
	}
	p, err := s.findPurchase(ctx, userID, purchaseID)
	if err != nil {
		return nil, err
	}
	if p != nil {
		return s.resume(ctx, p)
	}
	return s.subscribe(ctx, userID, poolIDOrSlug, req, purchaseID, true)
}

// subscribe runs a new purchase under subID. resumable says a repeat may
// carry it on (SubscribeAs): its reservation then outlives a charge whose
// outcome is unknown.
func (s *Service) subscribe(ctx context.Context, userID, poolIDOrSlug string, req SubscribeRequest, subID string, resumable bool) (*SubscribeResult, error) {
	// 1. Everything that can be checked before anything is written.
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
	if order.amount, err = ChargeAmount(order.monthly, order.cycle, pool.AnnualDiscount); err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", pool.Slug, err)
	}
	if takesPledges(pool) {
		// Nothing is charged until the pool goes live (funding.go).
		return s.pledge(ctx, user, pool, order, subID)
	}

	// 2. The seats, reserved with the charge intent before money moves: a
	// buyer who loses the race for them is refused here, uncharged.
	p := &purchase{
		user: user,
		pool: pool,
		intent: &ChargeIntent{ID: subID, UserID: userID, SubscriptionID: subID, Kind: IntentSubscribe,
			Amount: order.amount, MethodID: user.PaymentMethod.ID, IdempotencyKey: billing.SubscribeKey(subID)},
		resumable: resumable,
	}
	for attempt := 1; ; attempt++ {
		p.sub, err = s.reserve(ctx, pool.ID, p.intent, order)
		if !errors.Is(err, ErrConflict) || attempt == seatAttempts {
			break
		}
	}
	if errors.Is(err, ErrConflict) {
		return nil, Conflict("sold out: other subscriptions took the seats first; nothing was charged. Look at GET /api/pools/%s and try again", pool.Slug)
	}
	if err != nil {
		return nil, passClientError("subscribe", err)
	}
	return s.charge(ctx, p)
}

// purchase is a subscribe under way: its reservation (an incomplete
// subscription holding the seats) and its charge intent.
type purchase struct {
	user      *User // the buyer with the card to charge; nil: read it
	pool      *Pool
	sub       *Subscription
	intent    *ChargeIntent
	resumable bool // under an Idempotency-Key: a repeat carries it on
}

// reserve writes, in one transaction, the charge intent and the
// subscription that holds the order's seats while the card is charged
// (incomplete: no key, no admission). ErrConflict means another
// subscription took a seat it picked: the caller tries again.
func (s *Service) reserve(ctx context.Context, poolID string, in *ChargeIntent, o *subscribeOrder) (*Subscription, error) {
	var sub *Subscription
	err := s.store.Update(ctx, func(tx Tx) error {
		pool, err := tx.GetPool(poolID)
		if err != nil {
			return err
		}
		if err := checkUnpaidTx(tx, in.UserID, pool, s.clock()); err != nil {
			return err
		}
		if sub, err = s.newSubscriptionTx(tx, in.SubscriptionID, in.UserID, pool.ID, o, SubIncomplete); err != nil {
			return err
		}
		if err := tx.CreateSubscription(sub); err != nil {
			return err
		}
		now := s.clock()
		in.Status, in.CreatedAt, in.UpdatedAt = IntentPending, now, now
		return tx.CreateChargeIntent(in)
	})
	return sub, err
}

// checkUnpaidTx refuses a second unpaid purchase of the user on the pool
// (409): a reservation being charged or a payment waiting for 3-D Secure
// holds seats nobody else can buy, so each user may hold them on a pool
// only once at a time, for IncompleteHold at most.
func checkUnpaidTx(tx Tx, userID string, pool *Pool, now time.Time) error {
	subs, err := tx.ListSubscriptionsByUser(userID)
	if err != nil {
		return err
	}
	for _, sub := range subs {
		if sub.PoolID != pool.ID || sub.Status != SubIncomplete {
			continue
		}
		in, err := subscribeIntentTx(tx, sub.ID, now)
		if err != nil {
			return err
		}
		if in != nil && in.ProcessorRef == "" {
			return Conflict("you already have a purchase on pool %s (subscription %s) whose payment is being processed; wait for its answer, or repeat it with its Idempotency-Key. One unpaid purchase per pool at a time",
				pool.Slug, sub.ID)
		}
		return Conflict("you already have an unpaid purchase on pool %s (subscription %s) waiting for 3-D Secure: finish its payment (POST /api/subscriptions/%s/confirm), cancel it (POST /api/subscriptions/%s/cancel) or let it lapse at %s. One unpaid purchase per pool at a time",
			pool.Slug, sub.ID, sub.ID, sub.ID, sub.CreatedAt.Add(IncompleteHold).Format(time.RFC3339))
	}
	return nil
}

// charge charges a reserved purchase and records the outcome.
func (s *Service) charge(ctx context.Context, p *purchase) (*SubscribeResult, error) {
	user := p.user
	// The card is the one the purchase was first made with (charge_fixed.go),
	// whatever the buyer saved since; a purchase carried on needs no card now.
	method, askFirst := p.intent.MethodID, false
	if user == nil { // a purchase carried on (SubscribeAs)
		var err error
		if user, err = s.purchaser(ctx, p.intent.UserID, method == ""); err != nil {
			return nil, err
		}
	}
	if method == "" { // an intent written before its card was kept
		method, askFirst = user.PaymentMethod.ID, true
	}
	sub := p.sub
	ref, err := s.chargeFixed(ctx, billing.ChargeRequest{
		UserID:         sub.UserID,
		MethodID:       method,
		Amount:         p.intent.Amount,
		IdempotencyKey: p.intent.IdempotencyKey,
		Description:    fmt.Sprintf("Timeblock %s: %s x%d, first %s", p.pool.Slug, blockList(sub.Blocks), sub.Quantity, sub.BillingCycle),
	}, p.intent.CreatedAt, askFirst)
	if action, ok := errors.AsType[*billing.ActionRequiredError](err); ok {
		// The payment waits for the customer (3-D Secure): incomplete.go.
		return nil, s.holdIncomplete(ctx, p, action)
	}
	if errors.Is(err, billing.ErrDeclined) {
		s.release(ctx, p.intent.ID, IntentVoid, "")
		why := ""
		if r := billing.DeclineReason(err); r != "" {
			why = " The processor says: " + r
		}
		card := "the card this purchase was first paid with"
		if pm := user.PaymentMethod; pm != nil && pm.ID == method {
			card = fmt.Sprintf("your card (%s ending %s)", pm.Brand, pm.Last4)
		}
		return nil, PaymentDeclined("%s was declined; nothing was created and no seat is held.%s Save another card with POST /api/billing/setup-intent and try again",
			card, why)
	}
	if err != nil {
		// The charge's outcome is unknown; the intent stays pending, and
		// settlement refunds anything the processor charged after all.
		s.logger.Error("subscribe charge failed", zap.String("user_id", sub.UserID), zap.String("intent_id", p.intent.ID), zap.Error(err))
		if p.resumable {
			return nil, &Error{Status: 502, Message: fmt.Sprintf("the payment could not be completed; retry with the same Idempotency-Key to finish this purchase (your card is charged at most once). Without a retry nothing is bought, the seats are released and any charge made is refunded by %s",
				p.intent.CreatedAt.Add(settleGraceNow()).Format(time.RFC3339))}
		}
		s.releaseSeats(ctx, sub.ID)
		return nil, &Error{Status: 502, Message: "the payment could not be completed; nothing was created, and any charge made will be refunded. Try again in a moment"}
	}
	if err := s.activate(ctx, p.intent.ID, ref); err != nil {
		if s.refundIntent(ctx, p.intent.ID, p.intent.IdempotencyKey, ref, "the subscription could not be recorded") {
			// The commit went through after all (its answer was lost).
			s.logger.Error("subscribe: the subscription was activated although its transaction reported an error",
				zap.String("subscription_id", sub.ID), zap.Error(err))
			return nil, &Error{Status: 503, Message: fmt.Sprintf("the subscription may have been created; look at GET /api/pools/%s/my-subscriptions before trying again", p.pool.Slug)}
		}
		s.releaseSeats(ctx, sub.ID)
		if errors.Is(err, errIntentTaken) {
			return nil, &Error{Status: 503, Message: "the payment took too long to be recorded; your charge was refunded and nothing was created. Try again"}
		}
		return nil, passClientError("subscribe", err)
	}
	res, err := s.subscribeResultOf(ctx, sub.UserID, sub.ID)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, fmt.Errorf("subscribe: subscription %s vanished after its activation", sub.ID)
	}
	s.logger.Info("subscribed",
		zap.String("user_id", sub.UserID), zap.String("subscription_id", sub.ID),
		zap.String("pool", p.pool.Slug), zap.String("status", res.Status), zap.String("amount", res.AmountCharged))
	s.notifySubscribed(ctx, sub.ID, res.Status) // operator notices (operator_notices.go)
	return res, nil
}

// purchaser reads the buyer; needCard refuses one without a saved card.
func (s *Service) purchaser(ctx context.Context, userID string, needCard bool) (*User, error) {
	var user *User
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		user, err = tx.GetUser(userID)
		return err
	})
	if err != nil {
		return nil, passClientError("subscribe", err)
	}
	if needCard && user.PaymentMethod == nil {
		return nil, Invalid(MsgNoPaymentMethod)
	}
	return user, nil
}

// activate records a paid purchase in one transaction: the intent done, the
// reserved subscription active (pending_key on manual-provisioning pools)
// with its period starting now, and its charge. errIntentTaken means
// settlement claimed the intent first: nothing is recorded.
func (s *Service) activate(ctx context.Context, intentID, ref string) error {
	return s.store.Update(ctx, func(tx Tx) error {
		in, err := tx.GetChargeIntent(intentID)
		if err != nil {
			return err
		}
		if in.Status == IntentDone {
			return nil // recorded already (a repeat under the same key)
		}
		if in.Status != IntentPending {
			return fmt.Errorf("intent %s is %s: %w", intentID, in.Status, errIntentTaken)
		}
		sub, err := tx.GetSubscription(in.SubscriptionID)
		if err != nil {
			return err
		}
		_, err = settleIncompleteTx(tx, sub, billing.PaymentSucceeded, ref, s.clock())
		return err
	})
}

// release ends a purchase that bought nothing: the intent gets its final
// status and the reservation is deleted, its seats free again, in one
// transaction. A failure is logged: settlement releases it later.
func (s *Service) release(ctx context.Context, intentID, status, ref string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := s.store.Update(ctx, func(tx Tx) error {
		in, err := tx.GetChargeIntent(intentID)
		if err != nil {
			return err
		}
		if in.Status == IntentDone {
			return nil
		}
		in.Status, in.UpdatedAt = status, s.clock()
		if ref != "" {
			in.ProcessorRef = ref
		}
		if err := tx.UpdateChargeIntent(in); err != nil {
			return err
		}
		return deleteReservationTx(tx, in.SubscriptionID)
	})
	if err != nil {
		s.logger.Warn("purchase left open for settlement", zap.String("intent_id", intentID),
			zap.String("status", status), zap.Error(err))
	}
}

// releaseSeats deletes a reservation whose intent stays open (settlement
// finishes the intent); best effort, as settlement deletes it too.
func (s *Service) releaseSeats(ctx context.Context, subID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := s.store.Update(ctx, func(tx Tx) error { return deleteReservationTx(tx, subID) }); err != nil {
		s.logger.Warn("reservation left for settlement", zap.String("subscription_id", subID), zap.Error(err))
	}
}

// deleteReservationTx deletes the subscription of a purchase that bought
// nothing, if it is still an unpaid reservation.
func deleteReservationTx(tx Tx, subID string) error {
	sub, err := tx.GetSubscription(subID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if sub.Status != SubIncomplete {
		return nil
	}
	return tx.DeleteSubscription(subID)
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
	if (status == SubPledged) != takesPledges(pool) {
		return nil, Conflict("pool %s became %s while your order was placed; nothing was charged or pledged. Look at GET /api/pools/%s and order again", pool.Slug, pool.Status, pool.Slug)
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
		PeriodAmount:       o.amount,
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
