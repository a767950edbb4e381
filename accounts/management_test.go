package accounts_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

func TestManagementKeys(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, _ := e.user("ada@example.com", "")
		v, _ := e.user("eve@example.com", "")

		for _, bad := range []string{"", "   "} {
			_, err := e.svc.CreateManagementKey(e.ctx, u.ID, bad)
			wantStatus(t, err, http.StatusBadRequest, "name is required")
		}
		_, err := e.svc.CreateManagementKey(e.ctx, u.ID, strings.Repeat("n", 201))
		wantStatus(t, err, http.StatusBadRequest, "longer than 200")

		created, err := e.svc.CreateManagementKey(e.ctx, u.ID, " deploy bot ")
		if err != nil {
			t.Fatal(err)
		}
		if created.Name != "deploy bot" || created.ID == "" {
			t.Errorf("created = %+v", created)
		}
		if !regexp.MustCompile(`^mk_[a-z0-9]{8}$`).MatchString(created.KeyPrefix) ||
			!regexp.MustCompile(`^`+created.KeyPrefix+`_[A-Za-z0-9_-]{43}$`).MatchString(created.APIKey) {
			t.Errorf("keyPrefix %q, apiKey %q", created.KeyPrefix, created.APIKey)
		}
		created1At := e.clock.Now()
		e.clock.Advance(time.Second)
		second, err := e.svc.CreateManagementKey(e.ctx, u.ID, "second")
		if err != nil {
			t.Fatal(err)
		}

		// Stored only as a hash: no field of the record holds the key.
		e.view(func(tx accounts.Tx) error {
			k, err := tx.GetManagementKey(created.ID)
			if err != nil {
				return err
			}
			if k.Hash != accounts.HashKey(created.APIKey) || k.Prefix != created.KeyPrefix || !k.Active || k.UserID != u.ID {
				t.Errorf("stored = %+v", k)
			}
			secret := strings.TrimPrefix(created.APIKey, created.KeyPrefix+"_")
			for _, f := range []string{k.ID, k.UserID, k.Name, k.Prefix, k.Hash} {
				if strings.Contains(f, secret) {
					t.Errorf("stored field %q holds the key's secret", f)
				}
			}
			return nil
		})

		rows, err := e.svc.ListManagementKeys(e.ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 || rows[0].ID != created.ID || rows[1].ID != second.ID {
			t.Fatalf("rows = %+v", rows)
		}
		if r := rows[0]; r.Name != "deploy bot" || r.KeyPrefix != created.KeyPrefix || !r.IsActive ||
			r.LastUsedAt != nil || !r.CreatedAt.Equal(created1At) {
			t.Errorf("row = %+v", r)
		}
		if rows, _ := e.svc.ListManagementKeys(e.ctx, v.ID); len(rows) != 0 {
			t.Errorf("other user lists %d management keys", len(rows))
		}

		wantStatus(t, e.svc.DeleteManagementKey(e.ctx, v.ID, created.ID), http.StatusNotFound, "management key "+created.ID+" not found")
		if err := e.svc.DeleteManagementKey(e.ctx, u.ID, created.ID); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, e.svc.DeleteManagementKey(e.ctx, u.ID, created.ID), http.StatusNotFound)
		rows, _ = e.svc.ListManagementKeys(e.ctx, u.ID)
		if len(rows) != 1 || rows[0].ID != second.ID {
			t.Errorf("after delete: %+v", rows)
		}
		_, err = e.svc.Authenticate(e.ctx, created.APIKey)
		wantStatus(t, err, http.StatusUnauthorized)
		if _, err := e.svc.Authenticate(e.ctx, second.APIKey); err != nil {
			t.Errorf("the other key stopped working: %v", err)
		}
	})
}
