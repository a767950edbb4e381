package accounts

// Funding pools: pledges gathered before a model server exists, charged
// only when the pool goes live.
//
//	draft ──► funding ──(goal reached, or the operator)──► activating ──(operator)──► active ◄──► paused
//	  ▲          │  ◄──(pledges withdrawn below the goal, or the operator)──┤
//	  └──────────┴───────(deadline passed below the goal, or the operator)──┘
//
// A subscribe on a funding or activating pool records a pledge: the
// subscription is pledged, holds its seats, has no key and charges nothing
// (a saved card is still required: it is what activation charges). The
// pledge is withdrawn at once with DELETE /api/pools/:id/pledge. One user
// may pledge at most PledgeSeatLimit seats per block of a pool, so that
// nobody holds a pool's seats for free.
//
// The funding pass (RunFunding, with every lifecycle pass on every node,
// and at once after the operator moves a pool) reconciles the store with
// each pool's state, so every step is idempotent and a crash anywhere is
// finished by the next pass:
//
//   - a funding pool whose pledges reach its goal moves to activating;
//   - a pool its goal moved to activating whose pledges are under the goal
//     again (withdrawn) moves back to funding (the withdrawal moves it in
//     its own transaction; the pass finishes what a crash left);
//   - a funding or activating pool past its deadline below the goal moves
//     to draft (at or above the goal an activating pool stays: the
//     operator decides);
//   - a draft pool's pledges are released (canceled, nothing charged);
//   - an active pool's pledges are charged, each once, off-session.
//
// Charging a pledge follows the renewal's pattern (lifecycle.go) with a
// charge intent as the claim: a transaction that still finds the
// subscription pledged writes an intent (kind pledge) under the processor
// key "pledge:<subscription id>"; the store keeps idempotency keys unique,
// so of several nodes exactly one writes it and the others skip. The
// processor is then called with that key, and a second transaction records
// the outcome and marks the intent done or void: paid → active (pending_key
// on manual pools) with its period starting then; declined (or the bank
// asks for authentication, which a charge made from the server cannot
// give) → canceled at once with a failed charge, its seats free for other
// buyers: its owner never had service, and a card that fails must not
// hold seats through a grace period. A node that dies between the two leaves the intent
// pending: after settleGrace another pass takes it over and calls the
// processor again with the same key, which answers with the first outcome
// instead of charging again. Settlement (intents.go) leaves these intents
// to this pass: a pledge charged after a crash is recorded, not refunded.

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/timeblock/timeblock/accounts/billing"
	"go.uber.org/zap"
)

// What set a pool's status (Pool.StatusReason).
const (
	StatusByConfig   = "config"
	StatusByOperator = "operator"
	StatusByGoal     = "goal reached"
	StatusByDeadline = "deadline passed"
	// StatusByWithdrawal: withdrawals took the pledges of a pool its goal
	// had moved to activating under the goal again; it is funding.
	StatusByWithdrawal = "pledges withdrawn"
)

// endOfTime is a cutoff later than any intent's UpdatedAt.
var endOfTime = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// IntentPledge is the charge intent of a pledge charged at activation.
const IntentPledge = "pledge"

// Funding notices (FundingNotice.Kind).
const (
	NoticePledgeRecorded = "pledge recorded"
	NoticePledgeReleased = "pledge released"
	NoticeGoalReached    = "goal reached"
	NoticeGoalLost       = "goal no longer reached" // to the operator: back to funding
	NoticePoolLive       = "pool live and charged"
	NoticeChargeFailed   = "charge failed" // the pledge is released
)

// Outcomes of a pledge's charge at activation (FundingMetrics).
const (
	PledgePaid     = "paid"
	PledgeDeclined = "declined"
	PledgeError    = "error"
)

// FundingMetrics receives the funding events a dashboard counts; nil
// counts nothing. Calls must not block.
type FundingMetrics interface {
	PoolMoved(pool *Pool, from, to, reason string)
	PledgeCharged(pool *Pool, outcome string)
}

// takesPledges reports whether a subscribe on p records a pledge.
func takesPledges(p *Pool) bool { return p.Status == PoolFunding || p.Status == PoolActivating }

// PledgeSeatLimit is the most seats one user may pledge per block of p
// (all their pledges on p together): its max_pledge_seats or, unset, half
// its seats per hour and at least 1, so that one account cannot hold every
// seat of a pool that charges nothing until it goes live.
func PledgeSeatLimit(p *Pool) int {
	if p.MaxPledgeSeats > 0 {
		return p.MaxPledgeSeats
	}
	return max(1, p.Slots/2)
}

