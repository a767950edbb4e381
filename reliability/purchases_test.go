//go:build reliability

package reliability

// Purchases under retries, lost answers and kill -9: each user buys again
// and again, every purchase under a new Idempotency-Key that the client
// retries (same key, same body) after a transport error, a 5xx or a 409
// "still being processed", as a careful client does. The built-in
// processor loses the answer of a quarter of the charges it makes
// (accounts.LoseChargeAnswersEnv), and the node is killed with SIGKILL at
// random moments. Then settlement runs and the processor's ledger is laid
// against the answers: one key is one purchase and at most one charge.

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

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
	"github.com/timeblock/timeblock/accounts/embedded"
	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// lostAnswers is the fraction of charge answers the processor loses.
const lostAnswers = "0.25"

func TestPurchasesUnderRetries(t *testing.T) {
	kills := scale(6, 20)
	env := []string{nodeSecret, accounts.SettleGraceEnv + "=" + killSettleGrace.String(), accounts.LoseChargeAnswersEnv + "=" + lostAnswers}
	t.Run("embedded", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "accounts.db")
		c := e2e.Start(t, strings.Replace(killCaddyfile, "%STORE%", "store embedded "+path, 1), e2e.WithEnv(env...))
		res := purchaseWithRetries(t, c, kills)
		c.Stop() // the file store admits one process
		st, err := embedded.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		res.check(t, "embedded", st)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		c := e2e.Start(t, strings.Replace(killCaddyfile, "%STORE%", "store postgres {$TIMEBLOCK_DSN}", 1),
			e2e.WithEnv(append(env, "TIMEBLOCK_DSN="+dsn)...))
		res := purchaseWithRetries(t, c, kills)
		c.Stop()
		res.check(t, "postgres", openPostgres(t, dsn))
	})
}

// keyedPurchase is one purchase under one Idempotency-Key, as its client
// saw it.
type keyedPurchase struct {
	userID     string
	key        string
	start, end time.Time // first attempt sent, final answer received
	attempts   int
	final      answer // zero when the attempts ran out
	last       string // the last attempt's answer or error, for the log when they ran out
	retried5xx bool   // a 5xx (a lost answer among them) was retried
	settling   bool   // a retry was told settlement is ending the purchase
}

type retryResult struct {
	kills     int
	purchases []*keyedPurchase
}

// purchaseWithRetries runs one buyer per user, each buying in turn, while
// c is killed and restarted.
func purchaseWithRetries(t *testing.T, c *e2e.Caddy, kills int) *retryResult {
	const buyers, maxAttempts = 8, 1000
	users := make([]*user, buyers)
	for i := range users {
		users[i] = newUser(t, c)
	}
	res := &retryResult{}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		stop atomic.Bool
	)
	for i, u := range users {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for n := 0; !stop.Load(); n++ {
				pool := "big"
				if rng.IntN(3) == 0 {
					pool = "small"
				}
				body := map[string]any{"blocks": []string{allBlocks[rng.IntN(3)]}, "quantity": 1 + rng.IntN(2)}
				p := &keyedPurchase{userID: u.id, key: fmt.Sprintf("%s-%d", u.id, n), start: time.Now()}
				for p.attempts < maxAttempts {
					p.attempts++
					a, err := tryDo(http.MethodPost, u.c.URL()+"/api/pools/"+pool+"/subscribe", body,
						append(bearer(u.token), "Idempotency-Key", p.key)...)
					retry := err != nil || a.status >= 500 ||
						a.status == http.StatusConflict && strings.Contains(string(a.body), "still being processed")
					if err == nil && a.status >= 500 {
						p.retried5xx = true
					}
					if err == nil && a.status == http.StatusConflict && strings.Contains(string(a.body), "being settled") {
						p.settling = true
					}
					if p.last = a.String(); err != nil {
						p.last = err.Error()
					}
					if !retry {
						p.final = a
						break
					}
					time.Sleep(time.Duration(30+rng.IntN(70)) * time.Millisecond)
				}
				p.end = time.Now()
				mu.Lock()
				res.purchases = append(res.purchases, p)
				mu.Unlock()
			}
		})
	}
	for range kills {
		time.Sleep(time.Duration(300+rand.IntN(1200)) * time.Millisecond)
		c.Kill()
		res.kills++
		c.Start()
	}
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()
	// Let settlement finish what the kills and the lost answers left.
	time.Sleep(killSettleGrace + 1500*time.Millisecond)
	return res
}

