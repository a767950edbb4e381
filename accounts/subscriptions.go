package accounts

// A user's subscriptions on a pool: listing them, their keys, and canceling
// at the end of the period (DELETE /api/pools/:id/pledge).

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.uber.org/zap"
)

// SubscriptionView is a subscription on the wire.
type SubscriptionView struct {
	ID                string           `json:"id"`
	PoolID            string           `json:"poolId"`
	PoolSlug          string           `json:"poolSlug"`
	Status            string           `json:"status"`
	Blocks            []Block          `json:"blocks"`
	Quantity          int              `json:"quantity"`
	MonthlyPrice      string           `json:"monthlyPrice"`
	BillingCycle      string           `json:"billingCycle"`
	CancelAtPeriodEnd bool             `json:"cancelAtPeriodEnd"`
	CurrentPeriodEnd  time.Time        `json:"currentPeriodEnd"`
	Hours             []SeatView       `json:"hours"` // the seats held; empty once canceled
	Key               *SubscriptionKey `json:"key"`   // null when the subscription has no standalone key
	CreatedAt         time.Time        `json:"createdAt"`
	// HoldExpiresAt is when an unpaid (incomplete) purchase lapses unless
	// its payment is confirmed first; absent in any other status.
	HoldExpiresAt *time.Time `json:"holdExpiresAt,omitempty"`
	// PeriodAmount is what each billing period charges (periodAmountTx).
	PeriodAmount string `json:"periodAmount"`
	// NextChargeAt is when the next period will be charged (nextChargeAt);
	// null when no charge is scheduled.
	NextChargeAt *time.Time `json:"nextChargeAt"`
}

// nextChargeAt is when sub's next period is charged: the end of the current
// one, for an active subscription that renews. Nothing is scheduled for one
// cancelled at period end or canceled; a pledge (charged when its pool
// opens, not on a date), an unpaid purchase, one waiting for its key
// (renewals start once it is delivered) or a past-due one (what it owes is
// charged when its owner saves a card, not on a schedule).
func nextChargeAt(sub *Subscription) *time.Time {
	if sub.Status != SubActive || sub.CancelAtPeriodEnd || sub.CurrentPeriodEnd.IsZero() {
		return nil
	}
	t := sub.CurrentPeriodEnd
	return &t
}

// periodAmountsTx returns what each period of each of subs charges, by
// subscription id (tx has the charges an old yearly one's is found from).
func periodAmountsTx(tx Tx, subs []*Subscription) (map[string]string, error) {
	amounts := make(map[string]string, len(subs))
	for _, sub := range subs {
		a, err := periodAmountTx(tx, sub)
		if err != nil {
			return nil, fmt.Errorf("amount of subscription %s: %w", sub.ID, err)
		}
		amounts[sub.ID] = canonicalAmount(a)
	}
	return amounts, nil
}

// SeatView is one held seat: one hour of one seat index.
type SeatView struct {
	Hour        int    `json:"hour"`
	SlotIndex   int    `json:"slotIndex"`
	PricePerDay string `json:"pricePerDay"`
}

// SubscriptionKey is the standalone key of a subscription.
type SubscriptionKey struct {
	ID       string `json:"id"`
	APIKey   string `json:"apiKey"`
	IsActive bool   `json:"isActive"`
}

// blockOfHour returns the block a UTC hour belongs to.
func blockOfHour(h int) Block { return Blocks[(h/HoursPerBlock)%len(Blocks)] }

