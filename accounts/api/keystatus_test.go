package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/api"
)

var keyStatusFields = []string{"models", "windowOpen", "closesAt", "nextOpensAt", "lanes", "lanesInUse", "hours"}

// lanesInUseFake stands in for the gate's count of lanes in use.
type lanesInUseFake struct {
	mu    sync.Mutex
	count map[string]int // by key id
	err   error
	asked map[string][]string
}

func (f *lanesInUseFake) lanesInUse(_ context.Context, keyID string, pools []string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked[keyID] = slices.Clone(pools)
	return f.count[keyID], f.err
}

// wantStatus checks a key status object.
func wantStatus(t *testing.T, got map[string]any, models []string, open bool, closes, opens string, lanes, inUse int, hours [24]int) {
	t.Helper()
	var gotModels []string
	for _, m := range got["models"].([]any) {
		gotModels = append(gotModels, m.(string))
	}
	if !slices.Equal(gotModels, models) {
		t.Errorf("models = %v, want %v", got["models"], models)
	}
	if got["windowOpen"] != open || got["lanes"] != float64(lanes) || got["lanesInUse"] != float64(inUse) {
		t.Errorf("windowOpen %v, lanes %v, lanesInUse %v; want %v, %d, %d", got["windowOpen"], got["lanes"], got["lanesInUse"], open, lanes, inUse)
	}
	for field, want := range map[string]string{"closesAt": closes, "nextOpensAt": opens} {
		switch {
		case want == "" && got[field] != nil:
			t.Errorf("%s = %v, want null", field, got[field])
		case want != "" && got[field] != want:
			t.Errorf("%s = %v, want %s", field, got[field], want)
		}
	}
	var gotHours [24]int
	hs, _ := got["hours"].([]any)
	if len(hs) != 24 {
		t.Fatalf("hours = %v, want 24 numbers", got["hours"])
	}
	for i, h := range hs {
		gotHours[i] = int(h.(float64))
	}
	if gotHours != hours {
		t.Errorf("hours = %v, want %v", gotHours, hours)
	}
}

func spans(s ...[3]int) [24]int {
	var h [24]int
	for _, x := range s {
		for i := x[0]; i < x[1]; i++ {
			h[i] += x[2]
		}
	}
	return h
}