// checkPledgeLimitTx refuses a pledge that would take the user's pledged
// seats in one of the order's blocks of pool over PledgeSeatLimit: 400
// when the quantity alone does, 409 with what is left otherwise. Run in
// the transaction that creates the pledge, so that two pledges of one user
// racing are serialized by the store and cannot both get through.
func checkPledgeLimitTx(tx Tx, pool *Pool, userID string, o *subscribeOrder) error {
	limit := PledgeSeatLimit(pool)
	if o.quantity > limit {
		return Invalid("pool %s takes at most %d pledged seat(s) per block from one user, and this pledge asks for %d; pledge %d or fewer",
			pool.Slug, limit, o.quantity, limit)
	}
	subs, err := tx.ListSubscriptionsByUser(userID)
	if err != nil {
		return err
	}
	held := make(map[Block]int)
	for _, sub := range subs {
		if sub.PoolID != pool.ID || sub.Status != SubPledged {
			continue
		}
		for _, b := range sub.Blocks {
			held[b] += sub.Quantity
		}
	}
	left := limit
	var full []string
	for _, b := range o.blocks {
		left = min(left, max(0, limit-held[b]))
		if held[b]+o.quantity > limit {
			full = append(full, fmt.Sprintf("%d in %s", held[b], b))
		}
	}
	if len(full) == 0 {
		return nil
	}
	return Conflict("pool %s takes at most %d pledged seat(s) per block from one user; you already pledge %s, so %d more seat(s) per block can be pledged in %s and this pledge of %d is refused; nothing was pledged. Pledge fewer seats, or withdraw a pledge first (DELETE /api/pools/%s/pledge)",
		pool.Slug, limit, strings.Join(full, ", "), left, blockList(o.blocks), o.quantity, pool.Slug)
}

// funding is what a pool's pledges add up to.
type funding struct {
	pledged *big.Rat // sum of the pledges' monthly prices
	slots   int      // hour slots they hold
	pledges []*Subscription
}

// fundingTx reads the pledges of a pool.
func fundingTx(tx Tx, poolID string) (funding, error) {
	pledges, err := tx.ListSubscriptionsByPool(poolID, SubPledged)
	if err != nil {
		return funding{}, err
	}
	f := funding{pledged: new(big.Rat), pledges: pledges}
	for _, sub := range pledges {
		m, err := parseAmount(sub.MonthlyPrice)
		if err != nil {
			return funding{}, fmt.Errorf("pledge %s: monthly price: %w", sub.ID, err)
		}
		f.pledged.Add(f.pledged, m)
		f.slots += len(sub.Seats)
	}
	return f, nil
}

// goalReached reports whether a pool with a goal has pledges reaching it.
func (f funding) goalReached(p *Pool) bool {
	goal, err := parseAmount(p.FundingGoal)
	return p.FundingGoal != "" && err == nil && goal.Sign() > 0 && f.pledged.Cmp(goal) >= 0
}

// fill writes the funding figures into a pool's view.
func (f funding) fill(v *PoolView) {
	v.FundingPledged = formatAmount(f.pledged)
	v.PledgedSlots = f.slots
}

// pledge records a pledge on a funding or activating pool: a pledged
// subscription holding the order's seats, nothing charged.
func (s *Service) pledge(ctx context.Context, user *User, pool *Pool, order *subscribeOrder, subID string) (*SubscribeResult, error) {
	var err error
	for attempt := 1; ; attempt++ {
		err = s.store.Update(ctx, func(tx Tx) error {
			sub, err := s.newSubscriptionTx(tx, subID, user.ID, pool.ID, order, SubPledged)
			if err != nil {
				return err
			}
			cur, err := tx.GetPool(pool.ID)
			if err != nil {
				return err
			}
			if err := checkPledgeLimitTx(tx, cur, user.ID, order); err != nil {
				return err
			}
			return tx.CreateSubscription(sub)
		})
		if !errors.Is(err, ErrConflict) || attempt == seatAttempts {
			break
		}
	}
	if errors.Is(err, ErrConflict) {
		return nil, Conflict("sold out: other pledges took the seats first; nothing was pledged. Look at GET /api/pools/%s and try again", pool.Slug)
	}
	if err != nil {
		return nil, passClientError("pledge", err)
	}
	res, err := s.subscribeResultOf(ctx, user.ID, subID)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, fmt.Errorf("pledge: subscription %s vanished after it was recorded", subID)
	}
	s.logger.Info("pledge recorded", zap.String("user_id", user.ID), zap.String("subscription_id", subID),
		zap.String("pool", pool.Slug), zap.String("monthly", res.MonthlyPrice), zap.String("due_at_activation", res.AmountDue))
	s.notifyFunding(ctx, user, FundingNotice{Kind: NoticePledgeRecorded, Pool: pool, SubscriptionID: subID, Amount: res.AmountDue})
	s.notifyPledge(ctx, subID, res.AmountDue) // operator notices (operator_notices.go)
	s.checkGoal(ctx, pool.ID)
	return res, nil
}

// withdrawPledgeTx cancels a pledge at once: seats freed, nothing charged.
// A pledge whose charge is under way (its pool went live) cannot be
// withdrawn any more: that is a 409. When the withdrawal takes the pledges
// of a pool its goal moved to activating under the goal, the pool is
// funding again in the same transaction: the caller tells of it
// (fellBack) once it commits.
func withdrawPledgeTx(tx Tx, sub *Subscription, now time.Time) (*fallBack, error) {
	// Every open intent, whatever its time: another node's clock may be ahead.
	open, err := tx.ListOpenChargeIntents(endOfTime)
	if err != nil {
		return nil, err
	}
	for _, in := range open {
		if in.Kind == IntentPledge && in.SubscriptionID == sub.ID {
			return nil, Conflict("pledge %s is being charged now that its pool is live; it can no longer be withdrawn. Once it is active, cancel it at the end of its period instead", sub.ID)
		}
	}
	if err := cancelTx(tx, sub, now); err != nil {
		return nil, err
	}
	return fallBackTx(tx, sub.PoolID, now)
}

