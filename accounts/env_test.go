package accounts_test

// A test environment for the account service: a service on a given store
// with the built-in test processor (whose ledger tests inspect), a clock the
// test moves, a notifier that records notices, the invalidations the store
// published, and shortcuts that seed pools, users and subscriptions.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// testClock is a clock tests move by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// envStart is the test clock's start: 2033-01-31 09:15 UTC, inside the
// europe block, on a month end (so calendar months are exercised:
// Jan 31 + 1 month = Mar 3).
var envStart = time.Date(2033, 1, 31, 9, 15, 0, 0, time.UTC)

const (
	envTerms  = "2033-01"                     // the service's purchase-terms version
	envSecret = "account service test secret" // the service's secret
)

// recordingNotifier records key-delivered notices and sign-in links.
type recordingNotifier struct {
	mu      sync.Mutex
	notices []string // subscription ids
	links   chan signInNotice
	fail    bool
	funding []fundingNoticeSeen
}

// fundingNoticeSeen is a funding notice as the notifier got it.
type fundingNoticeSeen struct {
	to     string // the user's id, "operator" for the operator
	notice accounts.FundingNotice
}

func (n *recordingNotifier) Funding(_ context.Context, u *accounts.User, fn accounts.FundingNotice) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	to := "operator"
	if u != nil {
		to = u.ID
	}
	n.funding = append(n.funding, fundingNoticeSeen{to: to, notice: fn})
	return nil
}

// FundingNotices returns the funding notices so far.
func (n *recordingNotifier) FundingNotices() []fundingNoticeSeen {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]fundingNoticeSeen(nil), n.funding...)
}

type signInNotice struct {
	email, link string
	expires     time.Time
}