func TestKeyStatusHTTP(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)
		lanes := &lanesInUseFake{count: map[string]int{}, asked: map[string][]string{}}
		e.api = api.New(e.svc, api.Options{MaxBody: 1 << 10, LanesInUse: lanes.lanesInUse})
		uid, tok := e.user("ada@example.com", "")
		_, eveTok := e.user("eve@example.com", "")
		alpha, beta := e.pool("alpha", accounts.PoolActive, 10, false), e.pool("beta", accounts.PoolActive, 10, false)

		// A consumption key of europe x2, at 09:00 (envStart): open until 16:00.
		eu := e.sub(uid, alpha, accounts.SubActive, 2, accounts.BlockEurope)
		key := e.call("POST", "/api/keys/subscription", tok, fmt.Sprintf(`{"subscriptionId":%q}`, eu.ID)).want(t, 201).object(t, keyRowFields...)
		keyID := key["id"].(string)
		lanes.count[keyID] = 1
		got := e.call("GET", "/api/keys/"+keyID, tok, "").want(t, 200).object(t, keyStatusFields...)
		wantStatus(t, got, []string{"model-alpha"}, true, "2034-06-12T16:00:00Z", "", 2, 1, spans([3]int{8, 16, 2}))
		if !slices.Equal(lanes.asked[keyID], []string{alpha.ID}) {
			t.Errorf("lanes in use counted in pools %v, want [%s]", lanes.asked[keyID], alpha.ID)
		}

		// Another user's key, an unknown id: the same 404; no credential: 401.
		e.call("GET", "/api/keys/"+keyID, eveTok, "").want(t, 404, "key "+keyID+" not found")
		e.call("GET", "/api/keys/b0b5c0de-0000-4000-8000-999999999999", tok, "").want(t, 404, "not found")
		e.call("GET", "/api/keys/"+keyID, "", "").want(t, 401)
		// Still routed elsewhere: the management keys' list.
		e.call("GET", "/api/keys/management", tok, "").want(t, 200).array(t)

		// The count failing is a 503, not a wrong number (e.call fails on
		// any 5xx, so by hand).
		lanes.err = errors.New("node 2 did not answer")
		req := httptest.NewRequest("GET", "/api/keys/"+keyID, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		e.api.ServeHTTP(rec, req)
		if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), `"success":false`) ||
			!strings.Contains(rec.Body.String(), "could not be counted") {
			t.Errorf("count failing: %d Retry-After %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
		}
		lanes.err = nil

		// A combined key: americas x1 in alpha, asia x2 in beta — one window
		// from 16:00 across midnight to 08:00.
		am := e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockAmericas)
		as := e.sub(uid, beta, accounts.SubActive, 2, accounts.BlockAsia)
		ck := e.call("POST", "/api/meta-keys", tok, fmt.Sprintf(`{"pledgeIds":[%q,%q],"label":"night"}`, am.ID, as.ID)).
			want(t, 201).object(t, "id", "token", "label", "createdAt")
		ckID := ck["id"].(string)
		nightHours := spans([3]int{0, 8, 2}, [3]int{16, 24, 1})
		got = e.call("GET", "/api/meta-keys/"+ckID, tok, "").want(t, 200).object(t, keyStatusFields...)
		wantStatus(t, got, []string{"model-alpha", "model-beta"}, false, "", "2034-06-12T16:00:00Z", 0, 0, nightHours)
		if asked := slices.Sorted(slices.Values(lanes.asked[ckID])); !slices.Equal(asked, slices.Sorted(slices.Values([]string{alpha.ID, beta.ID}))) {
			t.Errorf("lanes in use counted in pools %v, want alpha's and beta's", lanes.asked[ckID])
		}
		e.call("GET", "/api/meta-keys/"+ckID, eveTok, "").want(t, 404, "combined key "+ckID+" not found")
		// A consumption key's id is not a combined key's, nor the reverse.
		e.call("GET", "/api/meta-keys/"+keyID, tok, "").want(t, 404)
		e.call("GET", "/api/keys/"+ckID, tok, "").want(t, 404)

		// 23:00: the night window is open, and closes at 08:00 the next day;
		// the europe key's is closed and opens at 08:00.
		e.setClock(time.Date(2034, 6, 12, 23, 0, 0, 0, time.UTC))
		lanes.count[ckID] = 1
		got = e.call("GET", "/api/meta-keys/"+ckID, tok, "").want(t, 200).object(t, keyStatusFields...)
		wantStatus(t, got, []string{"model-alpha", "model-beta"}, true, "2034-06-13T08:00:00Z", "", 1, 1, nightHours)
		e.setClock(time.Date(2034, 6, 13, 2, 0, 0, 0, time.UTC))
		got = e.call("GET", "/api/meta-keys/"+ckID, tok, "").want(t, 200).object(t, keyStatusFields...)
		wantStatus(t, got, []string{"model-alpha", "model-beta"}, true, "2034-06-13T08:00:00Z", "", 2, 1, nightHours)
		got = e.call("GET", "/api/keys/"+keyID, tok, "").want(t, 200).object(t, keyStatusFields...)
		wantStatus(t, got, []string{"model-alpha"}, false, "", "2034-06-13T08:00:00Z", 0, 1, spans([3]int{8, 16, 2}))

		// A revoked key holds nothing while it is revoked.
		e.call("PUT", "/api/keys/"+keyID, tok, `{"isActive":false}`).want(t, 200)
		got = e.call("GET", "/api/keys/"+keyID, tok, "").want(t, 200).object(t, keyStatusFields...)
		wantStatus(t, got, []string{}, false, "", "", 0, 1, [24]int{})
	})
}

// Without a count of lanes in use (no gate), lanesInUse is 0.
func TestKeyStatusWithoutLaneCount(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)
		uid, tok := e.user("ada@example.com", "")
		sub := e.sub(uid, e.pool("alpha", accounts.PoolActive, 10, false), accounts.SubActive, 1, accounts.BlockAsia)
		key := e.call("POST", "/api/keys/subscription", tok, fmt.Sprintf(`{"subscriptionId":%q}`, sub.ID)).want(t, 201).object(t, keyRowFields...)
		got := e.call("GET", "/api/keys/"+key["id"].(string), tok, "").want(t, 200).object(t, keyStatusFields...)
		wantStatus(t, got, []string{"model-alpha"}, false, "", "2034-06-13T00:00:00Z", 0, 0, spans([3]int{0, 8, 1}))
	})
}
