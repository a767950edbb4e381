package accounts

import "time"

// Window returns the window of the key's lanes in pool that is open at t:
// when it opened (the start of the run of consecutive hours with a lane of
// the pool open, at most 24 hours back) and when it closes (the first
// instant after t with none: an hour start, or the end of a grant that does
// not renew). closes is zero when the lanes stay open for the next 24 hours
// (a key holding every hour). Both are zero when no lane of pool is open at
// t. It does not allocate; the gate caches its result per hour.
func (e *Entitlement) Window(t time.Time, poolID string) (opened, closes time.Time) {
	t = t.UTC()
	if e == nil || e.Denied != "" || e.poolLanesAt(poolID, t) == 0 {
		return time.Time{}, time.Time{}
	}
	start := t.Truncate(time.Hour)
	opened = start.Add(-23 * time.Hour)
	for i := 1; i <= 23; i++ {
		if e.poolHourOpen(poolID, start.Add(-time.Duration(i)*time.Hour)) == 0 {
			opened = start.Add(-time.Duration(i-1) * time.Hour)
			break
		}
	}
	prev := t
	for i := 1; i <= 24; i++ {
		c := start.Add(time.Duration(i) * time.Hour)
		// A grant that ends inside (prev, c) may close the window before c.
		var end time.Time
		for j := range e.Grants {
			g := &e.Grants[j]
			if g.Boost || g.PoolID != poolID || g.Renews || g.Until.IsZero() ||
				!g.Until.After(prev) || !g.Until.Before(c) {
				continue
			}
			if (end.IsZero() || g.Until.Before(end)) && e.poolLanesAt(poolID, g.Until) == 0 {
				end = g.Until
			}
		}
		if !end.IsZero() {
			return opened, end
		}
		if e.poolLanesAt(poolID, c) == 0 {
			return opened, c
		}
		prev = c
	}
	return opened, time.Time{}
}

// poolLanesAt is how many lanes of pool are open at instant c, counting a
// renewing grant past its period end (it will renew), as nextOpen does.
func (e *Entitlement) poolLanesAt(poolID string, c time.Time) int {
	n, h := 0, c.Hour()
	for i := range e.Grants {
		g := &e.Grants[i]
		if !g.Boost && g.PoolID == poolID && g.Hours.Has(h) && (g.Renews || g.Until.IsZero() || c.Before(g.Until)) {
			n += g.Seats
		}
	}
	return n
}

// poolHourOpen is how many lanes of pool the key's hours give in the hour
// starting at c, a past hour: the paid period is not checked, so a window
// that began before the subscription did counts from the block's start.
func (e *Entitlement) poolHourOpen(poolID string, c time.Time) int {
	n, h := 0, c.Hour()
	for i := range e.Grants {
		g := &e.Grants[i]
		if !g.Boost && g.PoolID == poolID && g.Hours.Has(h) {
			n += g.Seats
		}
	}
	return n
}
