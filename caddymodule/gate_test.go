package caddymodule

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/admission"
)

// gateSource is a fake account service: entitlements by key hash.
type gateSource struct {
	mu    sync.Mutex
	ents  map[string]*accounts.Entitlement
	err   error
	calls atomic.Int64
}

func (s *gateSource) put(key string, e *accounts.Entitlement) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ents == nil {
		s.ents = make(map[string]*accounts.Entitlement)
	}
	s.ents[accounts.HashKey(key)] = e
}

func (s *gateSource) Entitlement(_ context.Context, hash string) (*accounts.Entitlement, error) {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	if e, ok := s.ents[hash]; ok {
		return e, nil
	}
	return nil, accounts.ErrNotFound
}

// gateStoreFake records last-use batches and lets a test publish invalidations.
type gateStoreFake struct {
	mu         sync.Mutex
	batches    []accounts.LastUsedBatch
	usage      []accounts.KeyUsage
	invalidate func(string)
}

func (s *gateStoreFake) AddKeyUsage(_ context.Context, rows []accounts.KeyUsage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.usage = append(s.usage, rows...)
	return nil
}

func (s *gateStoreFake) TouchLastUsed(_ context.Context, b accounts.LastUsedBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, b)
	return nil
}

func (s *gateStoreFake) OnInvalidation(fn func(string)) func() {
	s.invalidate = fn
	return func() {}
}

const (
	tKey      = "sk_pool_k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k"
	tCombined = "sk-compat-meta-c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c"
	tPastDue  = "sk_pool_pdpdpdpdpdpdpdpdpdpdpdpdpdpdpdpdpdpdpdp"
	tRevoked  = "sk_pool_rvrvrvrvrvrvrvrvrvrvrvrvrvrvrvrvrvrvrvr"
	tEvening  = "sk_pool_evevevevevevevevevevevevevevevevevevevev"
	tUnknown  = "sk_pool_ununununununununununununununununununununu"

	chatPath      = "/v1/chat/completions"
	messagesPath  = "/compat/v1/messages"
	responsesPath = "/v1/responses"
)

var (
	// 09:30 UTC: the europe block (08-15) is open, americas (16-23) is not.
	gateNow  = time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)
	europe   = accounts.MaskOf([]accounts.Block{accounts.BlockEurope})
	americas = accounts.MaskOf([]accounts.Block{accounts.BlockAmericas})
)

func grant(sub string, hours accounts.HourMask, seats int, boost bool) accounts.Grant {
	return accounts.Grant{
		SubscriptionID: sub, PoolID: "pool-qwen", PoolSlug: "qwen", Model: "qwen3-32b",
		Hours: hours, Seats: seats, Boost: boost, MaxOutputTokens: 8192,
	}
}

type gateFixture struct {
	gate  *Gate
	src   *gateSource
	store *gateStoreFake
}

func newGateFixture(t testing.TB, laneWait time.Duration) *gateFixture {
	t.Helper()
	src := &gateSource{}
	src.put(tKey, &accounts.Entitlement{KeyID: "key_1", UserID: "u1", Grants: []accounts.Grant{grant("s1", europe, 1, false)}})
	src.put(tCombined, &accounts.Entitlement{KeyID: "ck_1", UserID: "u1", Combined: true, Grants: []accounts.Grant{
		grant("s2", europe, 1, false), grant("s3", europe, 2, false), grant("s4", europe, 0, true),
	}})
	src.put(tPastDue, &accounts.Entitlement{KeyID: "key_pd", UserID: "u2", Denied: accounts.DeniedPastDue, DeniedStatus: http.StatusForbidden})
	src.put(tRevoked, &accounts.Entitlement{KeyID: "key_rv", UserID: "u2", Denied: accounts.DeniedRevoked, DeniedStatus: http.StatusUnauthorized})
	src.put(tEvening, &accounts.Entitlement{KeyID: "key_ev", UserID: "u3", Grants: []accounts.Grant{grant("s5", americas, 1, false)}})
	store := &gateStoreFake{}
	st, err := newGateState(store, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close() })
	lw := caddy.Duration(laneWait)
	if laneWait == 0 {
		lw = -1
	}
	g := &Gate{LaneWait: lw, state: st, source: src, maxBody: 1 << 10, now: func() time.Time { return gateNow }, logger: zap.NewNop()}
	return &gateFixture{gate: g, src: src, store: store}
}

// seen is what the next handler saw.
type seen struct {
	body    string
	varBody string // the bytes of VarBody, read while the handler runs
	clen    int64
	repl    map[string]string
	vars    map[string]any
	calls   int
}

type result struct {
	status int
	header http.Header
	body   string
	err    error
}

func (f *gateFixture) do(t *testing.T, path, key, body string, next caddyhttp.Handler) result {
	t.Helper()
	return f.doRequest(t, f.request(path, key, body), next)
}

func (f *gateFixture) request(path, key, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	if key != "" {
		if strings.HasSuffix(path, "/v1/messages") {
			r.Header.Set("x-api-key", key)
		} else {
			r.Header.Set("Authorization", "Bearer "+key)
		}
	}
	ctx := context.WithValue(r.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer())
	ctx = context.WithValue(ctx, caddyhttp.VarsCtxKey, map[string]any{})
	return r.WithContext(ctx)
}

func (f *gateFixture) doRequest(t *testing.T, r *http.Request, next caddyhttp.Handler) result {
	t.Helper()
	if next == nil {
		next = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			w.WriteHeader(http.StatusOK)
			return nil
		})
	}
	rec := httptest.NewRecorder()
	err := f.gate.ServeHTTP(rec, r, next)
	return result{status: rec.Code, header: rec.Header(), body: rec.Body.String(), err: err}
}

