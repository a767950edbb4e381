//go:build reliability

package reliability

// Cluster lanes: two caddy nodes on one PostgreSQL database share the lanes
// of a key. Requests of one key go to either node at random and many are
// cancelled at random moments; the model server (a tiny one in this test,
// shared by both nodes) counts the requests of the key it runs at once.
//
// Figures: requests admitted beyond the key's lanes (zero), lanes leaked
// after the run (zero: all of them usable again from each node), the delay
// for a lane freed on one node to reach a request waiting on the other, and
// how long a node killed with SIGKILL keeps its lanes.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

const clSecret = "TIMEBLOCK_SECRET=cluster-lanes-secret-0123456789"

// clCaddyfile: pool "lanes" is open at every hour; the gate sends admitted
// requests straight to the test's model server (%UP%), with the key's id.
const clCaddyfile = `{
	timeblock {
		store postgres {$TIMEBLOCK_DSN}
		secret {$TIMEBLOCK_SECRET}
		pool lanes {
			model m-lanes
			slots 100
			block asia 40
			block europe 40
			block americas 40
		}
	}
}

:{{.HTTP}} {
	handle /api/* {
		timeblock_accounts
	}
	handle /v1/chat/completions {
		timeblock_gate {
			lane_wait %WAIT%
		}
		reverse_proxy 127.0.0.1:%UP% {
			header_up X-Key {timeblock.key_id}
		}
	}
}
`

// clUpstream holds each request for X-Hold-Ms milliseconds, streaming a
// byte every 10 ms, and tracks the requests of every key it runs at once.
type clUpstream struct {
	addr string

	mu       sync.Mutex
	inflight map[string]int
	capacity map[string]int
	over     atomic.Int64 // admissions beyond capacity that persisted
	started  chan clEvent // optional: every start and end
}

type clEvent struct {
	key   string
	start bool
	at    time.Time
}

func startUpstream(t *testing.T) *clUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &clUpstream{addr: ln.Addr().String(), inflight: map[string]int{}, capacity: map[string]int{}}
	srv := &http.Server{Handler: u}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return u
}

func (u *clUpstream) port() string { return u.addr[strings.LastIndexByte(u.addr, ':')+1:] }

func (u *clUpstream) event(key string, start bool) {
	u.mu.Lock()
	ch := u.started
	u.mu.Unlock()
	if ch != nil {
		select {
		case ch <- clEvent{key, start, time.Now()}:
		default:
		}
	}
}

func (u *clUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	key := r.Header.Get("X-Key")
	hold, _ := strconv.Atoi(r.Header.Get("X-Hold-Ms"))
	u.mu.Lock()
	u.inflight[key]++
	n, capacity := u.inflight[key], u.capacity[key]
	u.mu.Unlock()
	u.event(key, true)
	done := func() {
		u.mu.Lock()
		u.inflight[key]--
		u.mu.Unlock()
	}
	if capacity > 0 && n > capacity {
		// A cancelled request's lane may be handed on before this server
		// notices the cancellation; an excess that is real outlasts that.
		time.AfterFunc(50*time.Millisecond, func() {
			u.mu.Lock()
			still := u.inflight[key] > capacity
			u.mu.Unlock()
			if still && r.Context().Err() == nil {
				u.over.Add(1)
			}
		})
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fl.Flush()
	end := time.Now().Add(time.Duration(hold) * time.Millisecond)
	for time.Now().Before(end) {
		select {
		case <-r.Context().Done():
			done()
			return
		case <-time.After(10 * time.Millisecond):
		}
		w.Write([]byte("."))
		fl.Flush()
	}
	done()
	u.event(key, false)
}

// clKey makes a user with a key of seats lanes in pool "lanes".
func clKey(t *testing.T, c *e2e.Caddy, seats int) (keyID, apiKey string) {
	t.Helper()
	email := fmt.Sprintf("lanes-%d@example.com", time.Now().UnixNano())
	token := clCall(t, http.MethodPost, c.AdminURL()+"/timeblock/users", "", map[string]any{"email": email}).Get("sessionToken").Str
	clCall(t, http.MethodPost, c.URL()+"/api/billing/setup-intent", token, map[string]any{"paymentMethod": "pm_card_visa"})
	sub := clCall(t, http.MethodPost, c.URL()+"/api/pools/lanes/subscribe", token,
		map[string]any{"blocks": allBlocks, "quantity": seats}).Get("id").Str
	key := clCall(t, http.MethodPost, c.URL()+"/api/keys/subscription", token, map[string]any{"subscriptionId": sub})
	return key.Get("id").Str, key.Get("apiKey").Str
}

func clCall(t *testing.T, method, url, token string, body any) gjson.Result {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %s %s", method, url, resp.Status, out)
	}
	return gjson.GetBytes(out, "data")
}

