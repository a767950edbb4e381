//go:build reliability

package reliability

// kill -9 during subscribes: clients subscribe through the real account API
// (sign up, save pm_card_visa, subscribe) while the node is killed with
// SIGKILL at random moments and started again. Then settlement runs (its
// grace shortened with accounts.SettleGraceEnv), the node stops, and the
// store is read directly: money against subscriptions.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
	"github.com/timeblock/timeblock/accounts/embedded"
	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// killSettleGrace is the settlement grace the killed node runs with: intents
// older than this are settled at the next lifecycle pass (every 500ms here).
const killSettleGrace = 2 * time.Second

// killCaddyfile is a node with the account API only. Pool "small" runs out
// of seats during the run; pool "big" does not.
const killCaddyfile = `{
	timeblock {
		%STORE%
		secret {$TIMEBLOCK_SECRET}
		lifecycle_interval 500ms
		pool small {
			model m-small
			slots 6
			block asia 40
			block europe 40
			block americas 40
		}
		pool big {
			model m-big
			slots 2000
			block asia 40
			block europe 40
			block americas 40
		}
	}
}

:{{.HTTP}} {
	@api path /api /api/*
	handle @api {
		timeblock_accounts
	}
}
`

func TestKill9DuringSubscribes(t *testing.T) {
	kills := scale(10, 25)
	t.Run("embedded", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "accounts.db")
		c := e2e.Start(t, strings.Replace(killCaddyfile, "%STORE%", "store embedded "+path, 1),
			e2e.WithEnv(nodeSecret, accounts.SettleGraceEnv+"="+killSettleGrace.String()))
		res := killDuringSubscribes(t, c, kills)
		c.Stop() // the file store admits one process
		st, err := embedded.Open(path)
		res.check(t, "embedded", st, err)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		c := e2e.Start(t, strings.Replace(killCaddyfile, "%STORE%", "store postgres {$TIMEBLOCK_DSN}", 1),
			e2e.WithEnv(nodeSecret, "TIMEBLOCK_DSN="+dsn, accounts.SettleGraceEnv+"="+killSettleGrace.String()))
		res := killDuringSubscribes(t, c, kills)
		c.Stop()
		res.check(t, "postgres", openPostgres(t, dsn), nil)
	})
}

// killResult is what the clients saw and what the node logged.
type killResult struct {
	kills     int
	answered  map[string]bool // subscription ids answered 201
	attempts  int64
	settled   int // "charge intent settled" log lines with outcome refunded
	soldOutOK int64
}

// killDuringSubscribes runs subscribers against c while killing and
// restarting it, then lets settlement run and returns.
func killDuringSubscribes(t *testing.T, c *e2e.Caddy, kills int) *killResult {
	const workers, nUsers = 8, 24
	users := make([]*user, nUsers)
	for i := range users {
		users[i] = newUser(t, c)
	}
	res := &killResult{answered: make(map[string]bool)}
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		stop     atomic.Bool
		attempts atomic.Int64
		soldOut  atomic.Int64
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for !stop.Load() {
				u := users[rng.IntN(len(users))]
				pool := "big"
				if rng.IntN(4) == 0 {
					pool = "small"
				}
				body := map[string]any{"blocks": []string{allBlocks[rng.IntN(3)]}, "quantity": 1 + rng.IntN(2)}
				attempts.Add(1)
				a, err := tryDo(http.MethodPost, u.c.URL()+"/api/pools/"+pool+"/subscribe", body, bearer(u.token)...)
				switch {
				case err != nil:
					time.Sleep(20 * time.Millisecond) // the node is down
				case a.status == http.StatusCreated:
					mu.Lock()
					res.answered[gjson.GetBytes(a.body, "data.id").Str] = true
					mu.Unlock()
				case a.status == http.StatusConflict:
					soldOut.Add(1)
				}
			}
		}()
	}
	for range kills {
		time.Sleep(time.Duration(200+rand.IntN(1200)) * time.Millisecond)
		c.Kill()
		res.kills++
		c.Start()
	}
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	// Every intent a kill left is now older than... soon: let two passes run
	// after the grace.
	time.Sleep(killSettleGrace + 1500*time.Millisecond)
	res.attempts, res.soldOutOK = attempts.Load(), soldOut.Load()
	for _, line := range strings.Split(c.Logs(), "\n") {
		if strings.Contains(line, "charge intent settled") && strings.Contains(line, `"outcome":"refunded"`) {
			res.settled++
		}
	}
	return res
}

