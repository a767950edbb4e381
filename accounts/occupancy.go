package accounts

// Pool occupancy for the operator: per UTC hour of the day, the seats a pool
// sells and holds, and how many lanes its keys' requests used, from the
// hourly key usage (usage.go). It is what sizing a pool's seats needs: a
// pool whose peak lanes in use stay well below its seats held sells seats
// its model server could serve more of, and refusals for lanes_full show
// keys that wanted more lanes than they hold.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// defaultOccupancyRange is the range of an occupancy query that names no start.
const defaultOccupancyRange = 7 * 24 * time.Hour

// PoolOccupancy answers GET /timeblock/pools/{slug}/occupancy.
type PoolOccupancy struct {
	Pool string    `json:"pool"`
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Exact is false when some of the range's usage came from combined keys
	// with lanes in this pool and others: usage is counted per key and hour,
	// not per pool, so those requests cannot be placed in a pool and are
	// shown apart, in each hour's shared.
	Exact bool `json:"exact"`
	// Hours[h] is UTC hour h of the day, over every day of the range.
	Hours [24]HourOccupancy `json:"hours"`
}

// HourOccupancy is one UTC hour of the day of a pool's occupancy.
type HourOccupancy struct {
	Hour         int `json:"hour"`
	SeatsPerHour int `json:"seatsPerHour"` // 0 in an hour the pool does not sell
	SeatsHeld    int `json:"seatsHeld"`    // held now by subscriptions
	// Days is how many times the hour occurs in the range, up to now: the
	// hours the mean is taken over.
	Days int `json:"days"`
	LaneUse
	// Shared is the usage of combined keys that hold lanes in this pool and
	// in others (nil when there is none): the pool's true figures lie
	// between the ones above and those plus these.
	Shared *LaneUse `json:"shared"`
}

// LaneUse is what requests admitted in one hour of the day did, over the
// range. Lanes in use are lane-seconds / 3600, the same seconds as
// timeblock_gate_lane_seconds_total{pool} adds up; a request counts in full
// in the hour it was admitted, so a long stream that crosses into the next
// hour raises its first hour.
type LaneUse struct {
	MeanLanesInUse float64 `json:"meanLanesInUse"`
	// PeakLanesInUse is the busiest single hour's lanes in use, PeakAt its
	// start (nil when no request was admitted).
	PeakLanesInUse float64          `json:"peakLanesInUse"`
	PeakAt         *time.Time       `json:"peakAt"`
	Admitted       int64            `json:"admitted"`
	Refused        map[string]int64 `json:"refused"`
	InputTokens    int64            `json:"inputTokens"`
	OutputTokens   int64            `json:"outputTokens"`
	LaneSeconds    float64          `json:"laneSeconds"`
}

