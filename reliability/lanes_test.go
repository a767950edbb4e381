//go:build reliability

package reliability

// Lane leaks under random cancellation: one node (embedded store), a key
// with a few lanes, many requests from more clients than lanes, streaming
// and not, about 30 % of them cancelled by the client at a random moment —
// while waiting for a lane, before the headers, mid-stream — and a
// `caddy reload` half-way through. Afterwards no lane may be in use, all
// lanes can be taken at once again, and one more is refused.
//
// Lanes are per node here; cluster-wide lanes on PostgreSQL have their own
// two-node scenario (cluster_lanes_test.go, with that work).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timeblock/timeblock/caddymodule/e2e"
	"github.com/timeblock/timeblock/simulator"
)

const (
	laneCount   = 8    // the key's lanes (seats of its subscription)
	laneWorkers = 24   // clients at once: three per lane, so requests wait
	laneRate    = 1000 // simulator tokens a second: a request holds its lane 5–50 ms
	laneGauge   = "timeblock_gate_lanes_in_use"
)

func TestLaneLeaks(t *testing.T) {
	total := scale(2000, 10000)
	// The model server runs in this test process, not in the node: a
	// reload restarts every server of the node's config, a simulator site
	// included, which would cut the proxied requests at the reload (502).
	sim, err := simulator.New(simulator.Config{TokenRate: laneRate, ReplyTokens: 4000})
	if err != nil {
		t.Fatal(err)
	}
	upstream := httptest.NewServer(sim)
	t.Cleanup(upstream.Close)
	opts := nodeOpts{wait: "500ms", upstream: strings.TrimPrefix(upstream.URL, "http://")}
	c := startNode(t, opts)
	u := newUser(t, c)
	_, key := u.key(t, u.subscribe(t, "open", laneCount))

	// A gauge sampler: the most lanes in use ever seen during the run.
	var peak atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(10 * time.Millisecond):
			}
			a, err := tryDo(http.MethodGet, c.AdminURL()+"/metrics", nil)
			if err != nil {
				continue
			}
			if v, _ := sumSeries(a.body, laneGauge); int64(v) > peak.Load() {
				peak.Store(int64(v))
			}
		}
	}()

	var st laneStats
	st.began = time.Now()
	began := time.Now()
	var next atomic.Int64
	reloadErr := make(chan error, 1)
	var wg sync.WaitGroup
	for w := range laneWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for {
				i := next.Add(1)
				if i > int64(total) {
					return
				}
				if i == int64(total/2) {
					// Half-way: reload the config while requests hold and
					// wait for lanes (in the background: this worker goes on).
					go func() {
						reloaded := opts
						reloaded.mark = "2"
						st.reloadAt.Store(time.Now().UnixNano())
						err := c.Reload(reloaded.caddyfile())
						st.reloadEnd.Store(time.Now().UnixNano())
						reloadErr <- err
					}()
				}
				st.one(c, key, rng)
			}
		}()
	}
	wg.Wait()
	if err := <-reloadErr; err != nil {
		t.Fatalf("reload mid-run: %v", err)
	}
	close(stopSampling)
	<-sampled
	t.Logf("%d requests in %v", total, time.Since(began))

	// Lanes come back when the server notices a client gone: give it a
	// moment, then read the gauge.
	inUse := 0.0
	deadline := time.Now().Add(5 * time.Second)
	adminDown := 0
	for {
		a, err := tryDo(http.MethodGet, c.AdminURL()+"/metrics", nil)
		if err != nil || a.status != http.StatusOK {
			// Seen once under heavy load: the admin endpoint, restarted by
			// the reload, refused connections for a while afterwards.
			adminDown++
			if time.Now().After(deadline.Add(10 * time.Second)) {
				t.Fatalf("the admin endpoint does not answer after the reload: %v %s", err, a)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		inUse, _ = sumSeries(a.body, laneGauge)
		if inUse == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if adminDown > 0 {
		t.Logf("the admin endpoint refused %d reads of /metrics after the reload", adminDown)
	}

	// All lanes can be taken at once again, and one more is refused.
	taken, extra := takeAllLanes(t, c, key)

	Zero(t, "lanes still in use after the run (gauge)", int(inUse), "lanes")
	Zero(t, "lanes not takeable at once after the run", laneCount-taken, "lanes")
	Zero(t, "requests admitted beyond the key's lanes after the run", extra, "requests")
	AtMost(t, "lanes in use at peak during the run (gauge, sampled)", float64(peak.Load()), laneCount, "lanes")
	for _, f := range st.failed {
		t.Logf("failure: %s", f)
	}
	Zero(t, "server errors (5xx) and failures not caused by a cancel", int(st.failures.Load()), "requests")
	// The run really cancelled mid-flight, on both sides of the headers.
	AtLeast(t, "requests cancelled before the headers (waiting or admitted)", float64(st.cancelledBefore.Load()), float64(total)/20, "requests")
	AtLeast(t, "requests cancelled mid-stream (after the headers)", float64(st.cancelledMid.Load()), float64(total)/200, "requests")
	AtLeast(t, "answers from the reloaded config", float64(st.afterReload.Load()), 1, "answers")
	Info(t, "requests (streaming and not, 24 clients, 8 lanes)", float64(total), "requests")
	Info(t, "requests streamed", float64(st.streamed.Load()), "requests")
	Info(t, "requests completed", float64(st.completed.Load()), "requests")
	Info(t, "requests refused 429 (lane wait over)", float64(st.refused.Load()), "requests")
	Info(t, "requests cut by the reload closing their connection (client retries)", float64(st.closedByReload.Load()), "requests")
	Info(t, "admin /metrics reads refused after the reload (100 ms apart)", float64(adminDown), "reads")
	Info(t, "cancels that came after the answer ended", float64(st.cancelledLate.Load()), "requests")
}

type laneStats struct {
	streamed, completed, refused         atomic.Int64
	cancelledBefore, cancelledMid        atomic.Int64
	cancelledLate, failures, afterReload atomic.Int64

	began time.Time
	// The reload's start and end (Unix ns); 0 until then.
	reloadAt, reloadEnd atomic.Int64
	// Connections the old config's server closed as the reload stopped
	// it, under a request the client had just sent on them.
	closedByReload atomic.Int64
	mu             sync.Mutex
	failed         []string // the first few failures, for the log
}

func (s *laneStats) fail(what string) {
	s.failures.Add(1)
	what = fmt.Sprintf("%v after the start: %s", time.Since(s.began), what)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failed) < 10 {
		s.failed = append(s.failed, what)
	}
}

// one sends one request, streaming or not with equal odds, and cancels it
// with probability 0.3 at a random moment within the first 60 ms (requests
// take 5–50 ms once admitted, and often wait for a lane before).
func (s *laneStats) one(c *e2e.Caddy, key string, rng *rand.Rand) {
	stream := rng.IntN(2) == 0
	if stream {
		s.streamed.Add(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelled atomic.Bool
	if rng.Float64() < 0.3 {
		d := time.Duration(rng.Int64N(int64(60 * time.Millisecond)))
		timer := time.AfterFunc(d, func() { cancelled.Store(true); cancel() })
		defer timer.Stop()
	}
	body := chatBody("m-open", 5+rng.IntN(46), stream)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.URL()+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := laneClient.Do(req)
	if err != nil {
		if cancelled.Load() && errors.Is(err, context.Canceled) {
			s.cancelledBefore.Add(1)
		} else if s.duringReload() && closedConn(err) {
			s.closedByReload.Add(1)
		} else {
			s.fail(fmt.Sprintf("stream %t, cancelled %t: %v", stream, cancelled.Load(), err))
		}
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	switch {
	case err != nil && cancelled.Load():
		s.cancelledMid.Add(1)
	case err != nil:
		s.fail(fmt.Sprintf("stream %t, status %d, reading the body: %v", stream, resp.StatusCode, err))
	case resp.StatusCode == http.StatusTooManyRequests:
		s.refused.Add(1)
	case resp.StatusCode != http.StatusOK:
		s.fail(fmt.Sprintf("stream %t, cancelled %t: %d %.300s", stream, cancelled.Load(), resp.StatusCode, b))
	default:
		s.completed.Add(1)
		if cancelled.Load() {
			s.cancelledLate.Add(1)
		}
		if resp.Header.Get("X-Config") == "2" {
			s.afterReload.Add(1)
		}
	}
}

// duringReload tells whether now is within the reload, or 100 ms after.
func (s *laneStats) duringReload() bool {
	now, at, end := time.Now().UnixNano(), s.reloadAt.Load(), s.reloadEnd.Load()
	return at != 0 && now >= at && (end == 0 || now <= end+int64(100*time.Millisecond))
}

// closedConn tells a connection closed under a request just sent on it
// (the keep-alive race every HTTP client meets when a server stops; the
// SDKs retry these).
func closedConn(err error) bool {
	s := err.Error()
	return strings.Contains(s, "server closed idle connection") || strings.Contains(s, "connection reset by peer") ||
		strings.Contains(s, "EOF")
}

// laneClient keeps enough idle connections for the workers; a cancelled
// request closes its own.
var laneClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: laneWorkers * 2}}

// takeAllLanes opens laneCount long streams with key at once, waits until
// each has its headers, then sends one more request; it returns how many
// streams were admitted and whether the extra one was (1) or not (0).
func takeAllLanes(t *testing.T, c *e2e.Caddy, key string) (taken, extra int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range laneCount {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 4000 tokens at 1000 a second: open for four seconds.
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.URL()+"/v1/chat/completions",
				strings.NewReader(chatBody("m-open", 4000, true)))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := laneClient.Do(req)
			if err != nil {
				t.Errorf("stream: %v", err)
				return
			}
			if resp.StatusCode == http.StatusOK {
				mu.Lock()
				taken++
				mu.Unlock()
			} else {
				b, _ := io.ReadAll(resp.Body)
				t.Logf("stream refused: %d %s", resp.StatusCode, b)
			}
			go func() { io.Copy(io.Discard, resp.Body); resp.Body.Close() }()
		}()
	}
	wg.Wait()
	a, err := chat(c, key, "m-open", 1) // waits lane_wait (500 ms), then 429
	if err != nil {
		t.Fatal(err)
	}
	if a.status == http.StatusOK {
		extra = 1
	} else if a.status != http.StatusTooManyRequests {
		t.Errorf("the request beyond the lanes: %s, want 429", a)
	}
	return taken, extra
}
