package caddymodule

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/admission"
)

// sseWriter is a ResponseWriter that hands each flushed chunk to the test.
type sseWriter struct {
	mu     sync.Mutex
	header http.Header
	status int
	buf    bytes.Buffer
	chunks chan string
}

func newSSEWriter() *sseWriter {
	return &sseWriter{header: http.Header{}, chunks: make(chan string, 64)}
}

func (w *sseWriter) Header() http.Header { return w.header }
func (w *sseWriter) WriteHeader(status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == 0 {
		w.status = status
	}
}
func (w *sseWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.buf.Write(b)
}
func (w *sseWriter) Flush() {
	w.mu.Lock()
	s := w.buf.String()
	w.buf.Reset()
	w.mu.Unlock()
	if s != "" {
		w.chunks <- s
	}
}

// lanesStream is a GET /v1/key/lanes in progress.
type lanesStream struct {
	w      *sseWriter
	cancel context.CancelFunc
	done   chan error
}

func (f *gateFixture) openLanes(t *testing.T, key string) *lanesStream {
	t.Helper()
	r := f.request("/v1/key/lanes", key, "")
	r.Method = http.MethodGet
	ctx, cancel := context.WithCancel(r.Context())
	s := &lanesStream{w: newSSEWriter(), cancel: cancel, done: make(chan error, 1)}
	go func() {
		s.done <- f.gate.ServeHTTP(s.w, r.WithContext(ctx), nil)
	}()
	t.Cleanup(func() { s.close(t) })
	return s
}

// next returns the data of the next lanes event, skipping pings.
func (s *lanesStream) next(t *testing.T) gjson.Result {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case c := <-s.w.chunks:
			if strings.HasPrefix(c, ":") {
				continue
			}
			data, ok := strings.CutPrefix(c, "event: lanes\ndata: ")
			if !ok || !strings.HasSuffix(data, "\n\n") {
				t.Fatalf("not a lanes event: %q", c)
			}
			return gjson.Parse(strings.TrimSuffix(data, "\n\n"))
		case <-timeout:
			t.Fatal("no lanes event within 5s")
		}
	}
}

func (s *lanesStream) close(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("the stream returned %v", err)
		}
		s.done <- nil // for a second close
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end within 5s of the client leaving")
	}
}

// The stream: the current count on connect, an event when a request of the
// key is admitted (1, with its model, endpoint and start) and when it
// finishes (0); the subscription goes when the client leaves.
func TestGateKeyLanesStream(t *testing.T) {
	f := newGateFixture(t, 0)
	s := f.openLanes(t, tKey)
	ev := s.next(t)
	if ev.Raw != `{"lanesInUse":0,"lanes":1,"inFlight":[]}` {
		t.Fatalf("on connect: %s", ev.Raw)
	}
	if s.w.status != http.StatusOK || s.w.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %q", s.w.status, s.w.header.Get("Content-Type"))
	}
	if n := f.gate.state.watch.subscribers("key_1"); n != 1 {
		t.Fatalf("%d subscribers, want 1", n)
	}

	// Another key's request is not this key's.
	if res := f.do(t, chatPath, tCombined, chatBody, nil); res.status != http.StatusOK {
		t.Fatalf("another key: %d %s", res.status, res.body)
	}

	started, release := make(chan struct{}, 1), make(chan struct{})
	done := make(chan result, 1)
	go func() { done <- f.do(t, chatPath, tKey, chatBody, blockingNext(started, release)) }()
	<-started
	ev = s.next(t)
	want := `{"lanesInUse":1,"lanes":1,"inFlight":[{"model":"qwen3-32b","endpoint":"/v1/chat/completions","startedAt":"2026-03-02T09:30:00Z"}]}`
	if ev.Raw != want {
		t.Fatalf("admitted:\ngot  %s\nwant %s", ev.Raw, want)
	}
	close(release)
	if r := <-done; r.status != http.StatusOK {
		t.Fatalf("the request: %d %s", r.status, r.body)
	}
	if ev = s.next(t); ev.Raw != `{"lanesInUse":0,"lanes":1,"inFlight":[]}` {
		t.Fatalf("finished: %s", ev.Raw)
	}

	s.close(t)
	if n := f.gate.state.watch.subscribers("key_1"); n != 0 || f.gate.state.watch.watched.Load() != 0 {
		t.Fatalf("after the client left: %d subscribers, %d keys watched", n, f.gate.state.watch.watched.Load())
	}
}

