package api_test

// An HTTP test environment for the pool, subscription, billing and operator
// subscription endpoints: the /api handler and the operator handler on one
// service and store, the test processor, and a clock the test moves.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/api"
)

type subsHTTP struct {
	t    *testing.T
	ctx  context.Context
	st   accounts.Store
	svc  *accounts.Service
	proc *accounts.TestProcessor
	api  http.Handler
	op   http.Handler

	mu  sync.Mutex
	now time.Time
}

// subsHTTPStart is 2034-06-12 09:00 UTC, inside the europe block.
var subsHTTPStart = time.Date(2034, 6, 12, 9, 0, 0, 0, time.UTC)

const subsHTTPTerms = "2034-06"

func newSubsHTTP(t *testing.T, st accounts.Store, maxBody int64) *subsHTTP {
	t.Helper()
	e := &subsHTTP{t: t, ctx: context.Background(), st: st, now: subsHTTPStart, proc: accounts.NewTestProcessor()}
	svc, err := accounts.NewService(accounts.Config{
		Store: st, Secret: "subscription http test secret", TermsVersion: subsHTTPTerms,
		Processor: e.proc, Now: e.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.api = api.New(svc, api.Options{MaxBody: maxBody})
	e.op = api.NewOperator(svc, api.Options{MaxBody: maxBody})
	return e
}

func (e *subsHTTP) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *subsHTTP) setClock(t time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = t
}

// subsReply is a decoded envelope.
type subsReply struct {
	Status  int
	Success bool            `json:"success"`
	Data    json.RawMessage `json:"data"`
	Error   string          `json:"error"`
}

func (e *subsHTTP) serve(h http.Handler, method, path, token, body string) *subsReply {
	e.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	r := &subsReply{Status: rec.Code}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		e.t.Fatalf("%s %s: Content-Type %q, body %s", method, path, ct, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), r); err != nil {
		e.t.Fatalf("%s %s: body is not an envelope: %v: %s", method, path, err, rec.Body)
	}
	if r.Success != (r.Status < 300) || (!r.Success && r.Error == "") {
		e.t.Errorf("%s %s: status %d, success %v, error %q", method, path, r.Status, r.Success, r.Error)
	}
	if r.Status >= 500 {
		e.t.Errorf("%s %s: %d %s", method, path, r.Status, r.Error)
	}
	return r
}

func (e *subsHTTP) call(method, path, token, body string) *subsReply {
	e.t.Helper()
	return e.serve(e.api, method, path, token, body)
}

func (e *subsHTTP) operator(method, path string) *subsReply {
	e.t.Helper()
	return e.serve(e.op, method, path, "", "")
}

func (r *subsReply) want(t *testing.T, status int, fragments ...string) *subsReply {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; error %q, data %s", r.Status, status, r.Error, r.Data)
	}
	for _, f := range fragments {
		if !strings.Contains(r.Error, f) {
			t.Errorf("error %q does not contain %q", r.Error, f)
		}
	}
	return r
}

// obj decodes data as an object with exactly the given fields.
func (r *subsReply) obj(t *testing.T, fields ...string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Data, &m); err != nil {
		t.Fatalf("data %s is not an object: %v", r.Data, err)
	}
	exactFields(t, m, fields...)
	return m
}

// arr decodes data as an array of objects (never null).
func (r *subsReply) arr(t *testing.T) []map[string]any {
	t.Helper()
	var a []map[string]any
	if err := json.Unmarshal(r.Data, &a); err != nil || a == nil {
		t.Fatalf("data %s is not an array of objects: %v", r.Data, err)
	}
	return a
}

func exactFields(t *testing.T, m map[string]any, fields ...string) {
	t.Helper()
	got := make([]string, 0, len(m))
	for k := range m {
		got = append(got, k)
	}
	slices.Sort(got)
	want := slices.Clone(fields)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("fields %v, want %v", got, want)
	}
}

// asObj asserts v is a JSON object with exactly fields.
func asObj(t *testing.T, v any, fields ...string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%v (%T) is not an object", v, v)
	}
	exactFields(t, m, fields...)
	return m
}

func asTime(t *testing.T, v any) time.Time {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("timestamp %v (%T) is not a string", v, v)
	}
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("timestamp %q: %v", s, err)
	}
	return ts
}

// user creates a user through the operator endpoint; card, when not empty,
// is saved through the billing endpoint.
func (e *subsHTTP) user(email, card string) (id, token string) {
	e.t.Helper()
	r := e.serve(e.op, "POST", "/timeblock/users", "", fmt.Sprintf(`{"email":%q}`, email)).want(e.t, 201)
	var u struct {
		ID           string `json:"id"`
		SessionToken string `json:"sessionToken"`
	}
	if err := json.Unmarshal(r.Data, &u); err != nil {
		e.t.Fatal(err)
	}
	if card != "" {
		e.call("POST", "/api/billing/setup-intent", u.SessionToken, fmt.Sprintf(`{"paymentMethod":%q}`, card)).want(e.t, 200)
	}
	return u.ID, u.SessionToken
}

var subsHTTPIDs struct {
	mu sync.Mutex
	n  int
}

func subsHTTPID() string {
	subsHTTPIDs.mu.Lock()
	defer subsHTTPIDs.mu.Unlock()
	subsHTTPIDs.n++
	return fmt.Sprintf("b0b5c0de-0000-4000-8000-%012d", subsHTTPIDs.n)
}

// pool upserts a pool selling asia 80, europe 96, americas 120.50.
func (e *subsHTTP) pool(slug, status string, slots int, manual bool) *accounts.Pool {
	e.t.Helper()
	p := &accounts.Pool{
		ID: subsHTTPID(), Slug: slug, ModelID: "model-" + slug, ModelName: "Model " + slug, Description: "the " + slug + " pool",
		Status: status, Slots: slots, ManualProvisioning: manual, MaxOutputTokens: 4096,
		BlockPrices:    map[accounts.Block]string{accounts.BlockAsia: "80", accounts.BlockEurope: "96", accounts.BlockAmericas: "120.50"},
		AnnualDiscount: "0.2", UpdatedAt: e.clock(),
	}
	if err := e.st.Update(e.ctx, func(tx accounts.Tx) error { return tx.UpsertPool(p) }); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// session opens a new session for the user through the operator endpoint.
func (e *subsHTTP) session(userID string) string {
	e.t.Helper()
	r := e.serve(e.op, "POST", "/timeblock/users/"+userID+"/sessions", "", "").want(e.t, 201)
	var v struct {
		SessionToken string `json:"sessionToken"`
	}
	if err := json.Unmarshal(r.Data, &v); err != nil || v.SessionToken == "" {
		e.t.Fatalf("session %s: %v", r.Data, err)
	}
	return v.SessionToken
}
