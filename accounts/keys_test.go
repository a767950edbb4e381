package accounts_test

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

var poolKeyRE = regexp.MustCompile(`^sk_pool_[A-Za-z0-9_-]{43}$`)

func TestCreateAndListKeys(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, _ := e.user("ada@example.com", "")
		alpha := e.pool("alpha", accounts.PoolActive, 10, false)
		older := e.sub(u, alpha, accounts.SubActive, 1, accounts.BlockEurope)
		newer := e.sub(u, alpha, accounts.SubActive, 2, accounts.BlockAsia, accounts.BlockAmericas)
		e.sub(u, alpha, accounts.SubCanceled, 1, accounts.BlockAsia) // most recent, but not active
		e.settle()

		// No subscriptionId: the most recent active subscription, labelled by default.
		row, err := e.svc.CreateKey(e.ctx, u.ID, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if row.SubscriptionID != newer.ID {
			t.Errorf("key made for %s, want the most recent active subscription %s", row.SubscriptionID, newer.ID)
		}
		if row.Name != "Model alpha asia+americas x2" {
			t.Errorf("default name = %q", row.Name)
		}
		if !poolKeyRE.MatchString(row.APIKey) {
			t.Errorf("apiKey %q is not sk_pool_ + 43 base64url chars", row.APIKey)
		}
		want := accounts.KeyRow{
			ID:                    row.ID,
			Name:                  row.Name,
			KeyPlan:               "pool",
			KeyType:               "subscription",
			APIKey:                row.APIKey,
			IsActive:              true,
			SubscriptionID:        newer.ID,
			SubscriptionStatus:    accounts.SubActive,
			SubscriptionExpiresAt: &newer.CurrentPeriodEnd,
			CreatedAt:             e.clock.Now(),
		}
		keysEqualRow(t, row, want)
		e.wantPublished(u.ID)

		// Explicit subscription and name (a moment later: lists are in creation order).
		e.clock.Advance(time.Second)
		row2, err := e.svc.CreateKey(e.ctx, u.ID, older.ID, "  laptop  ")
		if err != nil {
			t.Fatal(err)
		}
		if row2.Name != "laptop" || row2.SubscriptionID != older.ID {
			t.Errorf("row2 = %+v", row2)
		}

		// One key per subscription.
		_, err = e.svc.CreateKey(e.ctx, u.ID, older.ID, "")
		wantStatus(t, err, http.StatusConflict, "already has a key", row2.ID)
		_, err = e.svc.CreateKey(e.ctx, u.ID, "", "")
		wantStatus(t, err, http.StatusConflict, "already has a key")

		rows, err := e.svc.ListKeys(e.ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 {
			t.Fatalf("listed %d keys, want 2", len(rows))
		}
		keysEqualRow(t, rows[0], row)
		keysEqualRow(t, rows[1], row2)

		// lastUsedAt arrives through the batched TouchLastUsed.
		used := e.clock.Now().Add(time.Minute)
		if err := st.TouchLastUsed(e.ctx, accounts.LastUsedBatch{Keys: map[string]time.Time{row.ID: used}}); err != nil {
			t.Fatal(err)
		}
		rows, _ = e.svc.ListKeys(e.ctx, u.ID)
		if rows[0].LastUsedAt == nil || !rows[0].LastUsedAt.Equal(used) || rows[1].LastUsedAt != nil {
			t.Errorf("lastUsedAt = %v, %v; want %v, nil", rows[0].LastUsedAt, rows[1].LastUsedAt, used)
		}

		// Another user sees nothing of them.
		v, _ := e.user("eve@example.com", "")
		if rows, _ := e.svc.ListKeys(e.ctx, v.ID); len(rows) != 0 {
			t.Errorf("other user lists %d keys", len(rows))
		}
		_, err = e.svc.CreateKey(e.ctx, v.ID, older.ID, "")
		wantStatus(t, err, http.StatusNotFound, "subscription "+older.ID+" not found")
		_, err = e.svc.CreateKey(e.ctx, v.ID, "", "")
		wantStatus(t, err, http.StatusNotFound, "no active subscription")
		_, err = e.svc.CreateKey(e.ctx, u.ID, "no-such-sub", "")
		wantStatus(t, err, http.StatusNotFound)
		_, err = e.svc.CreateKey(e.ctx, u.ID, "", strings.Repeat("x", 201))
		wantStatus(t, err, http.StatusBadRequest, "name")
		_, err = e.svc.CreateKey(e.ctx, u.ID, "", "bad\nname")
		wantStatus(t, err, http.StatusBadRequest, "control characters")
	})
}