func recorder(s *seen) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		s.calls++
		b, _ := io.ReadAll(r.Body)
		s.body = string(b)
		s.clen = r.ContentLength
		repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		s.repl = map[string]string{}
		for _, k := range []string{"pool", "model", "key_id", "boost", "lanes"} {
			s.repl[k] = repl.ReplaceAll("{timeblock."+k+"}", "-")
		}
		s.vars = r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
		if fb, ok := s.vars[VarBody].(*forwardedBody); ok {
			s.varBody = string(fb.Bytes())
		}
		w.WriteHeader(http.StatusOK)
		return nil
	})
}

const chatBody = `{"model":"qwen3-32b","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`
const messagesBody = `{"model":"qwen3-32b","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`

// boost_priority off leaves priority out of the body but still publishes
// the boost for routing.
func TestGateBoostPriorityOff(t *testing.T) {
	f := newGateFixture(t, 0)
	f.gate.NoBoostPriority = true
	var s seen
	res := f.do(t, chatPath, tCombined, `{"model":"qwen3-32b","priority":-100,"messages":[]}`, recorder(&s))
	if res.status != http.StatusOK {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	if gjson.Get(s.body, "priority").Exists() {
		t.Errorf("priority written with boost_priority off: %s", s.body)
	}
	if s.repl["boost"] != "1" || s.vars[VarBoost] != 0 {
		t.Errorf("{timeblock.boost} = %q, var %s = %v; want 1 and 0", s.repl["boost"], VarBoost, s.vars[VarBoost])
	}
}

func (f *gateFixture) inUse(keyID string) int {
	return f.gate.state.lanes.InUse(admission.LaneKey{KeyID: keyID, PoolID: "pool-qwen"})
}

func TestGateAdmitsAndPublishes(t *testing.T) {
	f := newGateFixture(t, 0)
	var s seen
	res := f.do(t, chatPath, tCombined, chatBody, recorder(&s))
	if res.status != http.StatusOK || res.err != nil || s.calls != 1 {
		t.Fatalf("status %d, err %v, next called %d times; body %s", res.status, res.err, s.calls, res.body)
	}
	wantRepl := map[string]string{"pool": "qwen", "model": "qwen3-32b", "key_id": "ck_1", "boost": "1", "lanes": "3"}
	for k, v := range wantRepl {
		if s.repl[k] != v {
			t.Errorf("{timeblock.%s} = %q, want %q", k, s.repl[k], v)
		}
	}
	if got := gjson.Get(s.body, "priority"); got.Int() != -1 {
		t.Errorf("boosted chat body priority = %s, want -1 (body %s)", got.Raw, s.body)
	}
	if s.clen != int64(len(s.body)) {
		t.Errorf("ContentLength %d, body %d bytes", s.clen, len(s.body))
	}
	if s.varBody != s.body {
		t.Errorf("var %s holds %q, want the forwarded body", VarBody, s.varBody)
	}
	// The body's buffer is let go when the gate returns, though the handler
	// after it never closed the body.
	if fb, _ := s.vars[VarBody].(*forwardedBody); fb == nil || holders(fb.cur) != 0 {
		t.Errorf("the body is still held after the gate returned")
	}
	if s.vars[VarBoost] != 1 {
		t.Errorf("var %s = %v, want 1", VarBoost, s.vars[VarBoost])
	}
	if n := f.inUse("ck_1"); n != 0 {
		t.Fatalf("%d lanes still in use after the request", n)
	}
	// lastUsedAt goes out in a batch, not per request.
	if err := f.gate.state.lastUsed.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(f.store.batches) != 1 || !f.store.batches[0].CombinedKeys["ck_1"].Equal(gateNow) {
		t.Fatalf("last-use batches = %+v", f.store.batches)
	}
}

func TestGateCredentials(t *testing.T) {
	f := newGateFixture(t, 0)
	// Both headers carry a key.
	if res := f.do(t, messagesPath, tKey, messagesBody, nil); res.status != 200 {
		t.Fatalf("x-api-key: %d %s", res.status, res.body)
	}
	if res := f.do(t, chatPath, tKey, chatBody, nil); res.status != 200 {
		t.Fatalf("bearer: %d %s", res.status, res.body)
	}
	cases := []struct {
		name, key, wantMsg string
		storeCalls         int64
	}{
		{"missing", "", "no API key", 0},
		{"management key", "mk_abcdefgh_secretsecretsecret", "management keys/session tokens are for the account API", 0},
		{"session token", "st_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", "management keys/session tokens are for the account API", 0},
		{"garbage", "hello", "invalid API key", 0},
		{"unknown", tUnknown, "invalid API key", 1},
		{"unknown again (negative cache)", tUnknown, "invalid API key", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.src.calls.Load()
			for _, path := range []string{chatPath, messagesPath} {
				res := f.do(t, path, tc.key, chatBody, nil)
				if res.status != http.StatusUnauthorized {
					t.Fatalf("%s: status %d, want 401", path, res.status)
				}
				assertErrorBody(t, path, res.body, "authentication_error", tc.wantMsg)
			}
			if got := f.src.calls.Load() - before; got != tc.storeCalls {
				t.Fatalf("store asked %d times, want %d", got, tc.storeCalls)
			}
		})
	}
}

