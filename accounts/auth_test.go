package accounts_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

func TestAuthenticate(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, session := e.user("ada@example.com", "")

		p, err := e.svc.Authenticate(e.ctx, session)
		if err != nil {
			t.Fatal(err)
		}
		if p.UserID != u.ID || p.Via != accounts.ViaSession || p.CredentialID == "" {
			t.Errorf("session principal = %+v", p)
		}

		mk, err := e.svc.CreateManagementKey(e.ctx, u.ID, "ci")
		if err != nil {
			t.Fatal(err)
		}
		p, err = e.svc.Authenticate(e.ctx, mk.APIKey)
		if err != nil {
			t.Fatal(err)
		}
		if *p != (accounts.Principal{UserID: u.ID, Via: accounts.ViaManagementKey, CredentialID: mk.ID}) {
			t.Errorf("management key principal = %+v", p)
		}
		// Surrounding whitespace is forgiven.
		if _, err := e.svc.Authenticate(e.ctx, " "+mk.APIKey+" "); err != nil {
			t.Errorf("key with spaces: %v", err)
		}

		pool := e.pool("alpha", accounts.PoolActive, 10, false)
		sub := e.sub(u, pool, accounts.SubActive, 1, accounts.BlockEurope)
		key, err := e.svc.CreateKey(e.ctx, u.ID, sub.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		s2 := e.sub(u, pool, accounts.SubActive, 1, accounts.BlockAsia)
		s3 := e.sub(u, pool, accounts.SubActive, 1, accounts.BlockAsia)
		ck, err := e.svc.CreateCombinedKey(e.ctx, u.ID, []string{s2.ID, s3.ID}, "", nil)
		if err != nil {
			t.Fatal(err)
		}

		refused := []struct {
			name, token string
			fragments   []string
		}{
			{"missing", "", []string{"missing credentials", "Bearer"}},
			{"blank", "   ", []string{"missing credentials"}},
			{"unknown session", "st_" + strings.Repeat("A", 43), []string{"unknown session"}},
			{"unknown management key", "mk_abcdefgh_" + strings.Repeat("A", 43), []string{"unknown", "management key"}},
			{"tampered management key", mk.APIKey[:len(mk.APIKey)-1] + "x", []string{"management key"}},
			{"consumption key", key.APIKey, []string{"consumption keys and combined keys are for inference only", "mk_"}},
			{"combined key", ck.Token, []string{"for inference only"}},
			{"other sk- key", "sk-ant-whatever", []string{"for inference only"}},
			{"garbage", "hello", []string{"unknown credentials"}},
		}
		for _, c := range refused {
			_, err := e.svc.Authenticate(e.ctx, c.token)
			t.Run(c.name, func(t *testing.T) { wantStatus(t, err, http.StatusUnauthorized, c.fragments...) })
		}

		// A deleted management key stops working at once.
		if err := e.svc.DeleteManagementKey(e.ctx, u.ID, mk.ID); err != nil {
			t.Fatal(err)
		}
		_, err = e.svc.Authenticate(e.ctx, mk.APIKey)
		wantStatus(t, err, http.StatusUnauthorized, "management key")

		// Sessions expire after the session TTL (30 days by default).
		e.clock.Advance(30*24*time.Hour - time.Second)
		if _, err := e.svc.Authenticate(e.ctx, session); err != nil {
			t.Fatalf("session a second before expiry: %v", err)
		}
		e.clock.Advance(time.Second)
		_, err = e.svc.Authenticate(e.ctx, session)
		wantStatus(t, err, http.StatusUnauthorized, "session expired")

		// A new session works again.
		fresh, err := e.svc.CreateSession(e.ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(fresh, "st_") || fresh == session {
			t.Errorf("new session token %q", fresh)
		}
		if p, err := e.svc.Authenticate(e.ctx, fresh); err != nil || p.UserID != u.ID {
			t.Errorf("new session: %+v, %v", p, err)
		}
	})
}

func TestCreateUserAndSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, token, err := e.svc.CreateUser(e.ctx, "  Grace.Hopper@Example.COM ", " Grace ")
		if err != nil {
			t.Fatal(err)
		}
		if u.Email != "grace.hopper@example.com" || u.Name != "Grace" || u.ID == "" || !u.CreatedAt.Equal(e.clock.Now()) {
			t.Errorf("user = %+v", u)
		}
		if !strings.HasPrefix(token, "st_") || len(token) != 3+43 {
			t.Errorf("session token %q", token)
		}
		// Stored: the user, and the session only by hash.
		e.view(func(tx accounts.Tx) error {
			got, err := tx.GetUserByEmail("grace.hopper@example.com")
			if err != nil || got.ID != u.ID {
				t.Errorf("stored user = %+v, %v", got, err)
			}
			sess, err := tx.GetSession(accounts.HashKey(token))
			if err != nil {
				t.Fatalf("session by hash: %v", err)
			}
			if sess.UserID != u.ID || !sess.ExpiresAt.Equal(e.clock.Now().Add(30*24*time.Hour)) {
				t.Errorf("session = %+v", sess)
			}
			if _, err := tx.GetSession(token); err == nil {
				t.Error("session found by its plaintext token")
			}
			return nil
		})

		_, _, err = e.svc.CreateUser(e.ctx, "GRACE.HOPPER@example.com", "")
		wantStatus(t, err, http.StatusConflict, "already exists")

		for _, bad := range []string{"", "not-an-email", "Grace <g@example.com>", "a@b@c", "@example.com"} {
			_, _, err := e.svc.CreateUser(e.ctx, bad, "")
			wantStatus(t, err, http.StatusBadRequest)
		}
		_, _, err = e.svc.CreateUser(e.ctx, "x@example.com", strings.Repeat("n", 201))
		wantStatus(t, err, http.StatusBadRequest, "name")

		_, err = e.svc.CreateSession(e.ctx, "no-such-user")
		wantStatus(t, err, http.StatusNotFound, "user no-such-user not found")
	})
}

func TestManagementKeyUseIsBatched(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, _ := e.user("ops@example.com", "")
		mk, err := e.svc.CreateManagementKey(e.ctx, u.ID, "deploy")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Authenticate(e.ctx, mk.APIKey); err != nil {
			t.Fatal(err)
		}
		rows, _ := e.svc.ListManagementKeys(e.ctx, u.ID)
		if rows[0].LastUsedAt != nil {
			t.Errorf("lastUsedAt written on the request path: %v", rows[0].LastUsedAt)
		}
		if err := e.svc.FlushUsage(e.ctx); err != nil {
			t.Fatal(err)
		}
		rows, _ = e.svc.ListManagementKeys(e.ctx, u.ID)
		if rows[0].LastUsedAt == nil || !rows[0].LastUsedAt.Equal(e.clock.Now()) {
			t.Errorf("lastUsedAt after flush = %v, want %v", rows[0].LastUsedAt, e.clock.Now())
		}
		// Nothing pending: a flush is a no-op.
		if err := e.svc.FlushUsage(e.ctx); err != nil {
			t.Fatal(err)
		}
	})
}