// fallBack is a pool that went back from activating to funding: its
// pledges (pledged, a monthly amount) are under its goal again.
type fallBack struct {
	pool    *Pool
	pledged string
}

// fallBackTx moves a pool that its goal moved to activating back to
// funding when its pledges are under the goal again, and returns it (nil
// when it stays). A pool the operator moved to activating stays: the
// operator chose it, below the goal or not.
func fallBackTx(tx Tx, poolID string, now time.Time) (*fallBack, error) {
	p, err := tx.GetPool(poolID)
	if err != nil || p.Status != PoolActivating || p.StatusReason != StatusByGoal || p.FundingGoal == "" {
		return nil, err
	}
	f, err := fundingTx(tx, p.ID)
	if err != nil || f.goalReached(p) {
		return nil, err
	}
	if err := movePoolTx(tx, p, PoolFunding, StatusByWithdrawal, now); err != nil {
		return nil, err
	}
	return &fallBack{pool: p, pledged: formatAmount(f.pledged)}, nil
}

// fellBack logs, counts and tells the operator of a pool back to funding
// (nil: nothing to tell). Past its deadline, the funding pass returns it
// to draft: it is asked for now.
func (s *Service) fellBack(ctx context.Context, fb *fallBack) {
	if fb == nil {
		return
	}
	p := fb.pool
	s.logger.Warn("funding goal no longer reached: pledges were withdrawn, so the pool is funding again and moves to activating by itself once pledges reach the goal; to go live anyway, make it active with POST /timeblock/pools/"+p.Slug+"/status {\"status\":\"active\"}",
		zap.String("pool", p.Slug), zap.String("goal", p.FundingGoal), zap.String("pledged", fb.pledged))
	s.poolMoved(p, PoolActivating, PoolFunding, StatusByWithdrawal)
	s.notifyFunding(ctx, nil, FundingNotice{Kind: NoticeGoalLost, Pool: p, Amount: fb.pledged})
	if !p.FundingDeadline.IsZero() && !p.FundingDeadline.After(s.clock()) {
		s.Kick()
	}
}

// checkFallBack is fallBackTx in its own transaction, for the funding
// pass: it finishes a withdrawal that committed without moving the pool
// (a node that ran an older build, or a goal raised by a reload). It
// reports whether the pool moved; failures are logged.
func (s *Service) checkFallBack(ctx context.Context, poolID string) bool {
	var fb *fallBack
	err := s.store.Update(ctx, func(tx Tx) error {
		var err error
		fb, err = fallBackTx(tx, poolID, s.clock())
		return err
	})
	if err != nil {
		s.logger.Warn("checking a funding goal failed: the next funding pass tries again", zap.String("pool_id", poolID), zap.Error(err))
		return false
	}
	s.fellBack(ctx, fb)
	return fb != nil
}

// checkGoal moves a funding pool whose pledges reached its goal to
// activating, and reports whether it did. Failures are logged: the next
// funding pass tries again.
func (s *Service) checkGoal(ctx context.Context, poolID string) bool {
	var (
		moved *Pool
		total string
	)
	err := s.store.Update(ctx, func(tx Tx) error {
		moved = nil
		p, err := tx.GetPool(poolID)
		if err != nil || p.Status != PoolFunding || p.FundingGoal == "" {
			return err
		}
		f, err := fundingTx(tx, p.ID)
		if err != nil || !f.goalReached(p) {
			return err
		}
		total = formatAmount(f.pledged)
		moved = p
		return movePoolTx(tx, p, PoolActivating, StatusByGoal, s.clock())
	})
	if err != nil {
		s.logger.Warn("checking a funding goal failed: the next funding pass tries again", zap.String("pool_id", poolID), zap.Error(err))
		return false
	}
	if moved != nil {
		s.logger.Warn("funding goal reached: the pool is activating; start its model server, then make it active with POST /timeblock/pools/"+moved.Slug+"/status {\"status\":\"active\"}",
			zap.String("pool", moved.Slug), zap.String("goal", moved.FundingGoal), zap.String("pledged", total))
		s.poolMoved(moved, PoolFunding, PoolActivating, StatusByGoal)
		s.notifyFunding(ctx, nil, FundingNotice{Kind: NoticeGoalReached, Pool: moved, Amount: total})
		s.notifyGoalReached(ctx, moved, total) // operator notices (operator_notices.go)
	}
	return moved != nil
}

// movePoolTx sets a pool's status inside tx, noting what moved it.
func movePoolTx(tx Tx, p *Pool, to, reason string, now time.Time) error {
	p.Status, p.StatusReason, p.StatusChangedAt, p.UpdatedAt = to, reason, now, now
	return tx.UpsertPool(p)
}

// poolMoved counts a move.
func (s *Service) poolMoved(p *Pool, from, to, reason string) {
	if s.fundingMetrics != nil {
		s.fundingMetrics.PoolMoved(p, from, to, reason)
	}
}

// PoolStatusResult answers POST /timeblock/pools/{slug}/status.
type PoolStatusResult struct {
	PoolView
	PreviousStatus string `json:"previousStatus"`
	Changed        bool   `json:"changed"`
}

