package accounts

// Entitlements: a pure function from (key, member subscriptions, pools, time)
// to what an inference credential may do, and its evaluation per request.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Denial messages (the gate shows them to the client).
const (
	DeniedRevoked        = "this key has been revoked; reactivate it with PUT /api/keys/{id} or create a new one"
	DeniedPastDue        = "payment past due: save a working card with POST /api/billing/setup-intent to restore the key"
	DeniedCanceled       = "the subscription of this key is canceled"
	DeniedNoSubscription = "the subscription of this key no longer exists"
	DeniedPending        = "the key of this subscription has not been delivered yet"
	DeniedNoPool         = "the pool of this key no longer exists"
	DeniedCombinedNone   = "no subscription of this combined key can serve requests (each is canceled, or has no lane)"
	DeniedCombinedDue    = "payment past due: every lane subscription of this combined key is past due or canceled; save a working card with POST /api/billing/setup-intent"
)

// Entitlement returns what the consumption key or combined key with this
// lookup hash (HashKey of the full key) may do now. It returns ErrNotFound
// when no credential has the hash.
func (s *Service) Entitlement(ctx context.Context, keyHash string) (*Entitlement, error) {
	now := s.clock()
	var ent *Entitlement
	err := s.store.View(ctx, func(tx Tx) error {
		k, err := tx.GetKeyByHash(keyHash)
		if err == nil {
			ent, _, err = keyEntitlementTx(tx, k, now)
			return err
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		ck, err := tx.GetCombinedKeyByHash(keyHash)
		if err != nil {
			return err
		}
		ent, _, err = combinedEntitlementTx(tx, ck, now)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("entitlement: %w", err)
	}
	return ent, nil
}

func deny(e *Entitlement, status int, msg string) *Entitlement {
	e.Denied, e.DeniedStatus, e.Grants = msg, status, nil
	return e
}

// subscriptionUsable says whether sub can contribute at now, and if not,
// the status and message of the denial.
func subscriptionUsable(sub *Subscription, now time.Time) (int, string) {
	switch {
	case sub == nil:
		return http.StatusUnauthorized, DeniedNoSubscription
	case sub.Status == SubPastDue:
		return http.StatusForbidden, DeniedPastDue
	case sub.Status == SubPendingKey:
		return http.StatusUnauthorized, DeniedPending
	case sub.Status != SubActive:
		return http.StatusUnauthorized, DeniedCanceled
	case sub.CancelAtPeriodEnd && !now.Before(sub.CurrentPeriodEnd):
		// Ended; the lifecycle worker has not caught up yet.
		return http.StatusUnauthorized, DeniedCanceled
	}
	return 0, ""
}

// grantOf is what an active subscription gives its key.
func grantOf(sub *Subscription, pool *Pool, boost bool) Grant {
	g := Grant{
		SubscriptionID:  sub.ID,
		PoolID:          pool.ID,
		PoolSlug:        pool.Slug,
		Model:           pool.ModelID,
		ModelName:       pool.ModelName,
		Hours:           MaskOf(sub.Blocks),
		Boost:           boost,
		MaxOutputTokens: pool.MaxOutputTokens,
		Until:           sub.CurrentPeriodEnd,
		Renews:          !sub.CancelAtPeriodEnd,
		Since:           sub.CreatedAt,
	}
	if !boost {
		g.Seats = max(sub.Quantity, 1)
	}
	return g
}

// setValidUntil sets the earliest grant end after now: the entitlement must
// be recomputed then.
func setValidUntil(e *Entitlement, now time.Time) {
	for _, g := range e.Grants {
		if g.Until.After(now) && (e.ValidUntil.IsZero() || g.Until.Before(e.ValidUntil)) {
			e.ValidUntil = g.Until
		}
	}
}

// ResolveKeyEntitlement is what consumption key k of subscription sub in
// pool may do at now. A revoked key, a missing or canceled subscription or
// pool is denied with 401, a past_due subscription with 403.
func ResolveKeyEntitlement(k *Key, sub *Subscription, pool *Pool, now time.Time) *Entitlement {
	e := &Entitlement{}
	if k == nil {
		return deny(e, http.StatusUnauthorized, "unknown key")
	}
	e.KeyID, e.UserID = k.ID, k.UserID
	if !k.Active {
		return deny(e, http.StatusUnauthorized, DeniedRevoked)
	}
	if status, msg := subscriptionUsable(sub, now); status != 0 {
		return deny(e, status, msg)
	}
	if pool == nil {
		return deny(e, http.StatusUnauthorized, DeniedNoPool)
	}
	e.Grants = []Grant{grantOf(sub, pool, false)}
	setValidUntil(e, now)
	return e
}

// ResolveCombinedEntitlement is what combined key ck may do at now, given
// its member subscriptions and their pools (by id). Members that are
// canceled, past due or missing contribute nothing; the key is denied only
// when no lane member is usable (403 when one of them is past due and could
// recover, 401 otherwise).
func ResolveCombinedEntitlement(ck *CombinedKey, subs map[string]*Subscription, pools map[string]*Pool, now time.Time) *Entitlement {
	e := &Entitlement{Combined: true}
	if ck == nil {
		return deny(e, http.StatusUnauthorized, "unknown key")
	}
	e.KeyID, e.UserID = ck.ID, ck.UserID
	if !ck.Active {
		return deny(e, http.StatusUnauthorized, DeniedRevoked)
	}
	pastDue, lanes := false, 0
	e.Grants = make([]Grant, 0, len(ck.Members))
	for _, m := range ck.Members {
		sub := subs[m.SubscriptionID]
		status, _ := subscriptionUsable(sub, now)
		if status == http.StatusForbidden && m.Role != RoleBoost {
			pastDue = true
		}
		if status != 0 {
			continue
		}
		pool := pools[sub.PoolID]
		if pool == nil {
			continue
		}
		boost := m.Role == RoleBoost
		if !boost {
			lanes++
		}
		e.Grants = append(e.Grants, grantOf(sub, pool, boost))
	}
	if lanes == 0 {
		if pastDue {
			return deny(e, http.StatusForbidden, DeniedCombinedDue)
		}
		return deny(e, http.StatusUnauthorized, DeniedCombinedNone)
	}
	setValidUntil(e, now)
	return e
}

// openAt reports whether the grant admits requests at t (UTC hour h).
func (g *Grant) openAt(t time.Time, h int) bool {
	return g.Hours.Has(h) && (g.Until.IsZero() || t.Before(g.Until))
}

// opensAt reports whether the grant is open at the hour start c, counting
// hours after Until when the subscription renews.
func (g *Grant) opensAt(c time.Time) bool {
	return g.Hours.Has(c.Hour()) && (g.Renews || g.Until.IsZero() || c.Before(g.Until))
}

// At evaluates the entitlement for a request for model at t. It does not
// allocate. Lanes is the sum of the seats of the lane grants of the model's
// pool open at t; Boosts counts the open boost grants of that pool. When a
// key holds the model in several pools, the first pool (in member order)
// open at t serves it. When no lane is open, NextOpen is the next hour start
// at which one is (zero when none will open in the paid periods).
func (e *Entitlement) At(t time.Time, model string) Admission {
	var a Admission
	if e == nil || e.Denied != "" {
		return a
	}
	t = t.UTC()
	h := t.Hour()
	var chosen *Grant
	for i := range e.Grants {
		g := &e.Grants[i]
		if g.Boost || g.Model != model {
			continue
		}
		if chosen == nil {
			chosen = g
		}
		if g.openAt(t, h) {
			chosen = g
			break
		}
	}
	if chosen == nil {
		return a
	}
	a.ModelHeld = true
	a.PoolID, a.PoolSlug, a.Model, a.MaxOutputTokens = chosen.PoolID, chosen.PoolSlug, chosen.Model, chosen.MaxOutputTokens
	for i := range e.Grants {
		g := &e.Grants[i]
		if g.PoolID != chosen.PoolID || !g.openAt(t, h) {
			continue
		}
		if g.Boost {
			a.Boosts++
		} else {
			a.Lanes += g.Seats
		}
	}
	if a.Lanes == 0 {
		a.NextOpen = e.nextOpen(t, model)
	}
	return a
}

// nextOpen returns the first hour start after t at which a lane grant for
// model is open, looking one day ahead (every hour of the day is seen).
func (e *Entitlement) nextOpen(t time.Time, model string) time.Time {
	start := t.Truncate(time.Hour)
	for i := 1; i <= 24; i++ {
		c := start.Add(time.Duration(i) * time.Hour)
		for j := range e.Grants {
			g := &e.Grants[j]
			if !g.Boost && g.Model == model && g.opensAt(c) {
				return c
			}
		}
	}
	return time.Time{}
}

// keyEntitlementTx resolves a consumption key from the store, with the id of
// its pool (none when its subscription is gone).
func keyEntitlementTx(tx Tx, k *Key, now time.Time) (*Entitlement, []string, error) {
	sub, err := tx.GetSubscription(k.SubscriptionID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, nil, err
	}
	var (
		pool    *Pool
		poolIDs []string
	)
	if sub != nil {
		poolIDs = append(poolIDs, sub.PoolID)
		if pool, err = tx.GetPool(sub.PoolID); err != nil && !errors.Is(err, ErrNotFound) {
			return nil, nil, err
		}
	}
	return ResolveKeyEntitlement(k, sub, pool, now), poolIDs, nil
}

// combinedEntitlementTx resolves a combined key from the store, with the ids
// of its members' pools. Members whose subscription or pool is gone count
// for nothing.
func combinedEntitlementTx(tx Tx, ck *CombinedKey, now time.Time) (*Entitlement, []string, error) {
	subs := make(map[string]*Subscription, len(ck.Members))
	pools := make(map[string]*Pool, 2)
	var poolIDs []string
	for _, m := range ck.Members {
		sub, err := tx.GetSubscription(m.SubscriptionID)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		subs[sub.ID] = sub
		if _, seen := pools[sub.PoolID]; seen {
			continue
		}
		pool, err := tx.GetPool(sub.PoolID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, nil, err
		}
		pools[sub.PoolID] = pool // nil when gone
		poolIDs = append(poolIDs, sub.PoolID)
	}
	return ResolveCombinedEntitlement(ck, subs, pools, now), poolIDs, nil
}
