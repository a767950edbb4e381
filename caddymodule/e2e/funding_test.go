package e2e_test

// End-to-end tests of funding pools (accounts/funding.go, SPEC.md section 7,
// issue 28): buyers pledge seats on a pool in funding through the account
// API, the pool moves to activating by itself when the pledges reach its
// goal, the operator makes it active through Caddy's admin API, and every
// pledge is charged exactly once, off-session — counted at the processor
// (the built-in test processor's ledger in the store, or the PaymentIntents
// of a stateful fake Stripe), never from Timeblock's own word. A declined
// pledge is released at once (canceled, its seats free, nothing charged)
// and its owner can then buy like anyone; a pool past its
// deadline below its goal goes back to draft with its pledges released;
// a paused pool sells nothing while its keys keep serving; a reload with
// the Caddyfile still saying funding does not undo an activation; a node
// killed half-way through an activation is finished by its restart
// without charging anyone twice. On the embedded store and on PostgreSQL
// (two nodes sharing it: the activation runs once).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
	"github.com/timeblock/timeblock/accounts/embedded"
	"github.com/timeblock/timeblock/accounts/postgres"
	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

const fundingSecret = "TIMEBLOCK_SECRET=funding-e2e-secret-0123456789"

// fundingCaddyfile: pool "fund" (funding, goal %GOAL% a month, seats in the
// block holding the current UTC hour at 40 a month each) and, when
// %SOON% is set, pool "soon" (funding, a goal out of reach, a deadline a
// few seconds ahead) and pool "spare" (funding, a goal out of reach, for
// the operator's moves). Every /v1/* and /compat/v1/* path goes through the
// gate to the simulator. A short grace period and lifecycle interval make
// the past-due path and the funding passes run within the test.
const fundingCaddyfile = `{
	timeblock {
		%STORE%
		secret {$TIMEBLOCK_SECRET}
		%BILLING%
		grace_period %GRACE%
		lifecycle_interval 500ms
		pool fund {
			model m-fund
			slots 10
			block %NOW% 40
			status funding
			funding_goal %GOAL%
		}
%SOON%
	}
}

:{{.HTTP}} {
	handle /api/* {
		timeblock_accounts
	}
	@inference path /v1/* /compat/v1/*
	handle @inference {
		timeblock_gate
		timeblock_translate chat
		reverse_proxy 127.0.0.1:{{.Upstream}}
	}
}

:{{.Upstream}} {
	timeblock_simulator
}
`

const fundingSoonPool = `		pool soon {
			model m-soon
			slots 10
			block %NOW% 40
			status funding
			funding_goal 1000
			funding_deadline %DEADLINE%
		}
		pool spare {
			model m-spare
			slots 10
			block %NOW% 40
			status funding
			funding_goal 1000
		}`

type fundingOpts struct {
	store    string    // a store line; default the embedded store in Caddy's data dir
	billing  string    // a billing block; default the built-in test processor
	goal     string    // fund's goal; default 150
	grace    string    // grace_period; default 6s
	deadline time.Time // soon's deadline; zero: no pool soon
}

// fundingNow is the block holding the current UTC hour; the test skips
// when that block ends too soon for the test to finish inside it.
func fundingNow(t *testing.T) string {
	t.Helper()
	now := time.Now().UTC()
	if left := now.Truncate(8 * time.Hour).Add(8 * time.Hour).Sub(now); left < 5*time.Minute {
		t.Skipf("too close to the end of the %s block (%v left); the pledged hours would close mid-test", blockNames[now.Hour()/8], left)
	}
	return blockNames[now.Hour()/8]
}

func fundingConfig(t *testing.T, o fundingOpts) string {
	t.Helper()
	if o.goal == "" {
		o.goal = "150"
	}
	if o.grace == "" {
		o.grace = "6s"
	}
	soon := ""
	if !o.deadline.IsZero() {
		soon = strings.ReplaceAll(fundingSoonPool, "%DEADLINE%", o.deadline.UTC().Format(time.RFC3339))
	}
	return strings.NewReplacer(
		"%STORE%", o.store,
		"%BILLING%", o.billing,
		"%GOAL%", o.goal,
		"%GRACE%", o.grace,
		"%SOON%", soon,
	).Replace(fundingCaddyfile) // %NOW%: fillNow
}

// fillNow puts the current block into a rendered config.
func fillNow(cfg, block string) string { return strings.ReplaceAll(cfg, "%NOW%", block) }

// fundReq sends a JSON request (body a string is sent as is) and returns
// the status and the envelope.
func fundReq(t *testing.T, method, url, token string, body any, hdr map[string]string) (int, gjson.Result) {
	t.Helper()
	code, env, _ := fundReqH(t, method, url, token, body, hdr)
	return code, env
}

// fundReqH is fundReq that also returns the response headers.
func fundReqH(t *testing.T, method, url, token string, body any, hdr map[string]string) (int, gjson.Result, http.Header) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := jsonMarshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = strings.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, gjson.ParseBytes(b), resp.Header
}

