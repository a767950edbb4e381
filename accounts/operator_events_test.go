package accounts_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/embedded"
	"github.com/timeblock/timeblock/accounts/operatorhook"
)

const hookSecret = "operator webhook test secret"

// hookDelivery is one POST the test receiver got.
type hookDelivery struct {
	header http.Header
	body   []byte
	id     string // the payload's id
	status int    // what the receiver answered
}

// hookReceiver is the operator's endpoint: it answers each POST with the
// next status of answers (200 once they run out) and keeps what it got.
type hookReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	answers []int
	got     []hookDelivery
	hold    time.Duration // how long each request is held before the answer
}

func newHookReceiver(t *testing.T, answers ...int) *hookReceiver {
	t.Helper()
	r := &hookReceiver{answers: answers}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var p struct{ ID string }
		_ = json.Unmarshal(body, &p)
		time.Sleep(r.hold)
		r.mu.Lock()
		status := http.StatusOK
		if len(r.answers) > 0 {
			status, r.answers = r.answers[0], r.answers[1:]
		}
		r.got = append(r.got, hookDelivery{header: req.Header.Clone(), body: body, id: p.ID, status: status})
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *hookReceiver) deliveries() []hookDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookDelivery(nil), r.got...)
}

// hookService is a service ("node") on st that posts operator events to
// url, on clock.
func hookService(t *testing.T, st accounts.Store, clock *testClock, url string, notifier accounts.Notifier) *accounts.Service {
	t.Helper()
	cfg := accounts.Config{Store: st, Secret: envSecret, TermsVersion: envTerms, Now: clock.Now, Notifier: notifier}
	if url != "" {
		cfg.OperatorWebhook = operatorhook.New(url, hookSecret)
	}
	svc, err := accounts.NewService(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// deliver runs one delivery pass and fails the test on an error.
func deliver(t *testing.T, svc *accounts.Service) accounts.OperatorEventReport {
	t.Helper()
	rep, err := svc.DeliverOperatorEvents(context.Background())
	if err != nil {
		t.Fatalf("delivery pass: %v", err)
	}
	return rep
}

// storedEvent reads an operator event from the store.
func storedEvent(t *testing.T, st accounts.Store, id string) *accounts.OperatorEvent {
	t.Helper()
	var e *accounts.OperatorEvent
	err := st.View(context.Background(), func(tx accounts.Tx) (err error) {
		e, err = tx.GetOperatorEvent(id)
		return err
	})
	if err != nil {
		t.Fatalf("event %s: %v", id, err)
	}
	return e
}

// pendingEvents lists every pending event, due or not.
func pendingEvents(t *testing.T, st accounts.Store) []*accounts.OperatorEvent {
	t.Helper()
	var out []*accounts.OperatorEvent
	err := st.View(context.Background(), func(tx accounts.Tx) (err error) {
		out, err = tx.ListOperatorEventsDue(envStart.AddDate(10, 0, 0), 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOperatorWebhookSignature checks a delivery as a receiver would: the
// signature recomputed here from the secret, the timestamp and the raw
// body, and the payload's fields.
func TestOperatorWebhookSignature(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		recv := newHookReceiver(t)
		clock := &testClock{t: envStart}
		svc := hookService(t, st, clock, recv.URL, nil)
		svc.NotifyOperator(context.Background(), accounts.OpSubscriptionPendingKey,
			map[string]any{"subscriptionId": "sub-1", "poolSlug": "kimi", "amount": "35.00"})
		before := time.Now().Unix()
		if rep := deliver(t, svc); rep.Delivered != 1 {
			t.Fatalf("report %+v, want one delivered", rep)
		}
		got := recv.deliveries()
		if len(got) != 1 {
			t.Fatalf("receiver got %d posts, want 1", len(got))
		}
		d := got[0]
		sig := d.header.Get("Timeblock-Signature")
		ts, v1, ok := strings.Cut(sig, ",v1=")
		ts, tsOK := strings.CutPrefix(ts, "t=")
		if !ok || !tsOK {
			t.Fatalf("Timeblock-Signature %q is not t=<unix seconds>,v1=<hex>", sig)
		}
		unix, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || unix < before-1 || unix > time.Now().Unix()+1 {
			t.Errorf("signature timestamp %q is not the time of sending in unix seconds", ts)
		}
		mac := hmac.New(sha256.New, []byte(hookSecret))
		mac.Write([]byte(ts + "." + string(d.body)))
		if want := hex.EncodeToString(mac.Sum(nil)); v1 != want {
			t.Errorf("v1 = %s, want HMAC-SHA256(secret, t.body) = %s", v1, want)
		}
		if ct := d.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		var p map[string]json.RawMessage
		if err := json.Unmarshal(d.body, &p); err != nil {
			t.Fatalf("body %s: %v", d.body, err)
		}
		if len(p) != 4 || !strings.HasPrefix(d.id, "evt_") || len(d.id) < 20 {
			t.Errorf("payload %s: want exactly {id: evt_..., type, createdAt, data}", d.body)
		}
		if string(p["type"]) != `"subscription.pending_key"` || string(p["createdAt"]) != `"`+envStart.Format(time.RFC3339)+`"` {
			t.Errorf("type %s, createdAt %s", p["type"], p["createdAt"])
		}
		if string(p["data"]) != `{"amount":"35.00","poolSlug":"kimi","subscriptionId":"sub-1"}` {
			t.Errorf("data %s", p["data"])
		}
		if e := storedEvent(t, st, d.id); e.Status != accounts.OpEventDelivered || e.Attempts != 1 || !e.FinishedAt.Equal(envStart) {
			t.Errorf("stored event %+v, want delivered after 1 attempt", e)
		}
	})
}

// TestOperatorWebhookRetries has the receiver refuse the first two posts:
// the event is posted again after 30 s, then after 60 s more, delivered by
// the third post, and never posted again.
func TestOperatorWebhookRetries(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		recv := newHookReceiver(t, http.StatusInternalServerError, http.StatusServiceUnavailable)
		clock := &testClock{t: envStart}
		svc := hookService(t, st, clock, recv.URL, nil)
		svc.NotifyOperator(context.Background(), accounts.OpChargeFailed, map[string]any{"subscriptionId": "sub-1"})
		posts := func(want int, when string) {
			t.Helper()
			if got := len(recv.deliveries()); got != want {
				t.Fatalf("%s: receiver got %d posts, want %d", when, got, want)
			}
		}
		if rep := deliver(t, svc); rep.Retrying != 1 {
			t.Errorf("first pass %+v, want one retrying", rep)
		}
		posts(1, "first pass")
		id := recv.deliveries()[0].id
		e := storedEvent(t, st, id)
		if e.Status != accounts.OpEventPending || e.Attempts != 1 || !e.NextAttemptAt.Equal(envStart.Add(30*time.Second)) ||
			!strings.Contains(e.LastError, "500") {
			t.Fatalf("after a 500: %+v, want pending, 1 attempt, next in 30 s", e)
		}
		clock.Advance(29 * time.Second)
		deliver(t, svc)
		posts(1, "29 s later (before the first backoff ends)")
		clock.Advance(time.Second)
		deliver(t, svc)
		posts(2, "30 s later")
		e = storedEvent(t, st, id)
		if e.Attempts != 2 || !e.NextAttemptAt.Equal(envStart.Add(90*time.Second)) {
			t.Fatalf("after a 503: %+v, want 2 attempts, next 60 s after the second", e)
		}
		clock.Advance(59 * time.Second)
		deliver(t, svc)
		posts(2, "59 s after the second post (the backoff doubled)")
		clock.Advance(time.Second)
		if rep := deliver(t, svc); rep.Delivered != 1 {
			t.Errorf("third pass %+v, want one delivered", rep)
		}
		posts(3, "60 s after the second post")
		for i, d := range recv.deliveries() {
			if d.id != id {
				t.Errorf("post %d carried event %s, want %s (the same id on every retry)", i, d.id, id)
			}
		}
		e = storedEvent(t, st, id)
		if e.Status != accounts.OpEventDelivered || e.Attempts != 3 || e.LastError != "" {
			t.Errorf("after the 200: %+v, want delivered after 3 attempts", e)
		}
		clock.Advance(2 * time.Hour)
		deliver(t, svc)
		posts(3, "2 hours after delivery")
	})
}

// TestOperatorWebhookGivesUp stops posting three days after the event, and
// logs an error naming it.
func TestOperatorWebhookGivesUp(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		recv := newHookReceiver(t, slices.Repeat([]int{http.StatusBadGateway}, 200)...)
		clock := &testClock{t: envStart}
		core, logs := observer.New(zap.ErrorLevel)
		cfg := accounts.Config{Store: st, Secret: envSecret, Now: clock.Now, Logger: zap.New(core),
			OperatorWebhook: operatorhook.New(recv.URL, hookSecret)}
		svc, err := accounts.NewService(cfg)
		if err != nil {
			t.Fatal(err)
		}
		svc.NotifyOperator(context.Background(), accounts.OpChargeRefunded, map[string]any{"chargeId": "ch-1"})
		var waits []time.Duration
		last := clock.Now()
		for range 200 {
			before := len(recv.deliveries())
			deliver(t, svc)
			got := recv.deliveries()
			if len(got) > before {
				waits = append(waits, clock.Now().Sub(last))
				last = clock.Now()
			}
			e := storedEvent(t, st, got[0].id)
			if e.Status != accounts.OpEventPending {
				break
			}
			clock.Set(e.NextAttemptAt) // the moment it is due again
		}
		got := recv.deliveries()
		id := got[0].id
		if e := storedEvent(t, st, id); e.Status != accounts.OpEventFailed || clock.Now().Sub(envStart) < 72*time.Hour {
			t.Errorf("after %v of 502s: %+v, want failed once 72 hours have passed", clock.Now().Sub(envStart), e)
		}
		clock.Advance(time.Hour)
		deliver(t, svc)
		if n := len(recv.deliveries()); n != len(got) {
			t.Errorf("posted again after giving up")
		}
		want := []time.Duration{0, 30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute,
			16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}
		for i, w := range want {
			if i >= len(waits) || waits[i] != w {
				t.Fatalf("waits between posts %v, want them to start %v and stay at 1h", waits, want)
			}
		}
		// 9 posts in the first 63.5 minutes, then hourly up to 72 hours.
		if n := len(got); n < 75 || n > 80 {
			t.Errorf("%d posts, want about 9 + 71 hourly ones up to 72 hours", n)
		}
		if entries := logs.FilterField(zap.String("event_id", id)).All(); len(entries) != 1 {
			t.Errorf("error log naming %s: %v", id, logs.All())
		}
	})
}

