//go:build reliability

package reliability

// Revocation across nodes: two nodes on one PostgreSQL database; a key in
// use (cached) on node B is revoked, deleted or suspended through node A,
// and node B is asked again and again until it refuses the key. The time
// from A's answer to B's first refusal is the figure.

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// revocationBound is generous: LISTEN/NOTIFY takes milliseconds, but the
// machine running the suite is shared and noisy.
const revocationBound = 1000 * time.Millisecond

func TestRevocationAcrossNodes(t *testing.T) {
	dsn := pgtest.DSN(t)
	nodes := postgresNodes(t, 2, nodeOpts{}, dsn)
	a, b := nodes[0], nodes[1]
	owner := newUser(t, a)

	// Each way a key stops working, through node A.
	type way struct {
		name   string
		make   func() (apiKey string, revoke func())
		status int // what node B answers afterwards
	}
	ways := []way{
		{"key revoked (PUT isActive false)", func() (string, func()) {
			id, key := owner.key(t, owner.subscribe(t, "open", 1))
			return key, func() { owner.must(t, http.MethodPut, "/api/keys/"+id, map[string]any{"isActive": false}) }
		}, http.StatusUnauthorized},
		{"key deleted", func() (string, func()) {
			id, key := owner.key(t, owner.subscribe(t, "open", 1))
			return key, func() { owner.must(t, http.MethodDelete, "/api/keys/"+id, nil) }
		}, http.StatusUnauthorized},
		{"payment failed (operator)", func() (string, func()) {
			sub := owner.subscribe(t, "open", 1)
			_, key := owner.key(t, sub)
			return key, func() {
				if r := do(t, http.MethodPost, a.AdminURL()+"/timeblock/subscriptions/"+sub+"/payment-failed", nil); r.status != http.StatusOK {
					t.Fatalf("payment-failed: %s", r)
				}
			}
		}, http.StatusTooManyRequests}, // past due is a usage limit to an inference client
		{"combined key deleted", func() (string, func()) {
			subs := []string{owner.subscribe(t, "open", 1), owner.subscribe(t, "open", 1)} // rule 1: two at least
			d := owner.must(t, http.MethodPost, "/api/meta-keys", map[string]any{"pledgeIds": subs, "label": "rel"})
			id, token := d.Get("id").Str, d.Get("token").Str
			return token, func() { owner.must(t, http.MethodDelete, "/api/meta-keys/"+id, nil) }
		}, http.StatusUnauthorized},
	}

	rounds := scale(8, 40)
	var took []time.Duration
	for i := range rounds {
		w := ways[i%len(ways)]
		apiKey, revoke := w.make()
		took = append(took, revokeAndWait(t, a, b, i, apiKey, revoke, w.name, w.status))
	}
	worst := percentile(took, 100)
	AtMost(t, "revocation seen by the other node, worst of rounds", ms(worst), ms(revocationBound), "ms")
	Info(t, "revocation seen by the other node, p50", ms(percentile(took, 50)), "ms")
	Info(t, "revocation rounds (4 ways: revoke, delete, past due, combined)", float64(rounds), "rounds")
}

// revokeAndWait has node B admit apiKey (so B holds it in its cache), runs
// revoke against node A, then asks B until it answers want, and returns
// how long that took after revoke returned. Each round's requests come
// from an address of their own (X-Forwarded-For, round), so that refusals
// of earlier rounds never reach the gate's throttle of failed key checks.
func revokeAndWait(t *testing.T, a, b *e2e.Caddy, round int, apiKey string, revoke func(), what string, want int) time.Duration {
	t.Helper()
	addr := fmt.Sprintf("10.14.%d.%d", round/250, 1+round%250)
	// A key made through node A reaches node B's key filter a moment
	// later (its invalidation crosses by LISTEN/NOTIFY).
	deadline := time.Now().Add(5 * time.Second)
	for admitted := 0; admitted < 3; { // admitted, and again from the cache
		r, err := chatFrom(b, addr, apiKey, "m-open", 1)
		switch {
		case err != nil:
			t.Fatalf("%s: node B before: %v", what, err)
		case r.status == http.StatusOK:
			admitted++
		case time.Now().After(deadline):
			t.Fatalf("%s: node B does not admit the new key: %s", what, r)
		default:
			time.Sleep(20 * time.Millisecond)
		}
	}
	revoke()
	start := time.Now()
	deadline = start.Add(5 * time.Second)
	polls := 0
	for {
		r, err := chatFrom(b, addr, apiKey, "m-open", 1)
		polls++
		if err != nil {
			t.Fatalf("%s: node B: %v", what, err)
		}
		if r.status != http.StatusOK {
			took := time.Since(start)
			if r.status != want {
				t.Errorf("%s: node B answered %s, want %d", what, r, want)
			}
			t.Logf("%s: node B refused after %v (%d requests)", what, took, polls)
			return took
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: node B still admits the key %v after", what, time.Since(start))
			return time.Since(start)
		}
		// No sleep: the poll's own round trip (about a millisecond) is
		// the resolution.
	}
}