func (n *recordingNotifier) SignInLink(_ context.Context, email, link string, expires time.Time) error {
	n.mu.Lock()
	links := n.links
	n.mu.Unlock()
	if links != nil {
		links <- signInNotice{email, link, expires}
	}
	return nil
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

// env is a service on one store, with seeding shortcuts.
type env struct {
	t        *testing.T
	ctx      context.Context
	st       accounts.Store
	svc      *accounts.Service
	clock    *testClock
	proc     *billing.TestProcessor
	notifier *recordingNotifier

	mu        sync.Mutex
	published []string // user ids of every invalidation, in publication order
	forgotten int      // how many of published settle and wantPublished consumed
}

func newEnv(t *testing.T, st accounts.Store) *env {
	t.Helper()
	e := &env{
		t: t, ctx: context.Background(), st: st,
		clock:    &testClock{t: envStart},
		proc:     billing.NewTestProcessor(),
		notifier: &recordingNotifier{},
	}
	e.svc = e.newServiceOn(st)
	cancel := st.OnInvalidation(func(userID string) {
		e.mu.Lock()
		e.published = append(e.published, userID)
		e.mu.Unlock()
	})
	t.Cleanup(cancel)
	return e
}

// newServiceOn builds another service (another "node") on st, with the
// environment's processor, notifier and clock.
func (e *env) newServiceOn(st accounts.Store) *accounts.Service {
	e.t.Helper()
	svc, err := accounts.NewService(accounts.Config{
		Store:        st,
		Secret:       envSecret,
		TermsVersion: envTerms,
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

// fresh returns the invalidations not yet forgotten.
func (e *env) fresh() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.published[e.forgotten:]
}

// forget returns the invalidations not yet forgotten, and forgets them.
func (e *env) forget() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	got := e.published[e.forgotten:]
	e.forgotten = len(e.published)
	return got
}

// settle waits until publications have stopped arriving (PostgreSQL
// delivers them asynchronously), then forgets them.
func (e *env) settle() {
	seen, quietSince := -1, time.Now()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n := len(e.fresh()); n != seen {
			seen, quietSince = n, time.Now()
		} else if time.Since(quietSince) > 150*time.Millisecond {
			break
		}
	}
	e.forget()
}

// wantPublished checks that invalidations for userID, and only for it,
// arrive (within two seconds), then forgets them.
func (e *env) wantPublished(userID string) {
	e.t.Helper()
	for deadline := time.Now().Add(2 * time.Second); len(e.fresh()) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let duplicates of the same change land
	got := e.forget()
	if len(got) == 0 {
		e.t.Errorf("no invalidation published, want one for %s", userID)
	}
	for _, id := range got {
		if id != userID {
			e.t.Errorf("invalidation for %s, want only %s", id, userID)
		}
	}
}

// wantNothingPublished checks that no invalidation arrives within 200ms.
func (e *env) wantNothingPublished() {
	e.t.Helper()
	time.Sleep(200 * time.Millisecond)
	if got := e.forget(); len(got) != 0 {
		e.t.Errorf("published %v, want nothing", got)
	}
}

// invalidationsOf waits briefly for at least want invalidations of the user
// (forgotten or not) and returns how many were seen.
func (e *env) invalidationsOf(userID string, want int) int {
	deadline := time.Now().Add(2 * time.Second)
	for {
		e.mu.Lock()
		n := 0
		for _, id := range e.published {
			if id == userID {
				n++
			}
		}
		e.mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
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
	return fmt.Sprintf("5ab5c0de-0000-4000-8000-%012d", envIDs.n)
}

// pool upserts a pool; slots seats per hour; asia 80, europe 96, americas 120.
func (e *env) pool(slug, status string, slots int, manual bool) *accounts.Pool {
	e.t.Helper()
	p := &accounts.Pool{
		ID:                 envID(),
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
	e.update(func(tx accounts.Tx) error { return tx.UpsertPool(p) })
	return p
}

// user creates a user through the service and returns it with a session
// token; card, when not empty, is saved.
func (e *env) user(email, card string) (*accounts.User, string) {
	e.t.Helper()
	u, token, err := e.svc.CreateUser(e.ctx, email, "User "+email)
	e.must(err)
	if card != "" {
		_, err := e.svc.SetupIntent(e.ctx, u.ID, card)
		e.must(err)
	}
	return u, token
}

// sub creates a subscription straight in the store, holding the lowest free
// seats, with a period of one month from now.
func (e *env) sub(u *accounts.User, p *accounts.Pool, status string, quantity int, blocks ...accounts.Block) *accounts.Subscription {
	e.t.Helper()
	now := e.clock.Now()
	s := &accounts.Subscription{
		ID:                 envID(),
		UserID:             u.ID,
		PoolID:             p.ID,
		Status:             status,
		Blocks:             blocks,
		Quantity:           quantity,
		BillingCycle:       accounts.CycleMonth,
		MonthlyPrice:       "96",
		CurrentPeriodStart: now,
		CurrentPeriodEnd:   now.AddDate(0, 1, 0),
		AckVia:             "api",
		CreatedAt:          now,
		UpdatedAt:          now,
	}
	if status == accounts.SubPastDue {
		s.PastDueSince = now
	}
	// Creation order decides "most recent": keep it strictly increasing.
	e.clock.Advance(time.Millisecond)
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

// setStatus changes a subscription's status in the store.
func (e *env) setStatus(id, status string) {
	e.t.Helper()
	e.update(func(tx accounts.Tx) error {
		s, err := tx.GetSubscription(id)
		if err != nil {
			return err
		}
		s.Status = status
		if status == accounts.SubPastDue {
			s.PastDueSince = e.clock.Now()
		}
		return tx.UpdateSubscription(s)
	})
}

// subscribe subscribes and fails the test on error.
func (e *env) subscribe(u *accounts.User, pool string, q int, blocks ...string) *accounts.SubscribeResult {
	e.t.Helper()
	res, err := e.svc.Subscribe(e.ctx, u.ID, pool, accounts.SubscribeRequest{Blocks: blocks, Quantity: &q})
	e.must(err)
	return res
}

// entitlement returns the entitlement of a full key.
func (e *env) entitlement(fullKey string) *accounts.Entitlement {
	e.t.Helper()
	ent, err := e.svc.Entitlement(e.ctx, accounts.HashKey(fullKey))
	e.must(err)
	return ent
}

// lifecycle runs one pass and fails on error.
func (e *env) lifecycle() accounts.LifecycleReport {
	e.t.Helper()
	rep, err := e.svc.RunLifecycle(e.ctx)
	e.must(err)
	return rep
}

// chargesFor returns the ledger entries whose idempotency key mentions id.
func (e *env) chargesFor(id string) []billing.TestCharge {
	var out []billing.TestCharge
	for _, c := range e.proc.Ledger() {
		if strings.Contains(c.IdempotencyKey, id) {
			out = append(out, c)
		}
	}
	return out
}

func (e *env) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) update(fn func(tx accounts.Tx) error) {
	e.t.Helper()
	e.must(e.st.Update(e.ctx, fn))
}

func (e *env) view(fn func(tx accounts.Tx) error) {
	e.t.Helper()
	e.must(e.st.View(e.ctx, fn))
}

// read returns what get reads in a read-only transaction; the test fails
// on error.
func read[T any](e *env, get func(tx accounts.Tx) (T, error)) T {
	e.t.Helper()
	var v T
	e.view(func(tx accounts.Tx) error {
		var err error
		v, err = get(tx)
		return err
	})
	return v
}

// storedKey reads a consumption key record straight from the store.
func (e *env) storedKey(id string) *accounts.Key {
	e.t.Helper()
	return read(e, func(tx accounts.Tx) (*accounts.Key, error) { return tx.GetKey(id) })
}

func (e *env) getSub(id string) *accounts.Subscription {
	e.t.Helper()
	return read(e, func(tx accounts.Tx) (*accounts.Subscription, error) { return tx.GetSubscription(id) })
}

func (e *env) charges(subID string) []*accounts.Charge {
	e.t.Helper()
	return read(e, func(tx accounts.Tx) ([]*accounts.Charge, error) { return tx.ListCharges(subID) })
}

func (e *env) taken(poolID string) map[accounts.Seat]string {
	e.t.Helper()
	return read(e, func(tx accounts.Tx) (map[accounts.Seat]string, error) { return tx.TakenSeats(poolID) })
}

func (e *env) userSubs(userID string) []*accounts.Subscription {
	e.t.Helper()
	return read(e, func(tx accounts.Tx) ([]*accounts.Subscription, error) { return tx.ListSubscriptionsByUser(userID) })
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