// TestOperatorWebhookSurvivesRestart records events on one service while
// the receiver is down and delivers them from a new service on the same
// store, as after a restart.
func TestOperatorWebhookSurvivesRestart(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		recv := newHookReceiver(t, http.StatusServiceUnavailable)
		clock := &testClock{t: envStart}
		first := hookService(t, st, clock, recv.URL, nil)
		first.NotifyOperator(context.Background(), accounts.OpChargeFailed, map[string]any{"subscriptionId": "tried"})
		deliver(t, first) // refused: waits 30 s
		first.NotifyOperator(context.Background(), accounts.OpPledgeCreated, map[string]any{"subscriptionId": "never-tried"})
		if n := len(pendingEvents(t, st)); n != 2 {
			t.Fatalf("%d pending events before the restart, want 2", n)
		}

		clock.Advance(time.Minute)
		second := hookService(t, st, clock, recv.URL, nil)
		if rep := deliver(t, second); rep.Delivered != 2 {
			t.Errorf("the new service's pass %+v, want both delivered", rep)
		}
		got := recv.deliveries()
		if len(got) != 3 || got[0].id != got[1].id && got[0].id != got[2].id {
			t.Errorf("posts %v, want the refused event again and the other once", got)
		}
		if n := len(pendingEvents(t, st)); n != 0 {
			t.Errorf("%d events still pending", n)
		}
	})
}

