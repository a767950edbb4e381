package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/api"
)

// The account API checks the credential and the key's owner, then hands
// the stream to Options.KeyLanes with a status reader for the key.
func TestKeyLanesHTTP(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)
		uid, tok := e.user("ada@example.com", "")
		_, eveTok := e.user("eve@example.com", "")
		alpha := e.pool("alpha", accounts.PoolActive, 10, false)
		eu := e.sub(uid, alpha, accounts.SubActive, 2, accounts.BlockEurope)
		am := e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockAmericas)
		eu2 := e.sub(uid, alpha, accounts.SubActive, 3, accounts.BlockEurope)
		keyID := e.call("POST", "/api/keys/subscription", tok, fmt.Sprintf(`{"subscriptionId":%q}`, eu.ID)).want(t, 201).object(t, keyRowFields...)["id"].(string)
		ckID := e.call("POST", "/api/meta-keys", tok, fmt.Sprintf(`{"pledgeIds":[%q,%q]}`, am.ID, eu2.ID)).
			want(t, 201).object(t, "id", "token", "label", "createdAt")["id"].(string)

		// The stand-in for the gate's stream writes the status it reads,
		// twice: the second read is the one a poll makes.
		streamed := func(w http.ResponseWriter, r *http.Request, id string, status api.KeyStatusFunc) error {
			s, pools, err := status(r.Context())
			if err != nil {
				return err
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "%s lanes=%d pools=%d\n", id, s.Lanes, len(pools))
			if _, _, err := status(context.Background()); err != nil {
				fmt.Fprintf(w, "ended: %v\n", err)
			}
			return nil
		}
		h := api.New(e.svc, api.Options{KeyLanes: streamed})
		get := func(h http.Handler, path, token string) *httptest.ResponseRecorder {
			req := httptest.NewRequest("GET", path, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec
		}
		// envStart is 09:00 UTC, in the europe block.
		if rec := get(h, "/api/keys/"+keyID+"/lanes", tok); rec.Code != 200 || rec.Body.String() != keyID+" lanes=2 pools=1\n" {
			t.Errorf("key: %d %q", rec.Code, rec.Body)
		}
		if rec := get(h, "/api/meta-keys/"+ckID+"/lanes", tok); rec.Code != 200 || rec.Body.String() != ckID+" lanes=3 pools=1\n" {
			t.Errorf("combined key: %d %q", rec.Code, rec.Body)
		}
		for _, c := range []struct{ path, token string }{
			{"/api/keys/" + keyID + "/lanes", eveTok},
			{"/api/meta-keys/" + ckID + "/lanes", eveTok},
			{"/api/meta-keys/" + keyID + "/lanes", tok},
		} {
			if rec := get(h, c.path, c.token); rec.Code != 404 || !strings.Contains(rec.Body.String(), `"success":false`) {
				t.Errorf("GET %s: %d %s", c.path, rec.Code, rec.Body)
			}
		}
		if rec := get(h, "/api/keys/"+keyID+"/lanes", ""); rec.Code != 401 {
			t.Errorf("no credential: %d %s", rec.Code, rec.Body)
		}
		if rec := get(h, "/api/keys/management/lanes", tok); rec.Code != 405 {
			t.Errorf("a management key's path: %d %s", rec.Code, rec.Body)
		}

		// A session signed out while streaming ends the stream at its next read.
		sess := e.session(uid)
		signOut := func(w http.ResponseWriter, r *http.Request, id string, status api.KeyStatusFunc) error {
			if _, _, err := status(r.Context()); err != nil {
				return err
			}
			e.call("POST", "/api/auth/sign-out", sess, "").want(t, 200)
			_, _, err := status(r.Context())
			var ae *accounts.Error
			if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
				t.Errorf("the read after signing out: %v, want a 401", err)
			}
			return nil
		}
		get(api.New(e.svc, api.Options{KeyLanes: signOut}), "/api/keys/"+keyID+"/lanes", sess)

		// Without the gate's registry there is no stream.
		e.call("GET", "/api/keys/"+keyID+"/lanes", tok, "").want(t, 404, "no lane stream")
	})
}