// PoolOccupancy returns the occupancy of the pool named by slug or id in
// [from, to) (zero times: the last 7 days up to now). Usage is found
// through the keys that exist now: the usage of a deleted key, which the
// store keeps without a link to its pool, is left out.
func (s *Service) PoolOccupancy(ctx context.Context, slug string, from, to time.Time) (*PoolOccupancy, error) {
	now := s.clock().UTC()
	if to.IsZero() {
		to = now
	}
	if from.IsZero() {
		// 7 whole days up to the end of the hour under way: each hour of
		// the day 7 times.
		end := to.UTC().Truncate(time.Hour)
		if end.Before(to) {
			end = end.Add(time.Hour)
		}
		from = end.Add(-defaultOccupancyRange)
	}
	from, to, err := usageRange(from, to, now)
	if err != nil {
		return nil, err
	}
	occ := &PoolOccupancy{Pool: slug, From: from, To: to, Exact: true}
	err = s.store.View(ctx, func(tx Tx) error {
		p, err := tx.GetPoolBySlug(slug)
		if errors.Is(err, ErrNotFound) {
			p, err = tx.GetPool(slug)
		}
		if errors.Is(err, ErrNotFound) {
			return NotFound("no pool %q", slug)
		}
		if err != nil {
			return err
		}
		occ.Pool = p.Slug
		sold := MaskOf(poolBlocks(p))
		taken, err := tx.TakenSeats(p.ID)
		if err != nil {
			return err
		}
		for h := range occ.Hours {
			o := &occ.Hours[h]
			o.Hour = h
			if sold.Has(h) {
				o.SeatsPerHour = p.Slots
			}
			o.Refused = map[string]int64{}
		}
		for seat := range taken {
			if seat.Hour >= 0 && seat.Hour < 24 {
				occ.Hours[seat.Hour].SeatsHeld++
			}
		}
		exact, shared, err := poolKeysTx(tx, p.ID)
		if err != nil {
			return err
		}
		own, err := hourlyUsageTx(tx, exact, from, to)
		if err != nil {
			return err
		}
		other, err := hourlyUsageTx(tx, shared, from, to)
		if err != nil {
			return err
		}
		// The mean is over the hours begun by now, the current one included.
		begun := to
		if end := now.Truncate(time.Hour).Add(time.Hour); end.Before(begun) {
			begun = end
		}
		for h := range occ.Hours {
			o := &occ.Hours[h]
			o.Days = hoursOfDay(from, begun, h)
			o.LaneUse.add(own, h, o.Days)
			if len(other) > 0 {
				var u LaneUse
				if u.add(other, h, o.Days) {
					o.Shared = &u
					occ.Exact = false
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, passClientError("pool occupancy", err)
	}
	return occ, nil
}

// poolKeysTx lists the keys whose requests take lanes of pool: exact, the
// consumption keys of its subscriptions and the combined keys all of whose
// members are in it; shared, the combined keys with members in it and in
// other pools.
func poolKeysTx(tx Tx, poolID string) (exact, shared []string, err error) {
	users, err := tx.ListUsers()
	if err != nil {
		return nil, nil, err
	}
	for _, u := range users {
		subs, err := tx.ListSubscriptionsByUser(u.ID)
		if err != nil {
			return nil, nil, err
		}
		poolOf := make(map[string]string, len(subs))
		for _, s := range subs {
			poolOf[s.ID] = s.PoolID
		}
		keys, err := tx.ListKeys(u.ID)
		if err != nil {
			return nil, nil, err
		}
		for _, k := range keys {
			if poolOf[k.SubscriptionID] == poolID {
				exact = append(exact, k.ID)
			}
		}
		cks, err := tx.ListCombinedKeys(u.ID)
		if err != nil {
			return nil, nil, err
		}
		for _, ck := range cks {
			in, out := false, false
			for _, m := range ck.Members {
				if poolOf[m.SubscriptionID] == poolID {
					in = true
				} else {
					out = true
				}
			}
			switch {
			case in && out:
				shared = append(shared, ck.ID)
			case in:
				exact = append(exact, ck.ID)
			}
		}
	}
	return exact, shared, nil
}

// hourlyUsageTx adds up the usage of keys per hour of [from, to).
func hourlyUsageTx(tx Tx, keys []string, from, to time.Time) (map[int64]*KeyUsage, error) {
	byHour := make(map[int64]*KeyUsage)
	for _, id := range keys {
		rows, err := tx.ListKeyUsage(id, from, to)
		if err != nil {
			return nil, fmt.Errorf("usage of key %s: %w", id, err)
		}
		for i := range rows {
			at := rows[i].Hour.UTC().Truncate(time.Hour)
			u := byHour[at.Unix()]
			if u == nil {
				u = &KeyUsage{Hour: at}
				byHour[at.Unix()] = u
			}
			u.Add(&rows[i])
		}
	}
	return byHour, nil
}

// add adds the hours of byHour that fall on hour of the day h to u, over
// days days, and reports whether there were any.
func (u *LaneUse) add(byHour map[int64]*KeyUsage, h, days int) bool {
	if u.Refused == nil {
		u.Refused = map[string]int64{}
	}
	hours := make([]*KeyUsage, 0, days)
	for _, r := range byHour {
		if r.Hour.Hour() == h {
			hours = append(hours, r)
		}
	}
	// Oldest first, so that of equal peaks the first is named.
	slices.SortFunc(hours, func(a, b *KeyUsage) int { return a.Hour.Compare(b.Hour) })
	for _, r := range hours {
		u.Admitted += r.Admitted
		u.InputTokens += r.InputTokens
		u.OutputTokens += r.OutputTokens
		u.LaneSeconds += r.Seconds
		for reason, n := range r.Refused {
			u.Refused[reason] += n
		}
		if lanes := r.Seconds / 3600; lanes > u.PeakLanesInUse || (u.PeakAt == nil && r.Admitted > 0) {
			at := r.Hour
			u.PeakLanesInUse, u.PeakAt = lanes, &at
		}
	}
	if days > 0 {
		u.MeanLanesInUse = u.LaneSeconds / 3600 / float64(days)
	}
	return len(hours) > 0
}

// hoursOfDay counts the hour starts in [from, to) that fall on UTC hour h.
func hoursOfDay(from, to time.Time, h int) int {
	first := time.Date(from.Year(), from.Month(), from.Day(), h, 0, 0, 0, time.UTC)
	if first.Before(from) {
		first = first.Add(24 * time.Hour)
	}
	if !first.Before(to) {
		return 0
	}
	const day = 24 * time.Hour
	return int((to.Sub(first) + day - 1) / day)
}