func jsonMarshal(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// funder is one buyer of the account API.
type funder struct {
	name  string
	id    string
	token string
	c     *e2e.Caddy // the node this buyer talks to

	pledges int // made with mustPledge, for distinct Idempotency-Keys
}

var funderSeq int

// newFunder creates a user through the operator endpoint of c and saves
// card ("" saves none) with the test processor's tokens or a Stripe pm_ id.
func newFunder(t *testing.T, c *e2e.Caddy, name, card string) *funder {
	t.Helper()
	funderSeq++
	email := fmt.Sprintf("fund-%s-%d-%d@example.com", name, time.Now().UnixNano(), funderSeq)
	code, env := fundReq(t, http.MethodPost, c.AdminURL()+"/timeblock/users", "", map[string]any{"email": email}, nil)
	if code != http.StatusCreated {
		t.Fatalf("creating user %s: %d %s", name, code, env.Raw)
	}
	f := &funder{name: name, id: env.Get("data.id").Str, token: env.Get("data.sessionToken").Str, c: c}
	if f.id == "" || f.token == "" {
		t.Fatalf("creating user %s: no id or session token in %s", name, env.Raw)
	}
	if card != "" {
		f.must(t, http.MethodPost, "/api/billing/setup-intent", map[string]any{"paymentMethod": card}, http.StatusOK)
	}
	return f
}

func (f *funder) do(t *testing.T, method, path string, body any, hdr map[string]string) (int, gjson.Result) {
	t.Helper()
	return fundReq(t, method, f.c.URL()+path, f.token, body, hdr)
}

// must calls the account API and returns data; another status fails.
func (f *funder) must(t *testing.T, method, path string, body any, want int) gjson.Result {
	t.Helper()
	code, env := f.do(t, method, path, body, nil)
	if code != want {
		t.Fatalf("%s: %s %s: %d, want %d\n%s", f.name, method, path, code, want, env.Raw)
	}
	return env.Get("data")
}

// pledge subscribes one seat of pool in block with an Idempotency-Key.
func (f *funder) pledge(t *testing.T, pool, block, idem string) (int, gjson.Result) {
	t.Helper()
	return f.do(t, http.MethodPost, "/api/pools/"+pool+"/subscribe",
		map[string]any{"blocks": []string{block}, "quantity": 1}, map[string]string{"Idempotency-Key": idem})
}

// mustPledge pledges and checks the answer of a pledge: 201, pledged, no
// key, nothing charged, the first period due at activation.
func (f *funder) mustPledge(t *testing.T, pool, block string) gjson.Result {
	t.Helper()
	f.pledges++
	idem := "pledge-" + f.name + "-" + pool
	if f.pledges > 1 {
		idem += "-" + strconv.Itoa(f.pledges)
	}
	code, env := f.pledge(t, pool, block, idem)
	d := env.Get("data")
	if code != http.StatusCreated || d.Get("status").Str != "pledged" || d.Get("key").Type != gjson.Null ||
		d.Get("amountCharged").Str != "0" || d.Get("id").Str == "" {
		t.Fatalf("%s pledges on %s: %d %s\nwant 201, status pledged, key null, amountCharged \"0\"", f.name, pool, code, env.Raw)
	}
	if d.Get("amountDue").Str != d.Get("monthlyPrice").Str || d.Get("monthlyPrice").Str == "" {
		t.Errorf("%s pledges on %s: amountDue %q, monthlyPrice %q: a monthly pledge is due its first month at activation",
			f.name, pool, d.Get("amountDue").Str, d.Get("monthlyPrice").Str)
	}
	return d
}

// sub is the user's subscription id as GET /api/subscriptions shows it.
func (f *funder) sub(t *testing.T, id string) gjson.Result {
	t.Helper()
	for _, s := range f.must(t, http.MethodGet, "/api/subscriptions", nil, http.StatusOK).Array() {
		if s.Get("id").Str == id {
			return s
		}
	}
	t.Fatalf("%s: subscription %s is not in GET /api/subscriptions", f.name, id)
	return gjson.Result{}
}

// waitStatus waits until the user's subscription id has status.
func (f *funder) waitStatus(t *testing.T, id, status string, within time.Duration) gjson.Result {
	t.Helper()
	var s gjson.Result
	eventually(t, within, f.name+"'s subscription "+status, func() error {
		s = f.sub(t, id)
		if s.Get("status").Str != status {
			return fmt.Errorf("status %s", s.Get("status").Str)
		}
		return nil
	})
	return s
}

// createKey makes the consumption key of a subscription: 201 and the key,
// or the refusal.
func (f *funder) createKey(t *testing.T, subID string) (int, gjson.Result) {
	t.Helper()
	return f.do(t, http.MethodPost, "/api/keys/subscription", map[string]any{"subscriptionId": subID}, nil)
}

func (f *funder) mustKey(t *testing.T, subID string) string {
	t.Helper()
	code, env := f.createKey(t, subID)
	if code != http.StatusCreated || env.Get("data.apiKey").Str == "" {
		t.Fatalf("%s: creating the key of %s: %d %s", f.name, subID, code, env.Raw)
	}
	return env.Get("data.apiKey").Str
}

// poolRow is pool slug in GET /api/pools (listed false when absent).
func poolRow(t *testing.T, f *funder, slug string) (row gjson.Result, listed bool) {
	t.Helper()
	for _, p := range f.must(t, http.MethodGet, "/api/pools", nil, http.StatusOK).Array() {
		if p.Get("slug").Str == slug {
			return p, true
		}
	}
	return gjson.Result{}, false
}

// setStatus calls POST /timeblock/pools/{slug}/status with a raw body.
func setStatus(t *testing.T, c *e2e.Caddy, slug, body string) (int, gjson.Result) {
	t.Helper()
	return fundReq(t, http.MethodPost, c.AdminURL()+"/timeblock/pools/"+slug+"/status", "", body, nil)
}

// takenNow counts the taken seats of pool in the current UTC hour.
func takenNow(t *testing.T, f *funder, pool string) int {
	t.Helper()
	d := f.must(t, http.MethodGet, "/api/pools/"+pool, nil, http.StatusOK)
	n, hour := 0, time.Now().UTC().Hour()
	for _, s := range d.Get("hourSlots").Array() {
		if int(s.Get("hour").Int()) == hour && s.Get("status").Str == "taken" {
			n++
		}
	}
	return n
}

// metricSum is a series summed over nodes.
func metricSum(t *testing.T, series string, nodes ...*e2e.Caddy) float64 {
	t.Helper()
	sum := 0.0
	for _, c := range nodes {
		sum += metricValue(t, c, series)
	}
	return sum
}

// logCount counts the log lines of the nodes holding every part.
func logCount(nodes []*e2e.Caddy, parts ...string) int {
	n := 0
	for _, c := range nodes {
	line:
		for l := range strings.SplitSeq(c.Logs(), "\n") {
			for _, p := range parts {
				if !strings.Contains(l, p) {
					continue line
				}
			}
			n++
		}
	}
	return n
}

// ledgerCharges reads the built-in test processor's ledger: what the
// processor was asked to charge, as it recorded it.
func ledgerCharges(t *testing.T, st accounts.Store) []*billing.TestCharge {
	t.Helper()
	var out []*billing.TestCharge
	err := st.View(context.Background(), func(tx accounts.Tx) error {
		var err error
		out, err = tx.(accounts.TestLedgerTx).ListTestCharges()
		return err
	})
	if err != nil {
		t.Fatalf("reading the test processor's ledger: %v", err)
	}
	return out
}

// paid counts the ledger's charges that went through and were kept:
// by idempotency key and by user.
func paid(ledger []*billing.TestCharge) (byKey, byUser map[string]int) {
	byKey, byUser = map[string]int{}, map[string]int{}
	for _, c := range ledger {
		if c.Declined || c.Refunded {
			continue
		}
		byKey[c.IdempotencyKey]++
		byUser[c.UserID]++
	}
	return byKey, byUser
}

func openPG(t *testing.T, dsn string) accounts.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("opening the test database: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func openEmbedded(t *testing.T, path string) accounts.Store {
	t.Helper()
	st, err := embedded.Open(path)
	if err != nil {
		t.Fatalf("opening the store file (is caddy still running?): %v", err)
	}
	return st
}

// TestFundingPools is the journey of a funding pool on each store, with the
// built-in test processor: pledges, a withdrawal, the goal reached, refused
// operator moves, activation charging each pledge once, declines (both
// released at once; one owner then buys with a new card),
// the deadline of another pool, pause, and a reload. On PostgreSQL two
// nodes share the database, both run the funding passes, and the buyers
// use both.
func TestFundingPools(t *testing.T) {
	for _, store := range []string{"embedded", "postgres"} {
		t.Run(store, func(t *testing.T) { fundingJourney(t, store) })
	}
}

func fundingJourney(t *testing.T, store string) {
	block := fundingNow(t)
	e2e.Binary(t) // built before the deadline is set
	began := time.Now()
	step := func(what string) { t.Logf("%6.2fs %s", time.Since(began).Seconds(), what) }
	var (
		nodes    []*e2e.Caddy
		dsn      string
		pgStore  accounts.Store
		dbPath   = filepath.Join(t.TempDir(), "timeblock.db")
		deadline = time.Now().Add(8 * time.Second).Truncate(time.Second)
		opts     = fundingOpts{deadline: deadline, store: "store embedded {$TIMEBLOCK_DB}"}
	)
	if store == "postgres" {
		dsn = pgtest.DSN(t)
		opts.store = "store postgres {$TIMEBLOCK_DSN}"
	}
	cfg := fillNow(fundingConfig(t, opts), block)
	caddyEnv := e2e.WithEnv(fundingSecret, "TIMEBLOCK_DSN="+dsn, "TIMEBLOCK_DB="+dbPath)
	nodes = append(nodes, e2e.Start(t, cfg, caddyEnv))
	if store == "postgres" {
		nodes = append(nodes, e2e.Start(t, cfg, caddyEnv))
		pgStore = openPG(t, dsn)
	}
	a, b := nodes[0], nodes[len(nodes)-1] // one node twice on the embedded store

	// The deadline pool's pledge first: its deadline is seconds away.
	s := newFunder(t, a, "S", billing.TestCardVisa)
	soonPledge := s.mustPledge(t, "soon", block).Get("id").Str

	step("started")
	// 1. Listing and pledges.
	A := newFunder(t, a, "A", billing.TestCardVisa)
	B := newFunder(t, b, "B", billing.TestCardMastercard)
	W := newFunder(t, a, "W", billing.TestCardVisa)
	E := newFunder(t, b, "E", billing.TestCardVisa)
	D1 := newFunder(t, a, "D1", billing.TestCardDeclined)
	D2 := newFunder(t, b, "D2", billing.TestCardDeclined)
	N := newFunder(t, a, "N", "")

	row, listed := poolRow(t, A, "fund")
	if !listed || row.Get("status").Str != "funding" || row.Get("fundingGoal").Str != "150" || row.Get("fundingPledged").Str != "0" ||
		row.Get("fundingDeadline").Type != gjson.Null || row.Get("pledgedSlots").Type != gjson.Number || row.Get("pledgedSlots").Int() != 0 {
		t.Fatalf("GET /api/pools row of fund (listed %v): %s\nwant status funding, fundingGoal \"150\", fundingPledged \"0\", fundingDeadline null, pledgedSlots 0", listed, row.Raw)
	}
	soonRow, listed := poolRow(t, A, "soon")
	if !listed || soonRow.Get("fundingDeadline").Str == "" {
		t.Fatalf("GET /api/pools row of soon (listed %v): %s", listed, soonRow.Raw)
	}
	if got, err := time.Parse(time.RFC3339, soonRow.Get("fundingDeadline").Str); err != nil || !got.Equal(deadline) {
		t.Errorf("soon's fundingDeadline %s, want %s", soonRow.Get("fundingDeadline").Raw, deadline.UTC().Format(time.RFC3339))
	}

	detail := A.must(t, http.MethodGet, "/api/pools/fund", nil, http.StatusOK)
	if detail.Get("status").Str != "funding" || detail.Get("fundingGoal").Str != "150" || detail.Get("fundingPledged").Str != "0" ||
		detail.Get("pledgedSlots").Type != gjson.Number || detail.Get("fundingDeadline").Type != gjson.Null {
		t.Errorf("GET /api/pools/fund: %s\nwant the funding fields", detail.Raw)
	}

	// No saved card: nothing pledged.
	if code, env := N.pledge(t, "fund", block, "pledge-N"); code != http.StatusBadRequest || !strings.Contains(env.Get("error").Str, "No payment method") {
		t.Errorf("a pledge without a saved card: %d %s, want 400 No payment method", code, env.Raw)
	}

	aPledge := A.mustPledge(t, "fund", block)
	aID := aPledge.Get("id").Str
	// The same Idempotency-Key again: the same pledge, not a second one.
	code, env, hdr := fundReqH(t, http.MethodPost, a.URL()+"/api/pools/fund/subscribe", A.token,
		map[string]any{"blocks": []string{block}, "quantity": 1}, map[string]string{"Idempotency-Key": "pledge-A-fund"})
	if code != http.StatusCreated || hdr.Get("Idempotent-Replayed") != "true" || env.Get("data.id").Str != aID {
		t.Errorf("the pledge repeated with its Idempotency-Key: %d (Idempotent-Replayed %q) %s, want 201, replayed, id %s",
			code, hdr.Get("Idempotent-Replayed"), env.Raw, aID)
	}
	if row, _ := poolRow(t, A, "fund"); row.Get("pledgedSlots").Int() != 8 || row.Get("fundingPledged").Str != "40" {
		t.Errorf("after one pledge of 8 hours at 40: pledgedSlots %d, fundingPledged %q; want 8, \"40\"",
			row.Get("pledgedSlots").Int(), row.Get("fundingPledged").Str)
	}
	// A pledge has no key until its pool is live.
	if code, env := A.createKey(t, aID); code != http.StatusConflict || !strings.Contains(env.Get("error").Str, "pledge") {
		t.Errorf("creating a key for a pledge: %d %s, want 409 saying it is a pledge", code, env.Raw)
	}

	// Nor can it join a combined key.
	if code, env := A.do(t, http.MethodPost, "/api/meta-keys", map[string]any{"pledgeIds": []string{aID}, "label": "early"}, nil); code/100 == 2 {
		t.Errorf("a combined key holding a pledge: %d %s, want a refusal", code, env.Raw)
	}

	// A pledge withdrawn frees its seats at once.
	wID := W.mustPledge(t, "fund", block).Get("id").Str
	if row, _ := poolRow(t, W, "fund"); row.Get("pledgedSlots").Int() != 16 || row.Get("fundingPledged").Str != "80" {
		t.Errorf("after two pledges: pledgedSlots %d, fundingPledged %q; want 16, \"80\"", row.Get("pledgedSlots").Int(), row.Get("fundingPledged").Str)
	}
	taken := takenNow(t, W, "fund")
	wd := W.must(t, http.MethodDelete, "/api/pools/fund/pledge", nil, http.StatusOK)
	if !wd.Get("withdrawn").Bool() || !wd.Get("canceled").Bool() || wd.Get("subscriptionId").Str != wID {
		t.Errorf("DELETE /api/pools/fund/pledge: %s, want withdrawn and canceled, subscriptionId %s", wd.Raw, wID)
	}
	if row, _ := poolRow(t, W, "fund"); row.Get("pledgedSlots").Int() != 8 || row.Get("fundingPledged").Str != "40" {
		t.Errorf("after the withdrawal: pledgedSlots %d, fundingPledged %q; want 8, \"40\"", row.Get("pledgedSlots").Int(), row.Get("fundingPledged").Str)
	}
	if got := takenNow(t, W, "fund"); got != taken-1 {
		t.Errorf("taken seats in this hour %d after the withdrawal, want %d", got, taken-1)
	}
	if ws := W.sub(t, wID); ws.Get("status").Str != "canceled" || len(ws.Get("hours").Array()) != 0 {
		t.Errorf("the withdrawn pledge: %s, want canceled with no hours", ws.Raw)
	}
	if code, env := W.do(t, http.MethodDelete, "/api/pools/fund/pledge", nil, nil); code/100 == 2 && env.Get("data.withdrawn").Bool() {
		t.Errorf("a second withdrawal without a pledge: %d %s", code, env.Raw)
	}

	bID := B.mustPledge(t, "fund", block).Get("id").Str
	d1ID := D1.mustPledge(t, "fund", block).Get("id").Str
	if row, _ := poolRow(t, A, "fund"); row.Get("status").Str != "funding" || row.Get("fundingPledged").Str != "120" {
		t.Fatalf("at 120 of 150: %s, want still funding", row.Raw)
	}
	if v := metricSum(t, `timeblock_pool_pledged_amount{pool="fund"}`, a); v != 120 {
		t.Errorf("timeblock_pool_pledged_amount of fund %v, want 120", v)
	}
	if pgStore != nil {
		if l := ledgerCharges(t, pgStore); len(l) != 0 {
			t.Errorf("pledging charged something: the processor's ledger holds %d charge(s)", len(l))
		}
	}

	step("pledges done")
	// 2. The goal reached: activating by itself.
	d2ID := D2.mustPledge(t, "fund", block).Get("id").Str
	row, _ = poolRow(t, A, "fund")
	if row.Get("status").Str != "activating" || row.Get("fundingPledged").Str != "160" || row.Get("pledgedSlots").Int() != 32 {
		t.Fatalf("at 160 of 150: %s, want activating, fundingPledged 160, pledgedSlots 32", row.Raw)
	}
	eventually(t, 5*time.Second, "the goal logged", func() error {
		if logCount(nodes, "funding goal reached", `"pool":"fund"`) != 1 {
			return fmt.Errorf("%d log lines 'funding goal reached' for fund, want 1", logCount(nodes, "funding goal reached", `"pool":"fund"`))
		}
		return nil
	})
	if v := metricSum(t, `timeblock_pool_status_changes_total{pool="fund",reason="goal reached",to="activating"}`, nodes...); v != 1 {
		t.Errorf("timeblock_pool_status_changes_total for the goal %v, want 1", v)
	}
	if v := metricValue(t, a, `timeblock_pool_pledged_amount{pool="fund"}`); v != 160 {
		t.Errorf("timeblock_pool_pledged_amount of fund %v, want 160", v)
	}
	if v := metricValue(t, b, `timeblock_pool_pledged_slots{pool="fund"}`); v != 32 {
		t.Errorf("timeblock_pool_pledged_slots of fund %v, want 32", v)
	}
	if v := metricValue(t, a, `timeblock_pool_status{pool="fund",status="activating"}`); v != 1 {
		t.Errorf("timeblock_pool_status of fund activating %v, want 1", v)
	}
	// An activating pool still takes pledges.
	eID := E.mustPledge(t, "fund", block).Get("id").Str

	step("goal reached")
	// 5. Refused and malformed operator moves.
	for _, tc := range []struct {
		slug, body string
		code       int
		says       string
	}{
		{"fund", `{"status":"paused"}`, http.StatusConflict, "only an active pool can be paused"},
		{"fund", `{"status":"bogus"}`, http.StatusBadRequest, "status must be one of"},
		{"fund", `{"status":`, http.StatusBadRequest, ""},
		{"fund", `{}`, http.StatusBadRequest, "status is required"},
		{"fund", `{"status":42}`, http.StatusBadRequest, ""},
		{"no-such-pool", `{"status":"active"}`, http.StatusNotFound, "no-such-pool"},
	} {
		code, env := setStatus(t, a, tc.slug, tc.body)
		if code != tc.code || env.Get("error").Str == "" || !strings.Contains(env.Get("error").Str, tc.says) {
			t.Errorf("POST /timeblock/pools/%s/status %s: %d %s, want %d saying %q", tc.slug, tc.body, code, env.Raw, tc.code, tc.says)
		}
	}
	if code, env := fundReq(t, http.MethodGet, a.AdminURL()+"/timeblock/pools/fund/status", "", nil, nil); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /timeblock/pools/fund/status: %d %s, want 405", code, env.Raw)
	}
	if row, _ := poolRow(t, A, "fund"); row.Get("status").Str != "activating" {
		t.Fatalf("after refused moves the pool is %s, want activating", row.Get("status").Str)
	}

	step("refusals done")
	// 3. The operator makes it active: each pledge charged once.
	code, env = setStatus(t, a, "fund", `{"status":"active"}`)
	if code != http.StatusOK || env.Get("data.status").Str != "active" || env.Get("data.previousStatus").Str != "activating" ||
		!env.Get("data.changed").Bool() || env.Get("data.slug").Str != "fund" {
		t.Fatalf("POST status active: %d %s", code, env.Raw)
	}
	// Active again: a no-op.
	if code, env := setStatus(t, b, "fund", `{"status":"active"}`); code != http.StatusOK || env.Get("data.changed").Bool() {
		t.Errorf("POST status active on an active pool: %d %s, want 200 changed false", code, env.Raw)
	}
	activated := time.Now()
	for _, p := range []struct {
		f  *funder
		id string
	}{{A, aID}, {B, bID}, {E, eID}} {
		s := p.f.waitStatus(t, p.id, "active", 10*time.Second)
		if end, err := time.Parse(time.RFC3339, s.Get("currentPeriodEnd").Str); err != nil || end.Before(activated.AddDate(0, 1, -2)) {
			t.Errorf("%s's subscription period ends %s: the period starts at activation", p.f.name, s.Get("currentPeriodEnd").Str)
		}
	}
	D1.waitStatus(t, d1ID, "canceled", 10*time.Second)
	D2.waitStatus(t, d2ID, "canceled", 10*time.Second)
	t.Logf("all pledges settled %v after the activation", time.Since(activated))
	if v := metricSum(t, `timeblock_pool_pledge_charges_total{outcome="paid",pool="fund"}`, nodes...); v != 3 {
		t.Errorf("pledge charges paid (metric, all nodes) %v, want 3", v)
	}
	if v := metricSum(t, `timeblock_pool_pledge_charges_total{outcome="declined",pool="fund"}`, nodes...); v != 2 {
		t.Errorf("pledge charges declined (metric, all nodes) %v, want 2", v)
	}
	if v := metricSum(t, `timeblock_pool_status_changes_total{pool="fund",reason="operator",to="active"}`, nodes...); v != 1 {
		t.Errorf("activations (metric) %v, want 1", v)
	}
	if n := logCount(nodes, "pledge charged: the pool is live", `"pool":"fund"`); n != 3 {
		t.Errorf("%d 'pledge charged' log lines, want 3", n)
	}

	// Keys, and inference in the pledged hours, on both nodes.
	aKey := A.mustKey(t, aID)
	resp, _, err := chatOnce(t, a, aKey, "m-fund")
	if err != nil {
		t.Fatalf("inference with a pledge's key after activation: %v", err)
	}
	if resp.Model != "m-fund" || len(resp.Choices) == 0 {
		t.Errorf("chat answer: model %q, %d choices", resp.Model, len(resp.Choices))
	}
	bKey := B.mustKey(t, bID)
	eventually(t, 5*time.Second, "B's key admitted on its node", func() error {
		client := b.AnthropicClient(bKey)
		_, err := client.Messages.New(ctxT(t), anthropic.MessageNewParams{
			Model: "m-fund", MaxTokens: 2,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
		})
		return err
	})
	if code, env := D1.createKey(t, d1ID); code != http.StatusConflict || !strings.Contains(env.Get("error").Str, "canceled") {
		t.Errorf("a key for a declined pledge: %d %s, want 409 canceled", code, env.Raw)
	}

	step("activated, keys work")
	// 4. The declined pledges were released at once: their seats are free
	// (no grace period), and D1 buys with a working card like anyone.
	for _, d := range []gjson.Result{D1.sub(t, d1ID), D2.sub(t, d2ID)} {
		if len(d.Get("hours").Array()) != 0 {
			t.Errorf("a declined pledge still holds hours: %s", d.Raw)
		}
	}
	if got := takenNow(t, A, "fund"); got != 3 {
		t.Errorf("taken seats in this hour %d, want 3 (A, B, E: the declined pledges released)", got)
	}
	saved := D1.must(t, http.MethodPost, "/api/billing/setup-intent", map[string]any{"paymentMethod": billing.TestCardVisa}, http.StatusOK)
	if rec := saved.Get("recovered").Array(); len(rec) != 0 {
		t.Errorf("saving a working card: recovered %s, want none (the declined pledge was released)", saved.Get("recovered").Raw)
	}
	code, env = D1.pledge(t, "fund", block, "buy-D1")
	if code != http.StatusCreated || env.Get("data.status").Str != "active" || env.Get("data.amountCharged").Str != "40" {
		t.Fatalf("D1 buying after the release: %d %s, want 201 active, charged 40", code, env.Raw)
	}
	d1Buy := env.Get("data.id").Str
	d1Key := D1.mustKey(t, d1Buy)
	if _, _, err := chatOnce(t, a, d1Key, "m-fund"); err != nil {
		t.Errorf("inference with D1's new purchase's key: %v", err)
	}
	if got := takenNow(t, A, "fund"); got != 4 {
		t.Errorf("taken seats in this hour %d, want 4 (A, B, E, D1)", got)
	}

	step("declined pledges released")
	// 8. The deadline: soon goes back to draft, its pledge released.
	eventually(t, time.Until(deadline)+10*time.Second, "soon back to draft after its deadline", func() error {
		if code, env := s.do(t, http.MethodGet, "/api/pools/soon", nil, nil); code != http.StatusNotFound {
			return fmt.Errorf("GET /api/pools/soon: %d %s", code, env.Get("data.status").Str)
		}
		return nil
	})
	if time.Now().Before(deadline) {
		t.Errorf("soon left funding before its deadline %s", deadline)
	}
	if _, listed := poolRow(t, s, "soon"); listed {
		t.Error("a draft pool is listed in GET /api/pools")
	}
	if ss := s.waitStatus(t, soonPledge, "canceled", 5*time.Second); len(ss.Get("hours").Array()) != 0 {
		t.Errorf("the released pledge still holds hours: %s", ss.Raw)
	}
	if n := logCount(nodes, "funding deadline passed", `"pool":"soon"`); n != 1 {
		t.Errorf("%d 'funding deadline passed' log lines for soon, want 1", n)
	}
	if code, env := s.pledge(t, "soon", block, "pledge-S-again"); code != http.StatusNotFound && code != http.StatusConflict {
		t.Errorf("pledging on a draft pool: %d %s, want 404 or 409", code, env.Raw)
	}

	step("deadline done")
	// The operator's moves of a pool below its goal: funding → activating
	// → funding → draft releases its pledge, nothing charged; draft →
	// funding reopens it, empty.
	X := newFunder(t, b, "X", billing.TestCardVisa)
	xID := X.mustPledge(t, "spare", block).Get("id").Str
	for _, mv := range []struct{ to, from string }{{"activating", "funding"}, {"funding", "activating"}, {"draft", "funding"}} {
		code, env := setStatus(t, a, "spare", `{"status":"`+mv.to+`"}`)
		if code != http.StatusOK || env.Get("data.status").Str != mv.to || env.Get("data.previousStatus").Str != mv.from {
			t.Fatalf("POST spare status %s: %d %s, want 200 from %s", mv.to, code, env.Raw, mv.from)
		}
	}
	if xs := X.waitStatus(t, xID, "canceled", 5*time.Second); len(xs.Get("hours").Array()) != 0 {
		t.Errorf("the pledge released by draft still holds hours: %s", xs.Raw)
	}
	if code, _ := X.do(t, http.MethodGet, "/api/pools/spare", nil, nil); code != http.StatusNotFound {
		t.Errorf("GET /api/pools/spare on a draft pool: %d, want 404", code)
	}
	if code, env := setStatus(t, a, "spare", `{"status":"paused"}`); code != http.StatusConflict || !strings.Contains(env.Get("error").Str, "only an active pool") {
		t.Errorf("POST spare status paused from draft: %d %s, want 409", code, env.Raw)
	}
	if code, env := setStatus(t, a, "spare", `{"status":"funding"}`); code != http.StatusOK || env.Get("data.pledgedSlots").Int() != 0 || env.Get("data.fundingPledged").Str != "0" {
		t.Errorf("reopening spare for pledges: %d %s, want 200 with nothing pledged", code, env.Raw)
	}
	if row, listed := poolRow(t, X, "spare"); !listed || row.Get("status").Str != "funding" {
		t.Errorf("spare reopened: listed %v %s", listed, row.Raw)
	}

	step("operator moves of spare done")
	// 6. Paused: no sales, keys keep serving.
	if code, env := setStatus(t, a, "fund", `{"status":"paused"}`); code != http.StatusOK || env.Get("data.status").Str != "paused" {
		t.Fatalf("POST status paused: %d %s", code, env.Raw)
	}
	P := newFunder(t, b, "P", billing.TestCardVisa)
	if code, env := P.pledge(t, "fund", block, "buy-P-paused"); code != http.StatusConflict || !strings.Contains(env.Get("error").Str, "paused") {
		t.Errorf("buying on a paused pool: %d %s, want 409 saying paused", code, env.Raw)
	}
	if row, listed := poolRow(t, P, "fund"); !listed || row.Get("status").Str != "paused" {
		t.Errorf("a paused pool in GET /api/pools: listed %v, %s", listed, row.Raw)
	}
	for _, c := range nodes {
		if _, _, err := chatOnce(t, c, aKey, "m-fund"); err != nil {
			t.Errorf("inference with an existing key on a paused pool (%s): %v", c.URL(), err)
		}
	}
	if code, env := setStatus(t, a, "fund", `{"status":"draft"}`); code != http.StatusConflict || !strings.Contains(env.Get("error").Str, "live subscription") {
		t.Errorf("POST status draft on a paused pool with live subscriptions: %d %s, want 409", code, env.Raw)
	}
	if code, env := setStatus(t, a, "fund", `{"status":"active"}`); code != http.StatusOK || env.Get("data.previousStatus").Str != "paused" {
		t.Fatalf("resuming (paused → active): %d %s", code, env.Raw)
	}
	code, env = P.pledge(t, "fund", block, "buy-P-resumed")
	if code != http.StatusCreated || env.Get("data.status").Str != "active" || env.Get("data.amountCharged").Str != "40" {
		t.Fatalf("buying on the resumed pool: %d %s, want 201 active, charged 40", code, env.Raw)
	}
	pID := env.Get("data.id").Str

	step("pause done")
	// 7. A reload with the Caddyfile still saying funding keeps the pool
	// active (and soon draft). Caddy skips a reload whose config is
	// unchanged, so this one changes the lifecycle interval.
	// It also lowers spare's goal under what is pledged on it now: the
	// next funding pass finds the goal reached.
	x2ID := X.mustPledge(t, "spare", block).Get("id").Str
	reloaded := strings.Replace(cfg, "lifecycle_interval 500ms", "lifecycle_interval 400ms", 1)
	reloaded = strings.Replace(reloaded, "model m-spare\n\t\t\tslots 10\n\t\t\tblock "+block+" 40\n\t\t\tstatus funding\n\t\t\tfunding_goal 1000",
		"model m-spare\n\t\t\tslots 10\n\t\t\tblock "+block+" 40\n\t\t\tstatus funding\n\t\t\tfunding_goal 40", 1)
	if !strings.Contains(reloaded, "lifecycle_interval 400ms") || !strings.Contains(reloaded, "funding_goal 40\n") {
		t.Fatalf("the reload's config did not change as meant:\n%s", reloaded)
	}
	if err := a.Reload(reloaded); err != nil {
		t.Fatal(err)
	}
	if row, _ := poolRow(t, A, "fund"); row.Get("status").Str != "active" {
		t.Errorf("after a reload with status funding in the Caddyfile the pool is %s, want active", row.Get("status").Str)
	}
	if code, _ := s.do(t, http.MethodGet, "/api/pools/soon", nil, nil); code != http.StatusNotFound {
		t.Errorf("after a reload the expired pool soon answers %d, want 404 (still draft)", code)
	}
	if n := logCount(nodes[:1], "pool keeps its status from the store", `"pool":"fund"`, `"status":"active"`, `"caddyfile_status":"funding"`); n != 1 {
		t.Errorf("%d log lines saying fund kept its status at the reload, want 1", n)
	}
	if n := logCount(nodes[:1], "pool keeps its status from the store", `"pool":"soon"`, `"status":"draft"`); n != 1 {
		t.Errorf("%d log lines saying soon kept its status at the reload, want 1", n)
	}
	if _, _, err := chatOnce(t, a, aKey, "m-fund"); err != nil {
		t.Errorf("inference after the reload: %v", err)
	}
	eventually(t, 5*time.Second, "spare activating once its lowered goal is met", func() error {
		if row, _ := poolRow(t, X, "spare"); row.Get("status").Str != "activating" || row.Get("fundingGoal").Str != "40" {
			return fmt.Errorf("spare: %s", row.Raw)
		}
		return nil
	})
	X.waitStatus(t, x2ID, "pledged", time.Second)
	A.waitStatus(t, aID, "active", time.Second)

	step("reload done")
	// The notices (logged without SMTP): each pledger and the operator told.
	eventually(t, 5*time.Second, "the funding notices", func() error {
		for _, n := range []struct{ kind, sub string }{
			{"pledge recorded", aID}, {"pledge recorded", eID},
			{"pledge released", wID}, {"pledge released", soonPledge}, {"pledge released", xID},
			{"pool live and charged", aID}, {"pool live and charged", bID}, {"pool live and charged", eID},
			{"charge failed", d1ID}, {"charge failed", d2ID},
		} {
			if got := logCount(nodes, `"notice: `+n.kind+`"`, `"subscription_id":"`+n.sub+`"`); got != 1 {
				return fmt.Errorf("%d notices %q for %s, want 1", got, n.kind, n.sub)
			}
		}
		if got := logCount(nodes, `"notice: goal reached"`, `"to":"operator"`, `"pool":"fund"`); got != 1 {
			return fmt.Errorf("%d goal-reached notices to the operator, want 1", got)
		}
		return nil
	})

	// Several funding passes later, the processor's ledger: each pledge
	// charged exactly once, nothing for a withdrawn, released or lost
	// pledge, nothing at pledge time.
	time.Sleep(1200 * time.Millisecond)
	var st accounts.Store
	if pgStore != nil {
		st = pgStore
	} else {
		for _, c := range nodes[:1] {
			c.Stop()
		}
		st = openEmbedded(t, dbPath)
		defer st.Close()
	}
	ledger := ledgerCharges(t, st)
	byKey, byUser := paid(ledger)
	for _, p := range []struct {
		f  *funder
		id string
	}{{A, aID}, {B, bID}, {E, eID}} {
		if byKey[billing.PledgeKey(p.id)] != 1 || byUser[p.f.id] != 1 {
			t.Errorf("%s's pledge charged %d time(s) (%d charge(s) kept for the user), want exactly 1",
				p.f.name, byKey[billing.PledgeKey(p.id)], byUser[p.f.id])
		}
	}
	if byKey[billing.PledgeKey(d1ID)] != 0 || byKey[billing.SubscribeKey(d1Buy)] != 1 || byUser[D1.id] != 1 {
		t.Errorf("D1: %d pledge charge(s) through, %d purchase charge(s), %d charge(s) kept; want 0 (declined), 1 and 1 (the purchase on the new card)",
			byKey[billing.PledgeKey(d1ID)], byKey[billing.SubscribeKey(d1Buy)], byUser[D1.id])
	}
	for _, f := range []*funder{D2, W, s, N, X} {
		if byUser[f.id] != 0 {
			t.Errorf("%s was charged %d time(s), want never", f.name, byUser[f.id])
		}
	}
	if byKey[billing.SubscribeKey(pID)] != 1 {
		t.Errorf("P's purchase charged %d time(s), want 1", byKey[billing.SubscribeKey(pID)])
	}
	total := 0
	for _, n := range byKey {
		total += n
	}
	if total != 5 {
		t.Errorf("%d charges kept in all, want 5 (A, B, E, D1's purchase, P's purchase); ledger:", total)
		for _, c := range ledger {
			t.Logf("  %s user %s amount %s declined %v refunded %v", c.IdempotencyKey, c.UserID, c.Amount, c.Declined, c.Refunded)
		}
	}
	for _, c := range ledger {
		if strings.HasPrefix(c.IdempotencyKey, billing.ChargePledge+":") && !c.Declined && c.Amount != "40" {
			t.Errorf("pledge charge %s of %s, want 40 (the first month)", c.IdempotencyKey, c.Amount)
		}
	}
	var subsErr error
	_ = st.View(context.Background(), func(tx accounts.Tx) error {
		for _, id := range []string{aID, bID, eID, d1Buy} {
			cs, err := tx.ListCharges(id)
			if err != nil {
				subsErr = err
				return nil
			}
			ok := 0
			for _, c := range cs {
				if c.Status == accounts.ChargeSucceeded {
					ok++
				}
			}
			if ok != 1 {
				t.Errorf("subscription %s has %d succeeded charge record(s), want 1", id, ok)
			}
		}
		return nil
	})
	if subsErr != nil {
		t.Fatal(subsErr)
	}
}

