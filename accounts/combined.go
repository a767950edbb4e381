package accounts

// Combined keys: one credential spanning two or more keyless subscriptions.
// The seven rules of API.md ("Rules") are enforced here; each violation is a
// 400 whose message names the rule.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// CombinedKeyRow is a combined key as GET /api/meta-keys shows it.
type CombinedKeyRow struct {
	ID              string      `json:"id"`
	Token           string      `json:"token"`
	Label           string      `json:"label"`
	IsActive        bool        `json:"isActive"`
	CreatedAt       time.Time   `json:"createdAt"`
	RolesSelectable bool        `json:"rolesSelectable"`
	Members         []MemberRow `json:"members"`
}

// MemberRow is one member of a combined key.
type MemberRow struct {
	PledgeID     string `json:"pledgeId"`
	Role         string `json:"role"`
	PoolSlug     string `json:"poolSlug"`
	PledgeLabel  string `json:"pledgeLabel"` // pool display name and blocks, e.g. "Qwen3 72B asia+europe x2"
	PledgeStatus string `json:"pledgeStatus"`
	// KeyActive: the member admits requests through this key now — the key is
	// active and the subscription is active and inside its paid period.
	KeyActive        bool       `json:"keyActive"`
	Hours            []int      `json:"hours"` // UTC hours covered
	CurrentPeriodEnd *time.Time `json:"currentPeriodEnd"`
	WindowOpenNow    bool       `json:"windowOpenNow"` // KeyActive and the current UTC hour is covered
	MaxParallel      int        `json:"maxParallel"`   // seats for a lane, 0 for a boost
}

// CreatedCombinedKey answers the creation of a combined key.
type CreatedCombinedKey struct {
	ID        string    `json:"id"`
	Token     string    `json:"token"`
	Label     string    `json:"label"`
	CreatedAt time.Time `json:"createdAt"`
}

// maxMembers bounds a combined key (and the work one request can cause).
const maxMembers = 64

// ListCombinedKeys returns the user's combined keys, oldest first.
func (s *Service) ListCombinedKeys(ctx context.Context, userID string) ([]CombinedKeyRow, error) {
	var rows []CombinedKeyRow
	err := s.store.View(ctx, func(tx Tx) error {
		keys, err := tx.ListCombinedKeys(userID)
		if err != nil {
			return err
		}
		rows = make([]CombinedKeyRow, 0, len(keys))
		pools := map[string]*Pool{}
		for _, ck := range keys {
			row, err := s.combinedRowTx(tx, ck, pools)
			if err != nil {
				return err
			}
			rows = append(rows, row)
		}
		return nil
	})
	if err != nil {
		return nil, passClientError("list combined keys", err)
	}
	return rows, nil
}

// CreateCombinedKey folds the user's subscriptions into one combined key.
// roles maps subscription ids to lane or boost; unlisted members are lanes.
func (s *Service) CreateCombinedKey(ctx context.Context, userID string, pledgeIDs []string, label string, roles map[string]string) (CreatedCombinedKey, error) {
	label = strings.TrimSpace(label)
	if err := checkLabel("label", label, false); err != nil {
		return CreatedCombinedKey{}, err
	}
	if err := checkPledgeIDs(pledgeIDs); err != nil {
		return CreatedCombinedKey{}, err
	}
	listed := make(map[string]bool, len(pledgeIDs))
	for _, id := range pledgeIDs {
		listed[id] = true
	}
	for id, role := range roles {
		if !listed[id] {
			return CreatedCombinedKey{}, Invalid("roles names subscription %s, which is not in pledgeIds", id)
		}
		if role != RoleLane && role != RoleBoost {
			return CreatedCombinedKey{}, Invalid("role of subscription %s must be lane or boost, not %q", id, role)
		}
	}
	if label == "" {
		label = fmt.Sprintf("combined key (%d subscriptions)", len(pledgeIDs))
	}
	token := s.sealer.newCombinedToken()
	var ck *CombinedKey
	err := s.store.Update(ctx, func(tx Tx) error {
		subs := make(map[string]*Subscription, len(pledgeIDs))
		members := make([]Member, 0, len(pledgeIDs))
		for _, id := range pledgeIDs {
			sub, err := ownedSubscription(tx, userID, id)
			if err != nil {
				return err
			}
			if err := checkJoinable(tx, sub, "rule 1"); err != nil {
				return err
			}
			subs[id] = sub
			role := roles[id]
			if role == "" {
				role = RoleLane
			}
			members = append(members, Member{SubscriptionID: id, Role: role})
		}
		if err := ValidateCombination(members, subs); err != nil {
			return err
		}
		sealed, err := s.sealer.seal([]byte(token))
		if err != nil {
			return err
		}
		ck = &CombinedKey{
			ID:         newID(),
			UserID:     userID,
			Label:      label,
			Hash:       HashKey(token),
			Ciphertext: sealed,
			Active:     true,
			Members:    members,
			CreatedAt:  s.clock(),
		}
		return tx.CreateCombinedKey(ck)
	})
	if errors.Is(err, ErrConflict) {
		return CreatedCombinedKey{}, Conflict("rule 1: one of the subscriptions was just keyed or folded into another combined key; list them again and retry")
	}
	if err != nil {
		return CreatedCombinedKey{}, passClientError("create combined key", err)
	}
	s.publishKeyChange(ctx, userID)
	return CreatedCombinedKey{ID: ck.ID, Token: token, Label: ck.Label, CreatedAt: ck.CreatedAt}, nil
}

