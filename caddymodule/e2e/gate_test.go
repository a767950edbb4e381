package e2e_test

// End-to-end tests of the inference gate: the real caddy binary, the account
// API to buy seats and make keys, the official SDKs as clients, and the
// simulator as the upstream behind reverse_proxy.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	oaioption "github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

const gateSecret = "TIMEBLOCK_SECRET=gate-e2e-secret-0123456789"

// gateCaddyfile has three pools: "open" sells the block that holds the
// current UTC hour, "tiny" the same block with max_output_tokens 8, and
// "shut" only the next block. The simulator streams 20 tokens a second, so a
// request holds its lane for max_tokens/20 seconds. The gate publishes its
// placeholders back to the client as response headers, and limits bodies to
// 64 KiB. %STORE%, %NOW%,
// %LATER%, %WAIT% and %MARK% are filled in by gateConfig.
const gateCaddyfile = `{
	timeblock {
		%STORE%
		secret {$TIMEBLOCK_SECRET}
		pool open {
			model m-open
			slots 20
			block %NOW% 40
		}
		pool tiny {
			model m-tiny
			slots 20
			block %NOW% 40
			max_output_tokens 8
		}
		pool shut {
			model m-shut
			slots 20
			block %LATER% 40
		}
	}
}

:{{.HTTP}} {
	handle /api/* {
		timeblock_accounts
	}
	@inference path /v1/chat/completions /compat/v1/messages
	handle @inference {
		timeblock_gate {
			lane_wait %WAIT%
			max_request_body 64KiB
		}
		timeblock_translate chat
		reverse_proxy 127.0.0.1:{{.Upstream}} {
			header_down X-Timeblock-Pool {timeblock.pool}
			header_down X-Timeblock-Key {timeblock.key_id}
			header_down X-Timeblock-Boost {timeblock.boost}
			header_down X-Config %MARK%
		}
	}
}

:{{.Upstream}} {
	timeblock_simulator {
		token_rate 20
		reply_tokens 400
	}
}
`

var blockNames = [3]string{"asia", "europe", "americas"}

type gateOpts struct {
	store string // a store line; default the embedded store
	wait  string // lane_wait; default 0 (reject at once)
	mark  string // X-Config value, to tell configs apart across a reload
}

func gateConfig(t *testing.T, o gateOpts) string {
	t.Helper()
	now := time.Now().UTC()
	// A block change during the test would move the windows under it.
	if left := time.Duration(8-now.Hour()%8)*time.Hour - time.Duration(now.Minute())*time.Minute; left < 3*time.Minute {
		t.Skipf("too close to the end of the %s block; the windows would change mid-test", blockNames[now.Hour()/8])
	}
	if o.wait == "" {
		o.wait = "0"
	}
	if o.mark == "" {
		o.mark = "1"
	}
	return strings.NewReplacer(
		"%STORE%", o.store,
		"%NOW%", blockNames[now.Hour()/8],
		"%LATER%", blockNames[(now.Hour()/8+1)%3],
		"%WAIT%", o.wait,
		"%MARK%", o.mark,
	).Replace(gateCaddyfile)
}

// account is one user of the account API with a saved card.
type account struct {
	c     *e2e.Caddy
	token string
}

var userSeq atomic.Int64

func newAccount(t *testing.T, c *e2e.Caddy) *account {
	t.Helper()
	email := fmt.Sprintf("gate-%d-%d@example.com", time.Now().UnixNano(), userSeq.Add(1))
	data := call(t, http.MethodPost, c.AdminURL()+"/timeblock/users", "", map[string]any{"email": email}, http.StatusCreated)
	a := &account{c: c, token: data.Get("sessionToken").Str}
	a.api(t, http.MethodPost, "/api/billing/setup-intent", map[string]any{"paymentMethod": "pm_card_visa"})
	return a
}

// api calls the account API and returns data; any status but 2xx fails.
func (a *account) api(t *testing.T, method, path string, body any) gjson.Result {
	t.Helper()
	return call(t, method, a.c.URL()+path, a.token, body, 0)
}