// checkTransition says why the operator may not move p to `to`.
func checkTransition(tx Tx, p *Pool, to string) error {
	from := p.Status
	live := func() (int, error) {
		n := 0
		// Pledges on an active pool are being charged: live too.
		for _, st := range []string{SubActive, SubPendingKey, SubPastDue, SubIncomplete, SubPledged} {
			subs, err := tx.ListSubscriptionsByPool(p.ID, st)
			if err != nil {
				return 0, err
			}
			n += len(subs)
		}
		return n, nil
	}
	switch to {
	case PoolDraft:
		if from == PoolActive || from == PoolPaused {
			n, err := live()
			if err != nil {
				return err
			}
			if n > 0 {
				if from == PoolPaused {
					return Conflict("pool %s is paused with %d live subscription(s): it cannot go back to draft while they are live. It already takes no new subscriptions, so keep it paused; move it to draft once every subscription has been canceled or has ended", p.Slug, n)
				}
				return Conflict("pool %s is active with %d live subscription(s): it cannot go back to draft while they are live. Pause it instead (status paused) to stop new sales while their keys keep working, and move it to draft once every subscription has been canceled or has ended", p.Slug, n)
			}
		}
		return nil
	case PoolFunding:
		switch from {
		case PoolDraft, PoolActivating:
			return nil
		}
		return Conflict("pool %s is %s: only a draft or activating pool can (re)open for pledges", p.Slug, from)
	case PoolActivating:
		if from == PoolFunding {
			return nil
		}
		return Conflict("pool %s is %s: only a funding pool moves to activating (it may be below its goal)", p.Slug, from)
	case PoolActive:
		return nil // from anything: a draft or funding pool whose server already runs goes live at once
	case PoolPaused:
		if from == PoolActive {
			return nil
		}
		return Conflict("pool %s is %s: only an active pool can be paused", p.Slug, from)
	}
	return Invalid("status must be one of draft, funding, activating, active or paused, got %q", to)
}

// SetPoolStatus moves a pool (by slug or id, draft included) to status at
// the operator's request. Moving to active charges the pledges (at once, in
// the background, and by every later funding pass until done); moving to
// draft releases them. Moving to the status it has is a no-op.
func (s *Service) SetPoolStatus(ctx context.Context, idOrSlug, status string) (*PoolStatusResult, error) {
	var (
		res  *PoolStatusResult
		pool *Pool
	)
	err := s.store.Update(ctx, func(tx Tx) error {
		res = nil
		if err := s.auditTx(ctx, tx); err != nil { // audit.go
			return err
		}
		p, err := tx.GetPoolBySlug(idOrSlug)
		if errors.Is(err, ErrNotFound) {
			p, err = tx.GetPool(idOrSlug)
		}
		if errors.Is(err, ErrNotFound) {
			return NotFound("no pool %q (pools are defined in the timeblock global options of the Caddyfile)", idOrSlug)
		}
		if err != nil {
			return err
		}
		res = &PoolStatusResult{PreviousStatus: p.Status}
		if p.Status != status {
			if err := checkTransition(tx, p, status); err != nil {
				return err
			}
			if err := movePoolTx(tx, p, status, StatusByOperator, s.clock()); err != nil {
				return err
			}
			res.Changed = true
		}
		f, err := fundingTx(tx, p.ID)
		if err != nil {
			return err
		}
		res.PoolView = poolView(p)
		f.fill(&res.PoolView)
		pool = p
		return nil
	})
	if err != nil {
		return nil, passClientError("pool status", err)
	}
	if res.Changed {
		s.logger.Info("pool status changed by the operator", zap.String("pool", pool.Slug),
			zap.String("from", res.PreviousStatus), zap.String("to", status))
		s.poolMoved(pool, res.PreviousStatus, status, StatusByOperator)
		if status == PoolActive || status == PoolDraft {
			s.Kick() // charge or release the pledges now rather than at the next pass
		}
	}
	return res, nil
}

// Kick asks the worker (RunWorker) for a pass now; it never blocks.
func (s *Service) Kick() {
	select {
	case s.kick <- struct{}{}:
	default: // a pass is already asked for
	}
}

// PoolSync is what SyncConfiguredPools did to one configured pool.
type PoolSync struct {
	Slug string
	New  bool // not in the store before
	// Kept is set when the configuration names another status than the
	// pool's run-time one, which stays (ConfigStatus is the config's).
	Kept       bool
	Status     string // the pool's status now
	StatusWas  string // before this sync ("" when new)
	ConfigSays string
}

