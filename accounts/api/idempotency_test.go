package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// purchase posts a subscribe with an Idempotency-Key; it returns the reply,
// the raw body and whether it was a replay.
func (e *httpEnv) purchase(path, token, body, key string) (*reply, []byte, bool) {
	e.t.Helper()
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	e.api.ServeHTTP(rec, req)
	r := &reply{Status: rec.Code}
	if err := json.Unmarshal(rec.Body.Bytes(), r); err != nil {
		e.t.Fatalf("body is not an envelope: %v: %s", err, rec.Body)
	}
	if r.Status >= 500 {
		e.t.Errorf("%s: %d %s", path, r.Status, r.Error)
	}
	return r, rec.Body.Bytes(), rec.Header().Get("Idempotent-Replayed") == "true"
}

// buy is purchase for the reply only.
func (e *httpEnv) buy(path, token, body, key string) *reply {
	e.t.Helper()
	r, _, _ := e.purchase(path, token, body, key)
	return r
}

func (e *httpEnv) subscriptionsOf(userID string) []*accounts.Subscription {
	e.t.Helper()
	var subs []*accounts.Subscription
	if err := e.st.View(e.ctx, func(tx accounts.Tx) (err error) {
		subs, err = tx.ListSubscriptionsByUser(userID)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return subs
}

func TestIdempotentSubscribe(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<12)
		e.pool("alpha", accounts.PoolActive, 5, false)
		uid, tok := e.user("ray@example.test", billing.TestCardVisa)
		otherID, other := e.user("sam@example.test", billing.TestCardVisa)
		path, body := "/api/pools/alpha/subscribe", `{"blocks":["europe"]}`

		first, firstBody, replayed := e.purchase(path, tok, body, "key-1")
		first.want(t, 201)
		if replayed {
			t.Error("the first answer is marked replayed")
		}
		calls := e.proc.Calls()
		again, againBody, replayed := e.purchase(path, tok, body, "key-1")
		again.want(t, 201)
		if !replayed || !bytes.Equal(againBody, firstBody) {
			t.Errorf("retry: replayed %v, body\n%s\nwant the first answer\n%s", replayed, againBody, firstBody)
		}
		if e.proc.Calls() != calls || len(e.subscriptionsOf(uid)) != 1 {
			t.Fatalf("the retry charged (%d calls, was %d) or subscribed (%d subscriptions)", e.proc.Calls(), calls, len(e.subscriptionsOf(uid)))
		}

		// The same key with another body: 409, nothing bought.
		e.purchase(path, tok, `{"blocks":["asia"]}`, "key-1")
		if r, _, _ := e.purchase(path, tok, `{"blocks":["asia"]}`, "key-1"); r.Status != 409 || !strings.Contains(r.Error, "another request") {
			t.Errorf("same key, other body: %d %q, want 409", r.Status, r.Error)
		}
		if e.proc.Calls() != calls || len(e.subscriptionsOf(uid)) != 1 {
			t.Fatal("the refused request bought something")
		}
		// Keys are per user.
		e.buy(path, other, body, "key-1").want(t, 201)
		if len(e.subscriptionsOf(otherID)) != 1 {
			t.Error("another user's purchase under the same key did not happen")
		}
		// Without a key, every request buys.
		e.call("POST", path, tok, body).want(t, 201)
		if len(e.subscriptionsOf(uid)) != 2 {
			t.Errorf("without a key: %d subscriptions, want 2", len(e.subscriptionsOf(uid)))
		}
		// After 24 hours the key is forgotten.
		e.advance(accounts.IdempotencyWindow + time.Minute)
		e.buy(path, tok, body, "key-1").want(t, 201)
		if len(e.subscriptionsOf(uid)) != 3 {
			t.Errorf("after 24 hours: %d subscriptions, want 3", len(e.subscriptionsOf(uid)))
		}
		// Malformed keys.
		for _, key := range []string{"has space", strings.Repeat("k", 256), "tab\tkey"} {
			if r, _, _ := e.purchase(path, tok, body, key); r.Status != 400 || !strings.Contains(r.Error, "Idempotency-Key") {
				t.Errorf("key %q: %d %q, want 400", key, r.Status, r.Error)
			}
		}
	})
}

