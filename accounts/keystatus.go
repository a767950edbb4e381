package accounts

// Key status: where an inference credential stands at one moment — the
// hours it holds, whether its window is open, when that window closes or the
// next one opens — as GET /v1/key (the gate) and GET /api/keys/{id},
// GET /api/meta-keys/{id} (the account API) show it.

import (
	"context"
	"slices"
	"time"
)

// KeyStatus is the status of a consumption key or combined key. LanesInUse
// is filled in by the caller, which knows the lanes (the gate's registry).
type KeyStatus struct {
	// Models are the ids of the models the key may name (Entitlement.Models).
	Models     []string `json:"models"`
	WindowOpen bool     `json:"windowOpen"`
	// ClosesAt is when the open window ends: the end of the run of
	// consecutive held hours (past midnight too), or earlier when a
	// subscription that does not renew ends inside it. Nil when the window
	// is closed, or never closes (the key holds every hour and renews).
	ClosesAt *time.Time `json:"closesAt"`
	// NextOpensAt is the start of the next held hour while the window is
	// closed; nil when it is open or no hour will open again.
	NextOpensAt *time.Time `json:"nextOpensAt"`
	// Lanes is how many requests the key may have in flight now, summed
	// over its lane subscriptions open now (every pool).
	Lanes      int `json:"lanes"`
	LanesInUse int `json:"lanesInUse"`
	// Hours[h] is how many lanes the key holds in UTC hour h, counting the
	// lane subscriptions that still serve (in their paid period, or
	// renewing).
	Hours [24]int `json:"hours"`
}

// Status returns the key status of the entitlement at t (LanesInUse 0). A
// denied entitlement holds nothing: no model, no hour, window closed.
func (e *Entitlement) Status(t time.Time) KeyStatus {
	t = t.UTC()
	st := KeyStatus{Models: []string{}}
	if e == nil || e.Denied != "" {
		return st
	}
	for _, m := range e.Models(t, nil) {
		st.Models = append(st.Models, m.ID)
	}
	h := t.Hour()
	for i := range e.Grants {
		g := &e.Grants[i]
		if g.Boost {
			continue
		}
		if g.serves(t) {
			for hh := range st.Hours {
				if g.Hours.Has(hh) {
					st.Hours[hh] += g.Seats
				}
			}
		}
		// As the gate admits: open at t, within the paid period.
		if g.openAt(t, h) {
			st.Lanes += g.Seats
		}
	}
	st.WindowOpen = st.Lanes > 0
	if st.WindowOpen {
		if c := e.closesAt(t); !c.IsZero() {
			st.ClosesAt = &c
		}
	} else if c := e.nextOpenAny(t); !c.IsZero() {
		st.NextOpensAt = &c
	}
	return st
}

// lanesFrom is how many lanes are open from instant c on (until the next
// hour start or grant end), counting hours after a renewing grant's period
// end, as nextOpen does.
func (e *Entitlement) lanesFrom(c time.Time) int {
	n := 0
	for i := range e.Grants {
		if g := &e.Grants[i]; !g.Boost && g.opensAt(c) {
			n += g.Seats
		}
	}
	return n
}

// closesAt returns the first instant after t at which no lane is open, or
// zero when there is none. The count of open lanes changes only at hour
// starts and at the ends of grants that do not renew; between two such ends
// the hours repeat daily, so 24 hour starts after each end (and after t)
// are enough to see every change.
func (e *Entitlement) closesAt(t time.Time) time.Time {
	events := []time.Time{t}
	for i := range e.Grants {
		g := &e.Grants[i]
		if !g.Boost && !g.Renews && !g.Until.IsZero() && g.Until.After(t) {
			events = append(events, g.Until)
		}
	}
	candidates := make([]time.Time, 0, 25*len(events))
	for i, ev := range events {
		if i > 0 {
			candidates = append(candidates, ev)
		}
		start := ev.Truncate(time.Hour)
		for i := 1; i <= 24; i++ {
			candidates = append(candidates, start.Add(time.Duration(i)*time.Hour))
		}
	}
	slices.SortFunc(candidates, time.Time.Compare)
	for _, c := range candidates {
		if c.After(t) && e.lanesFrom(c) == 0 {
			return c
		}
	}
	return time.Time{}
}

// nextOpenAny returns the first hour start after t, within a day, at which
// a lane of any model is open (zero when none is), as nextOpen does for one
// model.
func (e *Entitlement) nextOpenAny(t time.Time) time.Time {
	start := t.Truncate(time.Hour)
	for i := 1; i <= 24; i++ {
		if c := start.Add(time.Duration(i) * time.Hour); e.lanesFrom(c) > 0 {
			return c
		}
	}
	return time.Time{}
}

// KeyStatus returns the status of the user's consumption key id now, and
// the pools whose lanes its requests take (to count the lanes in use). An
// unknown id and another user's key are both 404. A revoked key, or one
// whose subscription no longer serves, holds nothing.
func (s *Service) KeyStatus(ctx context.Context, userID, id string) (KeyStatus, []string, error) {
	now := s.clock()
	var ent *Entitlement
	var pools []string
	err := s.store.View(ctx, func(tx Tx) error {
		k, err := ownedKey(tx, userID, id)
		if err != nil {
			return err
		}
		ent, pools, err = keyEntitlementTx(tx, k, now)
		return err
	})
	if err != nil {
		return KeyStatus{}, nil, passClientError("key status", err)
	}
	return ent.Status(now), pools, nil
}

// CombinedKeyStatus is KeyStatus for the user's combined key id.
func (s *Service) CombinedKeyStatus(ctx context.Context, userID, id string) (KeyStatus, []string, error) {
	now := s.clock()
	var ent *Entitlement
	var poolIDs []string
	err := s.store.View(ctx, func(tx Tx) error {
		ck, err := ownedCombinedKey(tx, userID, id)
		if err != nil {
			return err
		}
		ent, poolIDs, err = combinedEntitlementTx(tx, ck, now)
		return err
	})
	if err != nil {
		return KeyStatus{}, nil, passClientError("combined key status", err)
	}
	return ent.Status(now), poolIDs, nil
}