// assertErrorBody checks the error body shape of the endpoint's format.
func assertErrorBody(t *testing.T, path, body, kind, msgPart string) {
	t.Helper()
	if !gjson.Valid(body) {
		t.Fatalf("error body is not JSON: %s", body)
	}
	if strings.HasSuffix(path, "/v1/messages") {
		if gjson.Get(body, "type").Str != "error" || gjson.Get(body, "error.type").Str != kind ||
			!strings.Contains(gjson.Get(body, "error.message").Str, msgPart) {
			t.Fatalf("messages error body = %s, want type %s and a message with %q", body, kind, msgPart)
		}
		return
	}
	e := gjson.Get(body, "error")
	if e.Get("type").Str != kind || !strings.Contains(e.Get("message").Str, msgPart) ||
		!e.Get("param").Exists() || !e.Get("code").Exists() {
		t.Fatalf("chat error body = %s, want type %s, a message with %q, param and code", body, kind, msgPart)
	}
}

func TestGateDeniedKeys(t *testing.T) {
	f := newGateFixture(t, 0)
	res := f.do(t, chatPath, tRevoked, chatBody, nil)
	if res.status != http.StatusUnauthorized {
		t.Fatalf("revoked: %d", res.status)
	}
	assertErrorBody(t, chatPath, res.body, "authentication_error", "revoked")
	if got := res.header.Get("X-Should-Retry"); got != "false" {
		t.Errorf("revoked: X-Should-Retry %q, want false", got)
	}
	// Past due is a usage limit to a client: 429 that no client retries.
	res = f.do(t, messagesPath, tPastDue, messagesBody, nil)
	if res.status != http.StatusTooManyRequests || res.header.Get("X-Should-Retry") != "false" || res.header.Get("Retry-After") != "" {
		t.Fatalf("past due: %d, X-Should-Retry %q, Retry-After %q", res.status, res.header.Get("X-Should-Retry"), res.header.Get("Retry-After"))
	}
	assertErrorBody(t, messagesPath, res.body, "rate_limit_error", "payment past due")
	res = f.do(t, responsesPath, tPastDue, `{"model":"qwen3-32b","input":"hi"}`, nil)
	if res.status != http.StatusTooManyRequests {
		t.Fatalf("past due, responses: %d", res.status)
	}
	assertErrorBody(t, chatPath, res.body, "usage_limit_reached", "payment past due")
	if e := gjson.Get(res.body, "error"); e.Get("code").Str != "payment_past_due" || e.Get("resets_at").Exists() {
		t.Errorf("past due: body %s, want code payment_past_due and no resets_at", res.body)
	}
	if got := res.header.Get("X-Codex-Promo-Message"); !strings.HasPrefix(got, "Payment past due: ") {
		t.Errorf("past due: X-Codex-Promo-Message %q", got)
	}
}

func TestGateModelNotHeld(t *testing.T) {
	f := newGateFixture(t, 0)
	body := `{"model":"llama-70b","max_tokens":10,"messages":[]}`
	for _, path := range []string{chatPath, messagesPath} {
		res := f.do(t, path, tKey, body, nil)
		if res.status != http.StatusNotFound {
			t.Fatalf("%s: %d", path, res.status)
		}
		assertErrorBody(t, path, res.body, "not_found_error", `model "llama-70b" is not available with this key`)
	}
}

func TestGateWindowClosed(t *testing.T) {
	f := newGateFixture(t, 0)
	opens := time.Date(2026, 3, 2, 16, 0, 0, 0, time.UTC)
	for _, path := range []string{chatPath, messagesPath, responsesPath} {
		res := f.do(t, path, tEvening, chatBody, nil)
		// A usage limit that no client retries, and no Retry-After of hours
		// for a client to sleep on.
		if res.status != http.StatusTooManyRequests || res.header.Get("X-Should-Retry") != "false" {
			t.Fatalf("%s: %d, X-Should-Retry %q, %s", path, res.status, res.header.Get("X-Should-Retry"), res.body)
		}
		if ra := res.header.Get("Retry-After"); ra != "" {
			t.Errorf("%s: Retry-After = %q, want none", path, ra)
		}
		if got := res.header.Get("X-Timeblock-Window-Opens"); got != "2026-03-02T16:00:00Z" {
			t.Errorf("%s: X-Timeblock-Window-Opens = %q", path, got)
		}
		// 09:30 → 16:00 is 6h30m.
		const msg = `this key's time window for model "qwen3-32b" is closed now; it opens next at 2026-03-02T16:00:00Z (UTC), in 6h30m`
		if path == messagesPath {
			assertErrorBody(t, path, res.body, "rate_limit_error", msg)
			continue
		}
		assertErrorBody(t, chatPath, res.body, "usage_limit_reached", msg)
		if e := gjson.Get(res.body, "error"); e.Get("resets_at").Int() != opens.Unix() || e.Get("code").Str != "window_closed" {
			t.Errorf("%s: body %s, want code window_closed and resets_at %d", path, res.body, opens.Unix())
		}
		if got := res.header.Get("X-Codex-Promo-Message"); got != "T"+msg[1:] {
			t.Errorf("%s: X-Codex-Promo-Message = %q", path, got)
		}
	}
}

// blockingNext holds each request until release is closed (or the client
// leaves), telling started when it has begun.
func blockingNext(started chan<- struct{}, release <-chan struct{}) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		started <- struct{}{}
		select {
		case <-release:
			w.WriteHeader(http.StatusOK)
			return nil
		case <-r.Context().Done():
			return r.Context().Err()
		}
	})
}

func TestGateLanesFullThenFree(t *testing.T) {
	f := newGateFixture(t, 0) // lane_wait 0: reject at once
	started, release := make(chan struct{}, 8), make(chan struct{})
	done := make(chan result, 8)
	go func() { done <- f.do(t, chatPath, tKey, chatBody, blockingNext(started, release)) }()
	<-started

	res := f.do(t, messagesPath, tKey, messagesBody, nil)
	if res.status != http.StatusTooManyRequests || res.header.Get("Retry-After") != "1" {
		t.Fatalf("second request on a 1-lane key: %d, Retry-After %q", res.status, res.header.Get("Retry-After"))
	}
	assertErrorBody(t, messagesPath, res.body, "rate_limit_error", "lanes of this key")

	close(release)
	if r := <-done; r.status != 200 {
		t.Fatalf("first request: %d", r.status)
	}
	if res := f.do(t, chatPath, tKey, chatBody, nil); res.status != 200 {
		t.Fatalf("after the lane was freed: %d %s", res.status, res.body)
	}
}

