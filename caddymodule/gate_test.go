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
	invalidate func(string)
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

	chatPath     = "/v1/chat/completions"
	messagesPath = "/compat/v1/messages"
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
	body  string
	clen  int64
	repl  map[string]string
	vars  map[string]any
	calls int
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
	if b, _ := s.vars[VarBody].([]byte); string(b) != s.body {
		t.Errorf("var %s = %q, want the forwarded body", VarBody, b)
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
	res = f.do(t, messagesPath, tPastDue, messagesBody, nil)
	if res.status != http.StatusForbidden {
		t.Fatalf("past due: %d", res.status)
	}
	assertErrorBody(t, messagesPath, res.body, "permission_error", "payment past due")
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
	for _, path := range []string{chatPath, messagesPath} {
		res := f.do(t, path, tEvening, chatBody, nil)
		if res.status != http.StatusForbidden {
			t.Fatalf("%s: %d %s", path, res.status, res.body)
		}
		// 09:30 → 16:00 is 6h30m.
		if ra := res.header.Get("Retry-After"); ra != "23400" {
			t.Errorf("Retry-After = %q, want 23400", ra)
		}
		assertErrorBody(t, path, res.body, "permission_error", "opens next at 2026-03-02T16:00:00Z")
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
	}{
		{"too large", big, 413, "request_too_large", "larger than 1.0 KiB", false},
		{"too large, no length", big, 413, "request_too_large", "larger than", true},
		{"not JSON", `{"model":`, 400, "invalid_request_error", "not valid JSON", false},
		{"not an object", `[1,2]`, 400, "invalid_request_error", "JSON object", false},
		{"no model", `{"messages":[]}`, 400, "invalid_request_error", "model is required", false},
		{"model not a string", `{"model":7}`, 400, "invalid_request_error", "model must be", false},
		{"empty", ``, 400, "invalid_request_error", "empty", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{chatPath, messagesPath} {
				r := f.request(path, tKey, tc.body)
				if tc.chunked {
					r.ContentLength = -1
					r.Body = io.NopCloser(strings.NewReader(tc.body))
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
