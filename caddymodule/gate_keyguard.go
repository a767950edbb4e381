package caddymodule

import (
	"context"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/admission"
)

// defaultKeyFailuresPerMinute is how many failed key checks (no key, a key
// of the wrong kind, an unknown key) one client address may have in a
// minute before the gate answers 429 without looking at its key. SDKs and
// coding agents do not retry a 401, so an honest client with a wrong key
// fails a few times a minute; 60 leaves room for several of them behind
// one NAT, while a guesser gets one try a second.
const defaultKeyFailuresPerMinute = 60

const (
	// keyFilterRebuild is how often the filter of live keys is read whole
	// again, dropping deleted keys (invalidations only add).
	keyFilterRebuild = 5 * time.Minute
	// keyFilterStartWait bounds how long start-up waits for the first read
	// of the filter; until it has read the store, every key is looked up.
	keyFilterStartWait = 10 * time.Second
	throttleSweep      = time.Minute
)

// keyGuard makes guessing keys cheap and slow: the filter of live key hashes
// answers "unknown" without a store read, and the throttle refuses an
// address after too many failed checks. It lives in the gate state, so both
// survive config reloads.
type keyGuard struct {
	filter   *admission.KeyFilter // nil when the store cannot list hashes (unit tests)
	throttle *admission.FailureThrottle
	stop     chan struct{}
	done     chan struct{}
}

// credentialStore is a store the filter can read hashes from.
type credentialStore interface {
	View(ctx context.Context, fn func(tx accounts.Tx) error) error
}