func TestGateWaitsForALane(t *testing.T) {
	f := newGateFixture(t, 5*time.Second)
	started, release := make(chan struct{}, 8), make(chan struct{})
	done := make(chan result, 8)
	go func() { done <- f.do(t, chatPath, tKey, chatBody, blockingNext(started, release)) }()
	<-started
	go func() { done <- f.do(t, chatPath, tKey, chatBody, blockingNext(started, release)) }()
	// The second request queues; it must not start before a lane frees.
	select {
	case <-started:
		t.Fatal("second request ran while the only lane was busy")
	case <-time.After(50 * time.Millisecond):
	}
	release <- struct{}{} // the first finishes, handing its lane on
	<-started
	close(release)
	for range 2 {
		if r := <-done; r.status != 200 {
			t.Fatalf("status %d %s", r.status, r.body)
		}
	}
	if n := f.inUse("key_1"); n != 0 {
		t.Fatalf("%d lanes in use", n)
	}
}

func TestGateCombinedKeyStacksLanesBoostAddsNone(t *testing.T) {
	f := newGateFixture(t, 0)
	started, release := make(chan struct{}, 8), make(chan struct{})
	done := make(chan result, 8)
	// Lane members of 1 and 2 seats: 3 at once; the boost member adds none.
	for range 3 {
		go func() { done <- f.do(t, chatPath, tCombined, chatBody, blockingNext(started, release)) }()
		<-started
	}
	if n := f.inUse("ck_1"); n != 3 {
		t.Fatalf("%d lanes in use, want 3", n)
	}
	res := f.do(t, chatPath, tCombined, chatBody, nil)
	if res.status != http.StatusTooManyRequests {
		t.Fatalf("fourth request: %d, want 429", res.status)
	}
	close(release)
	for range 3 {
		if r := <-done; r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
	}
	if n := f.inUse("ck_1"); n != 0 {
		t.Fatalf("%d lanes in use at the end", n)
	}
}

func TestGateReleasesOnPanic(t *testing.T) {
	f := newGateFixture(t, 0)
	boom := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { panic("upstream handler panicked") })
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not propagate")
			}
		}()
		f.do(t, chatPath, tKey, chatBody, boom)
	}()
	if n := f.inUse("key_1"); n != 0 {
		t.Fatalf("%d lanes in use after a panic", n)
	}
}

func TestGateReleasesOnUpstreamError(t *testing.T) {
	f := newGateFixture(t, 0)
	fail := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		return caddyhttp.Error(http.StatusBadGateway, errors.New("upstream refused"))
	})
	if res := f.do(t, chatPath, tKey, chatBody, fail); res.err == nil {
		t.Fatal("the upstream error was swallowed")
	}
	if n := f.inUse("key_1"); n != 0 {
		t.Fatalf("%d lanes in use after an upstream error", n)
	}
}

func TestGateReleasesWhenClientLeaves(t *testing.T) {
	f := newGateFixture(t, 5*time.Second)
	started := make(chan struct{}, 8)
	ctx, cancel := context.WithCancel(context.Background())
	r := f.request(chatPath, tKey, chatBody)
	r = r.WithContext(context.WithValue(ctx, caddy.ReplacerCtxKey, caddy.NewReplacer()))
	done := make(chan result, 2)
	go func() { done <- f.doRequest(t, r, blockingNext(started, make(chan struct{}))) }()
	<-started
	// A second client queues for the lane and leaves too.
	ctx2, cancel2 := context.WithCancel(context.Background())
	r2 := f.request(chatPath, tKey, chatBody)
	r2 = r2.WithContext(context.WithValue(ctx2, caddy.ReplacerCtxKey, caddy.NewReplacer()))
	go func() { done <- f.doRequest(t, r2, nil) }()
	time.Sleep(20 * time.Millisecond)
	cancel2()
	if res := <-done; res.status != 499 {
		t.Fatalf("client that left while queued: %d, want 499", res.status)
	}
	cancel()
	<-done
	if n := f.inUse("key_1"); n != 0 {
		t.Fatalf("%d lanes in use after the clients left", n)
	}
}

