package api_test

// An HTTP test environment for the account endpoints: the /api handler and
// the operator handler on one service and store, the test processor, and a
// clock the test moves; request helpers that check every answer is an
// envelope, and shortcuts that seed users, pools and subscriptions.

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
	"github.com/timeblock/timeblock/accounts/billing"
)

type httpEnv struct {
	t    *testing.T
	ctx  context.Context
	st   accounts.Store
	svc  *accounts.Service
	proc *billing.TestProcessor
	api  http.Handler
	op   http.Handler

	mu  sync.Mutex
	now time.Time
}

// envStart is 2034-06-12 09:00 UTC, inside the europe block (08-15 UTC).
var envStart = time.Date(2034, 6, 12, 9, 0, 0, 0, time.UTC)

// envTerms is the service's purchase-terms version.
const envTerms = "2034-06"

func newHTTPEnv(t *testing.T, st accounts.Store, maxBody int64) *httpEnv {
	t.Helper()
	e := &httpEnv{t: t, ctx: context.Background(), st: st, now: envStart, proc: billing.NewTestProcessor()}
	svc, err := accounts.NewService(accounts.Config{
		Store: st, Secret: "account http test secret", TermsVersion: envTerms,
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

func (e *httpEnv) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *httpEnv) setClock(t time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = t
}

func (e *httpEnv) advance(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = e.now.Add(d)
}

// reply is a decoded envelope.
type reply struct {
	Status  int
	Success bool            `json:"success"`
	Data    json.RawMessage `json:"data"`
	Error   string          `json:"error"`
}

// serve makes a request of h and checks that the answer is a consistent
// envelope and not a server error.
func (e *httpEnv) serve(h http.Handler, method, path, token, body string) *reply {
	e.t.Helper()
	var req *http.Request
	if body == "" {
		req = httptest.NewRequest(method, path, nil)
	} else {
		req = httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	r := &reply{Status: rec.Code}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		e.t.Fatalf("%s %s: Content-Type %q, body %s", method, path, ct, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), r); err != nil {
		e.t.Fatalf("%s %s: body is not an envelope: %v: %s", method, path, err, rec.Body)
	}
	if r.Success != (r.Status < 300) {
		e.t.Errorf("%s %s: status %d with success %v, error %q", method, path, r.Status, r.Success, r.Error)
	}
	if !r.Success && r.Error == "" {
		e.t.Errorf("%s %s: status %d, failure without an error string", method, path, r.Status)
	}
	if r.Status >= 500 {
		e.t.Errorf("%s %s: %d %s", method, path, r.Status, r.Error)
	}
	return r
}

// call makes an /api request with a bearer token.
func (e *httpEnv) call(method, path, token, body string) *reply {
	e.t.Helper()
	return e.serve(e.api, method, path, token, body)
}

// operator makes an operator-endpoint request.
func (e *httpEnv) operator(method, path, body string) *reply {
	e.t.Helper()
	return e.serve(e.op, method, path, "", body)
}

// want checks the status and, for failures, fragments of the error.
func (r *reply) want(t *testing.T, status int, fragments ...string) *reply {
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

// object decodes data as one JSON object and checks it has exactly fields.
func (r *reply) object(t *testing.T, fields ...string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Data, &m); err != nil {
		t.Fatalf("data %s is not an object: %v", r.Data, err)
	}
	exactFields(t, m, fields...)
	return m
}

// array decodes data as an array of objects (never null).
func (r *reply) array(t *testing.T) []map[string]any {
	t.Helper()
	var a []map[string]any
	if err := json.Unmarshal(r.Data, &a); err != nil {
		t.Fatalf("data %s is not an array of objects: %v", r.Data, err)
	}
	if a == nil {
		t.Fatalf("data is %s, want an array", r.Data)
	}
	return a
}

// exactFields checks that m has exactly the given keys.
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

// asTime parses an ISO 8601 timestamp field.
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
func (e *httpEnv) user(email, card string) (id, token string) {
	e.t.Helper()
	m := e.operator("POST", "/timeblock/users", fmt.Sprintf(`{"email":%q}`, email)).want(e.t, 201).object(e.t, "id", "email", "sessionToken")
	id, token = m["id"].(string), m["sessionToken"].(string)
	if card != "" {
		e.call("POST", "/api/billing/setup-intent", token, fmt.Sprintf(`{"paymentMethod":%q}`, card)).want(e.t, 200)
	}
	return id, token
}

// session opens a new session for the user through the operator endpoint.
func (e *httpEnv) session(userID string) string {
	e.t.Helper()
	m := e.operator("POST", "/timeblock/users/"+userID+"/sessions", "").want(e.t, 201).object(e.t, "sessionToken")
	token, _ := m["sessionToken"].(string)
	if token == "" {
		e.t.Fatalf("session %v", m)
	}
	return token
}

var envIDs struct {
	mu sync.Mutex
	n  int
}

// envID returns a fresh UUID-shaped id.
func envID() string {
	envIDs.mu.Lock()
	defer envIDs.mu.Unlock()
	envIDs.n++
	return fmt.Sprintf("b0b5c0de-0000-4000-8000-%012d", envIDs.n)
}

// pool upserts a pool selling asia 80, europe 96, americas 120.50.
func (e *httpEnv) pool(slug, status string, slots int, manual bool) *accounts.Pool {
	e.t.Helper()
	p := &accounts.Pool{
		ID: envID(), Slug: slug, ModelID: "model-" + slug, ModelName: "Model " + slug, Description: "the " + slug + " pool",
		Status: status, Slots: slots, ManualProvisioning: manual, MaxOutputTokens: 4096,
		BlockPrices:    map[accounts.Block]string{accounts.BlockAsia: "80", accounts.BlockEurope: "96", accounts.BlockAmericas: "120.50"},
		AnnualDiscount: "0.2", UpdatedAt: e.clock(),
	}
	e.update(func(tx accounts.Tx) error { return tx.UpsertPool(p) })
	return p
}

// sub creates a subscription straight in the store, on the lowest free seats.
func (e *httpEnv) sub(userID string, p *accounts.Pool, status string, quantity int, blocks ...accounts.Block) *accounts.Subscription {
	e.t.Helper()
	now := e.clock()
	s := &accounts.Subscription{
		ID: envID(), UserID: userID, PoolID: p.ID, Status: status, Blocks: blocks, Quantity: quantity,
		BillingCycle: accounts.CycleMonth, MonthlyPrice: "96", CurrentPeriodStart: now, CurrentPeriodEnd: now.AddDate(0, 1, 0),
		AckVia: "api", CreatedAt: now, UpdatedAt: now,
	}
	e.advance(time.Millisecond)
	e.update(func(tx accounts.Tx) error {
		taken, err := tx.TakenSeats(p.ID)
		if err != nil {
			return err
		}
		s.Seats = nil
		for _, h := range accounts.MaskOf(blocks).Hours() {
			for n, idx := 0, 0; n < quantity; idx++ {
				if _, ok := taken[accounts.Seat{Hour: h, SlotIndex: idx}]; !ok {
					s.Seats = append(s.Seats, accounts.Seat{Hour: h, SlotIndex: idx})
					n++
				}
			}
		}
		return tx.CreateSubscription(s)
	})
	return s
}

func (e *httpEnv) update(fn func(tx accounts.Tx) error) {
	e.t.Helper()
	if err := e.st.Update(e.ctx, fn); err != nil {
		e.t.Fatal(err)
	}
}
