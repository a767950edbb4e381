package accounts_test

// A test environment for the subscription side: a service on a given store
// with the built-in test processor (whose ledger tests inspect), a clock the
// test moves, a notifier that records notices, and the invalidations the
// store published.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/embedded"
	"github.com/timeblock/timeblock/accounts/postgres"
	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
)

type subsClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *subsClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *subsClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *subsClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// subsStart: 2033-01-31 09:15 UTC, inside the europe block, on a month end
// (so calendar months are exercised: Jan 31 + 1 month = Mar 3).
var subsStart = time.Date(2033, 1, 31, 9, 15, 0, 0, time.UTC)

// recordingNotifier records key-delivered notices.
type recordingNotifier struct {
	mu      sync.Mutex
	notices []string // subscription ids
	fail    bool
}

func (n *recordingNotifier) KeyDelivered(_ context.Context, u *accounts.User, sub *accounts.Subscription, p *accounts.Pool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fail {
		return errors.New("mail server down")
	}
	n.notices = append(n.notices, sub.ID)
	return nil
}

func (n *recordingNotifier) Notices() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.notices...)
}

type subsEnv struct {
	t        *testing.T
	ctx      context.Context
	st       accounts.Store
	svc      *accounts.Service
	clock    *subsClock
	proc     *accounts.TestProcessor
	notifier *recordingNotifier

	mu            sync.Mutex
	invalidations map[string]int // user id → count
}

const subsTerms = "2033-01"

func newSubsEnv(t *testing.T, st accounts.Store) *subsEnv {
	t.Helper()
	e := &subsEnv{
		t: t, ctx: context.Background(), st: st,
		clock:         &subsClock{t: subsStart},
		proc:          accounts.NewTestProcessor(),
		notifier:      &recordingNotifier{},
		invalidations: map[string]int{},
	}
	e.svc = e.newService()
	cancel := st.OnInvalidation(func(userID string) {
		e.mu.Lock()
		e.invalidations[userID]++
		e.mu.Unlock()
	})
	t.Cleanup(cancel)
	return e
}

// newService builds another service (another "node") on the same store,
// processor and clock.
func (e *subsEnv) newService() *accounts.Service {
	return e.newServiceOn(e.st)
}