func TestGateClampAndPriority(t *testing.T) {
	f := newGateFixture(t, 0)
	cases := []struct {
		name, path, key, body string
		check                 func(t *testing.T, out string)
	}{
		{"clamp messages", messagesPath, tKey, `{"model":"qwen3-32b","max_tokens":100000,"messages":[]}`, func(t *testing.T, out string) {
			if v := gjson.Get(out, "max_tokens").Int(); v != 8192 {
				t.Fatalf("max_tokens = %d, want 8192", v)
			}
		}},
		{"clamp chat both names", chatPath, tKey, `{"model":"qwen3-32b","max_completion_tokens":9000,"max_tokens":1e9,"messages":[]}`, func(t *testing.T, out string) {
			if a, b := gjson.Get(out, "max_tokens").Int(), gjson.Get(out, "max_completion_tokens").Int(); a != 8192 || b != 8192 {
				t.Fatalf("max_tokens %d, max_completion_tokens %d; want 8192 both (%s)", a, b, out)
			}
		}},
		{"no clamp keeps bytes", chatPath, tKey, `{"model":"qwen3-32b", "max_tokens": 8192, "messages":[]}`, func(t *testing.T, out string) {
			if out != `{"model":"qwen3-32b", "max_tokens": 8192, "messages":[]}` {
				t.Fatalf("body rewritten without need: %s", out)
			}
		}},
		{"client priority removed without boost", chatPath, tKey, `{"model":"qwen3-32b","priority":-100,"messages":[]}`, func(t *testing.T, out string) {
			if gjson.Get(out, "priority").Exists() || !gjson.Valid(out) {
				t.Fatalf("client priority kept: %s", out)
			}
		}},
		{"boost overrides client priority", chatPath, tCombined, `{"model":"qwen3-32b","priority":-100,"messages":[]}`, func(t *testing.T, out string) {
			if v := gjson.Get(out, "priority").Int(); v != -1 {
				t.Fatalf("priority = %d, want -1", v)
			}
		}},
		{"messages request keeps no priority", messagesPath, tCombined, messagesBody, func(t *testing.T, out string) {
			if out != messagesBody {
				t.Fatalf("messages body changed: %s", out)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s seen
			res := f.do(t, tc.path, tc.key, tc.body, recorder(&s))
			if res.status != 200 {
				t.Fatalf("status %d %s", res.status, res.body)
			}
			tc.check(t, s.body)
			if s.clen != int64(len(s.body)) {
				t.Fatalf("ContentLength %d for %d bytes", s.clen, len(s.body))
			}
		})
	}
}

func TestGateBadBodies(t *testing.T) {
	f := newGateFixture(t, 0)
	big := `{"model":"qwen3-32b","messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`
	cases := []struct {
		name, body string
		status     int
		kind, msg  string
		chunked    bool
		encoding   string
	}{
		{"too large", big, 413, "request_too_large", "larger than 1.0 KiB", false, ""},
		{"too large, no length", big, 413, "request_too_large", "larger than", true, ""},
		{"not JSON", `{"model":`, 400, "invalid_request_error", "not valid JSON", false, ""},
		{"not an object", `[1,2]`, 400, "invalid_request_error", "JSON object", false, ""},
		{"too deep", `{"model":"qwen3-32b","messages":` + strings.Repeat("[", 129) + strings.Repeat("]", 129) + `}`, 400, "invalid_request_error", "nested more than 128 levels deep", false, ""},
		{"no model", `{"messages":[]}`, 400, "invalid_request_error", "model is required", false, ""},
		{"model not a string", `{"model":7}`, 400, "invalid_request_error", "model must be", false, ""},
		{"empty", ``, 400, "invalid_request_error", "empty", false, ""},
		// Bytes the gate cannot read must not reach the model server unread.
		{"compressed", `{"model":"qwen3-32b"}`, 415, "invalid_request_error", "send the JSON uncompressed", false, "gzip"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{chatPath, messagesPath} {
				r := f.request(path, tKey, tc.body)
				if tc.chunked {
					r.ContentLength = -1
					r.Body = io.NopCloser(strings.NewReader(tc.body))
				}
				if tc.encoding != "" {
					r.Header.Set("Content-Encoding", tc.encoding)
				}
				res := f.doRequest(t, r, nil)
				if res.status != tc.status {
					t.Fatalf("%s: status %d, want %d (%s)", path, res.status, tc.status, res.body)
				}
				assertErrorBody(t, path, res.body, tc.kind, tc.msg)
			}
		})
	}
}

func TestGateInvalidationReloads(t *testing.T) {
	f := newGateFixture(t, 0)
	if res := f.do(t, chatPath, tKey, chatBody, nil); res.status != 200 {
		t.Fatalf("%d", res.status)
	}
	f.src.put(tKey, &accounts.Entitlement{KeyID: "key_1", UserID: "u1", Denied: accounts.DeniedRevoked, DeniedStatus: 401})
	f.store.invalidate("u1") // what the store calls on a revoke, from any node
	res := f.do(t, chatPath, tKey, chatBody, nil)
	if res.status != http.StatusUnauthorized {
		t.Fatalf("after revocation: %d, want 401", res.status)
	}
}

func TestGateStoreFailure(t *testing.T) {
	f := newGateFixture(t, 0)
	f.src.mu.Lock()
	f.src.err = errors.New("connection refused")
	f.src.mu.Unlock()
	res := f.do(t, messagesPath, tKey, messagesBody, nil)
	if res.status != http.StatusServiceUnavailable || res.header.Get("Retry-After") != "1" {
		t.Fatalf("status %d, Retry-After %q", res.status, res.header.Get("Retry-After"))
	}
	assertErrorBody(t, messagesPath, res.body, "overloaded_error", "could not be checked")
}