// SetMemberRoles changes the roles of some members (unlisted members keep
// theirs) and validates the result like a creation (rule 5).
func (s *Service) SetMemberRoles(ctx context.Context, userID, id string, roles map[string]string) (CombinedKeyRow, error) {
	for sid, role := range roles {
		if role != RoleLane && role != RoleBoost {
			return CombinedKeyRow{}, Invalid("role of subscription %s must be lane or boost, not %q", sid, role)
		}
	}
	return s.updateCombined(ctx, userID, id, func(tx Tx, ck *CombinedKey) error {
		index := make(map[string]int, len(ck.Members))
		for i, m := range ck.Members {
			index[m.SubscriptionID] = i
		}
		for sid, role := range roles {
			i, ok := index[sid]
			if !ok {
				return Invalid("rule 5: subscription %s is not a member of combined key %s; change its members with PUT /api/meta-keys/%s/members", sid, ck.ID, ck.ID)
			}
			ck.Members[i].Role = role
		}
		subs, err := memberSubscriptions(tx, ck.Members)
		if err != nil {
			return err
		}
		if err := ValidateCombination(ck.Members, subs); err != nil {
			var ae *Error
			if errors.As(err, &ae) {
				return Invalid("%s (rule 5: role changes are validated as at creation)", ae.Message)
			}
			return err
		}
		return nil
	})
}

// ReplaceMembers replaces the member set (rule 6): retained members keep
// their roles, added ones must be active and keyless and join as lanes,
// removed ones are left keyless.
func (s *Service) ReplaceMembers(ctx context.Context, userID, id string, pledgeIDs []string) (CombinedKeyRow, error) {
	if err := checkPledgeIDs(pledgeIDs); err != nil {
		return CombinedKeyRow{}, err
	}
	row, err := s.updateCombined(ctx, userID, id, func(tx Tx, ck *CombinedKey) error {
		current := make(map[string]string, len(ck.Members))
		for _, m := range ck.Members {
			current[m.SubscriptionID] = m.Role
		}
		members := make([]Member, 0, len(pledgeIDs))
		subs := make(map[string]*Subscription, len(pledgeIDs))
		for _, sid := range pledgeIDs {
			sub, err := ownedSubscription(tx, userID, sid)
			if err != nil {
				return err
			}
			role, retained := current[sid]
			if !retained {
				if err := checkJoinable(tx, sub, "rule 6"); err != nil {
					return err
				}
				role = RoleLane
			}
			subs[sid] = sub
			members = append(members, Member{SubscriptionID: sid, Role: role})
		}
		if err := ValidateCombination(members, subs); err != nil {
			return err
		}
		ck.Members = members
		return nil
	})
	if errors.Is(err, ErrConflict) {
		return CombinedKeyRow{}, Conflict("rule 6: a subscription being added was just keyed or folded into another combined key; list them again and retry")
	}
	return row, err
}

// RelabelCombinedKey sets the label of one of the user's combined keys.
func (s *Service) RelabelCombinedKey(ctx context.Context, userID, id, label string) (CombinedKeyRow, error) {
	label = strings.TrimSpace(label)
	if err := checkLabel("label", label, true); err != nil {
		return CombinedKeyRow{}, err
	}
	return s.updateCombined(ctx, userID, id, func(_ Tx, ck *CombinedKey) error {
		ck.Label = label
		return nil
	})
}