func call(t *testing.T, method, url, token string, body any, want int) gjson.Result {
	t.Helper()
	code, env := asUser(t, url, token, method, "", body)
	if (want != 0 && code != want) || code/100 != 2 {
		t.Fatalf("%s %s: %d\n%s", method, url, code, env.Raw)
	}
	return env.Get("data")
}

// subscribe buys quantity seats of pool in the block holding the current
// hour (or, for "shut", the next block) and returns the subscription id.
func (a *account) subscribe(t *testing.T, pool string, quantity int) string {
	t.Helper()
	h := time.Now().UTC().Hour() / 8
	if pool == "shut" {
		h = (h + 1) % 3
	}
	data := a.api(t, http.MethodPost, "/api/pools/"+pool+"/subscribe",
		map[string]any{"blocks": []string{blockNames[h]}, "quantity": quantity})
	return data.Get("id").Str
}

// key creates the consumption key of a subscription.
func (a *account) key(t *testing.T, subID string) (id, apiKey string) {
	t.Helper()
	data := a.api(t, http.MethodPost, "/api/keys/subscription", map[string]any{"subscriptionId": subID})
	return data.Get("id").Str, data.Get("apiKey").Str
}

// combined folds keyless subscriptions into a combined key.
func (a *account) combined(t *testing.T, roles map[string]string, subIDs ...string) string {
	t.Helper()
	data := a.api(t, http.MethodPost, "/api/meta-keys", map[string]any{"pledgeIds": subIDs, "label": "e2e", "roles": roles})
	return data.Get("token").Str
}

func chatParams(model string, maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:     model,
		MaxTokens: openai.Int(maxTokens),
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	}
}

func messageParams(model string, maxTokens int64) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: maxTokens,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
	}
}

// chatOnce sends a short chat request and returns the response and headers.
func chatOnce(t *testing.T, c *e2e.Caddy, key, model string) (*openai.ChatCompletion, http.Header, error) {
	t.Helper()
	var raw *http.Response
	client := c.OpenAIClient(key)
	resp, err := client.Chat.Completions.New(ctxT(t), chatParams(model, 2), oaioption.WithResponseInto(&raw))
	if raw != nil {
		return resp, raw.Header, err
	}
	return resp, nil, err
}

// holdStream starts a long chat stream, reads its first chunk (so the request
// holds a lane) and returns a func that disconnects it.
func holdStream(t *testing.T, c *e2e.Caddy, key, model string) (disconnect func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := c.OpenAIClient(key)
	stream := client.Chat.Completions.NewStreaming(ctx, chatParams(model, 400))
	if !stream.Next() {
		cancel()
		t.Fatalf("stream on %s did not start: %v", model, stream.Err())
	}
	var once atomic.Bool
	stop := func() {
		if once.CompareAndSwap(false, true) {
			cancel()
			stream.Close()
		}
	}
	t.Cleanup(stop)
	return stop
}

// anthropicMessages is the messages service of an SDK client with key.
func anthropicMessages(c *e2e.Caddy, key string) *anthropic.MessageService {
	client := c.AnthropicClient(key)
	return &client.Messages
}

// wantOpenAIError checks a chat-format error from the gate.
func wantOpenAIError(t *testing.T, err error, status int, typ, msgPart string) *openai.Error {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("want a %d %s, got %v", status, typ, err)
	}
	if apiErr.StatusCode != status || apiErr.Type != typ || !strings.Contains(apiErr.Message, msgPart) {
		t.Fatalf("got %d %s %q, want %d %s with %q", apiErr.StatusCode, apiErr.Type, apiErr.Message, status, typ, msgPart)
	}
	return apiErr
}

// wantAnthropicError checks a messages-format error from the gate.
func wantAnthropicError(t *testing.T, err error, status int, typ, msgPart string) *anthropic.Error {
	t.Helper()
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("want a %d %s, got %v", status, typ, err)
	}
	raw := apiErr.RawJSON()
	if apiErr.StatusCode != status || string(apiErr.Type()) != typ || gjson.Get(raw, "type").Str != "error" ||
		!strings.Contains(gjson.Get(raw, "error.message").Str, msgPart) {
		t.Fatalf("got %d %s %s, want %d %s with %q", apiErr.StatusCode, apiErr.Type(), raw, status, typ, msgPart)
	}
	return apiErr
}

