package api_test

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

var usageFields = []string{"hour", "admitted", "refused", "inputTokens", "outputTokens", "seconds"}

func TestKeyUsageHTTP(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)
		uid, tok := e.user("ada@example.com", "")
		_, eveTok := e.user("eve@example.com", "")
		alpha := e.pool("alpha", accounts.PoolActive, 10, false)
		eu := e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockEurope)
		am := e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockAmericas)
		as := e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockAsia)
		keyID := e.call("POST", "/api/keys/subscription", tok, fmt.Sprintf(`{"subscriptionId":%q}`, eu.ID)).want(t, 201).object(t, keyRowFields...)["id"].(string)
		ckID := e.call("POST", "/api/meta-keys", tok, fmt.Sprintf(`{"pledgeIds":[%q,%q],"label":"both"}`, am.ID, as.ID)).
			want(t, 201).object(t, "id", "token", "label", "createdAt")["id"].(string)

		now := e.clock()
		h := now.UTC().Truncate(time.Hour)
		if err := accounts.AddKeyUsage(e.ctx, st, []accounts.KeyUsage{
			{KeyID: keyID, Hour: h, Admitted: 3, Refused: map[string]int64{"window_closed": 2}, InputTokens: 40, OutputTokens: 9, Seconds: 1.25},
			{KeyID: keyID, Hour: h.Add(-30 * time.Hour), Admitted: 1},
			{KeyID: ckID, Hour: h.Add(-time.Hour), Admitted: 5},
		}); err != nil {
			t.Fatal(err)
		}

		// Default range: the last 24 hours, the hour under way included.
		rows := e.call("GET", "/api/keys/"+keyID+"/usage", tok, "").want(t, 200).array(t)
		if len(rows) != 1 {
			t.Fatalf("rows = %v", rows)
		}
		exactFields(t, rows[0], usageFields...)
		if asTime(t, rows[0]["hour"]) != h || rows[0]["admitted"] != float64(3) || rows[0]["inputTokens"] != float64(40) ||
			rows[0]["outputTokens"] != float64(9) || rows[0]["seconds"] != 1.25 ||
			rows[0]["refused"].(map[string]any)["window_closed"] != float64(2) {
			t.Errorf("row = %v", rows[0])
		}
		q := "?from=" + url.QueryEscape(h.Add(-48*time.Hour).Format(time.RFC3339)) + "&to=" + url.QueryEscape(h.Format(time.RFC3339))
		if rows := e.call("GET", "/api/keys/"+keyID+"/usage"+q, tok, "").want(t, 200).array(t); len(rows) != 1 || rows[0]["admitted"] != float64(1) {
			t.Errorf("two days back = %v", rows)
		}
		rows = e.call("GET", "/api/meta-keys/"+ckID+"/usage", tok, "").want(t, 200).array(t)
		if len(rows) != 1 || rows[0]["admitted"] != float64(5) || len(rows[0]["refused"].(map[string]any)) != 0 {
			t.Errorf("combined key = %v", rows)
		}

		// Another user's key, the other kind's id: 404. Bad or too long ranges: 400.
		e.call("GET", "/api/keys/"+keyID+"/usage", eveTok, "").want(t, 404)
		e.call("GET", "/api/meta-keys/"+ckID+"/usage", eveTok, "").want(t, 404)
		e.call("GET", "/api/meta-keys/"+keyID+"/usage", tok, "").want(t, 404)
		e.call("GET", "/api/keys/"+keyID+"/usage", "", "").want(t, 401)
		e.call("GET", "/api/keys/"+keyID+"/other", tok, "").want(t, 404, "no such endpoint")
		e.call("GET", "/api/keys/management/"+keyID, tok, "").want(t, 405)
		e.call("GET", "/api/keys/"+keyID+"/usage?from=yesterday", tok, "").want(t, 400, "RFC 3339")
		long := "?from=" + url.QueryEscape(now.Add(-94*24*time.Hour).Format(time.RFC3339))
		e.call("GET", "/api/keys/"+keyID+"/usage"+long, tok, "").want(t, 400, "93 days")
	})
}
