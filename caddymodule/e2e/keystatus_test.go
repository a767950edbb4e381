package e2e_test

// End-to-end tests of a key's status: GET /v1/key through the gate with the
// key itself, and GET /api/keys/{id}, /api/meta-keys/{id} with the owner's
// session, on one node and across two nodes on PostgreSQL.

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// keyStatusConfig is gateConfig with every /v1/* and /compat/v1/* path
// through the gate, as Caddyfile.example routes them.
func keyStatusConfig(t *testing.T, o gateOpts) string {
	t.Helper()
	const narrow = "@inference path /v1/chat/completions /compat/v1/messages"
	cfg := gateConfig(t, o)
	if !strings.Contains(cfg, narrow) {
		t.Fatal("gateCaddyfile no longer has the inference matcher this test widens")
	}
	return strings.Replace(cfg, narrow, "@inference path /v1/* /compat/v1/*", 1)
}

// keyStatus calls GET /v1/key on c with key in header ("Authorization" or
// "x-api-key") and returns data; any status but 200 fails.
func keyStatus(t *testing.T, c *e2e.Caddy, key, header string) gjson.Result {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.URL()+"/v1/key", nil)
	if err != nil {
		t.Fatal(err)
	}
	if header == "Authorization" {
		req.Header.Set("Authorization", "Bearer "+key)
	} else {
		req.Header.Set(header, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/key: %s %s", resp.Status, b)
	}
	return gjson.GetBytes(b, "data")
}

// blockStart is the start of block b (0 asia, 1 europe, 2 americas) that
// begins at or after the block holding now; b may be 3 or more for the
// days after.
func blockStart(now time.Time, b int) time.Time {
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	return day.Add(time.Duration(b*8) * time.Hour)
}

// wantKeyStatus checks a status against what the key was sold: lanes in
// each hour of the blocks (indexes into blockNames) it holds.
func wantKeyStatus(t *testing.T, what string, got gjson.Result, models []string, open bool, closes, opens time.Time,
	lanes, inUse int, held map[int]int) {
	t.Helper()
	var want [24]int64
	for b, n := range held {
		for h := b * 8; h < b*8+8; h++ {
			want[h] = int64(n)
		}
	}
	var hours [24]int64
	hs := got.Get("hours").Array()
	for i := range min(len(hs), 24) {
		hours[i] = hs[i].Int()
	}
	if len(hs) != 24 || hours != want {
		t.Errorf("%s: hours %s, want %v", what, got.Get("hours").Raw, want)
	}
	if ms := got.Get("models").Raw; ms != `["`+strings.Join(models, `","`)+`"]` {
		t.Errorf("%s: models %s, want %v", what, ms, models)
	}
	if got.Get("windowOpen").Type == gjson.Null || got.Get("windowOpen").Bool() != open ||
		got.Get("lanes").Int() != int64(lanes) || got.Get("lanesInUse").Int() != int64(inUse) {
		t.Errorf("%s: windowOpen %s, lanes %s, lanesInUse %s; want %v, %d, %d",
			what, got.Get("windowOpen").Raw, got.Get("lanes").Raw, got.Get("lanesInUse").Raw, open, lanes, inUse)
	}
	for field, w := range map[string]time.Time{"closesAt": closes, "nextOpensAt": opens} {
		v := got.Get(field)
		switch {
		case !v.Exists():
			t.Errorf("%s: no %s", what, field)
		case w.IsZero() && v.Type != gjson.Null:
			t.Errorf("%s: %s %s, want null", what, field, v.Raw)
		case !w.IsZero() && v.Str != w.Format(time.RFC3339):
			t.Errorf("%s: %s %s, want %s", what, field, v.Raw, w.Format(time.RFC3339))
		}
	}
}

