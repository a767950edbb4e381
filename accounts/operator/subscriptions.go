package operator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// Subscription is a subscription as the operator sees it: whose, where,
// what it charges, and its key's id (never the key).
type Subscription struct {
	ID                string           `json:"id"`
	Email             string           `json:"email"`
	UserID            string           `json:"userId"`
	PoolID            string           `json:"poolId"`
	Pool              string           `json:"pool"` // the pool's slug
	Status            string           `json:"status"`
	Blocks            []accounts.Block `json:"blocks"`
	Quantity          int              `json:"quantity"`
	BillingCycle      string           `json:"billingCycle"`
	MonthlyPrice      string           `json:"monthlyPrice"`
	PeriodAmount      string           `json:"periodAmount"`
	CurrentPeriodEnd  *time.Time       `json:"currentPeriodEnd"` // null before the first period (pledges, unpaid purchases)
	CancelAtPeriodEnd bool             `json:"cancelAtPeriodEnd"`
	KeyID             *string          `json:"keyId"`
	KeyActive         bool             `json:"keyActive"` // the key admits (false with no key or a revoked one)
	CreatedAt         time.Time        `json:"createdAt"`
}

// Filter narrows the subscriptions list; every field may be empty.
type Filter struct {
	Pool   string // slug or id
	Status string
	Email  string
	Limit  int    // 0: DefaultLimit
	Before string // a previous page's NextCursor
}

// SubscriptionPage is one page of subscriptions, newest first; NextCursor is
// "" on the last one.
type SubscriptionPage struct {
	Subscriptions []Subscription
	NextCursor    string
}

var statuses = []string{accounts.SubActive, accounts.SubPendingKey, accounts.SubPastDue, accounts.SubIncomplete,
	accounts.SubPledged, accounts.SubCanceled}

// Subscriptions lists the subscriptions that match f, newest first. A pool
// or e-mail that matches nothing is an empty list, not an error: the
// operator is searching.
func (s *Service) Subscriptions(ctx context.Context, f Filter) (*SubscriptionPage, error) {
	limit, err := pageLimit(f.Limit)
	if err != nil {
		return nil, err
	}
	after, err := parseCursor(f.Before)
	if err != nil {
		return nil, err
	}
	want := statuses
	if f.Status != "" {
		if !slices.Contains(statuses, f.Status) {
			return nil, accounts.Invalid("status must be one of %s, got %q", strings.Join(statuses, ", "), f.Status)
		}
		want = []string{f.Status}
	}
	page := &SubscriptionPage{}
	err = s.store.View(ctx, func(tx accounts.Tx) error {
		page.Subscriptions, page.NextCursor = nil, ""
		subs, err := s.matchingTx(tx, f, want)
		if err != nil || len(subs) == 0 {
			return err
		}
		slices.SortFunc(subs, func(a, b *accounts.Subscription) int {
			return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
		})
		if !after.at.IsZero() {
			// Newest first: skip the rows at or before the cursor's.
			i := 0
			for i < len(subs) && !after.older(subs[i].CreatedAt, subs[i].ID) {
				i++
			}
			subs = subs[i:]
		}
		if len(subs) > limit {
			last := subs[limit-1]
			page.NextCursor = cursor{at: last.CreatedAt, id: last.ID}.String()
			subs = subs[:limit]
		}
		users := make(map[string]*accounts.User)
		pools := make(map[string]*accounts.Pool)
		for _, sub := range subs {
			row, err := rowTx(tx, sub, users, pools)
			if err != nil {
				return err
			}
			page.Subscriptions = append(page.Subscriptions, row)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("operator subscriptions: %w", err)
	}
	return page, nil
}

// matchingTx reads the subscriptions in the statuses want, of the pool
// and the e-mail f names.
func (s *Service) matchingTx(tx accounts.Tx, f Filter, want []string) ([]*accounts.Subscription, error) {
	var pools []*accounts.Pool
	if f.Pool != "" {
		p, err := tx.GetPoolBySlug(f.Pool)
		if errors.Is(err, accounts.ErrNotFound) {
			p, err = tx.GetPool(f.Pool)
		}
		if errors.Is(err, accounts.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		pools = []*accounts.Pool{p}
	}
	if f.Email != "" {
		u, err := tx.GetUserByEmail(strings.ToLower(strings.TrimSpace(f.Email)))
		if errors.Is(err, accounts.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		subs, err := tx.ListSubscriptionsByUser(u.ID)
		if err != nil {
			return nil, err
		}
		return slices.DeleteFunc(subs, func(sub *accounts.Subscription) bool {
			return !slices.Contains(want, sub.Status) || (len(pools) == 1 && sub.PoolID != pools[0].ID)
		}), nil
	}
	if pools == nil {
		var err error
		if pools, err = tx.ListPools(); err != nil {
			return nil, err
		}
	}
	var out []*accounts.Subscription
	for _, p := range pools {
		for _, status := range want {
			subs, err := tx.ListSubscriptionsByPool(p.ID, status)
			if err != nil {
				return nil, err
			}
			out = append(out, subs...)
		}
	}
	return out, nil
}

// rowTx renders one subscription, reading its user and pool through the
// caches.
func rowTx(tx accounts.Tx, sub *accounts.Subscription, users map[string]*accounts.User, pools map[string]*accounts.Pool) (Subscription, error) {
	u, ok := users[sub.UserID]
	if !ok {
		var err error
		if u, err = tx.GetUser(sub.UserID); err != nil {
			return Subscription{}, fmt.Errorf("user of subscription %s: %w", sub.ID, err)
		}
		users[sub.UserID] = u
	}
	p, ok := pools[sub.PoolID]
	if !ok {
		var err error
		if p, err = tx.GetPool(sub.PoolID); err != nil {
			return Subscription{}, fmt.Errorf("pool of subscription %s: %w", sub.ID, err)
		}
		pools[sub.PoolID] = p
	}
	row := Subscription{ID: sub.ID, Email: u.Email, UserID: u.ID, PoolID: p.ID, Pool: p.Slug, Status: sub.Status,
		Blocks: sub.Blocks, Quantity: sub.Quantity, BillingCycle: sub.BillingCycle, MonthlyPrice: sub.MonthlyPrice,
		CancelAtPeriodEnd: sub.CancelAtPeriodEnd, CreatedAt: sub.CreatedAt}
	if row.Blocks == nil {
		row.Blocks = []accounts.Block{}
	}
	if !sub.CurrentPeriodEnd.IsZero() {
		end := sub.CurrentPeriodEnd
		row.CurrentPeriodEnd = &end
	}
	amount, err := accounts.PeriodAmountTx(tx, sub)
	if err != nil {
		return Subscription{}, fmt.Errorf("period amount of subscription %s: %w", sub.ID, err)
	}
	row.PeriodAmount = amount
	k, err := tx.GetKeyBySubscription(sub.ID)
	switch {
	case err == nil:
		row.KeyID, row.KeyActive = &k.ID, k.Active
	case !errors.Is(err, accounts.ErrNotFound):
		return Subscription{}, err
	}
	return row, nil
}