// SyncConfiguredPools writes the configured pools to the store in one
// transaction. Every field comes from the configuration except the status
// of a pool that has moved at run time (StatusReason other than
// StatusByConfig: the operator endpoint, its goal, its deadline): the
// store holds that state, and a reload never moves it back. Until a pool
// moves, the configuration's status applies, as it always did. Existing
// subscriptions are never touched.
func SyncConfiguredPools(ctx context.Context, store Store, pools []*Pool, now time.Time) ([]PoolSync, error) {
	var out []PoolSync
	err := store.Update(ctx, func(tx Tx) error {
		out = out[:0]
		for _, p := range pools {
			p := *p
			st := PoolSync{Slug: p.Slug, ConfigSays: p.Status}
			p.ConfigStatus, p.UpdatedAt = p.Status, now
			old, err := tx.GetPool(p.ID)
			switch {
			case errors.Is(err, ErrNotFound):
				st.New = true
				p.StatusReason, p.StatusChangedAt = StatusByConfig, now
			case err != nil:
				return err
			default:
				st.StatusWas = old.Status
				p.StatusReason, p.StatusChangedAt = old.StatusReason, old.StatusChangedAt
				if movedAtRunTime(old) {
					p.Status = old.Status
					st.Kept = p.Status != st.ConfigSays
				} else if old.Status != p.Status || old.StatusReason == "" {
					p.StatusReason, p.StatusChangedAt = StatusByConfig, now
				}
			}
			st.Status = p.Status
			if err := tx.UpsertPool(&p); err != nil {
				return fmt.Errorf("pool %s: %w", p.Slug, err)
			}
			out = append(out, st)
		}
		return nil
	})
	return out, err
}

// movedAtRunTime reports whether the pool's status was set after the
// configuration's (by the operator endpoint, its goal or its deadline).
func movedAtRunTime(p *Pool) bool { return p.StatusReason != "" && p.StatusReason != StatusByConfig }

// FundingReport counts what one funding pass did.
type FundingReport struct {
	Activating int // pools whose goal was reached
	FellBack   int // pools activating by their goal whose pledges are under it again: back to funding
	Expired    int // pools past their deadline below the goal: back to draft
	Released   int // pledges released (their pool is draft)
	Charged    int // pledges paid at activation
	Declined   int // pledges whose charge failed: released
	Skipped    int // pledges another node is charging
	Failed     int // errors (logged; retried on the next pass)
}

// Acted reports whether the pass changed anything.
func (r FundingReport) Acted() bool {
	return r.Activating+r.FellBack+r.Expired+r.Released+r.Charged+r.Declined+r.Failed > 0
}

// RunFunding makes one funding pass (see the top of this file). It is safe
// on several nodes at once.
func (s *Service) RunFunding(ctx context.Context) (FundingReport, error) {
	var rep FundingReport
	var pools []*Pool
	if err := s.store.View(ctx, func(tx Tx) error {
		var err error
		pools, err = tx.ListPools()
		return err
	}); err != nil {
		return rep, fmt.Errorf("funding: listing pools: %w", err)
	}
	var errs []error
	now := s.clock()
	for _, p := range pools {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		switch p.Status {
		case PoolFunding, PoolActivating:
			switch {
			case !p.FundingDeadline.IsZero() && !p.FundingDeadline.After(now):
				moved, err := s.expireFunding(ctx, p.ID)
				if err != nil {
					rep.Failed++
					errs = append(errs, err)
				} else if moved {
					rep.Expired++
					p.Status = PoolDraft // release its pledges in this pass
				}
			case p.Status == PoolFunding:
				if s.checkGoal(ctx, p.ID) {
					rep.Activating++
				}
			default:
				if s.checkFallBack(ctx, p.ID) {
					rep.FellBack++
				}
			}
		}
		switch p.Status {
		case PoolDraft:
			n, err := s.releasePledges(ctx, p)
			rep.Released += n
			if err != nil {
				rep.Failed++
				errs = append(errs, err)
			}
		case PoolActive:
			s.chargePledges(ctx, p, &rep, &errs)
		}
	}
	// Pledge charges a node left pending when it died (any pool).
	s.reclaimPledgeCharges(ctx, &rep, &errs)
	return rep, errors.Join(errs...)
}

// expireFunding returns a funding or activating pool past its deadline,
// still below its goal, to draft (its pledges are released by the
// caller's pass). An activating pool at or above its goal stays: the
// operator decides.
func (s *Service) expireFunding(ctx context.Context, poolID string) (bool, error) {
	var (
		moved *Pool
		from  string
		total string
	)
	err := s.store.Update(ctx, func(tx Tx) error {
		moved = nil
		p, err := tx.GetPool(poolID)
		if err != nil {
			return err
		}
		now := s.clock()
		if !takesPledges(p) || p.FundingDeadline.IsZero() || p.FundingDeadline.After(now) {
			return nil
		}
		f, err := fundingTx(tx, p.ID)
		if err != nil {
			return err
		}
		from = p.Status
		if f.goalReached(p) {
			if p.Status == PoolActivating {
				return nil
			}
			moved, total = p, formatAmount(f.pledged)
			return movePoolTx(tx, p, PoolActivating, StatusByGoal, now) // reached at the last minute
		}
		total = formatAmount(f.pledged)
		moved = p
		return movePoolTx(tx, p, PoolDraft, StatusByDeadline, now)
	})
	if err != nil {
		return false, fmt.Errorf("pool %s: deadline: %w", poolID, err)
	}
	if moved == nil {
		return false, nil
	}
	if moved.Status == PoolActivating {
		s.poolMoved(moved, PoolFunding, PoolActivating, StatusByGoal)
		s.notifyFunding(ctx, nil, FundingNotice{Kind: NoticeGoalReached, Pool: moved, Amount: total})
		s.notifyGoalReached(ctx, moved, total) // operator notices (operator_notices.go)
		return false, nil
	}
	s.logger.Warn("funding deadline passed below the goal: the pool is draft again and its pledges are released, nothing charged",
		zap.String("pool", moved.Slug), zap.String("from", from), zap.String("goal", moved.FundingGoal), zap.String("pledged", total),
		zap.Time("deadline", moved.FundingDeadline))
	s.poolMoved(moved, from, PoolDraft, StatusByDeadline)
	return true, nil
}