func TestIdempotentDeclineIsReplayed(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<12)
		e.pool("alpha", accounts.PoolActive, 3, false)
		uid, tok := e.user("ray@example.test", billing.TestCardDeclined)
		path, body := "/api/pools/alpha/subscribe", `{"blocks":["europe"]}`
		r, first, _ := e.purchase(path, tok, body, "k")
		r.want(t, 402)
		e.call("POST", "/api/billing/setup-intent", tok, `{"paymentMethod":"pm_card_visa"}`).want(t, 200)
		calls := e.proc.Calls()
		r, again, replayed := e.purchase(path, tok, body, "k")
		if r.Status != 402 || !replayed || !bytes.Equal(first, again) || e.proc.Calls() != calls {
			t.Fatalf("retry of a declined purchase: %d replayed %v, %d charge calls (was %d); want the 402 again and no charge", r.Status, replayed, e.proc.Calls(), calls)
		}
		e.buy(path, tok, body, "k2").want(t, 201)
		if len(e.subscriptionsOf(uid)) != 1 {
			t.Errorf("%d subscriptions, want 1", len(e.subscriptionsOf(uid)))
		}
	})
}

// fingerprint is what the handler records for a subscribe to poolID.
func fingerprint(poolID, body string) string {
	sum := sha256.Sum256([]byte("POST /api/pools/{id}/subscribe\n" + poolID + "\n" + body))
	return hex.EncodeToString(sum[:])
}

// TestIdempotentAbandonedRequest: a node died while a request ran under
// the key. When its purchase was recorded, a retry gets it at once, lease
// or not; when nothing shows it ended, a retry within the lease is told to
// wait, and after the lease the same purchase runs on.
func TestIdempotentAbandonedRequest(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<12)
		pool := e.pool("alpha", accounts.PoolActive, 3, false)
		uid, tok := e.user("ray@example.test", billing.TestCardVisa)
		path, body := "/api/pools/alpha/subscribe", `{"blocks":["europe"]}`

		// The dead request got as far as creating its subscription.
		var made map[string]any
		mustJSON(t, e.call("POST", path, tok, body).want(t, 201).Data, &made)
		for key, resource := range map[string]string{"done": made["id"].(string), "nothing": "sub-never-created"} {
			e.update(func(tx accounts.Tx) error {
				return tx.PutIdempotentRequest(&accounts.IdempotentRequest{UserID: uid, Key: key, Fingerprint: fingerprint(pool.ID, body),
					ResourceID: resource, CreatedAt: e.clock()})
			})
		}
		calls := e.proc.Calls()
		r, _, _ := e.purchase(path, tok, body, "done")
		r.want(t, 201)
		var got map[string]any
		json.Unmarshal(r.Data, &got)
		if got["id"] != made["id"] || got["amountCharged"] != made["amountCharged"] || e.proc.Calls() != calls {
			t.Fatalf("within the lease: %v, want the dead request's subscription %v and no charge", got, made["id"])
		}
		if r2, _, replayed := e.purchase(path, tok, body, "done"); r2.Status != 201 || !replayed {
			t.Errorf("the rebuilt answer is not kept: %d replayed %v", r2.Status, replayed)
		}
		if r, _, _ := e.purchase(path, tok, body, "nothing"); r.Status != 409 || !strings.Contains(r.Error, "still being processed") {
			t.Fatalf("within the lease: %d %q, want 409 in progress", r.Status, r.Error)
		}
		e.advance(11 * time.Minute)
		r, _, _ = e.purchase(path, tok, body, "nothing")
		r.want(t, 201)
		json.Unmarshal(r.Data, &got)
		if got["id"] != "sub-never-created" {
			t.Errorf("after the lease: subscription %v, want the purchase the key named (sub-never-created)", got["id"])
		}
		if n := len(e.subscriptionsOf(uid)); n != 2 {
			t.Errorf("%d subscriptions, want 2 (the dead request's and the re-run of the one that made none)", n)
		}
	})
}