// clRequest sends one request of apiKey to c that the model server holds
// for hold; it returns the status once the response has been read, or
// cancels it after cancelAfter (when > 0).
func clRequest(c *e2e.Caddy, apiKey string, hold, cancelAfter time.Duration) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if cancelAfter > 0 {
		time.AfterFunc(cancelAfter, cancel)
	}
	body := `{"model":"m-lanes","max_tokens":4,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.URL()+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("X-Hold-Ms", strconv.Itoa(int(hold.Milliseconds())))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// clHoldAll starts n requests of apiKey on c that hold their lanes for
// hold; it returns how many were admitted (the model server started them).
func clHoldAll(u *clUpstream, keyID string, c *e2e.Caddy, apiKey string, n int, hold time.Duration) int {
	before := u.running(keyID)
	for range n {
		go clRequest(c, apiKey, hold, 0)
	}
	deadline := time.Now().Add(hold / 2)
	for time.Now().Before(deadline) {
		if u.running(keyID)-before >= n {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return u.running(keyID) - before
}

func (u *clUpstream) running(key string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.inflight[key]
}

func clPercentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

func TestClusterLanes(t *testing.T) {
	up := startUpstream(t)
	dsn := pgtest.DSN(t)
	cfg := strings.NewReplacer("%WAIT%", "2s", "%UP%", up.port()).Replace(clCaddyfile)
	env := e2e.WithEnv(clSecret, "TIMEBLOCK_DSN="+dsn)
	a, b := e2e.Start(t, cfg, env), e2e.Start(t, cfg, env)
	nodes := []*e2e.Caddy{a, b}

	const lanes = 3
	keyID, apiKey := clKey(t, a, lanes)
	up.mu.Lock()
	up.capacity[keyID] = lanes
	up.mu.Unlock()

	// Random traffic across both nodes, a third of it cancelled.
	workers, rounds := scale(8, 16), scale(30, 300)
	var sent, admitted, cancelled atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				c := nodes[rand.IntN(2)]
				hold := time.Duration(20+rand.IntN(200)) * time.Millisecond
				var cancelAfter time.Duration
				if rand.IntN(3) == 0 {
					cancelAfter = time.Duration(rand.IntN(250)) * time.Millisecond
					cancelled.Add(1)
				}
				sent.Add(1)
				if clRequest(c, apiKey, hold, cancelAfter) == http.StatusOK {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	Info(t, "cluster lanes: requests sent (2 nodes, 3-lane key)", float64(sent.Load()), "requests")
	Info(t, "cluster lanes: requests cancelled at random", float64(cancelled.Load()), "requests")
	Info(t, "cluster lanes: requests answered 200", float64(admitted.Load()), "requests")
	Zero(t, "cluster lanes: admitted beyond the key's lanes", int(up.over.Load()), "requests")

	// Every lane is usable again, from each node.
	leaked := 0
	for _, c := range nodes {
		var got int
		deadline := time.Now().Add(5 * time.Second)
		for {
			got = clHoldAll(up, keyID, c, apiKey, lanes, 2*time.Second)
			if got == lanes || time.Now().After(deadline) {
				break
			}
			time.Sleep(2 * time.Second) // let the partial set end
		}
		leaked = max(leaked, lanes-got)
		time.Sleep(2100 * time.Millisecond)
	}
	Zero(t, "cluster lanes: lanes leaked after the run", leaked, "lanes")

	// Handover: the key's only lane moves from one node to a request
	// waiting on the other; the delay is from the end of the holder's
	// request at the model server to the start of the waiter's.
	oneID, oneKey := clKey(t, a, 1)
	events := make(chan clEvent, 64)
	up.mu.Lock()
	up.started = events
	up.mu.Unlock()
	var delays []time.Duration
	for i := range scale(20, 100) {
		holder, waiter := nodes[i%2], nodes[1-i%2]
		for len(events) > 0 {
			<-events
		}
		done := make(chan int, 2)
		go func() { done <- clRequest(holder, oneKey, 300*time.Millisecond, 0) }()
		for ev := <-events; ev.key != oneID || !ev.start; ev = <-events {
		}
		go func() { done <- clRequest(waiter, oneKey, 10*time.Millisecond, 0) }()
		var ended time.Time
		for ev := range events {
			if ev.key != oneID {
				continue
			}
			if !ev.start {
				ended = ev.at
				continue
			}
			if !ended.IsZero() {
				delays = append(delays, ev.at.Sub(ended))
			} else {
				t.Errorf("round %d: the waiting request started while the holder ran", i)
			}
			break
		}
		if s1, s2 := <-done, <-done; s1 != http.StatusOK || s2 != http.StatusOK {
			t.Errorf("round %d: statuses %d and %d", i, s1, s2)
		}
	}
	up.mu.Lock()
	up.started = nil
	up.mu.Unlock()
	AtMost(t, "cluster lanes: handover to a waiting request on another node (p50)", float64(clPercentile(delays, 0.5).Microseconds())/1000, 50, "ms")
	Info(t, "cluster lanes: handover to a waiting request on another node (max)", float64(clPercentile(delays, 1).Microseconds())/1000, "ms")

	// A node killed with SIGKILL while its requests hold every lane.
	if got := clHoldAll(up, keyID, a, apiKey, lanes, 30*time.Second); got != lanes {
		t.Fatalf("node a holds %d lanes, want %d", got, lanes)
	}
	a.Kill()
	killed := time.Now()
	var back time.Duration
	for {
		if clRequest(b, apiKey, 10*time.Millisecond, 0) == http.StatusOK {
			back = time.Since(killed)
			break
		}
		if time.Since(killed) > 20*time.Second {
			back = time.Since(killed)
			break
		}
	}
	AtMost(t, "cluster lanes: a SIGKILLed node's lanes back", back.Seconds(), 10, "s")
	a.Start()
}
