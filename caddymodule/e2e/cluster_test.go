package e2e_test

// End-to-end tests of cluster-wide lanes: several caddy nodes on one
// PostgreSQL database, requests of one key split across them.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// clusterNodes starts n caddy nodes on one fresh database, all with
// lane_wait wait.
func clusterNodes(t *testing.T, n int, wait string) []*e2e.Caddy {
	t.Helper()
	dsn := pgtest.DSN(t)
	opts := gateOpts{store: "store postgres {$TIMEBLOCK_DSN}", wait: wait}
	nodes := make([]*e2e.Caddy, n)
	for i := range nodes {
		nodes[i] = e2e.Start(t, gateConfig(t, opts), e2e.WithEnv(gateSecret, "TIMEBLOCK_DSN="+dsn))
	}
	return nodes
}

// tryStream starts a long chat stream on c and reads its first chunk. It
// returns a func that disconnects it, or the error that refused it.
func tryStream(c *e2e.Caddy, key string) (stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	client := c.OpenAIClient(key)
	stream := client.Chat.Completions.NewStreaming(ctx, chatParams("m-open", 400))
	if !stream.Next() {
		err := stream.Err()
		cancel()
		stream.Close()
		if err == nil {
			err = errors.New("stream ended before its first chunk")
		}
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { cancel(); stream.Close() }) }, nil
}

// burst sends one long stream to each of nodes at the same moment (the
// nodes in turn: nodes may repeat) and returns the streams admitted and the
// errors of the others, which must all be 429 "busy".
func burst(t *testing.T, key string, nodes ...*e2e.Caddy) (admitted []func()) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, c := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			stop, err := tryStream(c, key)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				admitted = append(admitted, stop)
				return
			}
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
				t.Errorf("refused otherwise than with 429: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	t.Cleanup(func() {
		for _, stop := range admitted {
			stop()
		}
	})
	return admitted
}

func stopAll(streams []func()) {
	for _, stop := range streams {
		stop()
	}
}

// allUsable checks that n streams of key are admitted one after another on
// c, retrying for a short while: the lanes of streams just disconnected come
// back once their nodes notice.
func allUsable(t *testing.T, c *e2e.Caddy, key string, n int, within time.Duration) time.Duration {
	t.Helper()
	var held []func()
	defer func() { stopAll(held) }()
	return eventually(t, within, fmt.Sprintf("%d lanes usable on one node", n), func() error {
		for len(held) < n {
			stop, err := tryStream(c, key)
			if err != nil {
				return fmt.Errorf("%d of %d admitted: %w", len(held), n, err)
			}
			held = append(held, stop)
		}
		return nil
	})
}

// known waits until every node admits key: a key made through one node
// reaches the others' key filter through a notification, a moment later.
func known(t *testing.T, key string, nodes ...*e2e.Caddy) {
	t.Helper()
	for _, c := range nodes {
		refused := 0
		took := eventually(t, 3*time.Second, "the new key admitted", func() error {
			_, _, err := chatOnce(t, c, key, "m-open")
			if err != nil {
				refused++
			}
			return err
		})
		if refused > 0 {
			t.Logf("a new key was refused %d times on %s before it was admitted (%v)", refused, c.URL(), took)
		}
	}
}