func TestGateCaddyfile(t *testing.T) {
	var g Gate
	if err := g.UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock_gate {\n lane_wait 2s\n max_request_body 4MiB\n}")); err != nil {
		t.Fatal(err)
	}
	if g.LaneWait != caddy.Duration(2*time.Second) || g.MaxRequestBody != 4<<20 {
		t.Fatalf("parsed %+v", g)
	}
	for _, bad := range []string{"max_request_body lots", "max_request_body 0", "max_request_body", "lane_wait -1s"} {
		if err := new(Gate).UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock_gate {\n " + bad + "\n}")); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestGateMetrics(t *testing.T) {
	f := newGateFixture(t, 0)
	reg := prometheus.NewPedanticRegistry()
	if err := f.gate.state.metrics.register(reg); err != nil {
		t.Fatal(err)
	}
	if err := f.gate.state.metrics.register(reg); err != nil {
		t.Fatalf("a second gate in the same config: %v", err)
	}
	started, release := make(chan struct{}, 1), make(chan struct{})
	done := make(chan result, 1)
	go func() { done <- f.do(t, chatPath, tKey, chatBody, blockingNext(started, release)) }()
	<-started
	f.do(t, chatPath, tKey, chatBody, nil) // lanes full
	f.do(t, chatPath, tUnknown, chatBody, nil)

	got := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather (pedantic): %v", err)
	}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetValue() + "}"
			}
			switch {
			case m.Counter != nil:
				got[name] = m.Counter.GetValue()
			case m.Gauge != nil:
				got[name] = m.Gauge.GetValue()
			case m.Histogram != nil:
				got[name] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	want := map[string]float64{
		"timeblock_gate_admissions_total{qwen}":                1,
		"timeblock_gate_rejections_total{lanes_full}":          1,
		"timeblock_gate_rejections_total{unknown_key}":         1,
		"timeblock_gate_lanes_in_use{qwen}":                    1,
		"timeblock_gate_lane_wait_seconds":                     2,
		"timeblock_gate_key_cache_lookups_total{miss}":         2,
		"timeblock_gate_key_cache_loads_total":                 2,
		"timeblock_gate_key_cache_load_errors_total":           0,
		"timeblock_gate_rejections_total{window_closed}":       0,
		"timeblock_gate_key_cache_lookups_total{hit}":          1,
		"timeblock_gate_key_cache_lookups_total{negative_hit}": 0,
	}
	for name, v := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s missing", name)
		} else if g != v {
			t.Errorf("%s = %v, want %v", name, g, v)
		}
	}
	close(release)
	<-done
}

// ---- endpoints beyond inference: model lists, token counts, 404/405 ----

const (
	tTrio     = "sk-compat-meta-t3t3t3t3t3t3t3t3t3t3t3t3t3t3t3t3t3t3t"
	countPath = "/compat/v1/messages/count_tokens"
)

// trioGrants is a combined key holding three models; llama's hours are the
// evening ones, closed at gateNow.
func trioGrants() []accounts.Grant {
	g := []accounts.Grant{grant("s7", europe, 1, false), grant("s8", americas, 1, false), grant("s9", europe, 1, false)}
	g[0].ModelName, g[0].Since = "Qwen3 32B", time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	g[1].PoolID, g[1].PoolSlug, g[1].Model = "pool-llama", "llama", "meta-llama/Llama-3.3-70B"
	g[2].PoolID, g[2].PoolSlug, g[2].Model, g[2].MaxOutputTokens = "pool-mistral", "mistral", "mistral-small", 0
	return g
}

// get sends a GET through the gate with key in the header an SDK of the
// path's style would use (x-api-key and anthropic-version under /compat/).
func (f *gateFixture) get(t *testing.T, method, path, key string, hdr ...string) result {
	t.Helper()
	r := f.request(path, "", "")
	r.Method = method
	if key != "" {
		if strings.Contains(path, "/compat/") {
			r.Header.Set("x-api-key", key)
			r.Header.Set("anthropic-version", "2023-06-01")
		} else {
			r.Header.Set("Authorization", "Bearer "+key)
		}
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	return f.doRequest(t, r, caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		t.Errorf("%s %s reached the next handler", method, path)
		return nil
	}))
}

