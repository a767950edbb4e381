//go:build reliability

package reliability

// Funding pools at activation (accounts/funding.go): pledges by several
// users on a pool in funding, then the operator makes it active and every
// pledge is charged off-session, each under the processor key
// "pledge:<subscription id>".
//
//   - kill -9 half-way (both stores): the node kills itself right after its
//     7th pledge charge at the processor, before recording it
//     (accounts.CrashAfterPledgeChargesEnv). A node started again on the same
//     store, with a short settle grace, finishes the activation; the
//     processor's ledger (kept in the store by the built-in processor) must
//     then hold exactly one charge per pledge, none refunded, nobody left out.
//   - two nodes on PostgreSQL both run the funding pass, the operator
//     activates through both admin APIs at once, and one node loses the
//     answers of half the charges it makes (accounts.LoseChargeAnswersEnv),
//     forcing takeovers: still one charge per pledge.
//   - two nodes on PostgreSQL, the activating one dies by SIGKILL after its
//     5th pledge charge and stays down: the other finishes alone.
//   - withdrawals racing the activation: a pledge is either withdrawn with
//     nothing charged or charged once, never both and never neither.

import (
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
	"github.com/timeblock/timeblock/accounts/embedded"
	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

const (
	fundPool        = "fund"
	fundSettleGrace = 2 * time.Second // the takeover wait of a pledge charge left pending
	fundInterval    = "1s"            // lifecycle_interval: the funding pass runs this often
	fundCrashAfter  = 7               // the kill -9 comes right after this many pledge charges
	fundFinishBound = 20.0            // seconds allowed to finish an activation after a restart
)

// fundCaddyfile is a node with the account API and one pool in funding with
// plenty of seats. Its goal is reached by the first few pledges, so the pool
// is activating (still taking pledges) when the operator makes it active.
const fundCaddyfile = `{
	timeblock {
		%STORE%
		secret {$TIMEBLOCK_SECRET}
		lifecycle_interval %EVERY%
		pool ` + fundPool + ` {
			model m-fund
			slots 100
			status funding
			funding_goal 300
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

// fundNode starts one node on store (a store line) with env added.
func fundNode(t *testing.T, store string, env ...string) *e2e.Caddy {
	t.Helper()
	return fundNodeEvery(t, store, fundInterval, env...)
}

// fundNodeEvery is fundNode with another lifecycle_interval.
func fundNodeEvery(t *testing.T, store, every string, env ...string) *e2e.Caddy {
	t.Helper()
	cf := strings.NewReplacer("%STORE%", store, "%EVERY%", every).Replace(fundCaddyfile)
	return e2e.Start(t, cf, e2e.WithEnv(append([]string{nodeSecret}, env...)...))
}

// pledgers signs up n users through c; the first saves a card that every
// charge declines and the second one whose bank asks for authentication
// (which an off-session charge cannot give): both must end canceled (a
// declined pledge is released at once, its seats freed). It
// returns the users and the set of those whose charges fail.
func pledgers(t *testing.T, c *e2e.Caddy, n int) ([]*user, map[string]bool) {
	t.Helper()
	users := make([]*user, n)
	failing := map[string]bool{}
	for i := range users {
		users[i] = newUser(t, c)
		card := ""
		switch i {
		case 0:
			card = billing.TestCardDeclined
		case 1:
			card = billing.TestCardAuthentication
		}
		if card != "" {
			users[i].must(t, http.MethodPost, "/api/billing/setup-intent", map[string]any{"paymentMethod": card})
			failing[users[i].id] = true
		}
	}
	return users, failing
}

// pledge subscribes u to the funding pool (some blocks, quantity 1–2) and
// checks that a pledge was recorded; it returns the subscription id.
func pledge(t *testing.T, u *user, rng *rand.Rand) string {
	t.Helper()
	var blocks []string
	for len(blocks) == 0 {
		for _, b := range allBlocks {
			if rng.IntN(2) == 0 {
				blocks = append(blocks, b)
			}
		}
	}
	d := u.must(t, http.MethodPost, "/api/pools/"+fundPool+"/subscribe",
		map[string]any{"blocks": blocks, "quantity": 1 + rng.IntN(2)})
	if st := d.Get("status").Str; st != accounts.SubPledged {
		t.Fatalf("subscribe on a funding pool: status %q, want %q: %s", st, accounts.SubPledged, d.Raw)
	}
	return d.Get("id").Str
}

// pledgeAll makes n pledges, spread over users in turn.
func pledgeAll(t *testing.T, users []*user, n int) []string {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	ids := make([]string, n)
	for i := range ids {
		ids[i] = pledge(t, users[i%len(users)], rng)
	}
	return ids
}

// poolStatus reads the pool's status through c's account API.
func poolStatus(t *testing.T, u *user) string {
	t.Helper()
	return u.must(t, http.MethodGet, "/api/pools/"+fundPool, nil).Get("status").Str
}

// activate asks c's admin API to make the pool active.
func activate(c *e2e.Caddy) (answer, error) {
	return tryDo(http.MethodPost, c.AdminURL()+"/timeblock/pools/"+fundPool+"/status", map[string]any{"status": accounts.PoolActive})
}

// pledgedLeft counts the users' subscriptions still pledged, through their
// account API.
func pledgedLeft(t *testing.T, users []*user) int {
	t.Helper()
	n := 0
	for _, u := range users {
		a, err := tryDo(http.MethodGet, u.c.URL()+"/api/subscriptions", nil, bearer(u.token)...)
		if err != nil || a.status != http.StatusOK {
			return -1 // not answering yet
		}
		for _, s := range a.data().Array() {
			if s.Get("status").Str == accounts.SubPledged {
				n++
			}
		}
	}
	return n
}

// waitNoPledges polls until none of the users' subscriptions is pledged and
// returns how long that took, and the count still pledged at the timeout.
func waitNoPledges(t *testing.T, users []*user, timeout time.Duration) (time.Duration, int) {
	t.Helper()
	start := time.Now()
	left := -1
	for time.Since(start) < timeout {
		if left = pledgedLeft(t, users); left == 0 {
			return time.Since(start), 0
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start), left
}

// waitDead waits until c's HTTP port refuses connections (the process died
// by itself) and reports whether it did within timeout.
func waitDead(c *e2e.Caddy, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(c.HTTP), 200*time.Millisecond)
		if err != nil {
			return true
		}
		conn.Close()
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// logCount counts the JSON log lines of logs whose msg starts with msg.
func logCount(logs, msg string) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.HasPrefix(gjson.Get(line, "msg").Str, msg) {
			n++
		}
	}
	return n
}

// logSubs returns the subscription_id of every JSON log line whose msg
// starts with msg, with how many lines named each.
func logSubs(logs, msg string) map[string]int {
	out := map[string]int{}
	for _, line := range strings.Split(logs, "\n") {
		if strings.HasPrefix(gjson.Get(line, "msg").Str, msg) {
			out[gjson.Get(line, "subscription_id").Str]++
		}
	}
	return out
}

// fundingState is the store after an activation: the pool's subscriptions,
// their charge records, the processor's ledger and the open intents.
type fundingState struct {
	subs    []*accounts.Subscription
	charges map[string][]*accounts.Charge
	ledger  []*billing.TestCharge
	open    []*accounts.ChargeIntent
}

func readFunding(t *testing.T, st accounts.Store) *fundingState {
	t.Helper()
	fs := &fundingState{charges: map[string][]*accounts.Charge{}}
	err := st.View(context.Background(), func(tx accounts.Tx) error {
		pools, err := tx.ListPools()
		if err != nil {
			return err
		}
		poolID := ""
		for _, p := range pools {
			if p.Slug == fundPool {
				poolID = p.ID
			}
		}
		users, err := tx.ListUsers()
		if err != nil {
			return err
		}
		for _, u := range users {
			subs, err := tx.ListSubscriptionsByUser(u.ID)
			if err != nil {
				return err
			}
			for _, s := range subs {
				if s.PoolID == poolID {
					fs.subs = append(fs.subs, s)
				}
			}
		}
		for _, s := range fs.subs {
			if fs.charges[s.ID], err = tx.ListCharges(s.ID); err != nil {
				return err
			}
		}
		if fs.ledger, err = tx.(accounts.TestLedgerTx).ListTestCharges(); err != nil {
			return err
		}
		fs.open, err = tx.ListOpenChargeIntents(time.Now().Add(time.Hour))
		return err
	})
	if err != nil {
		t.Fatalf("reading the store: %v", err)
	}
	return fs
}

// ledgerSub is the subscription a processor idempotency key names
// ("<kind>:<subscription id>[:…]").
func ledgerSub(key string) string {
	_, rest, _ := strings.Cut(key, ":")
	id, _, _ := strings.Cut(rest, ":")
	return id
}

// fundingFigures lays the ledger against the pool's subscriptions.
type fundingFigures struct {
	pledges      int // subscriptions of the pool, withdrawn ones excluded
	charged      int // ledger charges that went through
	declined     int // ledger charges declined
	maxPerPledge int // ledger entries of the most charged pledge
	duplicates   int // ledger entries beyond the first, per pledge
	leftPledged  int // still pledged
	leftOut      int // not withdrawn, yet nothing at the processor
	wrongStatus  int // not active (canceled for a failing card: released)
	wrongRecord  int // not exactly one charge record matching the ledger
	wrongAmount  int // charged another amount than the first period's
	refunded     int // ledger charges refunded
	withdrawnHit int // withdrawn pledges with anything at the processor or a charge record
	withdrawnBad int // answered "withdrawn" but the subscription is not canceled
}

// check computes the figures. failing names the users whose cards fail;
// withdrawn the subscriptions whose withdrawal was answered "withdrawn".
func (fs *fundingState) check(t *testing.T, failing map[string]bool, withdrawn map[string]bool) fundingFigures {
	t.Helper()
	var f fundingFigures
	per := map[string][]*billing.TestCharge{}
	for _, c := range fs.ledger {
		per[ledgerSub(c.IdempotencyKey)] = append(per[ledgerSub(c.IdempotencyKey)], c)
		switch {
		case c.Refunded:
			f.refunded++
		case c.Declined:
			f.declined++
		default:
			f.charged++
		}
	}
	for _, s := range fs.subs {
		entries := per[s.ID]
		if withdrawn[s.ID] {
			if len(entries) > 0 || len(fs.charges[s.ID]) > 0 {
				f.withdrawnHit++
				t.Logf("withdrawn pledge %s has %d ledger entries and %d charge records", s.ID, len(entries), len(fs.charges[s.ID]))
			}
			if s.Status != accounts.SubCanceled {
				f.withdrawnBad++
				t.Logf("withdrawn pledge %s is %s", s.ID, s.Status)
			}
			continue
		}
		f.pledges++
		f.maxPerPledge = max(f.maxPerPledge, len(entries))
		if len(entries) > 1 {
			f.duplicates += len(entries) - 1
			for _, c := range entries {
				t.Logf("pledge %s: ledger %s key %s declined=%t refunded=%t at %s", s.ID, c.Ref, c.IdempotencyKey, c.Declined, c.Refunded, c.CreatedAt)
			}
		}
		if s.Status == accounts.SubPledged {
			f.leftPledged++
		}
		if len(entries) == 0 {
			f.leftOut++
			t.Logf("pledge %s (%s) has nothing at the processor", s.ID, s.Status)
			continue
		}
		c := entries[0]
		if c.IdempotencyKey != billing.PledgeKey(s.ID) {
			f.wrongRecord++
			t.Logf("pledge %s charged under key %s", s.ID, c.IdempotencyKey)
		}
		if c.Amount != s.PeriodAmount && s.PeriodAmount != "" {
			f.wrongAmount++
			t.Logf("pledge %s charged %s, its period amount is %s", s.ID, c.Amount, s.PeriodAmount)
		}
		want := accounts.SubActive
		if failing[s.UserID] {
			want = accounts.SubCanceled
		}
		if s.Status != want && !(want == accounts.SubActive && s.Status == accounts.SubPendingKey) {
			f.wrongStatus++
			t.Logf("pledge %s is %s, want %s", s.ID, s.Status, want)
		}
		recs := fs.charges[s.ID]
		wantRec := accounts.ChargeSucceeded
		if c.Declined {
			wantRec = accounts.ChargeFailed
		}
		if len(recs) != 1 || recs[0].Status != wantRec || (!c.Declined && recs[0].ProcessorRef != c.Ref) {
			f.wrongRecord++
			t.Logf("pledge %s: %d charge records (want one %s, ref %s)", s.ID, len(recs), wantRec, c.Ref)
		}
	}
	return f
}

// record writes the figures common to the scenarios, named "<what> (<label>)".
func (f fundingFigures) record(t *testing.T, prefix, label string, open int) {
	t.Helper()
	name := func(s string) string { return prefix + ": " + s + " (" + label + ")" }
	Info(t, name("pledges"), float64(f.pledges), "pledges")
	Info(t, name("charges made at the processor"), float64(f.charged), "charges")
	Info(t, name("charges declined (failing cards)"), float64(f.declined), "charges")
	AtMost(t, name("processor charges per pledge, max"), float64(f.maxPerPledge), 1, "charges")
	Zero(t, name("duplicate charges"), f.duplicates, "charges")
	Zero(t, name("pledges left pledged"), f.leftPledged, "pledges")
	Zero(t, name("pledges left out (nothing at the processor)"), f.leftOut, "pledges")
	Zero(t, name("pledges in a wrong status"), f.wrongStatus, "pledges")
	Zero(t, name("pledges without exactly one matching charge record"), f.wrongRecord, "pledges")
	Zero(t, name("charges of a wrong amount"), f.wrongAmount, "charges")
	Zero(t, name("refunds"), f.refunded, "refunds")
	Zero(t, name("charge intents still open"), open, "intents")
}

// TestFundingKill9DuringActivation: a node dies by SIGKILL right after its
// 7th pledge charge, before recording it; a node started again on the
// store finishes the activation.
func TestFundingKill9DuringActivation(t *testing.T) {
	pledges := scale(20, 60)
	grace := accounts.SettleGraceEnv + "=" + fundSettleGrace.String()
	crash := accounts.CrashAfterPledgeChargesEnv + "=" + strconv.Itoa(fundCrashAfter)
	t.Run("embedded", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "accounts.db")
		store := "store embedded " + path
		fundingKill9(t, "embedded", pledges,
			func(env ...string) *e2e.Caddy { return fundNode(t, store, env...) },
			func(c *e2e.Caddy) accounts.Store {
				c.Stop() // the file store admits one process
				st, err := embedded.Open(path)
				if err != nil {
					t.Fatalf("opening the store: %v", err)
				}
				t.Cleanup(func() { st.Close() })
				return st
			}, crash, grace)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		fundingKill9(t, "postgres", pledges,
			func(env ...string) *e2e.Caddy {
				return fundNode(t, "store postgres {$TIMEBLOCK_DSN}", append(env, "TIMEBLOCK_DSN="+dsn)...)
			},
			func(c *e2e.Caddy) accounts.Store {
				c.Stop()
				return openPostgres(t, dsn)
			}, crash, grace)
	})
}

func fundingKill9(t *testing.T, label string, n int, start func(env ...string) *e2e.Caddy,
	open func(*e2e.Caddy) accounts.Store, crash, grace string) {
	c := start(crash, grace)
	users, failing := pledgers(t, c, 7)
	ids := pledgeAll(t, users, n)
	if st := poolStatus(t, users[0]); st != accounts.PoolActivating {
		t.Errorf("after %d pledges reaching the goal the pool is %s, want %s", n, st, accounts.PoolActivating)
	}

	// The operator makes the pool active; the node dies half-way through
	// charging (its answer may or may not get out first).
	a, err := activate(c)
	answered := 0
	if err == nil && a.status == http.StatusOK {
		answered = 1
	} else if err == nil {
		t.Fatalf("making the pool active: %s", a)
	}
	died := waitDead(c, 30*time.Second)
	alive := 0
	if !died {
		alive = 1
	}
	Zero(t, "funding kill -9: node alive after its crash charge ("+label+")", alive, "nodes")
	Info(t, "funding kill -9: activation answered 200 before the crash ("+label+")", float64(answered), "answers")
	crashLogs := c.Logs()
	c.Kill() // reaps it (a no-op on the process when it is dead)
	if !died {
		t.Fatalf("the node did not kill itself after %d pledge charges", fundCrashAfter)
	}
	crashedAt := time.Now()
	recordedBefore := logCount(crashLogs, "pledge charged") + logCount(crashLogs, "pledge charge declined")

	// Started again on the same store, without the crash.
	began := time.Now()
	c2 := start(grace)
	for i := range users {
		users[i] = users[i].on(c2)
	}
	took, left := waitNoPledges(t, users, 60*time.Second)
	finished := time.Since(began) // the node's start included
	if left != 0 {
		t.Errorf("%d pledges still pledged %v after the restart", left, took)
	}
	logs := c2.Logs()
	if st := poolStatus(t, users[0]); st != accounts.PoolActive {
		t.Errorf("after the restart the pool is %s, want active (a restart with the Caddyfile saying funding must not undo the activation)", st)
	}

	fs := readFunding(t, open(c2))
	if len(fs.subs) != len(ids) {
		t.Errorf("the store holds %d subscriptions of the pool, %d pledges were made", len(fs.subs), len(ids))
	}
	madeBefore := 0
	for _, ch := range fs.ledger {
		if ch.CreatedAt.Before(crashedAt) {
			madeBefore++
		}
	}
	f := fs.check(t, failing, nil)
	f.record(t, "funding kill -9", label, len(fs.open))
	Info(t, "funding kill -9: charges made before the kill ("+label+")", float64(madeBefore), "charges")
	Info(t, "funding kill -9: charges recorded before the kill ("+label+")", float64(recordedBefore), "charges")
	AtLeast(t, "funding kill -9: pledge charges taken over after the restart ("+label+")",
		float64(logCount(logs, "taking over a pledge charge left unfinished")), 1, "charges")
	AtMost(t, "funding kill -9: time to charge every pledge after the restart ("+label+")",
		finished.Seconds(), fundFinishBound, "s")
}

// pgFundStore is the store line of a PostgreSQL node.
const pgFundStore = "store postgres {$TIMEBLOCK_DSN}"

// activateAll sends the activation to every node at the same moment and
// returns how many answers said the pool changed, and how many failed.
func activateAll(t *testing.T, nodes []*e2e.Caddy) (changed, failed int) {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		release = make(chan struct{})
	)
	for _, n := range nodes {
		wg.Go(func() {
			<-release
			a, err := activate(n)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil || a.status != http.StatusOK:
				failed++
				t.Logf("activation through %s: %v %s", n.AdminURL(), err, a)
			case a.data().Get("changed").Bool():
				changed++
			}
		})
	}
	close(release)
	wg.Wait()
	return changed, failed
}

// outcomesTwice counts the pledges whose charge outcome was recorded (logged
// "pledge charged" or "pledge charge declined") more than once over logs.
func outcomesTwice(logs ...string) int {
	all := map[string]int{}
	for _, l := range logs {
		for _, msg := range []string{"pledge charged", "pledge charge declined"} {
			for id, n := range logSubs(l, msg) {
				all[id] += n
			}
		}
	}
	twice := 0
	for _, n := range all {
		if n > 1 {
			twice++
		}
	}
	return twice
}

// TestFundingTwoNodes: two nodes on one PostgreSQL database both run the
// funding pass every 200ms; the operator activates through both at once;
// node B loses the answers of half the charges it makes, so its claims are
// taken over after the settle grace (by either node) and charged again
// under the same key.
func TestFundingTwoNodes(t *testing.T) {
	const label = "postgres, 2 nodes"
	pledges := scale(40, 100)
	dsn := pgtest.DSN(t)
	grace := accounts.SettleGraceEnv + "=" + fundSettleGrace.String()
	a := fundNodeEvery(t, pgFundStore, "200ms", "TIMEBLOCK_DSN="+dsn, grace)
	b := fundNodeEvery(t, pgFundStore, "200ms", "TIMEBLOCK_DSN="+dsn, grace, accounts.LoseChargeAnswersEnv+"=0.5")
	users, failing := pledgers(t, a, 8)
	for i := range users {
		if i%2 == 1 {
			users[i] = users[i].on(b)
		}
	}
	ids := pledgeAll(t, users, pledges)

	changed, failed := activateAll(t, []*e2e.Caddy{a, b})
	took, left := waitNoPledges(t, users, 60*time.Second)
	if left != 0 {
		t.Errorf("%d pledges still pledged %v after the activation", left, took)
	}
	la, lb := a.Logs(), b.Logs()
	a.Stop()
	b.Stop()

	fs := readFunding(t, openPostgres(t, dsn))
	if len(fs.subs) != len(ids) {
		t.Errorf("the store holds %d subscriptions of the pool, %d pledges were made", len(fs.subs), len(ids))
	}
	f := fs.check(t, failing, nil)
	f.record(t, "funding 2 nodes", label, len(fs.open))
	Zero(t, "funding 2 nodes: activation requests failed ("+label+")", failed, "requests")
	AtMost(t, "funding 2 nodes: activations that changed the pool ("+label+")", float64(changed), 1, "activations")
	if changed != 1 {
		t.Errorf("%d activation answers said changed, want exactly 1", changed)
	}
	Zero(t, "funding 2 nodes: pledge outcomes recorded more than once ("+label+")", outcomesTwice(la, lb), "pledges")
	Info(t, "funding 2 nodes: outcomes recorded by node A ("+label+")",
		float64(logCount(la, "pledge charged")+logCount(la, "pledge charge declined")), "pledges")
	Info(t, "funding 2 nodes: outcomes recorded by node B ("+label+")",
		float64(logCount(lb, "pledge charged")+logCount(lb, "pledge charge declined")), "pledges")
	lost := strings.Count(lb, "the answer of a charge it made was lost")
	Info(t, "funding 2 nodes: charge answers lost by node B ("+label+")", float64(lost), "answers")
	takeovers := logCount(la, "taking over a pledge charge") + logCount(lb, "taking over a pledge charge")
	Info(t, "funding 2 nodes: pledge charges taken over ("+label+")", float64(takeovers), "charges")
	if lost > 0 && takeovers == 0 {
		t.Errorf("node B lost %d answers but no pledge charge was taken over", lost)
	}
	AtMost(t, "funding 2 nodes: time to charge every pledge ("+label+")", took.Seconds(), fundFinishBound, "s")
}

// TestFundingWithdrawRace: each pledger withdraws (DELETE
// /api/pools/fund/pledge) at a random moment while the activation charges
// the pledges. The activating node loses half its charge answers, so some
// claims stay open for the settle grace and the withdrawals meet them. A
// withdrawal answered "withdrawn" must leave nothing at the processor; any
// other pledge must be charged exactly once.
func TestFundingWithdrawRace(t *testing.T) {
	grace := accounts.SettleGraceEnv + "=" + fundSettleGrace.String()
	lossy := accounts.LoseChargeAnswersEnv + "=0.5"
	t.Run("embedded", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "accounts.db")
		c := fundNode(t, "store embedded "+path, grace, lossy)
		fundingWithdrawRace(t, "embedded", c, []*e2e.Caddy{c}, func() accounts.Store {
			c.Stop()
			st, err := embedded.Open(path)
			if err != nil {
				t.Fatalf("opening the store: %v", err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		a := fundNode(t, pgFundStore, "TIMEBLOCK_DSN="+dsn, grace, lossy)
		b := fundNode(t, pgFundStore, "TIMEBLOCK_DSN="+dsn, grace)
		fundingWithdrawRace(t, "postgres, 2 nodes", a, []*e2e.Caddy{b, a}, func() accounts.Store {
			a.Stop()
			b.Stop()
			return openPostgres(t, dsn)
		})
	})
}

func fundingWithdrawRace(t *testing.T, label string, activator *e2e.Caddy, nodes []*e2e.Caddy, open func() accounts.Store) {
	n := scale(16, 40)
	rng := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano())))
	users := make([]*user, n)
	subOf := map[string]string{} // user id → pledge
	for i := range users {
		users[i] = newUser(t, nodes[0]).on(nodes[i%len(nodes)])
		subOf[users[i].id] = pledge(t, users[i], rng)
	}

	var (
		wg                                 sync.WaitGroup
		mu                                 sync.Mutex
		release                            = make(chan struct{})
		withdrawn                          = map[string]bool{}
		atPeriodEnd, conflicts, unexpected int
		mismatched                         int
	)
	for _, u := range users {
		delay := time.Duration(rng.IntN(600)) * time.Millisecond
		wg.Go(func() {
			<-release
			time.Sleep(delay)
			a, err := tryDo(http.MethodDelete, u.c.URL()+"/api/pools/"+fundPool+"/pledge", nil, bearer(u.token)...)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				unexpected++
				t.Logf("withdrawal of %s: %v", u.id, err)
			case a.status == http.StatusOK:
				if id := a.data().Get("subscriptionId").Str; id != subOf[u.id] {
					mismatched++
					t.Logf("withdrawal of %s answered for subscription %s, its pledge is %s", u.id, id, subOf[u.id])
				}
				if a.data().Get("withdrawn").Bool() {
					withdrawn[subOf[u.id]] = true
				} else {
					atPeriodEnd++ // charged already: it ends at its period end instead
				}
			case a.status == http.StatusConflict:
				conflicts++
			default:
				unexpected++
				t.Logf("withdrawal of %s: %s", u.id, a)
			}
		})
	}
	var act answer
	var actErr error
	wg.Go(func() {
		<-release
		act, actErr = activate(activator)
	})
	close(release)
	wg.Wait()
	if actErr != nil || act.status != http.StatusOK {
		t.Fatalf("making the pool active: %v %s", actErr, act)
	}
	took, left := waitNoPledges(t, users, 60*time.Second)
	if left != 0 {
		t.Errorf("%d pledges still pledged %v after the activation", left, took)
	}
	fs := readFunding(t, open())
	if len(fs.subs) != n {
		t.Errorf("the store holds %d subscriptions of the pool, %d pledges were made", len(fs.subs), n)
	}
	f := fs.check(t, nil, withdrawn)
	f.record(t, "funding withdraw race", label, len(fs.open))
	Zero(t, "funding withdraw race: withdrawn pledges with a charge ("+label+")", f.withdrawnHit, "pledges")
	Zero(t, "funding withdraw race: withdrawn pledges not canceled ("+label+")", f.withdrawnBad, "pledges")
	Zero(t, "funding withdraw race: unexpected withdrawal answers ("+label+")", unexpected+mismatched, "answers")
	Info(t, "funding withdraw race: withdrawals answered withdrawn, nothing charged ("+label+")", float64(len(withdrawn)), "pledges")
	Info(t, "funding withdraw race: withdrawals answered 409, being charged ("+label+")", float64(conflicts), "pledges")
	Info(t, "funding withdraw race: withdrawals after the charge, ends at period end ("+label+")", float64(atPeriodEnd), "pledges")
}

// TestFundingNodeDiesOtherFinishes: two nodes on PostgreSQL; the node the
// operator activates through dies by SIGKILL right after its 5th pledge
// charge, and is not restarted: the other node's funding passes take over
// the charge it left pending (after the settle grace) and charge the rest.
func TestFundingNodeDiesOtherFinishes(t *testing.T) {
	const label = "postgres, 2 nodes"
	pledges := scale(20, 60)
	dsn := pgtest.DSN(t)
	grace := accounts.SettleGraceEnv + "=" + fundSettleGrace.String()
	a := fundNode(t, pgFundStore, "TIMEBLOCK_DSN="+dsn, grace, accounts.CrashAfterPledgeChargesEnv+"=5")
	b := fundNode(t, pgFundStore, "TIMEBLOCK_DSN="+dsn, grace)
	users, failing := pledgers(t, b, 6)
	ids := pledgeAll(t, users, pledges)

	began := time.Now()
	if ans, err := activate(a); err == nil && ans.status != http.StatusOK {
		t.Fatalf("making the pool active: %s", ans)
	}
	died := waitDead(a, 30*time.Second)
	alive := 0
	if !died {
		alive = 1
	}
	Zero(t, "funding node dies: activating node alive after its crash charge ("+label+")", alive, "nodes")
	la := a.Logs()
	a.Kill()
	took, left := waitNoPledges(t, users, 60*time.Second)
	finished := time.Since(began)
	if left != 0 {
		t.Errorf("%d pledges still pledged %v after the activation", left, took)
	}
	lb := b.Logs()
	b.Stop()

	fs := readFunding(t, openPostgres(t, dsn))
	if len(fs.subs) != len(ids) {
		t.Errorf("the store holds %d subscriptions of the pool, %d pledges were made", len(fs.subs), len(ids))
	}
	f := fs.check(t, failing, nil)
	f.record(t, "funding node dies", label, len(fs.open))
	Zero(t, "funding node dies: pledge outcomes recorded more than once ("+label+")", outcomesTwice(la, lb), "pledges")
	Info(t, "funding node dies: outcomes recorded by the node that died ("+label+")",
		float64(logCount(la, "pledge charged")+logCount(la, "pledge charge declined")), "pledges")
	Info(t, "funding node dies: outcomes recorded by the surviving node ("+label+")",
		float64(logCount(lb, "pledge charged")+logCount(lb, "pledge charge declined")), "pledges")
	AtLeast(t, "funding node dies: pledge charges taken over by the surviving node ("+label+")",
		float64(logCount(lb, "taking over a pledge charge left unfinished")), 1, "charges")
	AtMost(t, "funding node dies: time from activation to every pledge charged ("+label+")", finished.Seconds(), fundFinishBound, "s")
}