// TestOperatorWebhookTwoNodes runs the delivery pass on two nodes sharing
// one store at the same moment: every event reaches the receiver once.
func TestOperatorWebhookTwoNodes(t *testing.T) {
	forEachStoreNodes(t, 2, func(t *testing.T, nodes []accounts.Store) {
		const events = 6
		recv := newHookReceiver(t)
		recv.hold = 50 * time.Millisecond // both passes overlap while posts are in flight
		clock := &testClock{t: envStart}
		a := hookService(t, nodes[0], clock, recv.URL, nil)
		b := hookService(t, nodes[1], clock, recv.URL, nil)
		for i := range events {
			a.NotifyOperator(context.Background(), accounts.OpSubscriptionCreated, map[string]any{"n": i})
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, svc := range []*accounts.Service{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := svc.DeliverOperatorEvents(context.Background()); err != nil {
					t.Errorf("delivery pass: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		seen := map[string]int{}
		for _, d := range recv.deliveries() {
			seen[d.id]++
		}
		if len(seen) != events {
			t.Errorf("receiver got %d distinct events, want %d", len(seen), events)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("event %s posted %d times in one pass of two nodes, want once", id, n)
			}
		}
	})
}

// TestOperatorNoticeWithoutWebhook queues nothing without a webhook, and
// logs the event through the log notifier.
func TestOperatorNoticeWithoutWebhook(t *testing.T) {
	st := openEmbedded(t)
	core, logs := observer.New(zap.InfoLevel)
	svc, err := accounts.NewService(accounts.Config{Store: st, Secret: envSecret, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	svc.NotifyOperator(context.Background(), accounts.OpChargeSucceeded, map[string]any{"amount": "12.00"})
	if n := len(pendingEvents(t, st)); n != 0 {
		t.Errorf("%d events queued without a webhook", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for logs.FilterMessage("notice: charge.succeeded").Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := logs.FilterMessage("notice: charge.succeeded").All(); len(got) != 1 || got[0].ContextMap()["to"] != "operator" {
		t.Errorf("log notifier logged %v", logs.All())
	}
}

// TestOperatorNoticeEmail mails each event to the smtp operator address.
func TestOperatorNoticeEmail(t *testing.T) {
	srv := startFakeSMTP(t)
	st := openEmbedded(t)
	svc, err := accounts.NewService(accounts.Config{Store: st, Secret: envSecret,
		Notifier: accounts.SMTPNotifier{Addr: srv.addr, From: "keys@timeblock.test", Operator: "ops@example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	svc.NotifyOperator(context.Background(), accounts.OpSubscriptionPendingKey, map[string]any{"poolSlug": "kimi",
		"subscriptionId": "sub-1", "todo": "Deliver its key with POST /timeblock/subscriptions/sub-1/deliver"})
	var msg smtpMessage
	select {
	case msg = <-srv.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no message reached the mail server")
	}
	for _, want := range []string{"Subject: An order needs its key: kimi", "Deliver its key with POST /timeblock/subscriptions/sub-1/deliver",
		"subscriptionId: sub-1", "subscription.pending_key"} {
		if !strings.Contains(msg.data, want) {
			t.Errorf("message lacks %q:\n%s", want, msg.data)
		}
	}
	if msg.to != "ops@example.test" {
		t.Errorf("mailed to %q", msg.to)
	}
}

// openEmbedded opens an embedded store in a temporary directory.
func openEmbedded(t *testing.T) accounts.Store {
	t.Helper()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