// subscriptionView builds the wire form of sub; key may be nil.
func (s *Service) subscriptionView(sub *Subscription, pool *Pool, key *Key) (SubscriptionView, error) {
	v := SubscriptionView{
		ID:                sub.ID,
		PoolID:            sub.PoolID,
		Status:            sub.Status,
		Blocks:            append([]Block{}, sub.Blocks...),
		Quantity:          sub.Quantity,
		MonthlyPrice:      canonicalAmount(sub.MonthlyPrice),
		BillingCycle:      sub.BillingCycle,
		CancelAtPeriodEnd: sub.CancelAtPeriodEnd,
		CurrentPeriodEnd:  sub.CurrentPeriodEnd,
		Hours:             make([]SeatView, 0, len(sub.Seats)),
		CreatedAt:         sub.CreatedAt,
		NextChargeAt:      nextChargeAt(sub),
	}
	if pool != nil {
		v.PoolSlug = pool.Slug
	}
	// Without a store at hand: the amount fixed at purchase, else today's
	// price of the period (the lists read the exact fallback, periodAmountTx).
	if sub.PeriodAmount != "" {
		v.PeriodAmount = canonicalAmount(sub.PeriodAmount)
	} else if pool != nil {
		v.PeriodAmount, _ = ChargeAmount(sub.MonthlyPrice, sub.BillingCycle, pool.AnnualDiscount)
	}
	if sub.Status == SubIncomplete {
		hold := sub.CreatedAt.Add(IncompleteHold)
		v.HoldExpiresAt = &hold
	}
	seats := append([]Seat(nil), sub.Seats...)
	sort.Slice(seats, func(i, j int) bool {
		if seats[i].Hour != seats[j].Hour {
			return seats[i].Hour < seats[j].Hour
		}
		return seats[i].SlotIndex < seats[j].SlotIndex
	})
	for _, st := range seats {
		sv := SeatView{Hour: st.Hour, SlotIndex: st.SlotIndex}
		if pool != nil {
			// A price change in the configuration shows here; what the
			// subscriber pays is the subscription's monthlyPrice.
			sv.PricePerDay, _ = PricePerDay(pool, blockOfHour(st.Hour))
		}
		v.Hours = append(v.Hours, sv)
	}
	if key != nil {
		full, err := s.sealer.open(key.Ciphertext)
		if err != nil {
			return SubscriptionView{}, fmt.Errorf("key %s: %w", key.ID, err)
		}
		v.Key = &SubscriptionKey{ID: key.ID, APIKey: string(full), IsActive: key.Active}
	}
	return v, nil
}

// keyOfTx returns the standalone key of a subscription, or nil.
func keyOfTx(tx Tx, subID string) (*Key, error) {
	k, err := tx.GetKeyBySubscription(subID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return k, err
}

// userPoolSubscriptionsTx returns the pool and the user's subscriptions on
// it, oldest first.
func userPoolSubscriptionsTx(tx Tx, userID, idOrSlug string) (*Pool, []*Subscription, error) {
	pool, err := findPoolTx(tx, idOrSlug)
	if err != nil {
		return nil, nil, poolError(idOrSlug, err)
	}
	all, err := tx.ListSubscriptionsByUser(userID)
	if err != nil {
		return nil, nil, err
	}
	subs := make([]*Subscription, 0, len(all))
	for _, sub := range all {
		if sub.PoolID == pool.ID {
			subs = append(subs, sub)
		}
	}
	return pool, subs, nil
}

// MySubscriptions lists the user's subscriptions on a pool, oldest first,
// canceled ones included.
func (s *Service) MySubscriptions(ctx context.Context, userID, poolIDOrSlug string) ([]SubscriptionView, error) {
	var (
		pool    *Pool
		subs    []*Subscription
		keys    map[string]*Key
		amounts map[string]string
	)
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		if pool, subs, err = userPoolSubscriptionsTx(tx, userID, poolIDOrSlug); err != nil {
			return err
		}
		keys = make(map[string]*Key, len(subs))
		for _, sub := range subs {
			k, err := keyOfTx(tx, sub.ID)
			if err != nil {
				return err
			}
			keys[sub.ID] = k
		}
		amounts, err = periodAmountsTx(tx, subs)
		return err
	})
	if err != nil {
		return nil, passClientError("my subscriptions", err)
	}
	views := make([]SubscriptionView, 0, len(subs))
	for _, sub := range subs {
		v, err := s.subscriptionView(sub, pool, keys[sub.ID])
		if err != nil {
			return nil, err
		}
		v.PeriodAmount = amounts[sub.ID]
		views = append(views, v)
	}
	return views, nil
}

