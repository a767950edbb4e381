package api_test

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

var (
	occupancyFields = []string{"pool", "from", "to", "exact", "hours"}
	hourOccFields   = []string{"hour", "seatsPerHour", "seatsHeld", "days", "meanLanesInUse", "peakLanesInUse", "peakAt",
		"admitted", "refused", "inputTokens", "outputTokens", "laneSeconds", "shared"}
)

func TestPoolOccupancyHTTP(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)
		uid, tok := e.user("ada@example.com", "")
		alpha := e.pool("alpha", accounts.PoolActive, 10, false)
		beta := e.pool("beta", accounts.PoolActive, 4, false)
		eu := e.sub(uid, alpha, accounts.SubActive, 2, accounts.BlockEurope)
		am := e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockAmericas)
		as := e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockAsia)
		eu2 := e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockEurope)
		betaEU := e.sub(uid, beta, accounts.SubActive, 1, accounts.BlockEurope)
		betaAM := e.sub(uid, beta, accounts.SubActive, 1, accounts.BlockAmericas)
		key := func(sub *accounts.Subscription) string {
			return e.call("POST", "/api/keys/subscription", tok, fmt.Sprintf(`{"subscriptionId":%q}`, sub.ID)).want(t, 201).object(t, keyRowFields...)["id"].(string)
		}
		combined := func(a, b *accounts.Subscription) string {
			return e.call("POST", "/api/meta-keys", tok, fmt.Sprintf(`{"pledgeIds":[%q,%q],"label":"ck"}`, a.ID, b.ID)).
				want(t, 201).object(t, "id", "token", "label", "createdAt")["id"].(string)
		}
		keyEU, keyBeta := key(eu), key(betaEU)
		ckAlpha := combined(am, as)       // both members in alpha: its usage is alpha's
		ckShared := combined(eu2, betaAM) // alpha and beta: cannot be placed
		e.advance(30 * time.Minute)       // 09:30 on envStart's day
		h := envStart                     // 09:00, the hour under way

		if err := accounts.AddKeyUsage(e.ctx, st, []accounts.KeyUsage{
			{KeyID: keyEU, Hour: h, Admitted: 4, Refused: map[string]int64{"lanes_full": 2}, InputTokens: 100, OutputTokens: 20, Seconds: 3600},
			{KeyID: keyEU, Hour: h.Add(-24 * time.Hour), Admitted: 2, Seconds: 7200},
			{KeyID: keyEU, Hour: h.Add(-8 * 24 * time.Hour), Admitted: 100, Seconds: 100}, // before the range
			{KeyID: ckAlpha, Hour: h.Add(-time.Hour), Admitted: 1, Seconds: 1800},
			{KeyID: ckShared, Hour: h, Admitted: 3, Refused: map[string]int64{"window_closed": 1}, Seconds: 900},
			{KeyID: keyBeta, Hour: h, Admitted: 7, Seconds: 7000}, // another pool
		}); err != nil {
			t.Fatal(err)
		}

		// Default range: 7 whole days up to the end of the hour under way.
		m := e.operator("GET", "/timeblock/pools/alpha/occupancy", "").want(t, 200).object(t, occupancyFields...)
		if m["pool"] != "alpha" || m["exact"] != false ||
			!asTime(t, m["from"]).Equal(h.Add(time.Hour-7*24*time.Hour)) || !asTime(t, m["to"]).Equal(h.Add(time.Hour)) {
			t.Errorf("occupancy = pool %v exact %v from %v to %v", m["pool"], m["exact"], m["from"], m["to"])
		}
		hours := m["hours"].([]any)
		if len(hours) != 24 {
			t.Fatalf("%d hours", len(hours))
		}
		nine := asObj(t, hours[9], hourOccFields...)
		want := map[string]any{"hour": 9.0, "seatsPerHour": 10.0, "seatsHeld": 3.0, "days": 7.0, "admitted": 6.0,
			"inputTokens": 100.0, "outputTokens": 20.0, "laneSeconds": 10800.0, "peakLanesInUse": 2.0, "meanLanesInUse": 3.0 / 7}
		for k, v := range want {
			if nine[k] != v {
				t.Errorf("hour 9: %s = %v, want %v", k, nine[k], v)
			}
		}
		if !asTime(t, nine["peakAt"]).Equal(h.Add(-24*time.Hour)) || nine["refused"].(map[string]any)["lanes_full"] != 2.0 {
			t.Errorf("hour 9: peakAt %v refused %v", nine["peakAt"], nine["refused"])
		}
		shared := asObj(t, nine["shared"], "meanLanesInUse", "peakLanesInUse", "peakAt", "admitted", "refused",
			"inputTokens", "outputTokens", "laneSeconds")
		if shared["admitted"] != 3.0 || shared["peakLanesInUse"] != 0.25 || shared["refused"].(map[string]any)["window_closed"] != 1.0 {
			t.Errorf("hour 9 shared = %v", shared)
		}
		eight := asObj(t, hours[8], hourOccFields...)
		if eight["admitted"] != 1.0 || eight["peakLanesInUse"] != 0.5 || eight["seatsHeld"] != 3.0 || eight["shared"] != nil {
			t.Errorf("hour 8 = %v", eight)
		}
		twenty := asObj(t, hours[20], hourOccFields...)
		if twenty["seatsHeld"] != 1.0 || twenty["admitted"] != 0.0 || twenty["peakAt"] != nil || twenty["days"] != 7.0 {
			t.Errorf("hour 20 = %v", twenty)
		}

		// A range of one hour a day back; the other pool sees only its own key.
		q := "?from=" + url.QueryEscape(h.Add(-24*time.Hour).Format(time.RFC3339)) + "&to=" + url.QueryEscape(h.Add(-23*time.Hour).Format(time.RFC3339))
		nine = e.operator("GET", "/timeblock/pools/alpha/occupancy"+q, "").want(t, 200).object(t, occupancyFields...)["hours"].([]any)[9].(map[string]any)
		if nine["days"] != 1.0 || nine["admitted"] != 2.0 || nine["meanLanesInUse"] != 2.0 || nine["shared"] != nil {
			t.Errorf("one hour: %v", nine)
		}
		b := e.operator("GET", "/timeblock/pools/beta/occupancy", "").want(t, 200).object(t, occupancyFields...)
		nine = b["hours"].([]any)[9].(map[string]any)
		if nine["admitted"] != 7.0 || nine["seatsPerHour"] != 4.0 || nine["seatsHeld"] != 1.0 || nine["shared"].(map[string]any)["admitted"] != 3.0 {
			t.Errorf("beta hour 9: %v", nine)
		}

		e.operator("GET", "/timeblock/pools/nope/occupancy", "").want(t, 404, `no pool "nope"`)
		e.operator("GET", "/timeblock/pools/alpha/occupancy?to=soon", "").want(t, 400, "RFC 3339")
		e.operator("POST", "/timeblock/pools/alpha/occupancy", "").want(t, 405)
	})
}