// eventually retries f every 25ms until it returns nil or d has passed.
func eventually(t *testing.T, d time.Duration, what string, f func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := f()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func TestGateEndToEnd(t *testing.T) {
	c := e2e.Start(t, gateConfig(t, gateOpts{}), e2e.WithEnv(gateSecret))
	acct := newAccount(t, c)

	t.Run("window open and closed", func(t *testing.T) {
		_, openKey := acct.key(t, acct.subscribe(t, "open", 1))
		_, shutKey := acct.key(t, acct.subscribe(t, "shut", 1))
		resp, hdr, err := chatOnce(t, c, openKey, "m-open")
		if err != nil {
			t.Fatalf("key in its window: %v", err)
		}
		if resp.Model != "m-open" || hdr.Get("X-Timeblock-Pool") != "open" || hdr.Get("X-Timeblock-Lanes") != "1" ||
			hdr.Get("X-Timeblock-Lanes-In-Use") != "1" {
			t.Fatalf("model %q, pool %q, lanes %q, in use %q", resp.Model, hdr.Get("X-Timeblock-Pool"), hdr.Get("X-Timeblock-Lanes"),
				hdr.Get("X-Timeblock-Lanes-In-Use"))
		}

		// A usage limit with its reset time, which the SDKs do not retry
		// (x-should-retry: false) and no Retry-After to sleep on for hours.
		_, _, err = chatOnce(t, c, shutKey, "m-shut")
		apiErr := wantOpenAIError(t, err, http.StatusTooManyRequests, "usage_limit_reached", "opens next at")
		next := time.Now().UTC().Truncate(8 * time.Hour).Add(8 * time.Hour)
		if !strings.Contains(apiErr.Message, next.Format(time.RFC3339)) {
			t.Errorf("message %q does not name the next opening %s", apiErr.Message, next.Format(time.RFC3339))
		}
		eh := apiErr.Response.Header
		if eh.Get("Retry-After") != "" || eh.Get("X-Should-Retry") != "false" || eh.Get("X-Timeblock-Window-Opens") != next.Format(time.RFC3339) {
			t.Errorf("Retry-After %q, X-Should-Retry %q, X-Timeblock-Window-Opens %q; want none, false, %s",
				eh.Get("Retry-After"), eh.Get("X-Should-Retry"), eh.Get("X-Timeblock-Window-Opens"), next.Format(time.RFC3339))
		}
		_, err = anthropicMessages(c, shutKey).New(ctxT(t), messageParams("m-shut", 2))
		wantAnthropicError(t, err, http.StatusTooManyRequests, "rate_limit_error", "opens next at")
	})

	t.Run("lanes full then free", func(t *testing.T) {
		_, key := acct.key(t, acct.subscribe(t, "open", 1))
		stop := holdStream(t, c, key, "m-open")
		_, _, err := chatOnce(t, c, key, "m-open")
		apiErr := wantOpenAIError(t, err, http.StatusTooManyRequests, "rate_limit_error", "busy")
		if ra := apiErr.Response.Header.Get("Retry-After"); ra != "1" {
			t.Errorf("Retry-After %q, want 1", ra)
		}
		_, err = anthropicMessages(c, key).New(ctxT(t), messageParams("m-open", 2))
		wantAnthropicError(t, err, http.StatusTooManyRequests, "rate_limit_error", "busy")

		// The client that held the lane disconnects mid-stream: its lane
		// comes back as soon as the server notices.
		stop()
		took := eventually(t, 2*time.Second, "lane freed after a disconnect", func() error {
			_, _, err := chatOnce(t, c, key, "m-open")
			return err
		})
		t.Logf("lane free %v after the disconnect", took)
	})

	t.Run("combined key stacks lanes, boost adds none", func(t *testing.T) {
		s1, s2, s3 := acct.subscribe(t, "open", 1), acct.subscribe(t, "open", 2), acct.subscribe(t, "open", 1)
		token := acct.combined(t, nil, s1, s2)
		for range 3 { // 1 + 2 seats
			holdStream(t, c, token, "m-open")
		}
		_, _, err := chatOnce(t, c, token, "m-open")
		wantOpenAIError(t, err, http.StatusTooManyRequests, "rate_limit_error", "all 3 lanes")

		s4 := acct.subscribe(t, "open", 1)
		boosted := acct.combined(t, map[string]string{s4: "boost"}, s3, s4)
		stop := holdStream(t, c, boosted, "m-open")
		_, _, err = chatOnce(t, c, boosted, "m-open")
		wantOpenAIError(t, err, http.StatusTooManyRequests, "rate_limit_error", "all 1 lanes")
		stop()
		var hdr http.Header
		eventually(t, 2*time.Second, "boosted key admitted", func() (err error) {
			_, hdr, err = chatOnce(t, c, boosted, "m-open")
			return err
		})
		if hdr.Get("X-Timeblock-Boost") != "1" || hdr.Get("X-Timeblock-Lanes") != "1" {
			t.Errorf("boost %q lanes %q, want 1 and 1", hdr.Get("X-Timeblock-Boost"), hdr.Get("X-Timeblock-Lanes"))
		}
	})

	t.Run("max_tokens clamped to the pool", func(t *testing.T) {
		_, key := acct.key(t, acct.subscribe(t, "tiny", 1))
		oai := c.OpenAIClient(key)
		resp, err := oai.Chat.Completions.New(ctxT(t), chatParams("m-tiny", 1000))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Usage.CompletionTokens != 8 || resp.Choices[0].FinishReason != "length" {
			t.Fatalf("completion tokens %d, finish %q; want 8, length", resp.Usage.CompletionTokens, resp.Choices[0].FinishReason)
		}
		msg, err := anthropicMessages(c, key).New(ctxT(t), messageParams("m-tiny", 1000))
		if err != nil {
			t.Fatal(err)
		}
		if msg.Usage.OutputTokens != 8 || msg.StopReason != "max_tokens" {
			t.Fatalf("output tokens %d, stop %q; want 8, max_tokens", msg.Usage.OutputTokens, msg.StopReason)
		}
	})

	t.Run("errors in both formats", func(t *testing.T) {
		_, key := acct.key(t, acct.subscribe(t, "open", 1))
		_, _, err := chatOnce(t, c, "", "m-open")
		wantOpenAIError(t, err, http.StatusUnauthorized, "authentication_error", "no API key")
		_, err = anthropicMessages(c, "sk_pool_"+strings.Repeat("x", 43)).New(ctxT(t), messageParams("m-open", 2))
		wantAnthropicError(t, err, http.StatusUnauthorized, "authentication_error", "invalid API key")
		_, err = anthropicMessages(c, acct.token).New(ctxT(t), messageParams("m-open", 2))
		wantAnthropicError(t, err, http.StatusUnauthorized, "authentication_error", "session tokens are for the account API")
		_, _, err = chatOnce(t, c, key, "m-other")
		wantOpenAIError(t, err, http.StatusNotFound, "not_found_error", `model "m-other" is not available with this key`)
		_, err = anthropicMessages(c, key).New(ctxT(t), messageParams("m-other", 2))
		wantAnthropicError(t, err, http.StatusNotFound, "not_found_error", "is not available with this key")
		big := strings.Repeat("x", 100<<10)
		_, err = anthropicMessages(c, key).New(ctxT(t), anthropic.MessageNewParams{
			Model: "m-open", MaxTokens: 2,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(big))},
		})
		wantAnthropicError(t, err, http.StatusRequestEntityTooLarge, "request_too_large", "larger than")
	})

	t.Run("revocation takes effect at once", func(t *testing.T) {
		id, key := acct.key(t, acct.subscribe(t, "open", 1))
		if _, _, err := chatOnce(t, c, key, "m-open"); err != nil {
			t.Fatal(err)
		}
		acct.api(t, http.MethodPut, "/api/keys/"+id, map[string]any{"isActive": false})
		_, _, err := chatOnce(t, c, key, "m-open")
		wantOpenAIError(t, err, http.StatusUnauthorized, "authentication_error", "revoked")
		acct.api(t, http.MethodPut, "/api/keys/"+id, map[string]any{"isActive": true})
		if _, _, err := chatOnce(t, c, key, "m-open"); err != nil {
			t.Fatalf("after reactivation: %v", err)
		}
	})
}

