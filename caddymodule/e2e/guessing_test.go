package e2e_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

const (
	chatPath     = "/v1/chat/completions"
	messagesPath = "/compat/v1/messages"
)

// guessingConfig is the gate configuration with Caddy trusting
// X-Forwarded-For from the test (so that requests can come from many client
// addresses) and a failure limit of limit per minute.
func guessingConfig(t *testing.T, store string, limit int) string {
	cfg := gateConfig(t, gateOpts{store: store})
	cfg = strings.Replace(cfg, "{\n\ttimeblock {", "{\n\tservers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}\n\ttimeblock {", 1)
	cfg = strings.Replace(cfg, "timeblock_accounts\n", "timeblock_accounts {\n\t\t\tkey_failures_per_minute "+strconv.Itoa(limit)+"\n\t\t}\n", 1)
	return strings.Replace(cfg, "max_request_body 64KiB", "max_request_body 64KiB\n\t\t\tkey_failures_per_minute "+strconv.Itoa(limit), 1)
}

// randomKey is a well-formed key nobody issued.
func randomKey(prefix string) string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// gatePost sends a chat request with key from client address from (through
// X-Forwarded-For) and returns the status, Retry-After and body.
func gatePost(t *testing.T, c *e2e.Caddy, path, key, from string) (int, string, string) {
	t.Helper()
	body := `{"model":"m-open","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`
	req, err := http.NewRequest(http.MethodPost, c.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", key)
	req.Header.Set("X-Forwarded-For", from)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
}

// metricValue reads one series (name with its labels, as exposed) from the
// admin API's metrics; 0 when absent.
func metricValue(t *testing.T, c *e2e.Caddy, series string) float64 {
	t.Helper()
	resp, err := http.Get(c.AdminURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metrics: %q: %v", line, err)
			}
			return n
		}
	}
	return 0
}

// TestGateGuessedKeys: distinct random well-formed keys cost no store read
// (the filter of live keys), a key made through /api works on its very
// first request, and an address with too many failures gets 429 before its
// key is looked at. Both stores: on PostgreSQL the node hears its own
// invalidations through NOTIFY, a moment after the API has answered.
func TestGateGuessedKeys(t *testing.T) {
	for _, store := range []string{"embedded", "postgres"} {
		t.Run(store, func(t *testing.T) {
			line, env := "", []string{gateSecret}
			if store == "postgres" {
				line = "store postgres {$TIMEBLOCK_DSN}"
				env = append(env, "TIMEBLOCK_DSN="+pgtest.DSN(t))
			}
			const limit = 20
			c := e2e.Start(t, guessingConfig(t, line, limit), e2e.WithEnv(env...))
			testGuessedKeys(t, c, limit)
		})
	}
}

func testGuessedKeys(t *testing.T, c *e2e.Caddy, limit int) {
	const (
		loads   = "timeblock_gate_key_cache_loads_total"
		rejects = "timeblock_gate_key_filter_rejects_total"
	)
	if v := metricValue(t, c, "timeblock_gate_key_filter_ready"); v != 1 {
		t.Fatalf("timeblock_gate_key_filter_ready = %v, want 1", v)
	}
	acct := newAccount(t, c)
	// New keys work on the request that follows their creation.
	for i := range 5 {
		_, key := acct.key(t, acct.subscribe(t, "open", 1))
		if status, _, body := gatePost(t, c, messagesPath, key, "192.0.2.1"); status != http.StatusOK {
			t.Fatalf("new key %d, first request: %d %s", i, status, body)
		}
	}
	combined := acct.combined(t, nil, acct.subscribe(t, "open", 1), acct.subscribe(t, "tiny", 1))
	if status, _, body := gatePost(t, c, chatPath, combined, "192.0.2.1"); status != http.StatusOK {
		t.Fatalf("new combined key, first request: %d %s", status, body)
	}

	// Guesses from many addresses (fewer than limit each): no store read.
	loads0, rejects0 := metricValue(t, c, loads), metricValue(t, c, rejects)
	const guesses = 2000
	var wg sync.WaitGroup
	errs := make(chan string, guesses)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < guesses; i += 8 {
				prefix := "sk_pool_"
				if i%2 == 1 {
					prefix = "sk-compat-meta-"
				}
				from := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
				if status, _, body := gatePost(t, c, chatPath, randomKey(prefix), from); status != http.StatusUnauthorized ||
					gjson.Get(body, "error.code").Str != "invalid_api_key" {
					errs <- fmt.Sprintf("guess %d: %d %s", i, status, body)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if d := metricValue(t, c, loads) - loads0; d != 0 {
		t.Errorf("%d guessed keys caused %v store loads, want 0", guesses, d)
	}
	if d := metricValue(t, c, rejects) - rejects0; d != guesses {
		t.Errorf("filter rejects grew by %v, want %d", d, guesses)
	}

	// One address: limit failures, then 429 even with a valid key, in each
	// endpoint's format; another address is unaffected.
	_, key := acct.key(t, acct.subscribe(t, "open", 1))
	const attacker = "203.0.113.50"
	for i := range limit {
		if status, _, body := gatePost(t, c, chatPath, randomKey("sk_pool_"), attacker); status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d %s", i, status, body)
		}
	}
	status, retry, body := gatePost(t, c, chatPath, key, attacker)
	if n, err := strconv.Atoi(retry); status != http.StatusTooManyRequests || err != nil || n < 1 || n > 60 ||
		gjson.Get(body, "error.code").Str != "rate_limit_exceeded" {
		t.Fatalf("after %d failures (chat): %d, Retry-After %q, %s; want 429 with 1..60s", limit, status, retry, body)
	}
	status, retry, body = gatePost(t, c, messagesPath, key, attacker)
	if status != http.StatusTooManyRequests || retry == "" || gjson.Get(body, "type").Str != "error" ||
		gjson.Get(body, "error.type").Str != "rate_limit_error" {
		t.Fatalf("after %d failures (messages): %d, Retry-After %q, %s", limit, status, retry, body)
	}
	if status, _, body := gatePost(t, c, chatPath, key, "203.0.113.51"); status != http.StatusOK {
		t.Fatalf("another address: %d %s", status, body)
	}
	if v := metricValue(t, c, "timeblock_gate_throttled_total"); v != 2 {
		t.Errorf("timeblock_gate_throttled_total = %v, want 2", v)
	}

	// The account API counts its 401s (unknown session tokens) the same way.
	const apiGuesser = "203.0.113.60"
	apiGet := func(token string) (int, string, string) {
		req, _ := http.NewRequest(http.MethodGet, c.URL()+"/api/keys", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Forwarded-For", apiGuesser)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
	}
	for i := range limit {
		if status, _, body := apiGet(randomKey("st_")); status != http.StatusUnauthorized {
			t.Fatalf("/api failure %d: %d %s", i, status, body)
		}
	}
	status, retry, body = apiGet(acct.token)
	if status != http.StatusTooManyRequests || retry == "" || gjson.Get(body, "success").Bool() ||
		!strings.Contains(gjson.Get(body, "error").Str, "too many requests") {
		t.Fatalf("/api after %d failures: %d, Retry-After %q, %s", limit, status, retry, body)
	}
	if d := acct.api(t, http.MethodGet, "/api/keys", nil); !d.IsArray() {
		t.Fatalf("/api from another address: %s", d.Raw)
	}
}
