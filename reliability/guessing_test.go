//go:build reliability

package reliability

// Guessing cost: one node on PostgreSQL receives 10,000 random well-formed
// keys (consumption and combined formats) from 16 clients at once while a
// valid key keeps making requests. The figure is how many entitlement
// loads found no credential — store reads spent on guesses — which the
// filter of live keys makes zero; the valid key's p99 during the guessing is
// context. The throttle of failed key checks is off here (it would answer
// 429 before the filter is asked); the e2e test covers it.

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

func TestGuessingCost(t *testing.T) {
	dsn := pgtest.DSN(t)
	o := nodeOpts{store: "store postgres {$TIMEBLOCK_DSN}"}
	cfg := strings.Replace(o.caddyfile(), "\t\t\tlane_wait ", "\t\t\tkey_failures_per_minute 0\n\t\t\tlane_wait ", 1)
	if cfg == o.caddyfile() {
		t.Fatal("the node's Caddyfile has no lane_wait line to put the option beside")
	}
	c := e2e.Start(t, cfg, e2e.WithEnv(nodeSecret, "TIMEBLOCK_DSN="+dsn))
	owner := newUser(t, c)
	_, apiKey := owner.key(t, owner.subscribe(t, "open", 4))

	valid := func() (time.Duration, error) {
		start := time.Now()
		a, err := chat(c, apiKey, "m-open", 1)
		if err == nil && a.status != http.StatusOK {
			t.Errorf("valid key: %s", a)
		}
		return time.Since(start), err
	}
	// Warm up (the key is cached), and a baseline without guessing.
	var idle []time.Duration
	for range 200 {
		d, err := valid()
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, d)
	}

	unknown0, _ := metric(t, c, "timeblock_gate_key_cache_unknown_loads_total")
	rejects0, _ := metric(t, c, "timeblock_gate_key_filter_rejects_total")

	guesses := scale(10_000, 100_000)
	const workers = 16
	var (
		next    atomic.Int64
		wrong   atomic.Int64 // guesses not answered 401
		failed  atomic.Int64 // transport errors
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		during  []time.Duration
		validWg sync.WaitGroup
	)
	validWg.Add(1)
	go func() {
		defer validWg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if d, err := valid(); err == nil {
				during = append(during, d)
			}
		}
	}()
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(guesses); i = next.Add(1) {
				prefix := "sk_pool_"
				if i%2 == 0 {
					prefix = "sk-compat-meta-"
				}
				a, err := tryDo(http.MethodPost, c.URL()+"/v1/chat/completions", chatBody("m-open", 1, false),
					"x-api-key", guessKey(prefix))
				switch {
				case err != nil:
					failed.Add(1)
				case a.status != http.StatusUnauthorized:
					wrong.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(stop)
	validWg.Wait()

	unknown1, found := metric(t, c, "timeblock_gate_key_cache_unknown_loads_total")
	if !found {
		t.Fatal("timeblock_gate_key_cache_unknown_loads_total is not exported")
	}
	rejects1, _ := metric(t, c, "timeblock_gate_key_filter_rejects_total")
	reads := int(unknown1 - unknown0)
	Zero(t, "store reads per 10,000 guessed keys", reads*10_000/guesses, "reads")
	Zero(t, "guessed keys not answered 401 (or lost)", int(wrong.Load()+failed.Load()), "requests")
	Info(t, "guessed keys refused by the filter", rejects1-rejects0, "keys")
	Info(t, "guesses a second (16 clients)", float64(guesses)/took.Seconds(), "req/s")
	Info(t, "valid key p99, idle", ms(percentile(idle, 99)), "ms")
	Info(t, "valid key p99, during the guessing", ms(percentile(during, 99)), "ms")
	Info(t, "valid key requests during the guessing", float64(len(during)), "requests")
}

// guessKey is a well-formed key nobody issued: 256 random bits.
func guessKey(prefix string) string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}
