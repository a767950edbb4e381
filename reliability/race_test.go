//go:build reliability

package reliability

// The concurrent-subscribe race: 50 users, each with a card, subscribe at
// the same moment to a pool with fewer seats than they ask for, on the
// embedded store, on PostgreSQL with one node, and on PostgreSQL with two
// nodes taking half the requests each. No seat may be sold twice and every
// subscription must carry its charge.

import (
	"context"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/embedded"
	"github.com/timeblock/timeblock/accounts/postgres"
	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// raceSlots is the seats an hour of pool "race": far fewer than the users
// ask for (half of them ask for one seat, half for two).
const raceSlots = 10

func TestSubscribeRace(t *testing.T) {
	users := scale(50, 200)
	t.Run("embedded", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "accounts.db")
		n := startNode(t, nodeOpts{store: "store embedded " + path, slots: raceSlots})
		res := subscribeRace(t, []*e2e.Caddy{n}, users)
		n.Stop() // the file store admits one process
		st, err := embedded.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		res.check(t, "embedded", st)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		nodes := postgresNodes(t, 1, nodeOpts{slots: raceSlots}, dsn)
		res := subscribeRace(t, nodes, users)
		res.check(t, "postgres, 1 node", openPostgres(t, dsn))
	})
	t.Run("postgres two nodes", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		nodes := postgresNodes(t, 2, nodeOpts{slots: raceSlots}, dsn)
		res := subscribeRace(t, nodes, users)
		res.check(t, "postgres, 2 nodes", openPostgres(t, dsn))
	})
}

func openPostgres(t *testing.T, dsn string) accounts.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// raceResult is what the clients saw.
type raceResult struct {
	sold       map[string]int // subscription id → quantity, from the 201 answers
	soldOut    int            // 409 sold out
	other      []string       // any other answer
	peak       int            // requests in flight at once, client side
	spread     time.Duration  // between the first and the last request sent
	soldSeats  int            // seats an hour sold, from the answers
	demandSeat int            // seats an hour asked for
}

// subscribeRace signs up n users (alternating nodes), then releases all
// their subscribe requests at once, each to the next node in turn.
func subscribeRace(t *testing.T, nodes []*e2e.Caddy, n int) *raceResult {
	t.Helper()
	users := make([]*user, n)
	for i := range users {
		users[i] = newUser(t, nodes[0]).on(nodes[i%len(nodes)])
		// A first call on its node, so connections and caches are warm
		// and the race is between subscribes, not connection set-ups.
		users[i].must(t, http.MethodGet, "/api/pools/race", nil)
	}

	type shot struct {
		start, end time.Time
		quantity   int
		a          answer
		err        error
	}
	shots := make([]shot, n)
	release := make(chan struct{})
	var ready, done sync.WaitGroup
	for i, u := range users {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			q := 1 + i%2
			ready.Done()
			<-release
			start := time.Now()
			a, err := tryDo(http.MethodPost, u.c.URL()+"/api/pools/race/subscribe",
				map[string]any{"blocks": allBlocks, "quantity": q}, bearer(u.token)...)
			shots[i] = shot{start: start, end: time.Now(), quantity: q, a: a, err: err}
		}()
	}
	ready.Wait()
	close(release)
	done.Wait()

	res := &raceResult{sold: make(map[string]int)}
	type event struct {
		at    time.Time
		delta int
	}
	var events []event
	first, last := shots[0].start, shots[0].start
	for _, s := range shots {
		res.demandSeat += s.quantity
		if s.err != nil {
			res.other = append(res.other, s.err.Error())
			continue
		}
		events = append(events, event{s.start, 1}, event{s.end, -1})
		if s.start.Before(first) {
			first = s.start
		}
		if s.start.After(last) {
			last = s.start
		}
		switch {
		case s.a.status == http.StatusCreated:
			res.sold[s.a.data().Get("id").Str] = s.quantity
			res.soldSeats += s.quantity
		case s.a.status == http.StatusConflict && strings.Contains(string(s.a.body), "sold out"):
			res.soldOut++
		default:
			res.other = append(res.other, s.a.String())
		}
	}
	sort.Slice(events, func(i, j int) bool {
		if events[i].at.Equal(events[j].at) {
			return events[i].delta < events[j].delta // an end before a start at the same instant
		}
		return events[i].at.Before(events[j].at)
	})
	in := 0
	for _, e := range events {
		in += e.delta
		res.peak = max(res.peak, in)
	}
	res.spread = last.Sub(first)
	return res
}

