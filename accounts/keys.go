package accounts

// Consumption keys: one per subscription, retrievable (sealed at rest) and
// found by hash.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
)

// KeyRow is a consumption key as GET /api/keys shows it.
type KeyRow struct {
	ID                    string     `json:"id"`
	Name                  string     `json:"name"`
	KeyPlan               string     `json:"keyPlan"` // always "pool"
	KeyType               string     `json:"keyType"` // always "subscription"
	APIKey                string     `json:"apiKey"`
	IsActive              bool       `json:"isActive"`
	SubscriptionID        string     `json:"subscriptionId"`
	SubscriptionStatus    string     `json:"subscriptionStatus"`
	SubscriptionExpiresAt *time.Time `json:"subscriptionExpiresAt"`
	CreatedAt             time.Time  `json:"createdAt"`
	LastUsedAt            *time.Time `json:"lastUsedAt"` // null when never used
}

// keyRow builds the API row of a key, decrypting it. sub may be nil when the
// subscription cannot be found (the status and expiry are then empty).
func (s *Service) keyRow(k *Key, sub *Subscription) (KeyRow, error) {
	full, err := s.sealer.open(k.Ciphertext)
	if err != nil {
		return KeyRow{}, fmt.Errorf("key %s: %w", k.ID, err)
	}
	row := KeyRow{
		ID:             k.ID,
		Name:           k.Name,
		KeyPlan:        "pool",
		KeyType:        "subscription",
		APIKey:         string(full),
		IsActive:       k.Active,
		SubscriptionID: k.SubscriptionID,
		CreatedAt:      k.CreatedAt,
		LastUsedAt:     optionalTime(k.LastUsedAt),
	}
	if sub != nil {
		row.SubscriptionStatus = sub.Status
		row.SubscriptionExpiresAt = optionalTime(sub.CurrentPeriodEnd)
	}
	return row, nil
}