func (e *subsEnv) newServiceOn(st accounts.Store) *accounts.Service {
	e.t.Helper()
	svc, err := accounts.NewService(accounts.Config{
		Store:        st,
		Secret:       "subscription side test secret",
		TermsVersion: subsTerms,
		Processor:    e.proc,
		Notifier:     e.notifier,
		GracePeriod:  7 * 24 * time.Hour,
		Now:          e.clock.Now,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return svc
}

// invalidationsOf waits briefly for at least want invalidations of the user
// and returns how many were seen.
func (e *subsEnv) invalidationsOf(userID string, want int) int {
	deadline := time.Now().Add(2 * time.Second)
	for {
		e.mu.Lock()
		n := e.invalidations[userID]
		e.mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var subsIDs struct {
	mu sync.Mutex
	n  int
}

func subsID() string {
	subsIDs.mu.Lock()
	defer subsIDs.mu.Unlock()
	subsIDs.n++
	return fmt.Sprintf("5ab5c0de-0000-4000-8000-%012d", subsIDs.n)
}

// pool upserts a pool; slots seats per hour; asia 80, europe 96, americas 120.
func (e *subsEnv) pool(slug, status string, slots int, manual bool) *accounts.Pool {
	e.t.Helper()
	p := &accounts.Pool{
		ID:                 subsID(),
		Slug:               slug,
		ModelID:            "model-" + slug,
		ModelName:          "Model " + slug,
		Description:        "pool " + slug,
		Status:             status,
		Slots:              slots,
		BlockPrices:        map[accounts.Block]string{accounts.BlockAsia: "80", accounts.BlockEurope: "96", accounts.BlockAmericas: "120"},
		AnnualDiscount:     "0.15",
		ManualProvisioning: manual,
		MaxOutputTokens:    8192,
		UpdatedAt:          e.clock.Now(),
	}
	e.must(e.st.Update(e.ctx, func(tx accounts.Tx) error { return tx.UpsertPool(p) }))
	return p
}

// user creates a user; card, when not empty, is saved.
func (e *subsEnv) user(email, card string) *accounts.User {
	e.t.Helper()
	u, _, err := e.svc.CreateUser(e.ctx, email, "User "+email)
	e.must(err)
	if card != "" {
		_, err := e.svc.SetupIntent(e.ctx, u.ID, card)
		e.must(err)
	}
	return u
}

func (e *subsEnv) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// subscribe subscribes and fails the test on error.
func (e *subsEnv) subscribe(u *accounts.User, pool string, q int, blocks ...string) *accounts.SubscribeResult {
	e.t.Helper()
	res, err := e.svc.Subscribe(e.ctx, u.ID, pool, accounts.SubscribeRequest{Blocks: blocks, Quantity: &q})
	e.must(err)
	return res
}

func (e *subsEnv) getSub(id string) *accounts.Subscription {
	e.t.Helper()
	var s *accounts.Subscription
	e.must(e.st.View(e.ctx, func(tx accounts.Tx) error {
		var err error
		s, err = tx.GetSubscription(id)
		return err
	}))
	return s
}

func (e *subsEnv) charges(subID string) []*accounts.Charge {
	e.t.Helper()
	var cs []*accounts.Charge
	e.must(e.st.View(e.ctx, func(tx accounts.Tx) error {
		var err error
		cs, err = tx.ListCharges(subID)
		return err
	}))
	return cs
}

func (e *subsEnv) taken(poolID string) map[accounts.Seat]string {
	e.t.Helper()
	var m map[accounts.Seat]string
	e.must(e.st.View(e.ctx, func(tx accounts.Tx) error {
		var err error
		m, err = tx.TakenSeats(poolID)
		return err
	}))
	return m
}

func (e *subsEnv) userSubs(userID string) []*accounts.Subscription {
	e.t.Helper()
	var subs []*accounts.Subscription
	e.must(e.st.View(e.ctx, func(tx accounts.Tx) error {
		var err error
		subs, err = tx.ListSubscriptionsByUser(userID)
		return err
	}))
	return subs
}

// entitlement returns the entitlement of a full key.
func (e *subsEnv) entitlement(fullKey string) *accounts.Entitlement {
	e.t.Helper()
	ent, err := e.svc.Entitlement(e.ctx, accounts.HashKey(fullKey))
	e.must(err)
	return ent
}

// lifecycle runs one pass and fails on error.
func (e *subsEnv) lifecycle() accounts.LifecycleReport {
	e.t.Helper()
	rep, err := e.svc.RunLifecycle(e.ctx)
	e.must(err)
	return rep
}

// chargesFor returns the ledger entries whose idempotency key mentions id.
func (e *subsEnv) chargesFor(id string) []accounts.TestCharge {
	var out []accounts.TestCharge
	for _, c := range e.proc.Ledger() {
		if strings.Contains(c.IdempotencyKey, id) {
			out = append(out, c)
		}
	}
	return out
}

// wantStatus fails unless err is an *accounts.Error with the status whose
// message contains every fragment; it returns the error.
func wantStatus(t *testing.T, err error, status int, fragments ...string) *accounts.Error {
	t.Helper()
	var ae *accounts.Error
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want an *accounts.Error with status %d", err, err, status)
	}
	if ae.Status != status {
		t.Fatalf("status = %d (%q), want %d", ae.Status, ae.Message, status)
	}
	for _, f := range fragments {
		if !strings.Contains(ae.Message, f) {
			t.Errorf("message %q does not contain %q", ae.Message, f)
		}
	}
	return ae
}

// forEachStoreNodes runs fn per backend with n stores that share one
// database, as n Caddy nodes would: n separate PostgreSQL stores (each with
// its own connection pool) on one database. The embedded store is
// single-node (its file is locked by one process), so its nodes share one
// handle.
func forEachStoreNodes(t *testing.T, n int, fn func(t *testing.T, nodes []accounts.Store)) {
	t.Helper()
	t.Run("embedded", func(t *testing.T) {
		st, err := embedded.Open(filepath.Join(t.TempDir(), "t.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		nodes := make([]accounts.Store, n)
		for i := range nodes {
			nodes[i] = st
		}
		fn(t, nodes)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		nodes := make([]accounts.Store, n)
		for i := range nodes {
			st, err := postgres.Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			nodes[i] = st
		}
		fn(t, nodes)
	})
}