// TestGateReloadDuringStream reloads the config while a stream holds the
// only lane of a key: the stream runs to completion, and the new config sees
// the lane as taken until it ends.
func TestGateReloadDuringStream(t *testing.T) {
	c := e2e.Start(t, gateConfig(t, gateOpts{mark: "1"}), e2e.WithEnv(gateSecret))
	acct := newAccount(t, c)
	_, key := acct.key(t, acct.subscribe(t, "open", 1))
	_, probe := acct.key(t, acct.subscribe(t, "open", 1))

	// 60 tokens at 20 per second: a three-second stream.
	stream := anthropicMessages(c, key).NewStreaming(ctxT(t), messageParams("m-open", 60))
	if !stream.Next() {
		t.Fatalf("stream did not start: %v", stream.Err())
	}
	reloaded := make(chan error, 1)
	go func() { reloaded <- c.Reload(gateConfig(t, gateOpts{mark: "2"})) }()
	eventually(t, 10*time.Second, "new config running", func() error {
		_, hdr, err := chatOnce(t, c, probe, "m-open")
		if err != nil {
			return err
		}
		if hdr.Get("X-Config") != "2" {
			return fmt.Errorf("X-Config %q", hdr.Get("X-Config"))
		}
		return nil
	})
	_, _, err := chatOnce(t, c, key, "m-open")
	wantOpenAIError(t, err, http.StatusTooManyRequests, "rate_limit_error", "busy")

	var msg anthropic.Message
	for {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
		if !stream.Next() {
			break
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream across the reload: %v", err)
	}
	if msg.StopReason != "max_tokens" || msg.Usage.OutputTokens != 60 {
		t.Fatalf("stream ended with %q after %d tokens, want max_tokens after 60", msg.StopReason, msg.Usage.OutputTokens)
	}
	if err := <-reloaded; err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "lane free after the stream", func() error {
		_, _, err := chatOnce(t, c, key, "m-open")
		return err
	})
}