// releasePledges cancels the pledges of a draft pool, each in its own
// transaction, and tells each pledger. It returns how many it released.
func (s *Service) releasePledges(ctx context.Context, p *Pool) (int, error) {
	var pledges []*Subscription
	if err := s.store.View(ctx, func(tx Tx) error {
		var err error
		pledges, err = tx.ListSubscriptionsByPool(p.ID, SubPledged)
		return err
	}); err != nil {
		return 0, fmt.Errorf("pool %s: listing pledges: %w", p.Slug, err)
	}
	n := 0
	var errs []error
	for _, sub := range pledges {
		var user *User
		err := s.store.Update(ctx, func(tx Tx) error {
			user = nil
			cur, err := tx.GetSubscription(sub.ID)
			if err != nil || cur.Status != SubPledged {
				return err
			}
			pool, err := tx.GetPool(cur.PoolID)
			if err != nil || pool.Status != PoolDraft {
				return err // moved again meanwhile
			}
			if user, err = tx.GetUser(cur.UserID); err != nil {
				return err
			}
			return cancelTx(tx, cur, s.clock())
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("pledge %s: %w", sub.ID, err))
			continue
		}
		if user != nil {
			n++
			s.logger.Info("pledge released: its pool is draft again; nothing charged",
				zap.String("subscription_id", sub.ID), zap.String("user_id", user.ID), zap.String("pool", p.Slug))
			s.notifyFunding(ctx, user, FundingNotice{Kind: NoticePledgeReleased, Pool: p, SubscriptionID: sub.ID})
		}
	}
	return n, errors.Join(errs...)
}

// chargePledges charges every pledge of an active pool not yet claimed.
func (s *Service) chargePledges(ctx context.Context, p *Pool, rep *FundingReport, errs *[]error) {
	var pledges []*Subscription
	if err := s.store.View(ctx, func(tx Tx) error {
		var err error
		pledges, err = tx.ListSubscriptionsByPool(p.ID, SubPledged)
		return err
	}); err != nil {
		rep.Failed++
		*errs = append(*errs, fmt.Errorf("pool %s: listing pledges: %w", p.Slug, err))
		return
	}
	for _, sub := range pledges {
		if ctx.Err() != nil {
			return
		}
		in, err := s.claimPledge(ctx, sub.ID)
		switch {
		case err != nil:
			rep.Failed++
			*errs = append(*errs, fmt.Errorf("pledge %s: %w", sub.ID, err))
		case in == nil:
			rep.Skipped++
		default:
			s.settlePledge(ctx, in, false, rep, errs)
		}
	}
}

// claimPledge writes the charge intent of a pledge still pledged on an
// active pool; nil when another node holds it or it is no longer due.
func (s *Service) claimPledge(ctx context.Context, subID string) (*ChargeIntent, error) {
	var in *ChargeIntent
	err := s.store.Update(ctx, func(tx Tx) error {
		in = nil
		sub, err := tx.GetSubscription(subID)
		if err != nil || sub.Status != SubPledged {
			return err
		}
		pool, err := tx.GetPool(sub.PoolID)
		if err != nil || pool.Status != PoolActive {
			return err
		}
		amount := sub.PeriodAmount
		if amount == "" {
			if amount, err = periodAmountTx(tx, sub); err != nil {
				return err
			}
		}
		now := s.clock()
		// Writing the subscription makes a concurrent withdrawal (which
		// writes it too) conflict with this claim, so that one of the two
		// retries and sees the other: without it, a withdrawal that read no
		// open intent could commit beside the claim (write skew).
		sub.UpdatedAt = now
		if err := tx.UpdateSubscription(sub); err != nil {
			return err
		}
		c := &ChargeIntent{ID: newID(), UserID: sub.UserID, SubscriptionID: sub.ID, Kind: IntentPledge,
			Amount: amount, IdempotencyKey: billing.PledgeKey(sub.ID), Status: IntentPending, CreatedAt: now, UpdatedAt: now}
		// The card is fixed here: every retry of this charge re-sends it
		// (charge_fixed.go). No card: the charge is declined.
		u, err := tx.GetUser(sub.UserID)
		if err != nil {
			return err
		}
		if u.PaymentMethod != nil {
			c.MethodID = u.PaymentMethod.ID
		}
		if err := tx.CreateChargeIntent(c); err != nil {
			return err
		}
		in = c
		return nil
	})
	if errors.Is(err, ErrConflict) {
		return nil, nil // its intent exists: another node charges it, or reclaimPledgeCharges will
	}
	return in, err
}