// check records the figures: what the answers say, then what the store
// holds (seats per hour, each subscription's seats and its charge).
func (r *raceResult) check(t *testing.T, where string, st accounts.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	oversold := max(0, r.soldSeats-raceSlots) // by the answers
	withoutCharge, lostSubs, loserCharges := 0, 0, 0
	perHour := make(map[int]int)
	err := st.View(ctx, func(tx accounts.Tx) error {
		pool, err := tx.GetPoolBySlug("race")
		if err != nil {
			return err
		}
		taken, err := tx.TakenSeats(pool.ID)
		if err != nil {
			return err
		}
		for seat := range taken {
			perHour[seat.Hour]++
			if seat.SlotIndex < 0 || seat.SlotIndex >= raceSlots {
				oversold++ // a seat beyond the pool's slots
			}
		}
		users, err := tx.ListUsers()
		if err != nil {
			return err
		}
		found := make(map[string]bool)
		buyers := make(map[string]bool) // users holding a subscription of the pool
		for _, u := range users {
			subs, err := tx.ListSubscriptionsByUser(u.ID)
			if err != nil {
				return err
			}
			for _, s := range subs {
				if s.PoolID != pool.ID {
					continue
				}
				found[s.ID] = true
				buyers[u.ID] = true
				// Every sold seat is held in each hour of its blocks.
				if want := s.Quantity * 8 * len(s.Blocks); len(s.Seats) != want {
					t.Errorf("subscription %s holds %d seats, want %d", s.ID, len(s.Seats), want)
					oversold += max(0, want-len(s.Seats))
				}
				for _, seat := range s.Seats {
					if taken[seat] != s.ID {
						t.Errorf("subscription %s lists seat %+v, which the pool gives to %q", s.ID, seat, taken[seat])
						oversold++
					}
				}
				charges, err := tx.ListCharges(s.ID)
				if err != nil {
					return err
				}
				paid := 0
				for _, c := range charges {
					if c.Status == "succeeded" {
						paid++
					}
				}
				if paid != 1 {
					t.Errorf("subscription %s has %d succeeded charges (of %d)", s.ID, paid, len(charges))
					withoutCharge++
				}
			}
		}
		for id := range r.sold {
			if !found[id] {
				t.Errorf("subscription %s was answered 201 but is not in the store", id)
				lostSubs++
			}
		}
		if len(found) != len(r.sold) {
			t.Errorf("the store holds %d subscriptions of pool race, the answers sold %d", len(found), len(r.sold))
		}
		// The processor's ledger: a buyer refused sold out must never have
		// been charged (seats are reserved before the card is), not even
		// charged and refunded.
		ledger, err := tx.(accounts.TestLedgerTx).ListTestCharges()
		if err != nil {
			return err
		}
		for _, c := range ledger {
			if !c.Declined && !buyers[c.UserID] {
				t.Errorf("user %s holds no seat but was charged %s (refunded: %v)", c.UserID, c.Amount, c.Refunded)
				loserCharges++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for h, n := range perHour {
		if n > raceSlots {
			t.Errorf("hour %d: %d seats held, the pool has %d", h, n, raceSlots)
			oversold += n - raceSlots
		}
	}
	for _, o := range r.other {
		t.Errorf("unexpected answer: %s", o)
	}

	// The race raced: all requests were sent within a short spread and
	// most were in flight together; and demand really exceeded the seats.
	AtLeast(t, "subscribe requests in flight at once, peak ("+where+")", float64(r.peak), float64(len(r.sold)+r.soldOut)/2, "requests")
	Info(t, "spread of the subscribe requests' start ("+where+")", ms(r.spread), "ms")
	Zero(t, "seats oversold ("+where+")", oversold, "seats")
	Zero(t, "subscriptions without a charge ("+where+")", withoutCharge, "subs")
	Zero(t, "subscriptions answered 201 but missing ("+where+")", lostSubs, "subs")
	Zero(t, "subscribe answers other than 201 or 409 sold out ("+where+")", len(r.other), "answers")
	Zero(t, "charges made for buyers who lost the seat race ("+where+")", loserCharges, "charges")
	Info(t, "seats an hour asked for ("+where+")", float64(r.demandSeat), "seats")
	Info(t, "subscriptions sold ("+where+")", float64(len(r.sold)), "subs")
	Info(t, "seats an hour sold ("+where+")", float64(r.soldSeats), "seats")
	Info(t, "subscribes refused sold out ("+where+")", float64(r.soldOut), "answers")
	if r.soldSeats < raceSlots-1 {
		// With one- and two-seat requests the last free seat may stay
		// unsold only if every request left asked for two.
		t.Errorf("only %d of %d seats an hour were sold; the pool should sell out", r.soldSeats, raceSlots)
	}
}