// MyKeys lists the keys of the user's subscriptions on a pool, as GET
// /api/keys rows.
func (s *Service) MyKeys(ctx context.Context, userID, poolIDOrSlug string) ([]KeyRow, error) {
	type pair struct {
		key *Key
		sub *Subscription
	}
	var pairs []pair
	err := s.store.View(ctx, func(tx Tx) error {
		_, subs, err := userPoolSubscriptionsTx(tx, userID, poolIDOrSlug)
		if err != nil {
			return err
		}
		for _, sub := range subs {
			k, err := keyOfTx(tx, sub.ID)
			if err != nil {
				return err
			}
			if k != nil {
				pairs = append(pairs, pair{key: k, sub: sub})
			}
		}
		return nil
	})
	if err != nil {
		return nil, passClientError("my keys", err)
	}
	rows := make([]KeyRow, 0, len(pairs))
	for _, p := range pairs {
		row, err := s.keyRow(p.key, p.sub)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// CancelResult answers DELETE /api/pools/:id/pledge.
type CancelResult struct {
	Canceled         bool      `json:"canceled"`
	SubscriptionID   string    `json:"subscriptionId"`
	CurrentPeriodEnd time.Time `json:"currentPeriodEnd"` // the key works until then
	// Withdrawn says a pledge or an unpaid purchase was canceled at once,
	// its seats freed and nothing charged (currentPeriodEnd is then the time
	// of the withdrawal).
	Withdrawn bool `json:"withdrawn,omitempty"`
	// Refunded says the unpaid purchase's payment went through before the
	// cancel and was refunded in full (CancelIncomplete).
	Refunded bool `json:"refunded,omitempty"`
}

// cancellable reports whether a cancellation can still be scheduled.
func cancellable(sub *Subscription) bool {
	switch sub.Status {
	case SubActive, SubPendingKey, SubPastDue:
		return !sub.CancelAtPeriodEnd
	}
	return false
}

// CancelPledge withdraws the user's most recent pledge on the pool at once
// (funding.go: seats freed, nothing charged) or, when the user has none,
// schedules the cancellation of their most recent cancellable subscription
// on the pool at the end of its current period. The key keeps working
// until then; nothing is refunded.
func (s *Service) CancelPledge(ctx context.Context, userID, poolIDOrSlug string) (*CancelResult, error) {
	var (
		res       *CancelResult
		withdrawn *Pool
		fell      *fallBack
	)
	err := s.store.Update(ctx, func(tx Tx) error {
		res, withdrawn, fell = nil, nil, nil
		pool, subs, err := userPoolSubscriptionsTx(tx, userID, poolIDOrSlug)
		if err != nil {
			return err
		}
		var pledge *Subscription
		for _, sub := range subs {
			if sub.Status == SubPledged && (pledge == nil || !sub.CreatedAt.Before(pledge.CreatedAt)) {
				pledge = sub
			}
		}
		if pledge != nil {
			now := s.clock()
			if fell, err = withdrawPledgeTx(tx, pledge, now); err != nil {
				return err
			}
			res, withdrawn = &CancelResult{Canceled: true, SubscriptionID: pledge.ID, CurrentPeriodEnd: now, Withdrawn: true}, pool
			return nil
		}
		var latest *Subscription
		for _, sub := range subs {
			if cancellable(sub) && (latest == nil || !sub.CreatedAt.Before(latest.CreatedAt)) {
				latest = sub
			}
		}
		if latest == nil {
			return NotFound("no subscription on pool %s can be canceled (none is active, or each is already set to cancel at its period end)", pool.Slug)
		}
		latest.CancelAtPeriodEnd = true
		latest.UpdatedAt = s.clock()
		if err := tx.UpdateSubscription(latest); err != nil {
			return err
		}
		res = &CancelResult{Canceled: true, SubscriptionID: latest.ID, CurrentPeriodEnd: latest.CurrentPeriodEnd}
		return nil
	})
	if err != nil {
		return nil, passClientError("cancel pledge", err)
	}
	if withdrawn != nil {
		s.logger.Info("pledge withdrawn", zap.String("user_id", userID), zap.String("subscription_id", res.SubscriptionID), zap.String("pool", withdrawn.Slug))
		if u, err := s.purchaser(ctx, userID, false); err == nil {
			s.notifyFunding(ctx, u, FundingNotice{Kind: NoticePledgeReleased, Pool: withdrawn, SubscriptionID: res.SubscriptionID})
		}
		s.fellBack(ctx, fell)
		return res, nil
	}
	s.publishKeyChange(ctx, userID)
	return res, nil
}

// AllSubscriptions lists the user's subscriptions on every pool, oldest
// first, canceled ones included.
func (s *Service) AllSubscriptions(ctx context.Context, userID string) ([]SubscriptionView, error) {
	var (
		subs    []*Subscription
		pools   = make(map[string]*Pool)
		keys    = make(map[string]*Key)
		amounts map[string]string
	)
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		if subs, err = tx.ListSubscriptionsByUser(userID); err != nil {
			return err
		}
		for _, sub := range subs {
			if _, ok := pools[sub.PoolID]; !ok {
				if pools[sub.PoolID], err = tx.GetPool(sub.PoolID); err != nil {
					return err
				}
			}
			if keys[sub.ID], err = keyOfTx(tx, sub.ID); err != nil {
				return err
			}
		}
		amounts, err = periodAmountsTx(tx, subs)
		return err
	})
	if err != nil {
		return nil, passClientError("list subscriptions", err)
	}
	views := make([]SubscriptionView, 0, len(subs))
	for _, sub := range subs {
		v, err := s.subscriptionView(sub, pools[sub.PoolID], keys[sub.ID])
		if err != nil {
			return nil, err
		}
		v.PeriodAmount = amounts[sub.ID]
		views = append(views, v)
	}
	return views, nil
}