// A buyer's key, asked at the current UTC hour: "open" sells the block
// holding now, "shut" the next one.
func TestKeyStatusEndToEnd(t *testing.T) {
	c := e2e.Start(t, keyStatusConfig(t, gateOpts{}), e2e.WithEnv(gateSecret))
	acct := newAccount(t, c)
	now := time.Now().UTC()
	cur := now.Hour() / 8
	next := (cur + 1) % 3
	// The current block ends as the next begins (tomorrow's asia after americas).
	closes, nextOpens := blockStart(now, cur+1), blockStart(now, cur+1)

	openID, openKey := acct.key(t, acct.subscribe(t, "open", 2))
	st := keyStatus(t, c, openKey, "Authorization")
	wantKeyStatus(t, "open key", st, []string{"m-open"}, true, closes, time.Time{}, 2, 0, map[int]int{cur: 2})

	_, shutKey := acct.key(t, acct.subscribe(t, "shut", 1))
	st = keyStatus(t, c, shutKey, "x-api-key")
	wantKeyStatus(t, "key of the next block (closed: an answer, not a refusal)", st, []string{"m-shut"}, false,
		time.Time{}, nextOpens, 0, 0, map[int]int{next: 1})

	// A request in flight counts, on /v1/key and on the owner's /api/keys/{id}.
	stop := holdStream(t, c, openKey, "m-open")
	st = keyStatus(t, c, openKey, "Authorization")
	wantKeyStatus(t, "open key, one stream", st, []string{"m-open"}, true, closes, time.Time{}, 2, 1, map[int]int{cur: 2})
	st = acct.api(t, http.MethodGet, "/api/keys/"+openID, nil)
	wantKeyStatus(t, "GET /api/keys/{id}, one stream", st, []string{"m-open"}, true, closes, time.Time{}, 2, 1, map[int]int{cur: 2})
	stop()
	took := eventually(t, 5*time.Second, "the stream's lane no longer in use", func() error {
		if n := keyStatus(t, c, openKey, "Authorization").Get("lanesInUse").Int(); n != 0 {
			return fmt.Errorf("lanesInUse %d", n)
		}
		return nil
	})
	t.Logf("the stream's lane was free %v after the client left", took)

	// A combined key of this block (3 lanes) and the next (1 lane): the
	// blocks follow each other, so its window runs on to the end of the next.
	lane3, lane1 := acct.subscribe(t, "open", 3), acct.subscribe(t, "shut", 1)
	ck := acct.api(t, http.MethodPost, "/api/meta-keys", map[string]any{"pledgeIds": []string{lane3, lane1}, "label": "e2e"})
	ckHeld := map[int]int{cur: 3, next: 1}
	st = keyStatus(t, c, ck.Get("token").Str, "Authorization")
	wantKeyStatus(t, "combined key", st, []string{"m-open", "m-shut"}, true, blockStart(now, cur+2), time.Time{}, 3, 0, ckHeld)
	st = acct.api(t, http.MethodGet, "/api/meta-keys/"+ck.Get("id").Str, nil)
	wantKeyStatus(t, "GET /api/meta-keys/{id}", st, []string{"m-open", "m-shut"}, true, blockStart(now, cur+2), time.Time{}, 3, 0, ckHeld)

	// Another user sees nothing of it.
	other := newAccount(t, c)
	call404(t, c.URL()+"/api/keys/"+openID, other.token)
	call404(t, c.URL()+"/api/meta-keys/"+ck.Get("id").Str, other.token)
}

func call404(t *testing.T, url, token string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		b, _ := io.ReadAll(resp.Body)
		t.Errorf("GET %s as another user: %s %s, want 404", url, resp.Status, b)
	}
}

// On PostgreSQL the lanes in use are the cluster's: each node counts the
// requests in flight on both, and idle lanes a node keeps do not count.
func TestKeyStatusAcrossNodes(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := keyStatusConfig(t, gateOpts{store: "store postgres {$TIMEBLOCK_DSN}"})
	a := e2e.Start(t, cfg, e2e.WithEnv(gateSecret, "TIMEBLOCK_DSN="+dsn))
	b := e2e.Start(t, cfg, e2e.WithEnv(gateSecret, "TIMEBLOCK_DSN="+dsn))
	acct := newAccount(t, a)
	id, key := acct.key(t, acct.subscribe(t, "open", 3))
	known(t, key, a, b)

	inUse := func(want int) {
		t.Helper()
		eventually(t, 5*time.Second, fmt.Sprintf("%d lanes in use on both nodes", want), func() error {
			for _, c := range []*e2e.Caddy{a, b} {
				if n := keyStatus(t, c, key, "Authorization").Get("lanesInUse").Int(); n != int64(want) {
					return fmt.Errorf("%s counts %d", c.URL(), n)
				}
			}
			if n := acct.api(t, http.MethodGet, "/api/keys/"+id, nil).Get("lanesInUse").Int(); n != int64(want) {
				return fmt.Errorf("GET /api/keys/{id} counts %d", n)
			}
			return nil
		})
	}
	inUse(0)
	stopA := holdStream(t, a, key, "m-open")
	// Counted at once: the stream was admitted before the first ask.
	for _, c := range []*e2e.Caddy{a, b} {
		if n := keyStatus(t, c, key, "Authorization").Get("lanesInUse").Int(); n != 1 {
			t.Errorf("one stream on node a: %s counts %d in use", c.URL(), n)
		}
	}
	stopB := holdStream(t, b, key, "m-open")
	inUse(2)
	stopA()
	inUse(1)
	stopB()
	inUse(0)
}
