package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// maxAttempts bounds how often a worker retries after ErrConflict, as the
// service does.
const maxAttempts = 20

var errSoldOut = errors.New("sold out")

// gate holds the workers' transactions open together until all of them have
// arrived or a short deadline has passed, so that they overlap for real
// rather than run one after another as connections happen to come free. On
// a single-writer backend the deadline simply passes, once.
type gate struct {
	n, arrived int
	mu         sync.Mutex
	all        chan struct{}
	deadline   time.Time
}

func newGate(n int) *gate {
	return &gate{n: n, all: make(chan struct{}), deadline: time.Now().Add(300 * time.Millisecond)}
}

func (g *gate) wait() {
	g.mu.Lock()
	if g.arrived++; g.arrived == g.n {
		close(g.all)
	}
	g.mu.Unlock()
	timer := time.NewTimer(time.Until(g.deadline))
	defer timer.Stop()
	select {
	case <-g.all:
	case <-timer.C:
	}
}

// testConcurrentSeats has many buyers race for the seats of a small pool the
// way the service subscribes: read the taken seats, then take the lowest
// free ones, in one transaction. No seat may end up held twice, and exactly
// as many buyers as the pool has room for succeed.
func testConcurrentSeats(t *testing.T, s accounts.Store) {
	const capacity, buyers = 3, 12
	f := newFixtures(t, s)
	p := f.pool(capacity)
	users := make([]*accounts.User, buyers)
	records := []any{p}
	for i := range users {
		users[i] = f.user()
		records = append(records, users[i])
	}
	f.create(records...)

	g := newGate(buyers)
	subs := make([]*accounts.Subscription, buyers)
	errs := make([]error, buyers)
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			sub := f.subscription(users[i], p, nil)
			for range maxAttempts {
				errs[i] = s.Update(t.Context(), func(tx accounts.Tx) error {
					taken, err := tx.TakenSeats(p.ID)
					if err != nil {
						return err
					}
					g.wait()
					sub.Seats = nil
					for h := range accounts.HoursPerBlock {
						slot := 0
						for slot < capacity && taken[accounts.Seat{Hour: h, SlotIndex: slot}] != "" {
							slot++
						}
						if slot == capacity {
							return errSoldOut
						}
						sub.Seats = append(sub.Seats, accounts.Seat{Hour: h, SlotIndex: slot})
					}
					return tx.CreateSubscription(sub)
				})
				if !errors.Is(errs[i], accounts.ErrConflict) {
					break
				}
			}
			subs[i] = sub
		})
	}
	wg.Wait()

	want := make(map[string][]accounts.Seat)
	for i, err := range errs {
		switch {
		case err == nil:
			want[subs[i].ID] = subs[i].Seats
		case !errors.Is(err, errSoldOut):
			t.Errorf("buyer %d: %v", i, err)
		}
	}
	if len(want) != capacity {
		t.Errorf("%d buyers got seats, want %d", len(want), capacity)
	}
	// holders would hide a seat held twice; count instead.
	held := make(map[accounts.Seat]int)
	for _, seatsOf := range want {
		for _, seat := range seatsOf {
			held[seat]++
		}
	}
	for seat, n := range held {
		if n > 1 {
			t.Errorf("seat %+v held by %d subscriptions", seat, n)
		}
	}
	expect(t, s, "TakenSeats", holders(want), func(tx accounts.Tx) (map[accounts.Seat]string, error) { return tx.TakenSeats(p.ID) })
	for id, seatsOf := range want {
		got := read(t, s, func(tx accounts.Tx) (*accounts.Subscription, error) { return tx.GetSubscription(id) })
		equal(t, "seats of "+id, got.Seats, seatsOf)
	}
}

// testConcurrentChargeClaims has several nodes claim the renewal of one
// period at once, some checking for an existing charge first: exactly one
// claim wins, the others see ErrConflict.
func testConcurrentChargeClaims(t *testing.T, s accounts.Store) {
	const claimers = 8
	f := newFixtures(t, s)
	_, _, sub := f.basics(1)
	period := sub.CurrentPeriodEnd

	g := newGate(claimers)
	errs := make([]error, claimers)
	var wg sync.WaitGroup
	for i := range claimers {
		wg.Go(func() {
			c := f.charge(sub, period)
			errs[i] = s.Update(t.Context(), func(tx accounts.Tx) error {
				if i%2 == 1 {
					existing, err := tx.ListCharges(sub.ID)
					if err != nil {
						return err
					}
					if len(existing) > 0 {
						return fmt.Errorf("already claimed: %w", accounts.ErrConflict)
					}
				}
				g.wait()
				return tx.CreateCharge(c)
			})
		})
	}
	wg.Wait()

	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, accounts.ErrConflict):
			t.Errorf("claimer %d: %v", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d claims won, want exactly 1", won)
	}
	charges := read(t, s, func(tx accounts.Tx) ([]*accounts.Charge, error) { return tx.ListCharges(sub.ID) })
	if len(charges) != 1 {
		t.Errorf("%d charges stored, want 1", len(charges))
	}
}