// TestFundingCrashDuringActivation: the node charging the pledges is
// killed (SIGKILL, by the fault hook) right after the processor charged
// the second pledge and before it was recorded. Started again, it takes
// the unfinished charge over with the same idempotency key and charges
// the rest: every pledge active, each charged once at the processor.
func TestFundingCrashDuringActivation(t *testing.T) {
	for _, store := range []string{"embedded", "postgres"} {
		t.Run(store, func(t *testing.T) {
			block := fundingNow(t)
			dsn, dbPath := "", filepath.Join(t.TempDir(), "timeblock.db")
			opts := fundingOpts{goal: "160", store: "store embedded {$TIMEBLOCK_DB}"}
			if store == "postgres" {
				dsn = pgtest.DSN(t)
				opts.store = "store postgres {$TIMEBLOCK_DSN}"
			}
			cfg := fillNow(fundingConfig(t, opts), block)
			base := []string{fundingSecret, "TIMEBLOCK_DSN=" + dsn, "TIMEBLOCK_DB=" + dbPath}
			first := e2e.Start(t, cfg, e2e.WithEnv(append(base, accounts.CrashAfterPledgeChargesEnv+"=2")...))

			var funders []*funder
			var ids []string
			for i := range 4 {
				f := newFunder(t, first, fmt.Sprintf("K%d", i), billing.TestCardVisa)
				funders = append(funders, f)
				ids = append(ids, f.mustPledge(t, "fund", block).Get("id").Str)
			}
			if row, _ := poolRow(t, funders[0], "fund"); row.Get("status").Str != "activating" {
				t.Fatalf("4 pledges of 40 on a goal of 160: %s, want activating", row.Raw)
			}
			// The answer may or may not make it out before the kill.
			req, _ := http.NewRequest(http.MethodPost, first.AdminURL()+"/timeblock/pools/fund/status", strings.NewReader(`{"status":"active"}`))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
			eventually(t, 15*time.Second, "the node killed after the second pledge charge", func() error {
				conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(first.HTTP), 200*time.Millisecond)
				if err == nil {
					conn.Close()
					return fmt.Errorf("still answering")
				}
				return nil
			})
			first.Kill()
			n := logCount([]*e2e.Caddy{first}, "pledge charged: the pool is live")
			t.Logf("%d pledge(s) recorded before the kill", n)
			if n >= 2 {
				t.Errorf("%d pledges recorded before the kill: the fault hook should kill the node before it records the 2nd", n)
			}

			// Started again, without the fault, taking over pending
			// charges after one second.
			second := e2e.Start(t, cfg, e2e.WithEnv(append(base, "TIMEBLOCK_TEST_SETTLE_GRACE=1s")...))
			for i, f := range funders {
				f.c = second
				f.waitStatus(t, ids[i], "active", 20*time.Second)
			}
			if n := logCount([]*e2e.Caddy{second}, "taking over a pledge charge left unfinished"); n != 1 {
				t.Errorf("%d take-overs logged after the restart, want 1", n)
			}
			if row, _ := poolRow(t, funders[0], "fund"); row.Get("status").Str != "active" {
				t.Errorf("after the restart with status funding in the Caddyfile the pool is %s, want active", row.Get("status").Str)
			}
			key := funders[1].mustKey(t, ids[1])
			if _, _, err := chatOnce(t, second, key, "m-fund"); err != nil {
				t.Errorf("inference with the key of the pledge charged at the crash: %v", err)
			}
			time.Sleep(1200 * time.Millisecond) // more passes: nothing more charged

			var st accounts.Store
			if store == "postgres" {
				st = openPG(t, dsn)
			} else {
				second.Stop()
				st = openEmbedded(t, dbPath)
				defer st.Close()
			}
			ledger := ledgerCharges(t, st)
			byKey, byUser := paid(ledger)
			for i, f := range funders {
				if byKey[billing.PledgeKey(ids[i])] != 1 || byUser[f.id] != 1 {
					t.Errorf("%s's pledge charged %d time(s) at the processor (%d for the user), want exactly 1",
						f.name, byKey[billing.PledgeKey(ids[i])], byUser[f.id])
				}
			}
			if len(ledger) != 4 {
				t.Errorf("the ledger holds %d charge(s), want 4", len(ledger))
				for _, c := range ledger {
					t.Logf("  %s declined %v refunded %v", c.IdempotencyKey, c.Declined, c.Refunded)
				}
			}
		})
	}
}