// reclaimPledgeCharges takes over the pledge charges left pending for
// longer than settleGrace (their node died) and finishes them with the
// same idempotency key.
func (s *Service) reclaimPledgeCharges(ctx context.Context, rep *FundingReport, errs *[]error) {
	cutoff := s.clock().Add(-settleGraceNow())
	var open []*ChargeIntent
	if err := s.store.View(ctx, func(tx Tx) error {
		var err error
		open, err = tx.ListOpenChargeIntents(cutoff)
		return err
	}); err != nil {
		rep.Failed++
		*errs = append(*errs, fmt.Errorf("listing pledge charges: %w", err))
		return
	}
	for _, stale := range open {
		if stale.Kind != IntentPledge || ctx.Err() != nil {
			continue
		}
		var in *ChargeIntent
		err := s.store.Update(ctx, func(tx Tx) error {
			in = nil
			cur, err := tx.GetChargeIntent(stale.ID)
			if err != nil || cur.Status != IntentPending || cur.UpdatedAt.After(cutoff) {
				return err // finished, or taken over by another node meanwhile
			}
			if sub, err := tx.GetSubscription(cur.SubscriptionID); err != nil || sub.Status != SubPledged {
				return err // not a pledge any more: settlement's (intents.go)
			}
			cur.UpdatedAt = s.clock()
			if err := tx.UpdateChargeIntent(cur); err != nil {
				return err
			}
			in = cur
			return nil
		})
		if err != nil {
			rep.Failed++
			*errs = append(*errs, fmt.Errorf("pledge charge %s: %w", stale.ID, err))
			continue
		}
		if in != nil {
			s.logger.Info("taking over a pledge charge left unfinished", zap.String("subscription_id", in.SubscriptionID),
				zap.String("intent_id", in.ID))
			s.settlePledge(ctx, in, true, rep, errs)
		}
	}
}

// settlePledge charges a claimed pledge under its idempotency key, on the
// card its intent fixed (charge_fixed.go; a takeover asks the processor
// first what became of the key), and records the outcome. An unknown
// outcome leaves the intent pending, for reclaimPledgeCharges.
func (s *Service) settlePledge(ctx context.Context, in *ChargeIntent, takeover bool, rep *FundingReport, errs *[]error) {
	var (
		user *User
		pool *Pool
	)
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		if user, err = tx.GetUser(in.UserID); err != nil {
			return err
		}
		sub, err := tx.GetSubscription(in.SubscriptionID)
		if err != nil {
			return err
		}
		pool, err = tx.GetPool(sub.PoolID)
		return err
	})
	if err != nil {
		rep.Failed++
		*errs = append(*errs, fmt.Errorf("pledge %s: %w", in.SubscriptionID, err))
		return
	}
	var ref string
	methodID, askFirst := in.MethodID, takeover
	if methodID == "" && user.PaymentMethod != nil {
		// No card when it was claimed, or an intent written before its
		// card was kept: the card saved now, once the processor says
		// nothing was charged under the key.
		methodID, askFirst = user.PaymentMethod.ID, true
	}
	declined, reason := methodID == "", "no card is saved"
	if !declined {
		ref, err = s.chargeFixed(ctx, billing.ChargeRequest{
			UserID:         in.UserID,
			MethodID:       methodID,
			Amount:         in.Amount,
			IdempotencyKey: in.IdempotencyKey,
			Description:    fmt.Sprintf("Timeblock %s: pledge %s, first period (the pool is live)", pool.Slug, in.SubscriptionID),
		}, in.CreatedAt, askFirst)
		if errors.Is(err, billing.ErrDeclined) {
			declined, reason, err = true, billing.DeclineReason(err), nil
			if reason == "" {
				reason = "the card was declined"
			}
		}
		if _, ok := errors.AsType[*billing.ActionRequiredError](err); ok {
			// Only on-session charges wait for the customer; a processor
			// that asks anyway gets the past-due path.
			declined, reason, err = true, "the bank asks for authentication", nil
		}
		if err == nil {
			crashAfterPledgeCharge() // a test's kill -9 half-way (faults.go)
		}
		if err != nil {
			rep.Failed++
			s.pledgeCharged(pool, PledgeError)
			*errs = append(*errs, fmt.Errorf("charging pledge %s (retried with the same key later): %w", in.SubscriptionID, err))
			return
		}
	}
	status, err := s.recordPledge(ctx, in, declined, ref)
	if err != nil {
		rep.Failed++
		*errs = append(*errs, fmt.Errorf("recording pledge %s (retried with the same key later): %w", in.SubscriptionID, err))
		return
	}
	if status == "" {
		return // recorded by another node
	}
	s.publishKeyChange(ctx, in.UserID)
	if declined {
		rep.Declined++
		s.pledgeCharged(pool, PledgeDeclined)
		s.logger.Info("pledge charge declined at activation: the pledge is released, its seats free, nothing charged", zap.String("subscription_id", in.SubscriptionID),
			zap.String("pool", pool.Slug), zap.String("amount", in.Amount), zap.String("reason", reason))
		s.notifyFunding(ctx, user, FundingNotice{Kind: NoticeChargeFailed, Pool: pool, SubscriptionID: in.SubscriptionID,
			Amount: in.Amount, Reason: reason})
		s.notifyCharge(ctx, OpChargeFailed, opKindPledge, in.SubscriptionID, in.Amount, reason) // operator notices
		return
	}
	rep.Charged++
	s.pledgeCharged(pool, PledgePaid)
	s.logger.Info("pledge charged: the pool is live", zap.String("subscription_id", in.SubscriptionID),
		zap.String("pool", pool.Slug), zap.String("status", status), zap.String("amount", in.Amount), zap.String("charge_ref", ref))
	s.notifyFunding(ctx, user, FundingNotice{Kind: NoticePoolLive, Pool: pool, SubscriptionID: in.SubscriptionID, Amount: in.Amount})
	s.notifyPledgeCharged(ctx, in.SubscriptionID, in.Amount, status) // operator notices (operator_notices.go)
}

