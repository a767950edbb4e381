package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// Pool is a pool as the operator sees it (SPEC.md §8).
type Pool struct {
	ID           string `json:"id"`
	Slug         string `json:"slug"`
	Name         string `json:"name"`
	Status       string `json:"status"`
	SeatsPerHour int    `json:"seatsPerHour"`
	// SoldPerHour counts, per UTC hour 0–23, the seats held by sold
	// subscriptions: active, pending_key (paid, waiting for its key) and
	// past_due (sold, payment owed, seats still held). Pledges are not sold
	// yet (fundingPledged counts them) and unpaid purchases (incomplete) only
	// hold their seats for a few minutes.
	SoldPerHour [24]int `json:"soldPerHour"`
	// ServedPerHour counts, per UTC hour 0–23 of the current UTC day, the
	// requests admitted through the own keys of the pool's sold
	// subscriptions (revoked ones included), from the hourly usage rows.
	// A combined key's requests are not counted: its usage is not kept per
	// pool.
	ServedPerHour [24]int64 `json:"servedPerHour"`
	// LanesInUse counts the requests in flight now through the keys of the
	// pool's subscriptions, on every node.
	LanesInUse int `json:"lanesInUse"`
	// RevenueThisMonth is what the ledger took for the pool since the start
	// of this UTC month, minus what was refunded of those charges.
	RevenueThisMonth string `json:"revenueThisMonth"`
	// MonthlyRecurring sums what the active subscriptions not set to cancel
	// at the end of their period bring in per month (a yearly one, a
	// twelfth of its yearly amount).
	MonthlyRecurring string `json:"monthlyRecurring"`
	FundingGoal      string `json:"fundingGoal"` // "0" when the pool has none
	FundingPledged   string `json:"fundingPledged"`
}

// sold are the statuses whose seats count as sold.
var sold = []string{accounts.SubActive, accounts.SubPendingKey, accounts.SubPastDue}