func TestCreateKeyRefusesUnkeyableSubscriptions(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, _ := e.user("ada@example.com", "")
		alpha := e.pool("alpha", accounts.PoolActive, 10, false)
		for _, c := range []struct{ status, why string }{
			{accounts.SubPendingKey, "pending_key"},
			{accounts.SubPastDue, "past_due"},
			{accounts.SubCanceled, "canceled"},
		} {
			sub := e.sub(u, alpha, c.status, 1, accounts.BlockAsia)
			_, err := e.svc.CreateKey(e.ctx, u.ID, sub.ID, "")
			wantStatus(t, err, http.StatusConflict, sub.ID, c.why)
		}
		// None of them is active: no default either.
		_, err := e.svc.CreateKey(e.ctx, u.ID, "", "")
		wantStatus(t, err, http.StatusNotFound, "no active subscription")

		// A combined-key member cannot get a standalone key.
		a := e.sub(u, alpha, accounts.SubActive, 1, accounts.BlockEurope)
		b := e.sub(u, alpha, accounts.SubActive, 1, accounts.BlockEurope)
		ck, err := e.svc.CreateCombinedKey(e.ctx, u.ID, []string{a.ID, b.ID}, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.svc.CreateKey(e.ctx, u.ID, a.ID, "")
		wantStatus(t, err, http.StatusConflict, "belongs to combined key "+ck.ID)
		_, err = e.svc.CreateKey(e.ctx, u.ID, "", "") // b is the most recent active
		wantStatus(t, err, http.StatusConflict, "belongs to combined key")
	})
}

func TestKeysAreSealedAtRest(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, _ := e.user("ada@example.com", "")
		sub := e.sub(u, e.pool("alpha", accounts.PoolActive, 10, false), accounts.SubActive, 1, accounts.BlockEurope)
		row, err := e.svc.CreateKey(e.ctx, u.ID, sub.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		k := e.storedKey(row.ID)
		if k.Hash != accounts.HashKey(row.APIKey) {
			t.Errorf("stored hash %s is not HashKey(apiKey)", k.Hash)
		}
		if len(k.Ciphertext) == 0 || bytes.Contains(k.Ciphertext, []byte(row.APIKey)) {
			t.Errorf("stored ciphertext %x holds the plaintext key", k.Ciphertext)
		}
		// The random part must not leak either (e.g. a prefix-stripped copy).
		if bytes.Contains(k.Ciphertext, []byte(strings.TrimPrefix(row.APIKey, "sk_pool_"))) {
			t.Error("stored ciphertext holds the key's random part")
		}
		e.view(func(tx accounts.Tx) error {
			got, err := tx.GetKeyByHash(accounts.HashKey(row.APIKey))
			if err != nil || got.ID != row.ID {
				t.Errorf("lookup by hash = %v, %v", got, err)
			}
			return nil
		})

		// A service with another secret cannot read the keys back.
		other, err := accounts.NewService(accounts.Config{Store: st, Secret: "another secret", Now: e.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.ListKeys(e.ctx, u.ID); err == nil || !strings.Contains(err.Error(), "different secret") {
			t.Errorf("ListKeys under another secret: %v", err)
		}
	})
}

func TestUpdateKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, _ := e.user("ada@example.com", "")
		sub := e.sub(u, e.pool("alpha", accounts.PoolActive, 10, false), accounts.SubActive, 1, accounts.BlockEurope)
		created, err := e.svc.CreateKey(e.ctx, u.ID, sub.ID, "old")
		if err != nil {
			t.Fatal(err)
		}
		e.settle()
		name := func(s string) *string { return &s }
		flag := func(b bool) *bool { return &b }

		// Rename only: the row comes back, nothing to invalidate.
		row, err := e.svc.UpdateKey(e.ctx, u.ID, created.ID, name(" new "), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := created
		want.Name = "new"
		keysEqualRow(t, row, want)
		e.wantNothingPublished()

		// Revoke: immediate, published.
		row, err = e.svc.UpdateKey(e.ctx, u.ID, created.ID, nil, flag(false))
		if err != nil {
			t.Fatal(err)
		}
		want.IsActive = false
		keysEqualRow(t, row, want)
		if k := e.storedKey(created.ID); k.Active {
			t.Error("stored key still active after revoke")
		}
		e.wantPublished(u.ID)
		// Revoking again is a no-op.
		if _, err := e.svc.UpdateKey(e.ctx, u.ID, created.ID, nil, flag(false)); err != nil {
			t.Fatal(err)
		}

		// Reactivate with a rename in one call.
		row, err = e.svc.UpdateKey(e.ctx, u.ID, created.ID, name("both"), flag(true))
		if err != nil {
			t.Fatal(err)
		}
		want.IsActive, want.Name = true, "both"
		keysEqualRow(t, row, want)

		// A key of a subscription that is not active cannot come back.
		if _, err := e.svc.UpdateKey(e.ctx, u.ID, created.ID, nil, flag(false)); err != nil {
			t.Fatal(err)
		}
		e.setStatus(sub.ID, accounts.SubPastDue)
		_, err = e.svc.UpdateKey(e.ctx, u.ID, created.ID, nil, flag(true))
		wantStatus(t, err, http.StatusConflict, "cannot be reactivated", "past_due")
		e.setStatus(sub.ID, accounts.SubCanceled)
		_, err = e.svc.UpdateKey(e.ctx, u.ID, created.ID, nil, flag(true))
		wantStatus(t, err, http.StatusConflict, "canceled")
		// Renaming it is still fine.
		if _, err := e.svc.UpdateKey(e.ctx, u.ID, created.ID, name("archived"), nil); err != nil {
			t.Error(err)
		}

		_, err = e.svc.UpdateKey(e.ctx, u.ID, created.ID, nil, nil)
		wantStatus(t, err, http.StatusBadRequest, "nothing to update")
		_, err = e.svc.UpdateKey(e.ctx, u.ID, created.ID, name(strings.Repeat("é", 201)), nil)
		wantStatus(t, err, http.StatusBadRequest, "longer than 200")
		v, _ := e.user("eve@example.com", "")
		_, err = e.svc.UpdateKey(e.ctx, v.ID, created.ID, name("mine"), nil)
		wantStatus(t, err, http.StatusNotFound, "key "+created.ID+" not found")
		_, err = e.svc.UpdateKey(e.ctx, u.ID, "nope", name("x"), nil)
		wantStatus(t, err, http.StatusNotFound)
	})
}

func TestDeleteKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, _ := e.user("ada@example.com", "")
		v, _ := e.user("eve@example.com", "")
		sub := e.sub(u, e.pool("alpha", accounts.PoolActive, 10, false), accounts.SubActive, 1, accounts.BlockEurope)
		row, err := e.svc.CreateKey(e.ctx, u.ID, sub.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		e.settle()

		wantStatus(t, e.svc.DeleteKey(e.ctx, v.ID, row.ID), http.StatusNotFound)
		if err := e.svc.DeleteKey(e.ctx, u.ID, row.ID); err != nil {
			t.Fatal(err)
		}
		e.wantPublished(u.ID)
		wantStatus(t, e.svc.DeleteKey(e.ctx, u.ID, row.ID), http.StatusNotFound)
		if rows, _ := e.svc.ListKeys(e.ctx, u.ID); len(rows) != 0 {
			t.Errorf("%d keys left", len(rows))
		}
		e.view(func(tx accounts.Tx) error {
			if _, err := tx.GetKeyByHash(accounts.HashKey(row.APIKey)); err == nil {
				t.Error("deleted key still found by hash")
			}
			s, err := tx.GetSubscription(sub.ID)
			if err != nil || s.Status != accounts.SubActive {
				t.Errorf("subscription after key delete = %+v, %v", s, err)
			}
			return nil
		})
		// The subscription is keyless again: a new, different key can be made.
		again, err := e.svc.CreateKey(e.ctx, u.ID, sub.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if again.APIKey == row.APIKey || again.ID == row.ID {
			t.Error("a recreated key repeats the deleted one")
		}
	})
}

// keysEqualRow compares two key rows field by field.
func keysEqualRow(t *testing.T, got, want accounts.KeyRow) {
	t.Helper()
	timeEq := func(a, b *time.Time) bool { return a == nil && b == nil || a != nil && b != nil && a.Equal(*b) }
	if got.ID != want.ID || got.Name != want.Name || got.KeyPlan != want.KeyPlan || got.KeyType != want.KeyType ||
		got.APIKey != want.APIKey || got.IsActive != want.IsActive || got.SubscriptionID != want.SubscriptionID ||
		got.SubscriptionStatus != want.SubscriptionStatus || !timeEq(got.SubscriptionExpiresAt, want.SubscriptionExpiresAt) ||
		!got.CreatedAt.Equal(want.CreatedAt) || !timeEq(got.LastUsedAt, want.LastUsedAt) {
		t.Errorf("key row\n got %+v\nwant %+v", got, want)
	}
}