// DeleteCombinedKey deletes one of the user's combined keys. Its
// subscriptions stay active and keyless (rule 7).
func (s *Service) DeleteCombinedKey(ctx context.Context, userID, id string) error {
	err := s.store.Update(ctx, func(tx Tx) error {
		if _, err := ownedCombinedKey(tx, userID, id); err != nil {
			return err
		}
		return tx.DeleteCombinedKey(id)
	})
	if err != nil {
		return passClientError("delete combined key", err)
	}
	s.publishKeyChange(ctx, userID)
	return nil
}

// updateCombined applies change to one of the user's combined keys in a
// transaction and returns the updated list row.
func (s *Service) updateCombined(ctx context.Context, userID, id string, change func(tx Tx, ck *CombinedKey) error) (CombinedKeyRow, error) {
	var row CombinedKeyRow
	err := s.store.Update(ctx, func(tx Tx) error {
		ck, err := ownedCombinedKey(tx, userID, id)
		if err != nil {
			return err
		}
		if err := change(tx, ck); err != nil {
			return err
		}
		if err := tx.UpdateCombinedKey(ck); err != nil {
			return err
		}
		row, err = s.combinedRowTx(tx, ck, map[string]*Pool{})
		return err
	})
	if err != nil {
		return CombinedKeyRow{}, passClientError("update combined key", err)
	}
	s.publishKeyChange(ctx, userID)
	return row, nil
}

// checkPledgeIDs checks the shape of a member list: rule 1's count and
// duplicates, and a sane size.
func checkPledgeIDs(ids []string) error {
	if len(ids) < 2 {
		return Invalid("rule 1: a combined key needs at least 2 subscriptions, got %d", len(ids))
	}
	if len(ids) > maxMembers {
		return Invalid("a combined key has at most %d members, got %d", maxMembers, len(ids))
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if id == "" {
			return Invalid("pledgeIds must not contain empty ids")
		}
		if seen[id] {
			return Invalid("rule 1: subscription %s is listed twice; each subscription joins at most once", id)
		}
		seen[id] = true
	}
	return nil
}