// TestGateRevocationAcrossNodes runs two caddy nodes on one PostgreSQL
// store: a key revoked through one node is refused by the other within a
// second (LISTEN/NOTIFY), although the other had it cached.
func TestGateRevocationAcrossNodes(t *testing.T) {
	dsn := pgtest.DSN(t)
	store := gateOpts{store: "store postgres {$TIMEBLOCK_DSN}"}
	a := e2e.Start(t, gateConfig(t, store), e2e.WithEnv(gateSecret, "TIMEBLOCK_DSN="+dsn))
	b := e2e.Start(t, gateConfig(t, store), e2e.WithEnv(gateSecret, "TIMEBLOCK_DSN="+dsn))
	acct := newAccount(t, a)
	id, key := acct.key(t, acct.subscribe(t, "open", 1))
	// Node b hears of the new key from the same notification node a waited
	// for before answering; under load it may come a moment later (README,
	// "Guessing a key costs nothing").
	eventually(t, time.Second, "the new key admitted on the other node", func() error {
		_, _, err := chatOnce(t, b, key, "m-open")
		return err
	})
	acct.api(t, http.MethodPut, "/api/keys/"+id, map[string]any{"isActive": false})
	took := eventually(t, time.Second, "revocation on the other node", func() error {
		_, _, err := chatOnce(t, b, key, "m-open")
		var apiErr *openai.Error
		if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnauthorized {
			return nil
		}
		return fmt.Errorf("still admitted (%v)", err)
	})
	t.Logf("node b refused the revoked key after %v", took)
}
