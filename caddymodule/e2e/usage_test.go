package e2e_test

// End-to-end test of usage per key per hour: a known load through the real
// gate, translator and simulator, then the figures from
// GET /api/keys/{id}/usage after a graceful restart (the gate writes its
// counts every 30 s and when it stops).

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

func TestKeyUsageEndToEnd(t *testing.T) {
	c := e2e.Start(t, keyStatusConfig(t, gateOpts{}), e2e.WithEnv(gateSecret))
	acct := newAccount(t, c)
	openID, openKey := acct.key(t, acct.subscribe(t, "open", 2))
	shutID, shutKey := acct.key(t, acct.subscribe(t, "shut", 1))

	// Admitted: three whole chat completions, one streamed message, and one
	// stream the client cuts off after its first chunk.
	var wantIn, wantOut int64
	for range 3 {
		resp, _, err := chatOnce(t, c, openKey, "m-open")
		if err != nil {
			t.Fatal(err)
		}
		wantIn, wantOut = wantIn+resp.Usage.PromptTokens, wantOut+resp.Usage.CompletionTokens
	}
	in, out := streamMessage(t, c, openKey)
	wantIn, wantOut = wantIn+in, wantOut+out
	disconnect := holdStream(t, c, openKey, "m-open")
	time.Sleep(500 * time.Millisecond)
	disconnect()
	if wantIn == 0 || wantOut == 0 {
		t.Fatalf("the simulator reported no usage (%d in, %d out)", wantIn, wantOut)
	}

	// Refused: a model the key does not hold (twice), the shut key's closed
	// window (three times).
	for range 2 {
		if _, _, err := chatOnce(t, c, openKey, "m-shut"); err == nil {
			t.Fatal("a model the key does not hold was admitted")
		}
	}
	for range 3 {
		if _, _, err := chatOnce(t, c, shutKey, "m-shut"); err == nil {
			t.Fatal("a closed window admitted")
		}
	}
	// The cut-off stream's lane is back before the node stops.
	eventually(t, 10*time.Second, "the cut-off stream's lane back", func() error {
		if n := keyStatus(t, c, openKey, "Authorization").Get("lanesInUse").Int(); n != 0 {
			return fmt.Errorf("%d lanes in use", n)
		}
		return nil
	})
	c.Restart()

	sum := func(id string) (admitted, in, out int64, secs float64, refused map[string]int64, hours int) {
		rows := acct.api(t, http.MethodGet, "/api/keys/"+id+"/usage", nil).Array()
		refused = map[string]int64{}
		for _, r := range rows {
			if _, err := time.Parse(time.RFC3339, r.Get("hour").Str); err != nil || !strings.HasSuffix(r.Get("hour").Str, ":00:00Z") {
				t.Errorf("hour %s", r.Get("hour").Raw)
			}
			admitted += r.Get("admitted").Int()
			in += r.Get("inputTokens").Int()
			out += r.Get("outputTokens").Int()
			secs += r.Get("seconds").Float()
			r.Get("refused").ForEach(func(k, v gjson.Result) bool {
				refused[k.Str] += v.Int()
				return true
			})
		}
		return admitted, in, out, secs, refused, len(rows)
	}
	admitted, in, out, secs, refused, hours := sum(openID)
	t.Logf("open key: %d admitted, %d in, %d out, %.2f s, refused %v, over %d hour(s)", admitted, in, out, secs, refused, hours)
	if admitted != 5 || in != wantIn || out != wantOut || len(refused) != 1 || refused["model_not_held"] != 2 {
		t.Errorf("open key: %d admitted, %d/%d tokens, refused %v; want 5, %d/%d, model_not_held 2",
			admitted, in, out, refused, wantIn, wantOut)
	}
	if secs < 0.5 {
		t.Errorf("open key held its lanes %.3f s; the cut-off stream alone held one 0.5 s", secs)
	}
	admitted, _, _, _, refused, _ = sum(shutID)
	if admitted != 0 || len(refused) != 1 || refused["window_closed"] != 3 {
		t.Errorf("shut key: %d admitted, refused %v; want 0, window_closed 3", admitted, refused)
	}
}

// streamMessage streams a short message through /compat/v1/messages and
// returns the usage of its final message_delta.
func streamMessage(t *testing.T, c *e2e.Caddy, key string) (in, out int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL()+"/compat/v1/messages",
		strings.NewReader(`{"model":"m-open","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		switch gjson.Get(data, "type").Str {
		case "message_delta":
			in, out = gjson.Get(data, "usage.input_tokens").Int(), gjson.Get(data, "usage.output_tokens").Int()
		case "message_stop":
			done = true
		}
	}
	if !done {
		t.Fatalf("the stream did not finish: %v", sc.Err())
	}
	return in, out
}

// Two nodes on PostgreSQL add their counts to the same rows.
func TestKeyUsageAcrossNodes(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := keyStatusConfig(t, gateOpts{store: "store postgres {$TIMEBLOCK_DSN}"})
	a := e2e.Start(t, cfg, e2e.WithEnv(gateSecret, "TIMEBLOCK_DSN="+dsn))
	b := e2e.Start(t, cfg, e2e.WithEnv(gateSecret, "TIMEBLOCK_DSN="+dsn))
	acct := newAccount(t, a)
	id, key := acct.key(t, acct.subscribe(t, "open", 2))

	// Until a node has heard of the new key it refuses it as unknown,
	// which counts against no key.
	var wantIn, wantOut int64
	for _, c := range []*e2e.Caddy{a, a, b} {
		eventually(t, 3*time.Second, "admitted", func() error {
			resp, _, err := chatOnce(t, c, key, "m-open")
			if err == nil {
				wantIn, wantOut = wantIn+resp.Usage.PromptTokens, wantOut+resp.Usage.CompletionTokens
			}
			return err
		})
	}
	for _, c := range []*e2e.Caddy{a, b} {
		if _, _, err := chatOnce(t, c, key, "m-shut"); err == nil {
			t.Fatal("a model the key does not hold was admitted")
		}
	}
	// Both stop gracefully and write what they counted.
	a.Stop()
	b.Stop()
	a.Start()
	var admitted, in, out, refused int64
	for _, r := range acct.api(t, http.MethodGet, "/api/keys/"+id+"/usage", nil).Array() {
		admitted += r.Get("admitted").Int()
		in += r.Get("inputTokens").Int()
		out += r.Get("outputTokens").Int()
		refused += r.Get("refused.model_not_held").Int()
	}
	if admitted != 3 || in != wantIn || out != wantOut || refused != 2 {
		t.Errorf("usage across nodes: %d admitted, %d/%d tokens, %d model_not_held; want 3, %d/%d, 2",
			admitted, in, out, refused, wantIn, wantOut)
	}
}