// newKeyGuard builds the guard; with a store that lists hashes it starts the
// filter and waits (up to keyFilterStartWait) for its first read.
func newKeyGuard(store any, logger *zap.Logger) *keyGuard {
	kg := &keyGuard{
		throttle: admission.NewFailureThrottle(0),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if cs, ok := store.(credentialStore); ok {
		list := func(ctx context.Context, userID string) ([]string, error) {
			var hashes []string
			err := cs.View(ctx, func(tx accounts.Tx) (err error) {
				hashes, err = tx.ListCredentialHashes(userID)
				return err
			})
			return hashes, err
		}
		kg.filter = admission.NewKeyFilter(list, admission.FilterConfig{
			Rebuild: keyFilterRebuild,
			Logger:  logger.Named("key_filter"),
		})
		ctx, cancel := context.WithTimeout(context.Background(), keyFilterStartWait)
		if !kg.filter.WaitReady(ctx) {
			logger.Warn("the filter of live keys is not loaded yet; unknown keys are looked up in the store until it is")
		}
		cancel()
	}
	go kg.sweep()
	return kg
}

// invalidate is the guard's part of an invalidation: the filter reads the
// user's hashes again (every hash for accounts.InvalidateAll).
func (kg *keyGuard) invalidate(userID string) {
	if kg.filter != nil {
		kg.filter.Invalidate(userID)
	}
}

func (kg *keyGuard) sweep() {
	defer close(kg.done)
	t := time.NewTicker(throttleSweep)
	defer t.Stop()
	for {
		select {
		case <-kg.stop:
			return
		case now := <-t.C:
			kg.throttle.Sweep(now)
		}
	}
}

func (kg *keyGuard) close() {
	close(kg.stop)
	<-kg.done
	if kg.filter != nil {
		kg.filter.Close()
	}
}

// announcingStore is the store the account service writes through: an
// invalidation it publishes reaches this node's gate state before
// PublishInvalidation returns, so a key created through /api is known here
// by the time its creator reads the answer. (PostgreSQL delivers the
// notification to this node too, a moment later; the second invalidation
// costs one more read of the user's hashes.) Other nodes learn of it
// through the store's notifications.
//
// It then waits (up to echoWait) until this node hears its own invalidation
// back from the store: PostgreSQL delivers a notification to every listening
// node at the same moment, so by the time the creator reads the answer, the
// other nodes have heard of the key too and their filters wait for its read
// rather than refuse it. With the embedded store the echo is immediate.
type announcingStore struct {
	accounts.Store
	local  func(userID string)
	echoes *echoes
}

// echoWait bounds how long a change through the account API waits for its
// invalidation to come back (a listener that is down loses it).
const echoWait = 2 * time.Second

func (s announcingStore) PublishInvalidation(ctx context.Context, userID string) error {
	s.local(userID)
	heard, cancel := s.echoes.expect(userID)
	defer cancel()
	if err := s.Store.PublishInvalidation(ctx, userID); err != nil {
		return err
	}
	t := time.NewTimer(echoWait)
	defer t.Stop()
	select {
	case <-heard:
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

// echoes are the invalidations this node's account service waits to hear
// back from the store.
type echoes struct {
	mu      sync.Mutex
	waiting map[string][]chan struct{}
}

// expect registers a wait for userID's next invalidation.
func (e *echoes) expect(userID string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	e.mu.Lock()
	if e.waiting == nil {
		e.waiting = make(map[string][]chan struct{})
	}
	e.waiting[userID] = append(e.waiting[userID], ch)
	e.mu.Unlock()
	return ch, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		list := e.waiting[userID]
		for i, c := range list {
			if c == ch {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(e.waiting, userID)
		} else {
			e.waiting[userID] = list
		}
	}
}

// heard wakes the waits for userID (every wait for accounts.InvalidateAll).
func (e *echoes) heard(userID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for u, list := range e.waiting {
		if userID == accounts.InvalidateAll || u == userID {
			for _, c := range list {
				close(c)
			}
			delete(e.waiting, u)
		}
	}
}

// keyFailuresArg parses the argument of key_failures_per_minute: a count,
// 0 for off (returned as -1, since the zero value means "default").
func keyFailuresArg(d *caddyfile.Dispenser) (int, error) {
	var v string
	if err := singleArg(d, &v); err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, d.Errf("key_failures_per_minute: %q is not a count of 0 or more (0 turns the throttle off)", v)
	}
	if n == 0 {
		n = -1
	}
	return n, nil
}

// clientAddr is the client's address as Caddy determined it (trusted_proxies
// honoured), or the connection's peer when the variable is not set.
func clientAddr(r *http.Request) netip.Addr {
	if s, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok {
		if a, err := netip.ParseAddr(s); err == nil {
			return a
		}
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return ap.Addr()
	}
	return netip.Addr{}
}

var (
	keyFilterRejectsDesc = prometheus.NewDesc("timeblock_gate_key_filter_rejects_total",
		"Unknown keys refused by the filter of live keys, without a store read.", nil, nil)
	keyFilterTaggedDesc = prometheus.NewDesc("timeblock_gate_key_filter_tagged_total",
		"Keys the filter of live keys did not hold yet but whose tag is valid (made on another node a moment ago), looked up in the store.", nil, nil)
	keyFilterKeysDesc = prometheus.NewDesc("timeblock_gate_key_filter_keys",
		"Credential hashes the filter of live keys holds.", nil, nil)
	keyFilterReadyDesc = prometheus.NewDesc("timeblock_gate_key_filter_ready",
		"1 when the filter of live keys is loaded and current; 0 while every key is looked up in the store.", nil, nil)
	keyFilterReadErrorsDesc = prometheus.NewDesc("timeblock_gate_key_filter_read_errors_total",
		"Reads of credential hashes from the store that failed.", nil, nil)
	throttledDesc = prometheus.NewDesc("timeblock_gate_throttled_total",
		"Requests answered 429 because their client address had too many failed key checks in a minute.", nil, nil)
	keyFailuresDesc = prometheus.NewDesc("timeblock_gate_key_failures_total",
		"Failed key checks counted by the throttle (missing, wrong-kind or unknown key).", nil, nil)
	throttleAddressesDesc = prometheus.NewDesc("timeblock_gate_throttle_addresses",
		"Client addresses the throttle tracks now.", nil, nil)
)

// keyGuardCollector reads the guard's counts at scrape time, once the state
// is open; before, only that the filter is not ready.
type keyGuardCollector struct{ s *gateState }

func (c keyGuardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- keyFilterRejectsDesc
	ch <- keyFilterTaggedDesc
	ch <- keyFilterKeysDesc
	ch <- keyFilterReadyDesc
	ch <- keyFilterReadErrorsDesc
	ch <- throttledDesc
	ch <- keyFailuresDesc
	ch <- throttleAddressesDesc
}

func (c keyGuardCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.s.opened.Load() {
		// Not ready, rather than absent: an alert on ready == 0 also
		// catches a store that never opens.
		ch <- prometheus.MustNewConstMetric(keyFilterReadyDesc, prometheus.GaugeValue, 0)
		return
	}
	kg := c.s.guard
	var fs admission.FilterStats
	if kg.filter != nil {
		fs = kg.filter.Stats()
	}
	ready := 0.0
	if fs.Ready {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(keyFilterRejectsDesc, prometheus.CounterValue, float64(fs.Rejects))
	ch <- prometheus.MustNewConstMetric(keyFilterTaggedDesc, prometheus.CounterValue, float64(fs.Tagged))
	ch <- prometheus.MustNewConstMetric(keyFilterKeysDesc, prometheus.GaugeValue, float64(fs.Keys))
	ch <- prometheus.MustNewConstMetric(keyFilterReadyDesc, prometheus.GaugeValue, ready)
	ch <- prometheus.MustNewConstMetric(keyFilterReadErrorsDesc, prometheus.CounterValue, float64(fs.ReadErrors))
	ts := kg.throttle.Stats()
	ch <- prometheus.MustNewConstMetric(throttledDesc, prometheus.CounterValue, float64(ts.Throttled))
	ch <- prometheus.MustNewConstMetric(keyFailuresDesc, prometheus.CounterValue, float64(ts.Failures))
	ch <- prometheus.MustNewConstMetric(throttleAddressesDesc, prometheus.GaugeValue, float64(ts.Addresses))
}
