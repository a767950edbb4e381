package main

// The memory check: many slow streams (a token a second) open at once
// through the gate and the translator, and for comparison through the bare
// reverse_proxy, and Caddy's heap while they are.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type memResult struct {
	what                       string
	streams                    int
	idleInuse, idleLive        float64 // bytes, before the streams
	openInuse, openLive        float64 // bytes, while they are open
	idleGoroutines, goroutines float64
	idleRSS, openRSS           float64
	openTime                   time.Duration // until every stream had its first byte
}

func (m memResult) perStream() float64 { return (m.openLive - m.idleLive) / float64(m.streams) }

// heap reads Caddy's heap in use and, after a forced collection, its live
// heap. With settle, it collects first, so that the heap in use is what an
// idle process holds rather than what the previous phase left to collect.
func heap(c *caddyProc, settle bool) (inuse, live, goroutines float64, err error) {
	if settle {
		if err := c.gc(); err != nil {
			return 0, 0, 0, err
		}
	}
	m, err := c.metrics("go_memstats_heap_inuse_bytes")
	if err != nil {
		return 0, 0, 0, err
	}
	inuse = m["go_memstats_heap_inuse_bytes"]
	if err := c.gc(); err != nil {
		return 0, 0, 0, err
	}
	m, err = c.metrics("go_memstats_heap_alloc_bytes", "go_goroutines")
	if err != nil {
		return 0, 0, 0, err
	}
	return inuse, m["go_memstats_heap_alloc_bytes"], m["go_goroutines"], nil
}

// slowStream is the request of slow stream i.
type slowStream func(ctx context.Context, i int) (*http.Request, error)

// gateSlowStream is a messages→chat stream through the gate, spread over
// keys (seatsPerSubscription streams each).
func gateSlowStream(c *caddyProc, keys []string) slowStream {
	body := []byte(strings.Replace(messagesStreamBody, benchModel, memModel, 1))
	return func(ctx context.Context, i int) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.gateURL+"/compat/v1/messages", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header = messagesHeader(keys[i/seatsPerSubscription])
		req.Header.Set(modeHeader, "slow")
		return req, nil
	}
}

// proxySlowStream is a chat stream through the bare reverse_proxy.
func proxySlowStream(c *caddyProc) slowStream {
	return func(ctx context.Context, i int) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.proxyURL+"/v1/chat/completions", strings.NewReader(chatStreamBody))
		if err != nil {
			return nil, err
		}
		req.Header = chatHeader("")
		req.Header.Set(modeHeader, "slow")
		return req, nil
	}
}

// memoryCheck opens n slow streams at once and reads Caddy's heap while all
// of them are open: heap in use as it is, and live heap after a forced
// collection. With heapProfile set, it saves a heap profile there while
// the streams are open.
func memoryCheck(c *caddyProc, what string, newReq slowStream, n int, hold time.Duration, heapProfile string) (memResult, error) {
	res := memResult{what: what, streams: n}
	var err error
	if res.idleInuse, res.idleLive, res.idleGoroutines, err = heap(c, true); err != nil {
		return res, err
	}
	res.idleRSS = c.rssBytes()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, DisableCompression: true}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var opened, failed, early atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			req, err := newReq(ctx, i)
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
				return
			}
			defer resp.Body.Close()
			buf := make([]byte, 4<<10)
			k, err := resp.Body.Read(buf)
			if resp.StatusCode != http.StatusOK || k == 0 {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, fmt.Errorf("stream %d: %s (%v): %s", i, resp.Status, err, buf[:k]))
				return
			}
			opened.Add(1)
			io.Copy(io.Discard, resp.Body) // until cancelled
			if ctx.Err() == nil {
				early.Add(1)
			}
		})
	}
	deadline := time.Now().Add(2 * time.Minute)
	for opened.Load()+failed.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	res.openTime = time.Since(start)
	if f := failed.Load(); f > 0 {
		cancel()
		wg.Wait()
		return res, fmt.Errorf("%d of %d slow streams failed: %v", f, n, firstErr.Load())
	}
	if o := opened.Load(); o < int64(n) {
		cancel()
		wg.Wait()
		return res, fmt.Errorf("only %d of %d slow streams opened within 2 minutes", o, n)
	}
	time.Sleep(hold)
	if res.openInuse, res.openLive, res.goroutines, err = heap(c, false); err != nil {
		return res, err
	}
	res.openRSS = c.rssBytes()
	if heapProfile != "" {
		if err := c.profile(ctx, "heap", 0, heapProfile); err != nil {
			return res, err
		}
	}
	cancel()
	wg.Wait()
	if e := early.Load(); e > 0 {
		return res, fmt.Errorf("%d slow streams ended before the heap was read", e)
	}
	return res, nil
}