// Two streams of one key both hear; the key stays watched until the last leaves.
func TestGateKeyLanesTwoStreams(t *testing.T) {
	f := newGateFixture(t, 0)
	a, b := f.openLanes(t, tCombined), f.openLanes(t, tCombined)
	for _, s := range []*lanesStream{a, b} {
		if ev := s.next(t); ev.Get("lanes").Int() != 3 || ev.Get("lanesInUse").Int() != 0 {
			t.Fatalf("on connect: %s", ev.Raw)
		}
	}
	started, release := make(chan struct{}, 1), make(chan struct{})
	done := make(chan result, 1)
	go func() {
		done <- f.do(t, "/compat/v1/messages", tCombined, messagesBody, blockingNext(started, release))
	}()
	<-started
	for _, s := range []*lanesStream{a, b} {
		if ev := s.next(t); ev.Get("lanesInUse").Int() != 1 || ev.Get("inFlight.0.endpoint").Str != "/v1/messages" {
			t.Fatalf("admitted: %s", ev.Raw)
		}
	}
	a.close(t)
	if n := f.gate.state.watch.subscribers("ck_1"); n != 1 {
		t.Fatalf("%d subscribers after one left, want 1", n)
	}
	close(release)
	<-done
	if ev := b.next(t); ev.Get("lanesInUse").Int() != 0 {
		t.Fatalf("finished: %s", ev.Raw)
	}
	b.close(t)
	if f.gate.state.watch.watched.Load() != 0 {
		t.Fatal("the key is still watched after both streams left")
	}
}

// A heartbeat comment every lanesPing; the poll sends nothing while
// nothing changes.
func TestGateKeyLanesPing(t *testing.T) {
	f := newGateFixture(t, 0)
	f.gate.state.watch.ping = 20 * time.Millisecond
	f.gate.state.watch.poll = 5 * time.Millisecond
	s := f.openLanes(t, tKey)
	s.next(t)
	for range 2 {
		select {
		case c := <-s.w.chunks:
			if c != ": ping\n\n" {
				t.Fatalf("got %q, want only pings while nothing changes", c)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no ping")
		}
	}
}

// A key revoked while its stream runs ends the stream at the next poll.
func TestGateKeyLanesEndsWhenRevoked(t *testing.T) {
	f := newGateFixture(t, 0)
	f.gate.state.watch.poll = 10 * time.Millisecond
	s := f.openLanes(t, tKey)
	s.next(t)
	f.src.put(tKey, &accounts.Entitlement{KeyID: "key_1", UserID: "u1", Denied: accounts.DeniedRevoked, DeniedStatus: http.StatusUnauthorized})
	f.gate.state.invalidate("u1")
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(5 * time.Second):
		t.Fatal("the stream of a revoked key did not end")
	}
	if n := f.gate.state.watch.subscribers("key_1"); n != 0 {
		t.Fatalf("%d subscribers", n)
	}
}

// Refusals are /v1/key's; HEAD answers the stream's headers and no event.
func TestGateKeyLanesRefusals(t *testing.T) {
	f := newGateFixture(t, 0)
	cases := []struct {
		method, key string
		status      int
		kind, msg   string
	}{
		{"GET", "", 401, "authentication_error", "no API key"},
		{"GET", tUnknown, 401, "authentication_error", "invalid API key"},
		{"GET", tRevoked, 401, "authentication_error", "revoked"},
		{"GET", tPastDue, 403, "permission_error", "payment past due"},
		{"POST", tKey, 405, "invalid_request_error", "POST is not allowed on /v1/key/lanes; use GET or HEAD"},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.msg, func(t *testing.T) {
			res := f.get(t, tc.method, "/v1/key/lanes", tc.key)
			if res.status != tc.status {
				t.Fatalf("%d %s, want %d", res.status, res.body, tc.status)
			}
			assertErrorBody(t, chatPath, res.body, tc.kind, tc.msg)
		})
	}
	res := f.get(t, http.MethodHead, "/v1/key/lanes", tKey)
	if res.status != http.StatusOK || res.header.Get("Content-Type") != "text/event-stream" || res.body != "" {
		t.Fatalf("HEAD: %d %q %q", res.status, res.header.Get("Content-Type"), res.body)
	}
	if f.gate.state.watch.watched.Load() != 0 {
		t.Fatal("a key is still watched after HEAD")
	}
}