// TestIdempotentSettlingIsNotTheAnswer: a retry while settlement ends an
// interrupted purchase is told to retry ("still being processed"), and that
// answer is not kept: once settlement has ended the purchase, the next retry
// gets the outcome, which is then kept.
func TestIdempotentSettlingIsNotTheAnswer(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<12)
		pool := e.pool("alpha", accounts.PoolActive, 3, false)
		uid, tok := e.user("ray@example.test", billing.TestCardVisa)
		path, body := "/api/pools/alpha/subscribe", `{"blocks":["europe"]}`

		// A node died charging this purchase; a settler holds its intent.
		const id = "sub-interrupted"
		e.update(func(tx accounts.Tx) error {
			now := e.clock()
			if err := tx.PutIdempotentRequest(&accounts.IdempotentRequest{UserID: uid, Key: "k", Fingerprint: fingerprint(pool.ID, body),
				ResourceID: id, CreatedAt: now.Add(-11 * time.Minute)}); err != nil {
				return err
			}
			return tx.CreateChargeIntent(&accounts.ChargeIntent{ID: id, UserID: uid, SubscriptionID: id, Kind: accounts.IntentSubscribe,
				Amount: "10", IdempotencyKey: billing.SubscribeKey(id), Status: accounts.IntentSettling, CreatedAt: now, UpdatedAt: now})
		})
		for range 2 {
			r, _, replayed := e.purchase(path, tok, body, "k")
			if r.Status != 409 || !strings.Contains(r.Error, "still being processed") || replayed {
				t.Fatalf("while settling: %d %q (replayed %v), want a 409 still being processed, not a replay", r.Status, r.Error, replayed)
			}
		}
		// The settler gave up; the next pass finds nothing charged.
		e.advance(16 * time.Minute)
		if _, err := e.svc.SettleIntents(e.ctx); err != nil {
			t.Fatal(err)
		}
		r, _, replayed := e.purchase(path, tok, body, "k")
		if r.Status != 409 || !strings.Contains(r.Error, "bought nothing") || replayed {
			t.Fatalf("after settlement: %d %q (replayed %v), want the outcome: 409 bought nothing", r.Status, r.Error, replayed)
		}
		if r, _, replayed := e.purchase(path, tok, body, "k"); !strings.Contains(r.Error, "bought nothing") || !replayed {
			t.Errorf("the outcome is not kept: %d %q (replayed %v)", r.Status, r.Error, replayed)
		}
		if e.proc.Calls() != 0 {
			t.Errorf("%d processor calls; a settling purchase must not be charged again", e.proc.Calls())
		}
	})
}

// TestIdempotentConcurrentRetries: retries racing the first request buy
// once; each answer is the purchase or a 409 "still being processed".
func TestIdempotentConcurrentRetries(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<12)
		e.pool("alpha", accounts.PoolActive, 10, false)
		uid, tok := e.user("ray@example.test", billing.TestCardVisa)
		path, body := "/api/pools/alpha/subscribe", `{"blocks":["europe"]}`
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			bodies = map[string]int{}
		)
		for range 6 {
			wg.Go(func() {
				r, raw, _ := e.purchase(path, tok, body, "race")
				mu.Lock()
				defer mu.Unlock()
				switch r.Status {
				case 201:
					bodies[string(raw)]++
				case 409:
				default:
					t.Errorf("status %d %q", r.Status, r.Error)
				}
			})
		}
		wg.Wait()
		if n := len(e.subscriptionsOf(uid)); n != 1 {
			t.Fatalf("%d subscriptions, want 1", n)
		}
		if len(bodies) > 1 {
			t.Errorf("different 201 answers: %v", bodies)
		}
		if r, _, _ := e.purchase(path, tok, body, "race"); r.Status != 201 {
			t.Errorf("after the race: %d", r.Status)
		}
	})
}

func TestIdempotentRequestsArePruned(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<12)
		e.pool("alpha", accounts.PoolActive, 3, false)
		uid, tok := e.user("ray@example.test", billing.TestCardVisa)
		e.buy("/api/pools/alpha/subscribe", tok, `{"blocks":["europe"]}`, "old").want(t, 201)
		e.advance(time.Hour)
		if n, err := e.svc.PruneBillingRecords(e.ctx); err != nil || n != 0 {
			t.Fatalf("prune within the window: %d, %v; want nothing pruned", n, err)
		}
		e.advance(accounts.IdempotencyWindow)
		if n, err := e.svc.PruneBillingRecords(e.ctx); err != nil || n != 1 {
			t.Fatalf("prune after the window: %d, %v; want 1", n, err)
		}
		err := e.st.View(e.ctx, func(tx accounts.Tx) error {
			_, err := tx.GetIdempotentRequest(uid, "old")
			return err
		})
		if !errors.Is(err, accounts.ErrNotFound) {
			t.Errorf("the pruned request: %v", err)
		}
	})
}

// TestIdempotentPoolBySlugOrID: the same purchase names its pool by slug or
// by id; under one key it is one purchase either way.
func TestIdempotentPoolBySlugOrID(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<12)
		pool := e.pool("alpha", accounts.PoolActive, 3, false)
		uid, tok := e.user("ray@example.test", billing.TestCardVisa)
		body := `{"blocks":["europe"]}`
		r, first, _ := e.purchase("/api/pools/alpha/subscribe", tok, body, "k")
		r.want(t, 201)
		r, again, replayed := e.purchase("/api/pools/"+pool.ID+"/subscribe", tok, body, "k")
		if r.Status != 201 || !replayed || !bytes.Equal(first, again) {
			t.Fatalf("the same purchase by id: %d replayed %v %q; want the slug's answer again", r.Status, replayed, r.Error)
		}
		if n := len(e.subscriptionsOf(uid)); n != 1 {
			t.Fatalf("%d subscriptions, want 1", n)
		}
	})
}