// SetCancelAtPeriodEnd schedules (cancel true) or withdraws the cancellation
// of one of the user's subscriptions at the end of its current period. The
// key keeps working until then; nothing is refunded. Another user's
// subscription is a 404.
func (s *Service) SetCancelAtPeriodEnd(ctx context.Context, userID, subID string, cancel bool) (*CancelResult, error) {
	var (
		res  *CancelResult
		fell *fallBack
	)
	err := s.store.Update(ctx, func(tx Tx) error {
		fell = nil
		if err := s.auditTx(ctx, tx); err != nil { // audit.go
			return err
		}
		sub, err := tx.GetSubscription(subID)
		if errors.Is(err, ErrNotFound) || (err == nil && sub.UserID != userID) {
			return NotFound("subscription %s not found", subID)
		}
		if err != nil {
			return err
		}
		switch sub.Status {
		case SubActive, SubPendingKey, SubPastDue:
		case SubPledged:
			if !cancel {
				return Conflict("subscription %s is a pledge: it has no period to renew yet", subID)
			}
			// A pledge has no period to finish: it is withdrawn at once.
			now := s.clock()
			if fell, err = withdrawPledgeTx(tx, sub, now); err != nil {
				return err
			}
			res = &CancelResult{Canceled: true, SubscriptionID: sub.ID, CurrentPeriodEnd: now, Withdrawn: true}
			return nil
		default:
			return Conflict("subscription %s is %s: only an active, pending_key or past_due subscription can be set to cancel or renew", subID, sub.Status)
		}
		if sub.CancelAtPeriodEnd != cancel {
			sub.CancelAtPeriodEnd = cancel
			sub.UpdatedAt = s.clock()
			if err := tx.UpdateSubscription(sub); err != nil {
				return err
			}
		}
		res = &CancelResult{Canceled: cancel, SubscriptionID: sub.ID, CurrentPeriodEnd: sub.CurrentPeriodEnd}
		return nil
	})
	if err != nil {
		return nil, passClientError("cancel at period end", err)
	}
	s.fellBack(ctx, fell)
	s.publishKeyChange(ctx, userID)
	return res, nil
}
