package e2e_test

// End-to-end tests of GET /v1/key/lanes, the SSE stream of a key's lanes in
// use: on one node, and across two nodes on PostgreSQL.

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// lanesEvents opens GET /v1/key/lanes on c with key and returns its events'
// data as they come; the stream closes when the test ends.
func lanesEvents(t *testing.T, c *e2e.Caddy, key string) <-chan gjson.Result {
	t.Helper()
	return lanesEventsAt(t, c, "/v1/key/lanes", key)
}

// lanesEventsAt is lanesEvents for the stream at path, opened with the
// bearer token (a key, or a session for the account API's streams).
func lanesEventsAt(t *testing.T, c *e2e.Caddy, path, key string) <-chan gjson.Result {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		resp.Body.Close()
		t.Fatalf("GET %s: %s %q", path, resp.Status, resp.Header.Get("Content-Type"))
	}
	events := make(chan gjson.Result, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		name := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && name == "lanes":
				events <- gjson.Parse(strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	return events
}

// nextLanes waits up to within for an event with lanesInUse want, and
// returns it and how long it took.
func nextLanes(t *testing.T, events <-chan gjson.Result, want int64, within time.Duration) (gjson.Result, time.Duration) {
	t.Helper()
	start := time.Now()
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended while waiting for lanesInUse %d", want)
			}
			if ev.Get("lanesInUse").Int() == want {
				return ev, time.Since(start)
			}
			t.Logf("event %s while waiting for lanesInUse %d", ev.Raw, want)
		case <-timeout:
			t.Fatalf("no event with lanesInUse %d within %v", want, within)
		}
	}
}

// A stream sees a streaming chat request of its key come and go: 0, 1 with
// the request's model, endpoint and start, then 0 once the client left.
func TestKeyLanesEndToEnd(t *testing.T) {
	c := e2e.Start(t, keyStatusConfig(t, gateOpts{}), e2e.WithEnv(gateSecret))
	acct := newAccount(t, c)
	_, key := acct.key(t, acct.subscribe(t, "open", 2))

	events := lanesEvents(t, c, key)
	ev, _ := nextLanes(t, events, 0, 5*time.Second)
	if ev.Raw != `{"lanesInUse":0,"lanes":2,"inFlight":[]}` {
		t.Fatalf("on connect: %s", ev.Raw)
	}
	before := time.Now().UTC().Add(-time.Second)
	stop := holdStream(t, c, key, "m-open")
	ev, _ = nextLanes(t, events, 1, 5*time.Second)
	fl := ev.Get("inFlight.0")
	started, err := time.Parse(time.RFC3339Nano, fl.Get("startedAt").Str)
	if ev.Get("lanes").Int() != 2 || len(ev.Get("inFlight").Array()) != 1 || fl.Get("model").Str != "m-open" ||
		fl.Get("endpoint").Str != "/v1/chat/completions" || err != nil || started.Before(before) || started.After(time.Now().Add(time.Second)) {
		t.Fatalf("admitted: %s", ev.Raw)
	}
	stop()
	if ev, _ = nextLanes(t, events, 0, 5*time.Second); ev.Get("inFlight").Raw != "[]" {
		t.Fatalf("finished: %s", ev.Raw)
	}

	// Caddy waits for every response before it exits: the open stream must
	// end at the stop, not hold the process.
	start := time.Now()
	c.Stop()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("caddy took %v to stop with a lanes stream open", took)
	} else {
		t.Logf("caddy stopped in %v with a lanes stream open", took)
	}
	for range events {
	}
}