func TestClusterLanes(t *testing.T) {
	nodes := clusterNodes(t, 2, "0")
	a, b := nodes[0], nodes[1]
	acct := newAccount(t, a)

	t.Run("consumption key: exactly N across nodes, then all N from either", func(t *testing.T) {
		_, key := acct.key(t, acct.subscribe(t, "open", 2))
		known(t, key, a, b)
		got := burst(t, key, a, b, a, b, a, b)
		if len(got) != 2 {
			t.Fatalf("%d of 6 simultaneous requests of a 2-lane key admitted across two nodes, want exactly 2", len(got))
		}
		// Streams of the key, held on both nodes, keep a third out of either.
		for _, c := range []*e2e.Caddy{a, b} {
			_, _, err := chatOnce(t, c, key, "m-open")
			wantOpenAIError(t, err, http.StatusTooManyRequests, "rate_limit_error", "all 2 lanes")
		}
		stopAll(got)
		took := allUsable(t, b, key, 2, 3*time.Second)
		t.Logf("both lanes usable on b %v after the disconnects", took)
		took = allUsable(t, a, key, 2, 3*time.Second)
		t.Logf("both lanes usable on a %v after", took)
		took = allUsable(t, b, key, 2, 3*time.Second)
		t.Logf("and back on b %v after", took)
	})

	t.Run("combined key stacks lanes across nodes, boost adds none", func(t *testing.T) {
		s1, s2 := acct.subscribe(t, "open", 1), acct.subscribe(t, "open", 2)
		token := acct.combined(t, nil, s1, s2)
		known(t, token, a, b)
		got := burst(t, token, b, a, b, a, b, a)
		if len(got) != 3 {
			t.Fatalf("%d of 6 simultaneous requests of a 3-lane combined key admitted, want exactly 3", len(got))
		}
		_, _, err := chatOnce(t, c0(a, b, len(got)), token, "m-open")
		wantOpenAIError(t, err, http.StatusTooManyRequests, "rate_limit_error", "all 3 lanes")
		stopAll(got)
		allUsable(t, a, token, 3, 3*time.Second)

		s3, s4 := acct.subscribe(t, "open", 1), acct.subscribe(t, "open", 1)
		boosted := acct.combined(t, map[string]string{s4: "boost"}, s3, s4)
		known(t, boosted, a, b)
		got = burst(t, boosted, a, b, a, b)
		if len(got) != 1 {
			t.Fatalf("%d of 4 requests of a 1-lane boosted key admitted, want exactly 1", len(got))
		}
		stopAll(got)
		var hdr http.Header
		eventually(t, 3*time.Second, "boosted key admitted on b", func() (err error) {
			_, hdr, err = chatOnce(t, b, boosted, "m-open")
			return err
		})
		if hdr.Get("X-Timeblock-Boost") != "1" || hdr.Get("X-Timeblock-Lanes") != "1" {
			t.Errorf("boost %q lanes %q, want 1 and 1", hdr.Get("X-Timeblock-Boost"), hdr.Get("X-Timeblock-Lanes"))
		}
	})

	t.Run("lanes held across a reload", func(t *testing.T) {
		_, key := acct.key(t, acct.subscribe(t, "open", 1))
		known(t, key, a, b)
		stop, err := tryStream(a, key)
		if err != nil {
			t.Fatal(err)
		}
		opts := gateOpts{store: "store postgres {$TIMEBLOCK_DSN}", wait: "0", mark: "2"}
		if err := a.Reload(gateConfig(t, opts)); err != nil {
			t.Fatal(err)
		}
		for _, c := range []*e2e.Caddy{a, b} {
			_, _, err := chatOnce(t, c, key, "m-open")
			wantOpenAIError(t, err, http.StatusTooManyRequests, "rate_limit_error", "all 1 lanes")
		}
		stop()
		allUsable(t, b, key, 1, 3*time.Second)
		allUsable(t, a, key, 1, 3*time.Second)
	})

	t.Run("a killed node's lanes come back", func(t *testing.T) {
		_, key := acct.key(t, acct.subscribe(t, "open", 2))
		known(t, key, a, b)
		for range 2 {
			if _, err := tryStream(a, key); err != nil {
				t.Fatal(err)
			}
		}
		_, _, err := chatOnce(t, b, key, "m-open")
		wantOpenAIError(t, err, http.StatusTooManyRequests, "rate_limit_error", "all 2 lanes")
		a.Kill()
		killed := time.Now()
		took := allUsable(t, b, key, 2, 10*time.Second)
		t.Logf("a killed node's 2 lanes usable on another node %v after SIGKILL (%v since the kill)", took, time.Since(killed))
		a.Start()
		if _, _, err := chatOnce(t, a, key, "m-open"); err != nil {
			t.Fatalf("a after its restart: %v", err)
		}
	})
}

// c0 picks a node for a probe.
func c0(a, b *e2e.Caddy, i int) *e2e.Caddy {
	if i%2 == 0 {
		return a
	}
	return b
}

// TestClusterLaneHandover: a request waiting on one node (lane_wait) is
// admitted as soon as the request holding the key's only lane on another
// node ends.
func TestClusterLaneHandover(t *testing.T) {
	nodes := clusterNodes(t, 2, "10s")
	a, b := nodes[0], nodes[1]
	acct := newAccount(t, a)
	_, key := acct.key(t, acct.subscribe(t, "open", 1))
	known(t, key, a, b)

	for round := range 3 {
		holder, waiter := a, b
		if round%2 == 1 {
			holder, waiter = b, a
		}
		// 40 tokens at 20 a second: the holder's stream lasts two seconds.
		client := holder.OpenAIClient(key)
		stream := client.Chat.Completions.NewStreaming(ctxT(t), chatParams("m-open", 40))
		if !stream.Next() {
			t.Fatalf("holder stream: %v", stream.Err())
		}
		admitted := make(chan time.Time, 1)
		go func() {
			_, _, err := chatOnce(t, waiter, key, "m-open")
			if err != nil {
				t.Errorf("waiting request: %v", err)
			}
			admitted <- time.Now()
		}()
		for stream.Next() {
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		ended := time.Now()
		select {
		case at := <-admitted:
			// chatOnce asks for 2 tokens: 100 ms of the simulator's pace.
			t.Logf("round %d: waiting request done %v after the holder's stream ended on the other node", round, at.Sub(ended))
			if at.Sub(ended) > time.Second {
				t.Errorf("handover took %v", at.Sub(ended))
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the waiting request was not admitted within 5s of the lane freeing on the other node")
		}
	}
}