// optionalTime returns nil for the zero time, so JSON shows null for "never".
func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// ListKeys returns every consumption key of the user, oldest first.
func (s *Service) ListKeys(ctx context.Context, userID string) ([]KeyRow, error) {
	var keys []*Key
	subs := map[string]*Subscription{}
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		if keys, err = tx.ListKeys(userID); err != nil {
			return err
		}
		all, err := tx.ListSubscriptionsByUser(userID)
		if err != nil {
			return err
		}
		for _, sub := range all {
			subs[sub.ID] = sub
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return s.keyRows(keys, subs)
}

func (s *Service) keyRows(keys []*Key, subs map[string]*Subscription) ([]KeyRow, error) {
	rows := make([]KeyRow, 0, len(keys))
	for _, k := range keys {
		row, err := s.keyRow(k, subs[k.SubscriptionID])
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// CreateKey creates the consumption key of one of the user's subscriptions;
// with subscriptionID "" it uses the user's most recent active subscription.
// name labels the key (default: the pool and blocks).
func (s *Service) CreateKey(ctx context.Context, userID, subscriptionID, name string) (KeyRow, error) {
	name = strings.TrimSpace(name)
	if err := checkLabel("name", name, false); err != nil {
		return KeyRow{}, err
	}
	var (
		key  *Key
		full string
		sub  *Subscription
	)
	err := s.store.Update(ctx, func(tx Tx) error {
		var err error
		if sub, err = keyableSubscription(tx, userID, subscriptionID); err != nil {
			return err
		}
		label := name
		if label == "" {
			pool, err := tx.GetPool(sub.PoolID)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			label = pledgeLabel(sub, pool)
		}
		key, full, err = s.createKeyTx(tx, sub, label)
		return err
	})
	if errors.Is(err, ErrConflict) && sub != nil {
		// Another request created a key for it between our check and our write.
		return KeyRow{}, Conflict("subscription %s already has a key", sub.ID)
	}
	if err != nil {
		return KeyRow{}, passClientError("create key", err)
	}
	s.publishKeyChange(ctx, userID)
	row, err := s.keyRow(key, sub)
	if err != nil {
		return KeyRow{}, err
	}
	row.APIKey = full
	return row, nil
}

// keyableSubscription finds the subscription CreateKey should key, with a
// client error saying why when there is none.
func keyableSubscription(tx Tx, userID, subscriptionID string) (*Subscription, error) {
	if subscriptionID == "" {
		subs, err := tx.ListSubscriptionsByUser(userID)
		if err != nil {
			return nil, err
		}
		var latest *Subscription
		for _, sub := range subs {
			if sub.Status == SubActive && (latest == nil || !sub.CreatedAt.Before(latest.CreatedAt)) {
				latest = sub
			}
		}
		if latest == nil {
			return nil, NotFound("you have no active subscription to create a key for; subscribe to a pool first, or pass subscriptionId")
		}
		return latest, nil
	}
	sub, err := tx.GetSubscription(subscriptionID)
	if errors.Is(err, ErrNotFound) || err == nil && sub.UserID != userID {
		return nil, NotFound("subscription %s not found", subscriptionID)
	}
	if err != nil {
		return nil, err
	}
	switch sub.Status {
	case SubActive:
		return sub, nil
	case SubPendingKey:
		return nil, Conflict("subscription %s is pending_key: its pool is provisioned manually and the operator delivers the key (usually within hours, always within 24h)", sub.ID)
	case SubPastDue:
		return nil, Conflict("subscription %s is past_due: save a working card (POST /api/billing/setup-intent) to settle it, then create its key", sub.ID)
	case SubCanceled:
		return nil, Conflict("subscription %s is canceled; subscribe again to get a key", sub.ID)
	case SubPledged:
		return nil, Conflict("subscription %s is a pledge: its pool is not live yet. Its key can be created once the pool goes live and the pledge is charged (you are told then)", sub.ID)
	}
	return nil, Conflict("subscription %s is %s; only active subscriptions get keys", sub.ID, sub.Status)
}

// createKeyTx creates the key of sub inside tx and returns it with the full
// key. It refuses (409) a subscription that already has a key or belongs to
// a combined key. It does not check the subscription's status: callers do.
func (s *Service) createKeyTx(tx Tx, sub *Subscription, name string) (*Key, string, error) {
	if k, err := tx.GetKeyBySubscription(sub.ID); err == nil {
		return nil, "", Conflict("subscription %s already has a key (%s); one key per subscription: delete it first to create another", sub.ID, k.ID)
	} else if !errors.Is(err, ErrNotFound) {
		return nil, "", err
	}
	if ck, err := tx.GetCombinedKeyBySubscription(sub.ID); err == nil {
		return nil, "", Conflict("subscription %s belongs to combined key %s and cannot also have a standalone key; remove it from the combined key first", sub.ID, ck.ID)
	} else if !errors.Is(err, ErrNotFound) {
		return nil, "", err
	}
	full := s.sealer.newPoolKey()
	sealed, err := s.sealer.seal([]byte(full))
	if err != nil {
		return nil, "", err
	}
	k := &Key{
		ID:             newID(),
		UserID:         sub.UserID,
		SubscriptionID: sub.ID,
		Name:           name,
		Hash:           HashKey(full),
		Ciphertext:     sealed,
		Active:         true,
		CreatedAt:      s.clock(),
	}
	if err := tx.CreateKey(k); err != nil {
		return nil, "", err
	}
	return k, full, nil
}

// UpdateKey renames and/or revokes or reactivates one of the user's keys and
// returns the updated row. Reactivation needs a live subscription.
func (s *Service) UpdateKey(ctx context.Context, userID, id string, name *string, active *bool) (KeyRow, error) {
	if name == nil && active == nil {
		return KeyRow{}, Invalid("nothing to update: send name (string) and/or isActive (boolean)")
	}
	if name != nil {
		trimmed := strings.TrimSpace(*name)
		if err := checkLabel("name", trimmed, false); err != nil {
			return KeyRow{}, err
		}
		name = &trimmed
	}
	var (
		key     *Key
		sub     *Subscription
		changed bool
	)
	err := s.store.Update(ctx, func(tx Tx) error {
		var err error
		if key, err = ownedKey(tx, userID, id); err != nil {
			return err
		}
		if sub, err = tx.GetSubscription(key.SubscriptionID); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		changed = false
		if active != nil && *active != key.Active {
			if *active && (sub == nil || sub.Status != SubActive) {
				status := "gone"
				if sub != nil {
					status = sub.Status
				}
				return Conflict("key %s cannot be reactivated: its subscription is %s", key.ID, status)
			}
			key.Active = *active
			changed = true
			// An operator's revocation (accounts/operator) is audited with its effect.
			if err := s.auditTx(ctx, tx); err != nil {
				return err
			}
		}
		if name != nil {
			key.Name = *name
		}
		return tx.UpdateKey(key)
	})
	if err != nil {
		return KeyRow{}, passClientError("update key", err)
	}
	if changed {
		s.publishKeyChange(ctx, userID)
	}
	return s.keyRow(key, sub)
}

// DeleteKey removes one of the user's keys for good; its subscription stays
// active and keyless.
func (s *Service) DeleteKey(ctx context.Context, userID, id string) error {
	err := s.store.Update(ctx, func(tx Tx) error {
		if _, err := ownedKey(tx, userID, id); err != nil {
			return err
		}
		return tx.DeleteKey(id)
	})
	if err != nil {
		return passClientError("delete key", err)
	}
	s.publishKeyChange(ctx, userID)
	return nil
}

// ownedKey returns the user's key, or a 404 for unknown ids and other users' keys.
func ownedKey(tx Tx, userID, id string) (*Key, error) {
	k, err := tx.GetKey(id)
	if errors.Is(err, ErrNotFound) || err == nil && k.UserID != userID {
		return nil, NotFound("key %s not found", id)
	}
	return k, err
}

// pledgeLabel names a subscription for people: pool name and blocks,
// with the seat count when above one, e.g. "Qwen3 72B asia+europe x2".
func pledgeLabel(sub *Subscription, pool *Pool) string {
	name := sub.PoolID
	if pool != nil {
		name = pool.ModelName
		if name == "" {
			name = pool.Slug
		}
	}
	blocks := make([]string, len(sub.Blocks))
	for i, b := range sub.Blocks {
		blocks[i] = string(b)
	}
	label := name + " " + strings.Join(blocks, "+")
	if sub.Quantity > 1 {
		label += fmt.Sprintf(" x%d", sub.Quantity)
	}
	return label
}

// publishKeyChange announces that what the user's keys may do has changed. A failure
// is logged, not returned: the change is committed, and gates also expire
// entitlements on their own.
func (s *Service) publishKeyChange(ctx context.Context, userID string) {
	if err := s.store.PublishInvalidation(context.WithoutCancel(ctx), userID); err != nil {
		s.logger.Warn("publishing key invalidation failed; gates pick the change up when their cache expires",
			zap.String("user", userID), zap.Error(err))
	}
}

// passClientError passes client errors (*Error) through untouched and adds context to
// internal ones.
func passClientError(op string, err error) error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	return fmt.Errorf("%s: %w", op, err)
}