// On PostgreSQL a stream counts the cluster's lanes: a request on node b
// shows on a stream from node a within 6 s (the poll is 2 s; the bound leaves
// room for a loaded CI machine), and so does its end; the same for the
// owner's stream of the key under /api.
func TestKeyLanesAcrossNodes(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := keyStatusConfig(t, gateOpts{store: "store postgres {$TIMEBLOCK_DSN}"})
	a := e2e.Start(t, cfg, e2e.WithEnv(gateSecret, "TIMEBLOCK_DSN="+dsn))
	b := e2e.Start(t, cfg, e2e.WithEnv(gateSecret, "TIMEBLOCK_DSN="+dsn))
	acct := newAccount(t, a)
	keyID, key := acct.key(t, acct.subscribe(t, "open", 3))
	known(t, key, a, b)

	events := lanesEvents(t, a, key)
	session := lanesEventsAt(t, a, "/api/keys/"+keyID+"/lanes", acct.token)
	nextLanes(t, events, 0, 5*time.Second)
	nextLanes(t, session, 0, 5*time.Second)
	stop := holdStream(t, b, key, "m-open")
	ev, took := nextLanes(t, events, 1, 6*time.Second)
	if ev.Get("inFlight").Raw != "[]" {
		t.Errorf("node b's request is listed on node a: %s", ev.Raw)
	}
	t.Logf("node b's request showed on node a's stream after %v", took)
	_, took = nextLanes(t, session, 1, 6*time.Second)
	t.Logf("and on the session's stream after %v more", took)
	stop()
	_, took = nextLanes(t, events, 0, 6*time.Second)
	t.Logf("its end showed after %v", took)
	nextLanes(t, session, 0, 6*time.Second)
}

// A session sees the same stream for each of its keys under /api: a
// consumption key's and a combined key's requests come and go, another
// user's key is 404, and deleting the key ends its stream.
func TestAccountKeyLanesEndToEnd(t *testing.T) {
	c := e2e.Start(t, keyStatusConfig(t, gateOpts{}), e2e.WithEnv(gateSecret))
	acct := newAccount(t, c)
	keyID, key := acct.key(t, acct.subscribe(t, "open", 2))
	ck := acct.api(t, http.MethodPost, "/api/meta-keys", map[string]any{
		"pledgeIds": []string{acct.subscribe(t, "open", 1), acct.subscribe(t, "open", 2)}, "label": "both"})
	ckID, ckKey := ck.Get("id").Str, ck.Get("token").Str

	events := lanesEventsAt(t, c, "/api/keys/"+keyID+"/lanes", acct.token)
	ckEvents := lanesEventsAt(t, c, "/api/meta-keys/"+ckID+"/lanes", acct.token)
	if ev, _ := nextLanes(t, events, 0, 5*time.Second); ev.Raw != `{"lanesInUse":0,"lanes":2,"inFlight":[]}` {
		t.Fatalf("key on connect: %s", ev.Raw)
	}
	if ev, _ := nextLanes(t, ckEvents, 0, 5*time.Second); ev.Raw != `{"lanesInUse":0,"lanes":3,"inFlight":[]}` {
		t.Fatalf("combined key on connect: %s", ev.Raw)
	}

	stop := holdStream(t, c, key, "m-open")
	ev, _ := nextLanes(t, events, 1, 5*time.Second)
	if fl := ev.Get("inFlight.0"); fl.Get("model").Str != "m-open" || fl.Get("endpoint").Str != "/v1/chat/completions" || fl.Get("startedAt").Str == "" {
		t.Fatalf("key admitted: %s", ev.Raw)
	}
	stopCK := holdStream(t, c, ckKey, "m-open")
	if ev, _ := nextLanes(t, ckEvents, 1, 5*time.Second); ev.Get("inFlight.0.model").Str != "m-open" {
		t.Fatalf("combined key admitted: %s", ev.Raw)
	}
	stop()
	stopCK()
	nextLanes(t, events, 0, 5*time.Second)
	nextLanes(t, ckEvents, 0, 5*time.Second)

	// Another user's key, and the other kind's id: 404 in the envelope.
	other := newAccount(t, c)
	for _, path := range []string{"/api/keys/" + keyID + "/lanes", "/api/meta-keys/" + ckID + "/lanes"} {
		if code, env := asUser(t, c.URL()+path, other.token, http.MethodGet, "", nil); code != http.StatusNotFound || env.Get("success").Bool() {
			t.Errorf("GET %s as another user: %d %s", path, code, env.Raw)
		}
	}
	if code, _ := asUser(t, c.URL()+"/api/meta-keys/"+keyID+"/lanes", acct.token, http.MethodGet, "", nil); code != http.StatusNotFound {
		t.Errorf("a consumption key's id under /api/meta-keys: %d", code)
	}

	// Deleting the key ends its stream at the next poll (2 s).
	acct.api(t, http.MethodDelete, "/api/keys/"+keyID, nil)
	timeout := time.After(6 * time.Second)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("the stream of a deleted key is still open")
		}
	}
}