// The inference path pays nothing for the streams while nobody watches the
// key: no allocation, whether no key or another key is watched.
func TestGateKeyLanesHotPathAllocs(t *testing.T) {
	f := newGateFixture(t, 0)
	st := f.gate.state
	k := admission.LaneKey{KeyID: "key_1", PoolID: "pool-qwen"}
	admit := func() {
		lease, _, err := st.lanes.Acquire(context.Background(), k, "qwen", 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		fl := st.watch.admitted("key_1", "qwen3-32b", epChat, gateNow)
		if fl != nil {
			t.Fatal("a flight recorded for an unwatched key")
		}
		st.releaseLane(&lease, fl)
	}
	admit() // the lane group is made once
	if n := testing.AllocsPerRun(100, admit); n != 0 {
		t.Errorf("nobody watching: %v allocations per request, want 0", n)
	}
	_, _, cancel := st.watch.subscribe("ck_1")
	defer cancel()
	if n := testing.AllocsPerRun(100, admit); n != 0 {
		t.Errorf("another key watched: %v allocations per request, want 0", n)
	}
}

// Unloading the config that serves a stream ends it, so that the old
// servers can finish shutting down (Caddy waits for every response).
func TestGateKeyLanesEndsWhenUnloaded(t *testing.T) {
	f := newGateFixture(t, 0)
	unloaded := make(chan struct{})
	f.gate.unloaded = unloaded
	s := f.openLanes(t, tKey)
	s.next(t)
	close(unloaded)
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end when its config was unloaded")
	}
	if n := f.gate.state.watch.subscribers("key_1"); n != 0 {
		t.Fatalf("%d subscribers", n)
	}
}

// The account API's stream of a key (serveAccountLanes) hears the gate's
// requests of the key as GET /v1/key/lanes does; a poll the store cannot
// answer keeps the lanes it had, and a 404 (the key deleted) ends it.
func TestAccountLanesStream(t *testing.T) {
	f := newGateFixture(t, 0)
	f.gate.state.watch.poll = 10 * time.Millisecond
	pools := lanePools(&accounts.Entitlement{Grants: []accounts.Grant{grant("s1", europe, 1, false)}})
	const (
		statusOK = iota
		statusDown
		statusGone
	)
	var mode, downReads atomic.Int32
	status := func(context.Context) (accounts.KeyStatus, []string, error) {
		switch mode.Load() {
		case statusDown:
			downReads.Add(1)
			return accounts.KeyStatus{}, nil, errors.New("store down")
		case statusGone:
			return accounts.KeyStatus{}, nil, accounts.NotFound("no key key_1")
		}
		return accounts.KeyStatus{Lanes: 1}, pools, nil
	}
	serve := f.gate.state.serveAccountLanes(make(chan struct{}), zap.NewNop())
	s := &lanesStream{w: newSSEWriter(), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		s.done <- serve(s.w, httptest.NewRequest(http.MethodGet, "/api/keys/key_1/lanes", nil).WithContext(ctx), "key_1", status)
	}()
	t.Cleanup(func() { s.close(t) })
	if ev := s.next(t); ev.Raw != `{"lanesInUse":0,"lanes":1,"inFlight":[]}` {
		t.Fatalf("on connect: %s", ev.Raw)
	}

	mode.Store(statusDown)
	for downReads.Load() < 3 {
		runtime.Gosched()
	}
	started, release := make(chan struct{}, 1), make(chan struct{})
	done := make(chan result, 1)
	go func() { done <- f.do(t, chatPath, tKey, chatBody, blockingNext(started, release)) }()
	<-started
	if ev := s.next(t); ev.Get("lanesInUse").Int() != 1 || ev.Get("lanes").Int() != 1 || ev.Get("inFlight.0.model").Str != "qwen3-32b" {
		t.Fatalf("admitted while the store is down: %s", ev.Raw)
	}
	close(release)
	<-done
	if ev := s.next(t); ev.Raw != `{"lanesInUse":0,"lanes":1,"inFlight":[]}` {
		t.Fatalf("finished: %s", ev.Raw)
	}

	mode.Store(statusGone)
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(5 * time.Second):
		t.Fatal("the stream of a deleted key did not end")
	}
}