// checkJoinable enforces that a subscription joining a combined key is
// active and keyless (rule 1 at creation, rule 6 when added later).
func checkJoinable(tx Tx, sub *Subscription, rule string) error {
	if sub.Status != SubActive {
		return Invalid("%s: subscription %s is %s; only active subscriptions can join a combined key", rule, sub.ID, sub.Status)
	}
	if k, err := tx.GetKeyBySubscription(sub.ID); err == nil {
		return Invalid("%s: subscription %s has a key (%s); only keyless subscriptions can join a combined key: delete its key first (DELETE /api/keys/%s)", rule, sub.ID, k.ID, k.ID)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	if ck, err := tx.GetCombinedKeyBySubscription(sub.ID); err == nil {
		return Invalid("%s: subscription %s already belongs to combined key %s; only keyless subscriptions can join a combined key", rule, sub.ID, ck.ID)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// ValidateCombination checks rules 2 to 4 on a member set; subs holds every
// member's subscription. It is pure: callers check rule 1 (and 6) first.
func ValidateCombination(members []Member, subs map[string]*Subscription) error {
	var lanes HourMask
	pools := map[string]bool{}
	anyBoost := false
	for _, m := range members {
		sub := subs[m.SubscriptionID]
		if sub == nil {
			return fmt.Errorf("validate combined key: subscription %s not loaded", m.SubscriptionID)
		}
		pools[sub.PoolID] = true
		switch m.Role {
		case RoleLane:
			lanes |= MaskOf(sub.Blocks)
		case RoleBoost:
			anyBoost = true
		default:
			return Invalid("role of subscription %s must be lane or boost, not %q", m.SubscriptionID, m.Role)
		}
	}
	if !hasLane(members) {
		return Invalid("rule 2: at least one member must be a lane")
	}
	if !anyBoost {
		return nil
	}
	if len(pools) > 1 {
		return Invalid("rule 3: boost roles require all members to be in the same pool, but these members span %d pools; make every member a lane or combine subscriptions of one pool", len(pools))
	}
	for _, m := range members {
		if m.Role != RoleBoost {
			continue
		}
		if missing := MaskOf(subs[m.SubscriptionID].Blocks) &^ lanes; missing != 0 {
			return Invalid("rule 4: boost member %s covers UTC hours %s that no lane member covers; a boost's hours must be fully covered by the lanes", m.SubscriptionID, formatHours(missing))
		}
	}
	return nil
}

func hasLane(members []Member) bool {
	for _, m := range members {
		if m.Role == RoleLane {
			return true
		}
	}
	return false
}

// formatHours writes an hour set as ranges, e.g. "0-7, 16-23".
func formatHours(m HourMask) string {
	var parts []string
	for h := 0; h < 24; h++ {
		if !m.Has(h) {
			continue
		}
		end := h
		for end+1 < 24 && m.Has(end+1) {
			end++
		}
		if end == h {
			parts = append(parts, fmt.Sprint(h))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", h, end))
		}
		h = end
	}
	return strings.Join(parts, ", ")
}

// ownedSubscription returns the user's subscription, or a 404 for unknown
// ids and other users' subscriptions.
func ownedSubscription(tx Tx, userID, id string) (*Subscription, error) {
	sub, err := tx.GetSubscription(id)
	if errors.Is(err, ErrNotFound) || err == nil && sub.UserID != userID {
		return nil, NotFound("subscription %s not found", id)
	}
	return sub, err
}

// ownedCombinedKey returns the user's combined key, or a 404.
func ownedCombinedKey(tx Tx, userID, id string) (*CombinedKey, error) {
	ck, err := tx.GetCombinedKey(id)
	if errors.Is(err, ErrNotFound) || err == nil && ck.UserID != userID {
		return nil, NotFound("combined key %s not found", id)
	}
	return ck, err
}

// memberSubscriptions loads the subscription of every member.
func memberSubscriptions(tx Tx, members []Member) (map[string]*Subscription, error) {
	subs := make(map[string]*Subscription, len(members))
	for _, m := range members {
		sub, err := tx.GetSubscription(m.SubscriptionID)
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", m.SubscriptionID, err)
		}
		subs[m.SubscriptionID] = sub
	}
	return subs, nil
}

// combinedRowTx builds the list row of ck; pools caches pools across rows.
func (s *Service) combinedRowTx(tx Tx, ck *CombinedKey, pools map[string]*Pool) (CombinedKeyRow, error) {
	token, err := s.sealer.open(ck.Ciphertext)
	if err != nil {
		return CombinedKeyRow{}, fmt.Errorf("combined key %s: %w", ck.ID, err)
	}
	now := s.clock()
	row := CombinedKeyRow{
		ID:        ck.ID,
		Token:     string(token),
		Label:     ck.Label,
		IsActive:  ck.Active,
		CreatedAt: ck.CreatedAt,
		Members:   make([]MemberRow, 0, len(ck.Members)),
	}
	perPool := map[string]int{}
	for _, m := range ck.Members {
		sub, err := tx.GetSubscription(m.SubscriptionID)
		if err != nil {
			return CombinedKeyRow{}, fmt.Errorf("combined key %s, member %s: %w", ck.ID, m.SubscriptionID, err)
		}
		pool, ok := pools[sub.PoolID]
		if !ok {
			if pool, err = tx.GetPool(sub.PoolID); err != nil && !errors.Is(err, ErrNotFound) {
				return CombinedKeyRow{}, err
			}
			pools[sub.PoolID] = pool
		}
		perPool[sub.PoolID]++
		hours := MaskOf(sub.Blocks)
		live := ck.Active && sub.Status == SubActive && now.Before(sub.CurrentPeriodEnd)
		mr := MemberRow{
			PledgeID:         sub.ID,
			Role:             m.Role,
			PledgeLabel:      pledgeLabel(sub, pool),
			PledgeStatus:     sub.Status,
			KeyActive:        live,
			Hours:            hours.Hours(),
			CurrentPeriodEnd: optionalTime(sub.CurrentPeriodEnd),
			WindowOpenNow:    live && hours.Has(now.Hour()),
		}
		if pool != nil {
			mr.PoolSlug = pool.Slug
		}
		if m.Role == RoleLane {
			mr.MaxParallel = max(sub.Quantity, 1)
		}
		row.Members = append(row.Members, mr)
	}
	for _, n := range perPool {
		if n >= 2 {
			row.RolesSelectable = true
		}
	}
	return row, nil
}
