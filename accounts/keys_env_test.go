package accounts_test

// A test environment for the key side of the account service: a service on
// a given store with a clock the test moves, and shortcuts that seed pools,
// users and subscriptions straight through the store.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// keysClock is a clock tests move by hand.
type keysClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *keysClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *keysClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *keysClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// keysEnv is a service on one store, with seeding shortcuts.
type keysEnv struct {
	t     *testing.T
	ctx   context.Context
	st    accounts.Store
	svc   *accounts.Service
	clock *keysClock

	mu            sync.Mutex
	invalidations []string // user ids, in publication order
}

// keysStart is the test clock's start: 2031-03-10 10:30 UTC, inside the europe block.
var keysStart = time.Date(2031, 3, 10, 10, 30, 0, 0, time.UTC)

func newKeysEnv(t *testing.T, st accounts.Store) *keysEnv {
	t.Helper()
	e := &keysEnv{t: t, ctx: context.Background(), st: st, clock: &keysClock{t: keysStart}}
	svc, err := accounts.NewService(accounts.Config{
		Store:        st,
		Secret:       "test secret for the key side",
		TermsVersion: "2031-01",
		Now:          e.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	cancel := st.OnInvalidation(func(userID string) {
		e.mu.Lock()
		e.invalidations = append(e.invalidations, userID)
		e.mu.Unlock()
	})
	t.Cleanup(cancel)
	return e
}

// settle waits until publications have stopped arriving (PostgreSQL
// delivers them asynchronously), then forgets them.
func (e *keysEnv) settle() {
	seen, quietSince := -1, time.Now()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		e.mu.Lock()
		n := len(e.invalidations)
		e.mu.Unlock()
		if n != seen {
			seen, quietSince = n, time.Now()
		} else if time.Since(quietSince) > 150*time.Millisecond {
			break
		}
	}
	e.mu.Lock()
	e.invalidations = nil
	e.mu.Unlock()
}

// wantPublished checks that invalidations for userID, and only for it,
// arrive (within two seconds), then forgets them.
func (e *keysEnv) wantPublished(userID string) {
	e.t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		e.mu.Lock()
		got := e.invalidations
		e.mu.Unlock()
		if len(got) > 0 || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(20 * time.Millisecond) // let duplicates of the same change land
	e.mu.Lock()
	got := e.invalidations
	e.invalidations = nil
	e.mu.Unlock()
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
func (e *keysEnv) wantNothingPublished() {
	e.t.Helper()
	time.Sleep(200 * time.Millisecond)
	e.mu.Lock()
	got := e.invalidations
	e.invalidations = nil
	e.mu.Unlock()
	if len(got) != 0 {
		e.t.Errorf("published %v, want nothing", got)
	}
}

// pool upserts an active pool with 10 seats per hour, all blocks sold.
func (e *keysEnv) pool(slug string) *accounts.Pool {
	e.t.Helper()
	p := &accounts.Pool{
		ID:             keysID(),
		Slug:           slug,
		ModelID:        "model-" + slug,
		ModelName:      "Model " + slug,
		Description:    "test pool " + slug,
		Status:         accounts.PoolActive,
		Slots:          10,
		BlockPrices:    map[accounts.Block]string{accounts.BlockAsia: "80", accounts.BlockEurope: "96", accounts.BlockAmericas: "120"},
		AnnualDiscount: "0.15",
		UpdatedAt:      e.clock.Now(),
	}
	e.update(func(tx accounts.Tx) error { return tx.UpsertPool(p) })
	return p
}

// user creates a user through the service and returns it with a session token.
func (e *keysEnv) user(email string) (*accounts.User, string) {
	e.t.Helper()
	u, token, err := e.svc.CreateUser(e.ctx, email, "User "+email)
	if err != nil {
		e.t.Fatal(err)
	}
	return u, token
}

// sub creates a subscription straight in the store, holding the lowest free
// seats, with a period of one month from now.
func (e *keysEnv) sub(u *accounts.User, p *accounts.Pool, status string, quantity int, blocks ...accounts.Block) *accounts.Subscription {
	e.t.Helper()
	now := e.clock.Now()
	s := &accounts.Subscription{
		ID:                 keysID(),
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
func (e *keysEnv) setStatus(id, status string) {
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

func (e *keysEnv) update(fn func(tx accounts.Tx) error) {
	e.t.Helper()
	if err := e.st.Update(e.ctx, fn); err != nil {
		e.t.Fatal(err)
	}
}

func (e *keysEnv) view(fn func(tx accounts.Tx) error) {
	e.t.Helper()
	if err := e.st.View(e.ctx, fn); err != nil {
		e.t.Fatal(err)
	}
}

// storedKey reads a consumption key record straight from the store.
func (e *keysEnv) storedKey(id string) *accounts.Key {
	e.t.Helper()
	var k *accounts.Key
	e.view(func(tx accounts.Tx) error {
		var err error
		k, err = tx.GetKey(id)
		return err
	})
	return k
}

var keysIDs struct {
	mu sync.Mutex
	n  int
}

// keysID returns a fresh UUID-shaped id.
func keysID() string {
	keysIDs.mu.Lock()
	defer keysIDs.mu.Unlock()
	keysIDs.n++
	return fmt.Sprintf("5ab0c0de-0000-4000-8000-%012d", keysIDs.n)
}

// keysWantStatus fails unless err is an *accounts.Error with the given status
// whose message contains every fragment.
func keysWantStatus(t *testing.T, err error, status int, fragments ...string) {
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
}