// check reads the store and records the figures.
func (r *killResult) check(t *testing.T, label string, st accounts.Store, openErr error) {
	t.Helper()
	failedOpen := 0
	if openErr != nil {
		failedOpen = 1
	}
	Zero(t, "kill -9: store failed to open ("+label+")", failedOpen, "opens")
	if openErr != nil {
		return
	}
	defer st.Close()
	var (
		subs    []*accounts.Subscription
		ledger  []*billing.TestCharge
		open    []*accounts.ChargeIntent
		pools   []*accounts.Pool
		charges = map[string][]*accounts.Charge{}
	)
	err := st.View(context.Background(), func(tx accounts.Tx) error {
		users, err := tx.ListUsers()
		if err != nil {
			return err
		}
		for _, u := range users {
			s, err := tx.ListSubscriptionsByUser(u.ID)
			if err != nil {
				return err
			}
			subs = append(subs, s...)
		}
		for _, s := range subs {
			if charges[s.ID], err = tx.ListCharges(s.ID); err != nil {
				return err
			}
		}
		if ledger, err = tx.(accounts.TestLedgerTx).ListTestCharges(); err != nil {
			return err
		}
		if pools, err = tx.ListPools(); err != nil {
			return err
		}
		open, err = tx.ListOpenChargeIntents(time.Now().Add(time.Hour))
		return err
	})
	if err != nil {
		t.Fatalf("reading the store: %v", err)
	}

	exists := make(map[string]*accounts.Subscription, len(subs))
	for _, s := range subs {
		exists[s.ID] = s
	}
	kept := map[string]*billing.TestCharge{} // subscription id → its charge, not refunded
	unmatched, refunded := 0, 0
	for _, c := range ledger {
		if c.Declined {
			continue
		}
		if c.Refunded {
			refunded++
			continue
		}
		subID, ok := strings.CutPrefix(c.IdempotencyKey, "subscribe:")
		if !ok || exists[subID] == nil {
			unmatched++
			t.Logf("%s: charge %s (%s) has neither a subscription nor a refund", label, c.Ref, c.IdempotencyKey)
			continue
		}
		kept[subID] = c
	}
	unpaid, unrecorded := 0, 0
	for _, s := range subs {
		c := kept[s.ID]
		if c == nil {
			unpaid++
			t.Logf("%s: subscription %s has no charge kept", label, s.ID)
			continue
		}
		if cs := charges[s.ID]; len(cs) != 1 || cs[0].ProcessorRef != c.Ref || cs[0].Status != accounts.ChargeSucceeded {
			unrecorded++
		}
	}
	slots := map[string]int{}
	for _, p := range pools {
		slots[p.ID] = p.Slots
	}
	held := map[string]string{} // pool/hour/slot → subscription
	twice := 0
	for _, s := range subs {
		for _, seat := range s.Seats {
			k := fmt.Sprintf("%s/%d/%d", s.PoolID, seat.Hour, seat.SlotIndex)
			if other, ok := held[k]; ok && other != s.ID || seat.SlotIndex >= slots[s.PoolID] {
				twice++
			}
			held[k] = s.ID
		}
	}
	lost := 0
	for id := range r.answered {
		if exists[id] == nil {
			lost++
		}
	}
	Zero(t, "kill -9: charges without a subscription or refund ("+label+")", unmatched, "charges")
	Zero(t, "kill -9: subscriptions without a charge ("+label+")", unpaid, "subs")
	Zero(t, "kill -9: subscriptions with a wrong charge record ("+label+")", unrecorded, "subs")
	Zero(t, "kill -9: seats sold twice ("+label+")", twice, "seats")
	Zero(t, "kill -9: subscriptions answered 201 but not stored ("+label+")", lost, "subs")
	Zero(t, "kill -9: charge intents still open after settlement ("+label+")", len(open), "intents")
	Info(t, "kill -9: kills ("+label+")", float64(r.kills), "kills")
	Info(t, "kill -9: subscribe requests sent ("+label+")", float64(r.attempts), "requests")
	Info(t, "kill -9: subscriptions ("+label+")", float64(len(subs)), "subs")
	Info(t, "kill -9: refunds, all causes ("+label+")", float64(refunded), "refunds")
	Info(t, "kill -9: charges refunded by settlement ("+label+")", float64(r.settled), "refunds")
	Info(t, "kill -9: sold-out answers ("+label+")", float64(r.soldOutOK), "answers")
}