func TestGateModelLists(t *testing.T) {
	f := newGateFixture(t, 0)
	f.src.put(tTrio, &accounts.Entitlement{KeyID: "ck_3", UserID: "u4", Combined: true, Grants: trioGrants()})

	// The OpenAI list, every model the key holds, open now or not.
	res := f.get(t, http.MethodGet, "/v1/models", tTrio)
	if res.status != 200 || res.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/models: %d %s", res.status, res.body)
	}
	if got := gjson.Get(res.body, "data.#.id").String(); gjson.Get(res.body, "object").Str != "list" ||
		got != `["qwen3-32b","meta-llama/Llama-3.3-70B","mistral-small"]` {
		t.Fatalf("OpenAI list = %s", res.body)
	}
	if m := gjson.Get(res.body, "data.0"); m.Get("object").Str != "model" || m.Get("created").Int() != 1767607200 || m.Get("owned_by").Str != "timeblock" {
		t.Fatalf("OpenAI model = %s", m.Raw)
	}

	// The messages list: under /compat/, or anywhere with anthropic-version.
	for _, r := range []result{
		f.get(t, http.MethodGet, "/compat/v1/models", tTrio),
		f.get(t, http.MethodGet, "/v1/models", tTrio, "anthropic-version", "2023-06-01"),
	} {
		if r.status != 200 || gjson.Get(r.body, "data.#").Int() != 3 || gjson.Get(r.body, "has_more").Type != gjson.False ||
			gjson.Get(r.body, "first_id").Str != "qwen3-32b" || gjson.Get(r.body, "last_id").Str != "mistral-small" {
			t.Fatalf("messages list: %d %s", r.status, r.body)
		}
		want := `{"type":"model","id":"qwen3-32b","display_name":"Qwen3 32B","created_at":"2026-01-05T10:00:00Z","max_tokens":8192}`
		if got := gjson.Get(r.body, "data.0").Raw; got != want {
			t.Fatalf("messages model = %s, want %s", got, want)
		}
		if got := gjson.Get(r.body, "data.2").Raw; got != `{"type":"model","id":"mistral-small","display_name":"mistral-small","created_at":"1970-01-01T00:00:00Z"}` {
			t.Fatalf("a model without a name, start or ceiling = %s", got)
		}
	}

	// Pages of the messages list.
	pages := []struct {
		query, ids, first, last string
		more                    bool
	}{
		{"limit=2", `["qwen3-32b","meta-llama/Llama-3.3-70B"]`, "qwen3-32b", "meta-llama/Llama-3.3-70B", true},
		{"limit=2&after_id=meta-llama/Llama-3.3-70B", `["mistral-small"]`, "mistral-small", "mistral-small", false},
		{"limit=1&before_id=mistral-small", `["meta-llama/Llama-3.3-70B"]`, "meta-llama/Llama-3.3-70B", "meta-llama/Llama-3.3-70B", true},
		{"after_id=nope", `[]`, "", "", false},
	}
	for _, p := range pages {
		r := f.get(t, http.MethodGet, "/compat/v1/models?"+p.query, tTrio)
		if got := gjson.Get(r.body, "data.#.id").Raw; r.status != 200 || got != p.ids ||
			gjson.Get(r.body, "first_id").Str != p.first || gjson.Get(r.body, "last_id").Str != p.last || gjson.Get(r.body, "has_more").Bool() != p.more {
			t.Errorf("?%s: %d %s", p.query, r.status, r.body)
		}
	}
	if r := f.get(t, http.MethodGet, "/compat/v1/models?limit=0", tTrio); r.status != 400 {
		t.Errorf("limit=0: %d %s", r.status, r.body)
	} else {
		assertErrorBody(t, "/v1/messages", r.body, "invalid_request_error", "limit")
	}

	// One model, in each style; an id may hold slashes.
	r := f.get(t, http.MethodGet, "/v1/models/meta-llama/Llama-3.3-70B", tTrio)
	if r.status != 200 || gjson.Get(r.body, "id").Str != "meta-llama/Llama-3.3-70B" || gjson.Get(r.body, "object").Str != "model" {
		t.Fatalf("GET one model: %d %s", r.status, r.body)
	}
	r = f.get(t, http.MethodGet, "/compat/v1/models/qwen3-32b", tTrio)
	if r.status != 200 || gjson.Get(r.body, "type").Str != "model" || gjson.Get(r.body, "display_name").Str != "Qwen3 32B" {
		t.Fatalf("GET one model, messages style: %d %s", r.status, r.body)
	}
	for _, path := range []string{"/v1/models/gpt-5", "/compat/v1/models/gpt-5"} {
		r := f.get(t, http.MethodGet, path, tTrio)
		if r.status != 404 {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
		style := chatPath
		if strings.Contains(path, "/compat/") {
			style = messagesPath
		}
		assertErrorBody(t, style, r.body, "not_found_error",
			`model "gpt-5" is not available with this key; it holds: qwen3-32b, meta-llama/Llama-3.3-70B, mistral-small`)
	}

	// HEAD works; the key is checked like an inference key's.
	if r := f.get(t, http.MethodHead, "/v1/models", tTrio); r.status != 200 {
		t.Errorf("HEAD: %d", r.status)
	}
	if r := f.get(t, http.MethodGet, "/compat/v1/models", ""); r.status != 401 {
		t.Errorf("no key: %d", r.status)
	} else {
		assertErrorBody(t, messagesPath, r.body, "authentication_error", "no API key")
	}
	if r := f.get(t, http.MethodGet, "/v1/models", tRevoked); r.status != 401 {
		t.Errorf("revoked key: %d", r.status)
	}
}

// The gate answers a model list from the cache: with the key's only lane
// busy, and without the store once the key is cached.
func TestGateModelListTakesNoLane(t *testing.T) {
	f := newGateFixture(t, 0)
	started, release := make(chan struct{}, 1), make(chan struct{})
	done := make(chan result, 1)
	go func() { done <- f.do(t, chatPath, tKey, chatBody, blockingNext(started, release)) }()
	<-started
	calls := f.src.calls.Load()
	r := f.get(t, http.MethodGet, "/v1/models", tKey)
	if r.status != 200 || gjson.Get(r.body, "data.0.id").Str != "qwen3-32b" {
		t.Fatalf("list while the lane is busy: %d %s", r.status, r.body)
	}
	if f.src.calls.Load() != calls {
		t.Errorf("the list asked the store")
	}
	if n := f.inUse("key_1"); n != 1 {
		t.Errorf("%d lanes in use, want the stream's 1", n)
	}
	close(release)
	<-done
}

func TestGateUnknownEndpoints(t *testing.T) {
	f := newGateFixture(t, 0)
	cases := []struct {
		method, path string
		hdr          []string
		status       int
		allow        string
		messages     bool // the messages error format
		msg          string
	}{
		{"GET", "/v1/foo", nil, 404, "", false, "no endpoint GET /v1/foo here; served: POST /v1/chat/completions, POST /v1/messages, POST /v1/messages/count_tokens, POST /v1/responses, GET /v1/models, GET /v1/models/{model}"},
		{"POST", "/v1/completions", nil, 404, "", false, "POST /v1/completions here"},
		{"POST", "/v1/embeddings", []string{"anthropic-version", "2023-06-01"}, 404, "", true, "no endpoint"},
		{"GET", "/compat/v1/foo", nil, 404, "", true, "served: POST /compat/v1/chat/completions, POST /compat/v1/messages, POST /compat/v1/messages/count_tokens"},
		{"DELETE", "/v1/models", nil, 405, "GET, HEAD", false, "DELETE is not allowed on /v1/models; use GET or HEAD"},
		{"POST", "/compat/v1/models/qwen3-32b", nil, 405, "GET, HEAD", true, "use GET or HEAD"},
		{"GET", "/v1/chat/completions", nil, 405, "POST", false, "GET is not allowed on /v1/chat/completions; use POST"},
		{"GET", "/compat/v1/messages", nil, 405, "POST", true, "use POST"},
		{"GET", "/compat/v1/messages/count_tokens", nil, 405, "POST", true, "use POST"},
		{"PUT", "/v1/responses", nil, 405, "POST", false, "use POST"},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			before := f.src.calls.Load()
			// With a key that would be refused: the path is judged first.
			res := f.get(t, tc.method, tc.path, "", append([]string{"x-api-key", tUnknown}, tc.hdr...)...)
			if res.status != tc.status || res.header.Get("Allow") != tc.allow {
				t.Fatalf("%d, Allow %q; want %d, Allow %q (%s)", res.status, res.header.Get("Allow"), tc.status, tc.allow, res.body)
			}
			kind := "not_found_error"
			if tc.status == 405 {
				kind = "invalid_request_error"
			}
			style := chatPath
			if tc.messages {
				style = messagesPath
			}
			assertErrorBody(t, style, res.body, kind, tc.msg)
			if f.src.calls.Load() != before {
				t.Errorf("the key was looked up")
			}
		})
	}
}