// recordPledge records a pledge's charge in one transaction with its
// intent: paid → active (pending_key on manual pools), its period starting
// now; declined → canceled, its seats freed at once (no key, no past-due
// grace: its owner never had service), with the failed charge recorded. It
// returns the subscription's new status, "" when the intent was settled
// already.
func (s *Service) recordPledge(ctx context.Context, in *ChargeIntent, declined bool, ref string) (string, error) {
	var status string
	err := s.store.Update(ctx, func(tx Tx) error {
		status = ""
		cur, err := tx.GetChargeIntent(in.ID)
		if err != nil || cur.Status != IntentPending {
			return err
		}
		sub, err := tx.GetSubscription(in.SubscriptionID)
		if err != nil {
			return err
		}
		if sub.Status != SubPledged {
			// Not a pledge any more (nothing moves one while its intent is
			// open, but a store may hold anything): the intent stays
			// pending and settlement refunds what was charged.
			return nil
		}
		now := s.clock()
		cur.UpdatedAt = now
		charge := &Charge{ID: newID(), UserID: sub.UserID, SubscriptionID: sub.ID, PeriodStart: now,
			Amount: in.Amount, Status: ChargeSucceeded, ProcessorRef: ref, CreatedAt: now}
		if declined {
			cur.Status = IntentVoid
			charge.Status = ChargeFailed
		} else {
			cur.Status, cur.ProcessorRef = IntentDone, ref
		}
		if err := tx.UpdateChargeIntent(cur); err != nil {
			return err
		}
		if declined {
			if err := cancelTx(tx, sub, now); err != nil {
				return err
			}
			status = sub.Status
			return tx.CreateCharge(charge)
		}
		pool, err := tx.GetPool(sub.PoolID)
		if err != nil {
			return err
		}
		sub.CurrentPeriodStart, sub.CurrentPeriodEnd, sub.UpdatedAt = now, nextPeriodEnd(now, sub.BillingCycle), now
		sub.Status = SubActive
		if pool.ManualProvisioning {
			sub.Status = SubPendingKey
		}
		if err := tx.UpdateSubscription(sub); err != nil {
			return err
		}
		status = sub.Status
		if err := tx.CreateCharge(charge); err != nil {
			return err
		}
		return recordLedgerTx(tx, charge, LedgerPledge, now)
	})
	return status, err
}

// pledgeCharged counts a pledge's charge outcome.
func (s *Service) pledgeCharged(p *Pool, outcome string) {
	if s.fundingMetrics != nil {
		s.fundingMetrics.PledgeCharged(p, outcome)
	}
}

// notifyFunding sends a funding notice in the background (to the operator
// when user is nil); a failure is logged.
func (s *Service) notifyFunding(ctx context.Context, user *User, n FundingNotice) {
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), noticeTimeout)
		defer cancel()
		if err := s.notifier.Funding(ctx, user, n); err != nil {
			s.logger.Error("sending a funding notice failed", zap.String("kind", n.Kind), zap.String("pool", n.Pool.Slug), zap.Error(err))
		}
	}()
}

// PoolFundingFigures is one pool's funding figures, for the metrics.
type PoolFundingFigures struct {
	Slug    string
	Status  string
	Pledged float64 // monthly amount pledged
	Goal    float64 // 0: none
	Slots   int     // hour slots held by pledges
}

// FundingFigures reads every pool's funding figures (drafts too: a released pool shows 0).
func (s *Service) FundingFigures(ctx context.Context) ([]PoolFundingFigures, error) {
	var out []PoolFundingFigures
	err := s.store.View(ctx, func(tx Tx) error {
		out = out[:0]
		pools, err := tx.ListPools()
		if err != nil {
			return err
		}
		for _, p := range pools {
			f, err := fundingTx(tx, p.ID)
			if err != nil {
				return err
			}
			pf := PoolFundingFigures{Slug: p.Slug, Status: p.Status, Slots: f.slots}
			pf.Pledged, _ = f.pledged.Float64()
			if g, err := parseAmount(p.FundingGoal); err == nil && p.FundingGoal != "" {
				pf.Goal, _ = g.Float64()
			}
			out = append(out, pf)
		}
		return nil
	})
	return out, err
}

// ParseFundingDeadline reads a configured funding deadline, an RFC 3339
// time.
func ParseFundingDeadline(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time such as 2027-01-31T00:00:00Z", s)
	}
	return t, nil
}

// CheckFundingGoal checks a configured funding goal: a positive exact
// decimal amount.
func CheckFundingGoal(goal string) error {
	r, err := parseAmount(goal)
	if err != nil {
		return err
	}
	if r.Sign() <= 0 {
		return fmt.Errorf("%s is not a positive monthly amount such as 400", goal)
	}
	return nil
}