// Pools lists every pool, drafts included, in the store's order.
func (s *Service) Pools(ctx context.Context) ([]Pool, error) {
	var (
		out   []Pool
		lanes [][]laneKey // per pool
	)
	now := s.now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	err := s.store.View(ctx, func(tx accounts.Tx) error {
		out, lanes = nil, nil
		pools, err := tx.ListPools()
		if err != nil {
			return err
		}
		revenue, err := s.revenueThisMonthTx(tx)
		if err != nil {
			return err
		}
		for _, p := range pools {
			v := Pool{ID: p.ID, Slug: p.Slug, Name: p.ModelName, Status: p.Status, SeatsPerHour: p.Slots,
				RevenueThisMonth: "0"}
			if v.Name == "" {
				v.Name = p.Slug
			}
			if v.FundingGoal, v.FundingPledged, err = accounts.PoolFundingTx(tx, p); err != nil {
				return err
			}
			if r, ok := revenue[p.ID]; ok {
				if v.RevenueThisMonth, err = accounts.SumAmounts(r.taken, r.refunded); err != nil {
					return fmt.Errorf("revenue of pool %s: %w", p.Slug, err)
				}
			}
			var (
				recurring []string
				keys      []laneKey
			)
			for _, status := range sold {
				subs, err := tx.ListSubscriptionsByPool(p.ID, status)
				if err != nil {
					return err
				}
				for _, sub := range subs {
					for _, seat := range sub.Seats {
						if seat.Hour >= 0 && seat.Hour < 24 {
							v.SoldPerHour[seat.Hour]++
						}
					}
					if status == accounts.SubActive && !sub.CancelAtPeriodEnd {
						m, err := accounts.MonthlyAmountTx(tx, sub)
						if err != nil {
							return fmt.Errorf("subscription %s: %w", sub.ID, err)
						}
						recurring = append(recurring, m)
					}
					if err := servedTodayTx(tx, sub.ID, today, &v.ServedPerHour); err != nil {
						return err
					}
					if status != accounts.SubPendingKey {
						k, err := keysOfTx(tx, sub.ID)
						if err != nil {
							return err
						}
						keys = append(keys, k...)
					}
				}
			}
			if v.MonthlyRecurring, err = accounts.SumAmounts(recurring, nil); err != nil {
				return fmt.Errorf("monthly recurring revenue of pool %s: %w", p.Slug, err)
			}
			out = append(out, v)
			lanes = append(lanes, keys)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("operator pools: %w", err)
	}
	if s.lanes != nil {
		for i := range out {
			seen := make(map[string]bool)
			for _, k := range lanes[i] {
				if seen[k.id] {
					continue
				}
				seen[k.id] = true
				n, err := s.lanes(ctx, k.id, []string{out[i].ID})
				if err != nil {
					return nil, fmt.Errorf("lanes in use in pool %s: %w", out[i].Slug, err)
				}
				out[i].LanesInUse += n
			}
		}
	}
	return out, nil
}

type laneKey struct{ id string }

// servedTodayTx adds to served the requests admitted through the
// subscription's own key (active or not) in each hour of the UTC day that
// starts at today: one bounded read of at most 24 rows.
func servedTodayTx(tx accounts.Tx, subID string, today time.Time, served *[24]int64) error {
	k, err := tx.GetKeyBySubscription(subID)
	if errors.Is(err, accounts.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	rows, err := tx.ListKeyUsage(k.ID, today, today.Add(24*time.Hour))
	if err != nil {
		return fmt.Errorf("usage of key %s: %w", k.ID, err)
	}
	for _, r := range rows {
		if h := int(r.Hour.UTC().Sub(today) / time.Hour); h >= 0 && h < 24 {
			served[h] += r.Admitted
		}
	}
	return nil
}

// keysOfTx returns the credentials a subscription admits through: its own
// key and the combined key it is a member of, active ones only.
func keysOfTx(tx accounts.Tx, subID string) ([]laneKey, error) {
	var out []laneKey
	k, err := tx.GetKeyBySubscription(subID)
	switch {
	case err == nil && k.Active:
		out = append(out, laneKey{k.ID})
	case err != nil && !errors.Is(err, accounts.ErrNotFound):
		return nil, err
	}
	ck, err := tx.GetCombinedKeyBySubscription(subID)
	switch {
	case err == nil && ck.Active:
		out = append(out, laneKey{ck.ID})
	case err != nil && !errors.Is(err, accounts.ErrNotFound):
		return nil, err
	}
	return out, nil
}

// poolRevenue is what the ledger took for a pool this month.
type poolRevenue struct{ taken, refunded []string }

// revenueThisMonthTx reads the ledger's charges made since the start of
// this UTC month, by pool. The ledger is kept per buyer, newest first, so
// this reads each buyer's charges of the month and stops at the first
// older one: one query per buyer, not a scan of the ledger's history.
func (s *Service) revenueThisMonthTx(tx accounts.Tx) (map[string]*poolRevenue, error) {
	now := s.now().UTC()
	start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	users, err := tx.ListUsers()
	if err != nil {
		return nil, err
	}
	out := make(map[string]*poolRevenue)
	const page = 100
	for _, u := range users {
		var before int64
		for {
			charges, err := tx.ListLedgerCharges(u.ID, before, page)
			if err != nil {
				return nil, err
			}
			for _, c := range charges {
				if c.CreatedAt.Before(start) {
					charges = nil
					break
				}
				r := out[c.PoolID]
				if r == nil {
					r = new(poolRevenue)
					out[c.PoolID] = r
				}
				r.taken = append(r.taken, c.Amount)
				if c.RefundedAmount != "" {
					r.refunded = append(r.refunded, c.RefundedAmount)
				}
				before = c.Number
			}
			if len(charges) < page {
				break
			}
		}
	}
	return out, nil
}