func TestGateWrongModelNamesHeldModels(t *testing.T) {
	f := newGateFixture(t, 0)
	f.src.put(tTrio, &accounts.Entitlement{KeyID: "ck_3", UserID: "u4", Combined: true, Grants: trioGrants()})
	const want = `model "gpt-5" is not available with this key; it holds: qwen3-32b, meta-llama/Llama-3.3-70B, mistral-small`
	for _, path := range []string{chatPath, messagesPath, "/v1/responses", countPath} {
		res := f.do(t, path, tTrio, `{"model":"gpt-5","max_tokens":10,"messages":[],"input":"hi"}`, nil)
		if res.status != http.StatusNotFound {
			t.Fatalf("%s: %d %s", path, res.status, res.body)
		}
		style := path
		if path == countPath {
			style = messagesPath
		}
		assertErrorBody(t, style, res.body, "not_found_error", want)
		if code := gjson.Get(res.body, "error.code").Str; path == chatPath && code != "model_not_found" {
			t.Errorf("code %q", code)
		}
	}
}

func TestGateCountTokens(t *testing.T) {
	f := newGateFixture(t, 0)
	// The key's only lane is busy: a count still goes through.
	started, release := make(chan struct{}, 1), make(chan struct{})
	done := make(chan result, 1)
	go func() { done <- f.do(t, chatPath, tKey, chatBody, blockingNext(started, release)) }()
	<-started

	body := `{"model":"qwen3-32b","max_tokens":100000,"messages":[{"role":"user","content":"hi"}]}`
	var s seen
	r := f.request(countPath, tKey, body)
	r.Header.Set("x-api-key", tKey)
	res := f.doRequest(t, r, recorder(&s))
	if res.status != 200 || s.calls != 1 {
		t.Fatalf("count with the lane busy: %d %s", res.status, res.body)
	}
	if s.body != body {
		t.Errorf("the count's body was changed: %s", s.body)
	}
	if s.varBody != body {
		t.Errorf("var %s holds %q", VarBody, s.varBody)
	}
	if s.repl["pool"] != "qwen" || s.repl["key_id"] != "key_1" {
		t.Errorf("placeholders %v", s.repl)
	}
	if n := f.inUse("key_1"); n != 1 {
		t.Errorf("%d lanes in use, want the stream's 1", n)
	}
	if got := gatherGate(t, f)["timeblock_gate_laneless_total{count_tokens}"]; got != 1 {
		t.Errorf("laneless count_tokens = %v", got)
	}
	close(release)
	<-done

	// Outside the key's hours, a count is refused like inference.
	res = f.do(t, countPath, tEvening, body, nil)
	if res.status != http.StatusTooManyRequests || res.header.Get("X-Timeblock-Window-Opens") == "" {
		t.Fatalf("count outside the hours: %d %s", res.status, res.body)
	}
	assertErrorBody(t, messagesPath, res.body, "rate_limit_error", "opens next at")
	// Bad bodies, in the messages format.
	res = f.do(t, countPath, tKey, `{"messages":[]}`, nil)
	if res.status != 400 {
		t.Fatalf("no model: %d", res.status)
	}
	assertErrorBody(t, messagesPath, res.body, "invalid_request_error", "model is required")
}

// gatherGate reads the gate's counters by name{label values}.
func gatherGate(t *testing.T, f *gateFixture) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := f.gate.state.metrics.register(reg); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetValue() + "}"
			}
			if m.Counter != nil {
				got[name] = m.Counter.GetValue()
			}
		}
	}
	return got
}

func TestGateResponsesClamp(t *testing.T) {
	f := newGateFixture(t, 0)
	var s seen
	// A boosted combined key: the gate sets VarBoost for the translator and
	// writes no priority into a Responses body; it clamps max_output_tokens
	// and leaves other fields alone.
	body := `{"model":"qwen3-32b","input":"hi","max_output_tokens":100000,"max_tokens":5}`
	res := f.do(t, "/v1/responses", tCombined, body, recorder(&s))
	if res.status != 200 {
		t.Fatalf("%d %s", res.status, res.body)
	}
	if got := gjson.Get(s.body, "max_output_tokens").Int(); got != 8192 {
		t.Errorf("max_output_tokens = %d, want the pool's 8192 (%s)", got, s.body)
	}
	if gjson.Get(s.body, "max_tokens").Int() != 5 || gjson.Get(s.body, "priority").Exists() {
		t.Errorf("body = %s", s.body)
	}
	if s.vars[VarBoost] != 1 {
		t.Errorf("var %s = %v, want 1", VarBoost, s.vars[VarBoost])
	}
	// Under the ceiling the body is forwarded as it came.
	body = `{"model":"qwen3-32b", "input":"hi", "max_output_tokens": 64}`
	if res := f.do(t, "/v1/responses", tKey, body, recorder(&s)); res.status != 200 || s.body != body {
		t.Errorf("%d, forwarded %s", res.status, s.body)
	}
	res = f.do(t, "/v1/responses", tKey, ``, nil)
	assertErrorBody(t, "/v1/responses", res.body, "invalid_request_error", "model and input")
}