// check lays the ledger against the purchases: each charge belongs to the
// purchase of its user that was running when it was made (a user buys one
// at a time, and a charge is made after its purchase's first request left
// and before its final answer came back).
func (r *retryResult) check(t *testing.T, label string, st accounts.Store) {
	t.Helper()
	var (
		ledger []*billing.TestCharge
		open   []*accounts.ChargeIntent
	)
	err := st.View(context.Background(), func(tx accounts.Tx) error {
		var err error
		if ledger, err = tx.(accounts.TestLedgerTx).ListTestCharges(); err != nil {
			return err
		}
		open, err = tx.ListOpenChargeIntents(time.Now().Add(time.Hour))
		return err
	})
	if err != nil {
		t.Fatalf("reading the store: %v", err)
	}
	type charges struct{ kept, refunded int }
	per := make(map[*keyedPurchase]*charges)
	unattributed := 0
	for _, c := range ledger {
		if c.Declined || !strings.HasPrefix(c.IdempotencyKey, "subscribe:") {
			continue
		}
		var owner *keyedPurchase
		for _, p := range r.purchases {
			if p.userID == c.UserID && !c.CreatedAt.Before(p.start) && !c.CreatedAt.After(p.end) {
				if owner != nil {
					owner = nil // too close to tell: counted apart
					break
				}
				owner = p
			}
		}
		if owner == nil {
			unattributed++
			t.Logf("%s: charge %s of user %s at %s belongs to no single purchase", label, c.Ref, c.UserID, c.CreatedAt)
			continue
		}
		if per[owner] == nil {
			per[owner] = &charges{}
		}
		if c.Refunded {
			per[owner].refunded++
		} else {
			per[owner].kept++
		}
	}
	var (
		succeeded, chargesOfSucceeded, twice, keptUnbought, unpaid, unanswered, retried, settling int
	)
	for _, p := range r.purchases {
		ch := per[p]
		if ch == nil {
			ch = &charges{}
		}
		if ch.kept+ch.refunded > 1 {
			twice++
			t.Logf("%s: purchase %s charged %d times (%d refunded); answer %s", label, p.key, ch.kept+ch.refunded, ch.refunded, p.final)
		}
		if p.retried5xx {
			retried++
		}
		if p.settling {
			settling++
		}
		switch {
		case p.final.status == 0:
			unanswered++
			t.Logf("%s: purchase %s unanswered after %d attempts (%s to %s), the last: %s", label, p.key, p.attempts,
				p.start.Format(time.StampMilli), p.end.Format(time.StampMilli), p.last)
		case p.final.status == http.StatusCreated:
			succeeded++
			chargesOfSucceeded += ch.kept + ch.refunded
			if ch.kept != 1 {
				unpaid++
				t.Logf("%s: purchase %s answered 201 with %d charges kept", label, p.key, ch.kept)
			}
		default:
			if ch.kept > 0 {
				keptUnbought++
				t.Logf("%s: purchase %s answered %s but its charge was kept", label, p.key, p.final)
			}
		}
	}
	perPurchase := 0.0
	if succeeded > 0 {
		perPurchase = float64(chargesOfSucceeded) / float64(succeeded)
	}
	if succeeded == 0 || retried == 0 {
		t.Errorf("%s: %d purchases succeeded, %d after retrying a 5xx: the scenario did not exercise retries", label, succeeded, retried)
	}
	AtMost(t, "purchase retries: charges per successful purchase ("+label+")", perPurchase, 1, "charges")
	Zero(t, "purchase retries: purchases charged more than once ("+label+")", twice, "purchases")
	Zero(t, "purchase retries: 201 purchases without exactly one charge kept ("+label+")", unpaid, "purchases")
	Zero(t, "purchase retries: charges kept for purchases not answered 201 ("+label+")", keptUnbought, "purchases")
	Zero(t, "purchase retries: charge intents still open after settlement ("+label+")", len(open), "intents")
	Zero(t, "purchase retries: charges not attributable to one purchase ("+label+")", unattributed, "charges")
	Info(t, "purchase retries: purchases ("+label+")", float64(len(r.purchases)), "purchases")
	Info(t, "purchase retries: purchases answered 201 ("+label+")", float64(succeeded), "purchases")
	Info(t, "purchase retries: purchases that retried a 5xx ("+label+")", float64(retried), "purchases")
	Info(t, "purchase retries: purchases told settlement was ending them ("+label+")", float64(settling), "purchases")
	Zero(t, "purchase retries: purchases left without a final answer ("+label+")", unanswered, "purchases")
	Info(t, "purchase retries: kills ("+label+")", float64(r.kills), "kills")
}