// pledgeStripe stands in front of the browser test's stateful fake Stripe
// (browser_stripe_test.go): it declines the off-session PaymentIntents of
// the cards in declineOff (as Stripe's 4000 0000 0000 0341, which saves
// but whose charges fail) and counts the PaymentIntents that went
// through, by the idempotency key in their metadata.
type pledgeStripe struct {
	fake *fakeStripe

	mu         sync.Mutex
	declineOff map[string]bool            // payment method → its off-session charges are declined
	succeeded  map[string]map[string]bool // charge key → PaymentIntent ids that succeeded
	amounts    map[string]string          // charge key → amount (cents) of its last PaymentIntent
	declined   map[string]int             // charge key → declines answered
}

func (s *pledgeStripe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/payment_intents" {
		s.fake.ServeHTTP(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		stripeError(w, 400, "invalid_request_error", "", err.Error())
		return
	}
	key := r.Form.Get("metadata[timeblock_idempotency_key]")
	s.mu.Lock()
	s.amounts[key] = r.Form.Get("amount")
	decline := s.declineOff[r.Form.Get("payment_method")] && r.Form.Get("off_session") == "true"
	if decline {
		s.declined[key]++
	}
	s.mu.Unlock()
	if decline {
		stripeError(w, 402, "card_error", "card_declined", "Your card was declined.")
		return
	}
	rec := httptest.NewRecorder()
	s.fake.ServeHTTP(rec, r)
	if rec.Code == 200 && gjson.GetBytes(rec.Body.Bytes(), "status").Str == "succeeded" {
		s.mu.Lock()
		if s.succeeded[key] == nil {
			s.succeeded[key] = map[string]bool{}
		}
		s.succeeded[key][gjson.GetBytes(rec.Body.Bytes(), "id").Str] = true
		s.mu.Unlock()
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// card makes a payment method in the fake, as Stripe.js would.
func (s *pledgeStripe) card(number string, declineOffSession bool) string {
	s.fake.mu.Lock()
	id := s.fake.id("pm")
	s.fake.cards[id] = stripeCard{brand: "visa", last4: number[len(number)-4:]}
	s.fake.mu.Unlock()
	s.mu.Lock()
	s.declineOff[id] = declineOffSession
	s.mu.Unlock()
	return id
}

// paymentIntents counts the PaymentIntents that went through for a
// charge key, and for every key.
func (s *pledgeStripe) paymentIntents(key string) (n, all int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ids := range s.succeeded {
		all += len(ids)
	}
	return len(s.succeeded[key]), all
}

// TestFundingStripe: the same journey's core with billing stripe against
// the stateful fake: pledges create no PaymentIntent; activation creates
// exactly one per pledge, off-session; a card whose off-session charges
// are declined gets its pledge released at once (canceled, nothing
// charged), and a working card saved afterwards charges nothing for it.
func TestFundingStripe(t *testing.T) {
	block := fundingNow(t)
	ps := &pledgeStripe{fake: newFakeStripe(), declineOff: map[string]bool{}, succeeded: map[string]map[string]bool{}, declined: map[string]int{}, amounts: map[string]string{}}
	api := httptest.NewServer(ps)
	defer api.Close()
	cfg := fillNow(fundingConfig(t, fundingOpts{goal: "110", billing: `billing stripe {
			secret_key {env.STRIPE_SECRET_KEY}
			webhook_secret {env.STRIPE_WEBHOOK_SECRET}
			api_base ` + api.URL + `
		}`}), block)
	c := e2e.Start(t, cfg, e2e.WithEnv(fundingSecret, "STRIPE_SECRET_KEY="+e2eStripeKey, "STRIPE_WEBHOOK_SECRET="+e2eWebhookSecret))

	A := newFunder(t, c, "A", ps.card("4242424242424242", false))
	B := newFunder(t, c, "B", ps.card("4242424242424242", false))
	D := newFunder(t, c, "D", ps.card("4000000000000341", true))
	N := newFunder(t, c, "N", "")
	if code, env := N.pledge(t, "fund", block, "pledge-N"); code != http.StatusBadRequest || !strings.Contains(env.Get("error").Str, "No payment method") {
		t.Errorf("a pledge without a saved card: %d %s, want 400", code, env.Raw)
	}
	aID := A.mustPledge(t, "fund", block).Get("id").Str
	// B pledges for a year: due the whole first year at activation.
	code, env := B.do(t, http.MethodPost, "/api/pools/fund/subscribe",
		map[string]any{"blocks": []string{block}, "billingCycle": "year"}, map[string]string{"Idempotency-Key": "pledge-B-year"})
	if code != http.StatusCreated || env.Get("data.status").Str != "pledged" || env.Get("data.amountCharged").Str != "0" || env.Get("data.billingCycle").Str != "year" {
		t.Fatalf("a yearly pledge: %d %s", code, env.Raw)
	}
	bID, bDue := env.Get("data.id").Str, env.Get("data.amountDue").Str
	if due, ok := new(big.Rat).SetString(bDue); !ok || due.Cmp(big.NewRat(40, 1)) <= 0 {
		t.Errorf("a yearly pledge's amountDue %q, want the year's price (more than a month's 40)", bDue)
	}
	if _, all := ps.paymentIntents(""); all != 0 {
		t.Fatalf("pledging created %d PaymentIntent(s), want none", all)
	}
	dID := D.mustPledge(t, "fund", block).Get("id").Str
	if row, _ := poolRow(t, A, "fund"); row.Get("status").Str != "activating" || row.Get("pledgedSlots").Int() != 24 {
		t.Fatalf("three pledges on a goal of 110: %s, want activating with 24 pledged slots", row.Raw)
	}
	if _, all := ps.paymentIntents(""); all != 0 {
		t.Fatalf("reaching the goal created %d PaymentIntent(s), want none: pledges are charged at activation", all)
	}

	if code, env := setStatus(t, c, "fund", `{"status":"active"}`); code != http.StatusOK || env.Get("data.status").Str != "active" {
		t.Fatalf("POST status active: %d %s", code, env.Raw)
	}
	A.waitStatus(t, aID, "active", 10*time.Second)
	B.waitStatus(t, bID, "active", 10*time.Second)
	if d := D.waitStatus(t, dID, "canceled", 10*time.Second); len(d.Get("hours").Array()) != 0 {
		t.Errorf("D's declined pledge still holds hours: %s", d.Raw)
	}
	key := A.mustKey(t, aID)
	if _, _, err := chatOnce(t, c, key, "m-fund"); err != nil {
		t.Errorf("inference with a pledge's key after activation: %v", err)
	}

	// D saves a working card: its released pledge stays released, uncharged.
	saved := D.must(t, http.MethodPost, "/api/billing/setup-intent", map[string]any{"paymentMethod": ps.card("4242424242424242", false)}, http.StatusOK)
	if rec := saved.Get("recovered").Array(); len(rec) != 0 {
		t.Errorf("saving a working card: recovered %s, want none (the declined pledge was released)", saved.Get("recovered").Raw)
	}
	D.waitStatus(t, dID, "canceled", time.Second)
	time.Sleep(1200 * time.Millisecond) // more funding passes: nothing more charged

	for _, p := range []struct{ name, id string }{{"A", aID}, {"B", bID}} {
		if n, _ := ps.paymentIntents(billing.PledgeKey(p.id)); n != 1 {
			t.Errorf("%s's pledge: %d PaymentIntent(s) succeeded, want exactly 1", p.name, n)
		}
	}
	ps.mu.Lock()
	declined := ps.declined[billing.PledgeKey(dID)]
	aCents, bCents := ps.amounts[billing.PledgeKey(aID)], ps.amounts[billing.PledgeKey(bID)]
	ps.mu.Unlock()
	if aCents != "4000" {
		t.Errorf("A's monthly pledge charged %s cents, want 4000", aCents)
	}
	if due, _ := new(big.Rat).SetString(bDue); due == nil || bCents != new(big.Rat).Mul(due, big.NewRat(100, 1)).FloatString(0) {
		t.Errorf("B's yearly pledge charged %s cents, want its amountDue %s", bCents, bDue)
	}
	if n, _ := ps.paymentIntents(billing.PledgeKey(dID)); n != 0 || declined != 1 {
		t.Errorf("D's pledge: %d PaymentIntent(s) succeeded, %d declined; want 0 and 1", n, declined)
	}
	if _, all := ps.paymentIntents(""); all != 2 {
		t.Errorf("%d PaymentIntents succeeded in all, want 2 (A's and B's pledges)", all)
	}
	ps.fake.mu.Lock()
	for _, p := range ps.fake.problems {
		t.Errorf("fake Stripe: %s", p)
	}
	ps.fake.mu.Unlock()
	if strings.Contains(c.Logs(), e2eStripeKey) {
		t.Error("the Stripe secret key is in Caddy's log")
	}
}
