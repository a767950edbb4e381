package api_test

// An HTTP test environment for the key endpoints: the /api handler and the
// operator handler on one service and store, with a clock the test moves.

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

type keysHTTP struct {
	t   *testing.T
	ctx context.Context
	st  accounts.Store
	svc *accounts.Service
	api http.Handler
	op  http.Handler

	mu  sync.Mutex
	now time.Time
}

// keysHTTPStart is inside the europe block (08-15 UTC).
var keysHTTPStart = time.Date(2031, 3, 10, 10, 30, 0, 0, time.UTC)

func newKeysHTTP(t *testing.T, st accounts.Store, maxBody int64) *keysHTTP {
	t.Helper()
	e := &keysHTTP{t: t, ctx: context.Background(), st: st, now: keysHTTPStart}
	svc, err := accounts.NewService(accounts.Config{Store: st, Secret: "http test secret", TermsVersion: "2031-01", Now: e.clockNow})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.api = api.New(svc, api.Options{MaxBody: maxBody})
	e.op = api.NewOperator(svc, api.Options{MaxBody: maxBody})
	return e
}

func (e *keysHTTP) clockNow() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *keysHTTP) advance(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = e.now.Add(d)
}

// keysReply is a decoded envelope.
type keysReply struct {
	Status  int
	Header  http.Header
	Success bool            `json:"success"`
	Data    json.RawMessage `json:"data"`
	Error   string          `json:"error"`
}

func (e *keysHTTP) serve(h http.Handler, method, path, token, body string) *keysReply {
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
	r := &keysReply{Status: rec.Code, Header: rec.Header()}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		e.t.Fatalf("%s %s: Content-Type %q, body %s", method, path, ct, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), r); err != nil {
		e.t.Fatalf("%s %s: body is not an envelope: %v: %s", method, path, err, rec.Body)
	}
	if r.Success != (r.Status < 300) {
		e.t.Errorf("%s %s: status %d with success %v", method, path, r.Status, r.Success)
	}
	if !r.Success && r.Error == "" {
		e.t.Errorf("%s %s: failure without an error string", method, path)
	}
	return r
}

// call makes an /api request with a bearer token.
func (e *keysHTTP) call(method, path, token, body string) *keysReply {
	e.t.Helper()
	return e.serve(e.api, method, path, token, body)
}

// operator makes an operator-endpoint request.
func (e *keysHTTP) operator(method, path, body string) *keysReply {
	e.t.Helper()
	return e.serve(e.op, method, path, "", body)
}

// want checks the status and, for failures, fragments of the error.
func (r *keysReply) want(t *testing.T, status int, fragments ...string) *keysReply {
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
func (r *keysReply) object(t *testing.T, fields ...string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Data, &m); err != nil {
		t.Fatalf("data %s is not an object: %v", r.Data, err)
	}
	keysHaveFields(t, m, fields...)
	return m
}

// array decodes data as an array of objects.
func (r *keysReply) array(t *testing.T) []map[string]any {
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

// keysHaveFields checks that m has exactly the given keys.
func keysHaveFields(t *testing.T, m map[string]any, fields ...string) {
	t.Helper()
	var got []string
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

// keysTime parses an ISO 8601 timestamp field.
func keysTime(t *testing.T, v any) time.Time {
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

// newUser creates a user through the operator endpoint.
func (e *keysHTTP) newUser(email string) (id, session string) {
	e.t.Helper()
	m := e.operator("POST", "/timeblock/users", fmt.Sprintf(`{"email":%q}`, email)).want(e.t, 201).object(e.t, "id", "email", "sessionToken")
	return m["id"].(string), m["sessionToken"].(string)
}

var keysHTTPIDs struct {
	mu sync.Mutex
	n  int
}

func keysHTTPID() string {
	keysHTTPIDs.mu.Lock()
	defer keysHTTPIDs.mu.Unlock()
	keysHTTPIDs.n++
	return fmt.Sprintf("a11ce000-0000-4000-8000-%012d", keysHTTPIDs.n)
}

// pool upserts an active pool with 10 seats per hour.
func (e *keysHTTP) pool(slug string) *accounts.Pool {
	e.t.Helper()
	p := &accounts.Pool{
		ID: keysHTTPID(), Slug: slug, ModelID: "model-" + slug, ModelName: "Model " + slug, Status: accounts.PoolActive, Slots: 10,
		BlockPrices:    map[accounts.Block]string{accounts.BlockAsia: "80", accounts.BlockEurope: "96", accounts.BlockAmericas: "120"},
		AnnualDiscount: "0.15", UpdatedAt: e.clockNow(),
	}
	if err := e.st.Update(e.ctx, func(tx accounts.Tx) error { return tx.UpsertPool(p) }); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// sub creates a subscription straight in the store, on the lowest free seats.
func (e *keysHTTP) sub(userID string, p *accounts.Pool, status string, quantity int, blocks ...accounts.Block) *accounts.Subscription {
	e.t.Helper()
	now := e.clockNow()
	s := &accounts.Subscription{
		ID: keysHTTPID(), UserID: userID, PoolID: p.ID, Status: status, Blocks: blocks, Quantity: quantity,
		BillingCycle: accounts.CycleMonth, MonthlyPrice: "96", CurrentPeriodStart: now, CurrentPeriodEnd: now.AddDate(0, 1, 0),
		AckVia: "api", CreatedAt: now, UpdatedAt: now,
	}
	e.advance(time.Millisecond)
	err := e.st.Update(e.ctx, func(tx accounts.Tx) error {
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
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}
