package e2e_test

// End-to-end tests of the endpoints the gate serves besides inference, with
// the routes of Caddyfile.example (every /v1/* and /compat/v1/* request
// through the gate): both SDKs' model lists, token counts forwarded to a
// messages upstream and estimated for a chat one, message_start's input
// estimate, and JSON 404/405 answers.

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	antoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/caddymodule/e2e"
	"github.com/timeblock/timeblock/translate"
)

// routesCaddyfile: "open" sells the block holding the current hour, "shut"
// the next one. /v1/* and /compat/v1/* go through the gate to a chat
// upstream; the same under /m (handle_path strips it) to a messages
// upstream. The simulator holds a stream for max_tokens/20 seconds.
const routesCaddyfile = `{
	timeblock {
		secret {$TIMEBLOCK_SECRET}
		pool open {
			model m-open
			name "Open Model"
			slots 20
			block %NOW% 40
			max_output_tokens 512
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
	handle_path /m/* {
		timeblock_gate {
			lane_wait 0
		}
		timeblock_translate messages
		reverse_proxy 127.0.0.1:{{.Upstream}}
	}
	@inference path /v1/* /compat/v1/*
	handle @inference {
		timeblock_gate {
			lane_wait 0
		}
		timeblock_translate chat
		reverse_proxy 127.0.0.1:{{.Upstream}}
	}
}

:{{.Upstream}} {
	timeblock_simulator {
		token_rate 20
		reply_tokens 400
	}
}
`

func routesConfig(t *testing.T) string {
	t.Helper()
	gateConfig(t, gateOpts{}) // skips the test close to a block change
	now := time.Now().UTC()
	return strings.NewReplacer("%NOW%", blockNames[now.Hour()/8], "%LATER%", blockNames[(now.Hour()/8+1)%3]).Replace(routesCaddyfile)
}

// captureBody is an SDK middleware that keeps the last request body sent.
func captureBody(dst *[]byte) antoption.RequestOption {
	return antoption.WithMiddleware(func(r *http.Request, next antoption.MiddlewareNext) (*http.Response, error) {
		if r.Body != nil {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return nil, err
			}
			*dst = b
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		return next(r)
	})
}

func TestGateRoutesEndToEnd(t *testing.T) {
	c := e2e.Start(t, routesConfig(t), e2e.WithEnv(gateSecret))
	acct := newAccount(t, c)
	// One key holding both pools: one lane in "open" now, "shut" later.
	key := acct.combined(t, nil, acct.subscribe(t, "open", 1), acct.subscribe(t, "shut", 1))

	t.Run("OpenAI model list", func(t *testing.T) {
		client := c.OpenAIClient(key)
		page, err := client.Models.List(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
			if m.OwnedBy != "timeblock" || m.Created < time.Now().Add(-time.Hour).Unix() {
				t.Errorf("model %+v", m)
			}
		}
		if strings.Join(ids, ",") != "m-open,m-shut" {
			t.Fatalf("listed %v, want both pools' models, open now or not", ids)
		}
		m, err := client.Models.Get(ctxT(t), "m-shut")
		if err != nil || m.ID != "m-shut" {
			t.Fatalf("Get: %+v %v", m, err)
		}
		_, err = client.Models.Get(ctxT(t), "gpt-5")
		wantOpenAIError(t, err, http.StatusNotFound, "not_found_error", "it holds: m-open, m-shut")
	})

	t.Run("messages model list", func(t *testing.T) {
		client := c.AnthropicClient(key)
		page, err := client.Models.List(ctxT(t), anthropic.ModelListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 2 || page.HasMore || page.FirstID != "m-open" || page.LastID != "m-shut" {
			t.Fatalf("page %s", page.RawJSON())
		}
		if m := page.Data[0]; m.DisplayName != "Open Model" || m.MaxTokens != 512 || time.Since(m.CreatedAt) > time.Hour {
			t.Errorf("model %s", m.RawJSON())
		}
		// Auto-paging one model at a time walks the pages by after_id.
		var ids []string
		iter := client.Models.ListAutoPaging(ctxT(t), anthropic.ModelListParams{Limit: anthropic.Int(1)})
		for iter.Next() {
			ids = append(ids, iter.Current().ID)
		}
		if iter.Err() != nil || strings.Join(ids, ",") != "m-open,m-shut" {
			t.Fatalf("auto-paging: %v %v", ids, iter.Err())
		}
		m, err := client.Models.Get(ctxT(t), "m-open", anthropic.ModelGetParams{})
		if err != nil || m.DisplayName != "Open Model" {
			t.Fatalf("Get: %+v %v", m, err)
		}
		_, err = client.Models.Get(ctxT(t), "claude-opus-4", anthropic.ModelGetParams{})
		wantAnthropicError(t, err, http.StatusNotFound, "not_found_error", `model "claude-opus-4" is not available with this key; it holds: m-open, m-shut`)
	})

	t.Run("wrong model names the key's models", func(t *testing.T) {
		_, _, err := chatOnce(t, c, key, "gpt-5")
		wantOpenAIError(t, err, http.StatusNotFound, "not_found_error", `model "gpt-5" is not available with this key; it holds: m-open, m-shut`)
		_, err = anthropicMessages(c, key).New(ctxT(t), messageParams("claude-opus-4", 2))
		wantAnthropicError(t, err, http.StatusNotFound, "not_found_error", "it holds: m-open, m-shut")
	})

	countParams := anthropic.MessageCountTokensParams{
		Model:    "m-open",
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("You answer in one short sentence.")},
		Messages: userText("What is the weather in Paris today?"),
		Tools: []anthropic.MessageCountTokensToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: weatherSchema["properties"], Required: []string{"city"}},
		}}},
	}

	t.Run("count_tokens", func(t *testing.T) {
		// The key's only lane in "open" is busy: counts still go through.
		holdStream(t, c, key, "m-open")
		_, _, err := chatOnce(t, c, key, "m-open")
		wantOpenAIError(t, err, http.StatusTooManyRequests, "rate_limit_error", "lanes")

		// A chat upstream: estimated by the translator.
		var sent []byte
		client := c.AnthropicClient(key, captureBody(&sent))
		got, err := client.Messages.CountTokens(ctxT(t), countParams)
		if err != nil {
			t.Fatal(err)
		}
		want, terr := translate.CountTokens(sent)
		if terr != nil || got.InputTokens != want || want < 20 {
			t.Fatalf("chat upstream: input_tokens %d, want the estimate %d (%v)", got.InputTokens, want, terr)
		}

		// A messages upstream: forwarded; the simulator's own count.
		direct := anthropic.NewClient(antoption.WithoutEnvironmentDefaults(), antoption.WithBaseURL(c.UpstreamURL()+"/"),
			antoption.WithAPIKey("unused"), antoption.WithMaxRetries(0))
		wantUp, err := direct.Messages.CountTokens(ctxT(t), countParams)
		if err != nil {
			t.Fatal(err)
		}
		viaMessages := c.AnthropicClient(key, antoption.WithBaseURL(c.URL()+"/m/compat/"))
		got, err = viaMessages.Messages.CountTokens(ctxT(t), countParams)
		if err != nil || got.InputTokens != wantUp.InputTokens || got.InputTokens == want {
			t.Fatalf("messages upstream: %+v %v, want the simulator's %d", got, err, wantUp.InputTokens)
		}

		// Outside the key's hours, and for a model the key does not hold.
		p := countParams
		p.Model = "m-shut"
		_, err = viaMessages.Messages.CountTokens(ctxT(t), p)
		wantAnthropicError(t, err, http.StatusTooManyRequests, "rate_limit_error", "opens next at")
		p.Model = "m-other"
		_, err = client.Messages.CountTokens(ctxT(t), p)
		wantAnthropicError(t, err, http.StatusNotFound, "not_found_error", "it holds: m-open, m-shut")
	})

	t.Run("message_start reports the input estimate", func(t *testing.T) {
		_, key := acct.key(t, acct.subscribe(t, "open", 1))
		var sent []byte
		client := c.AnthropicClient(key, captureBody(&sent))
		stream := client.Messages.NewStreaming(ctxT(t), anthropic.MessageNewParams{
			Model: "m-open", MaxTokens: 3, Messages: countParams.Messages,
			System: []anthropic.TextBlockParam{{Text: "You answer in one short sentence."}},
		})
		defer stream.Close()
		var start, final int64 = -1, -1
		for stream.Next() {
			switch ev := stream.Current(); ev.Type {
			case "message_start":
				start = ev.AsMessageStart().Message.Usage.InputTokens
			case "message_delta":
				final = ev.AsMessageDelta().Usage.InputTokens
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		want, _ := translate.CountTokens(sent)
		if start != want || start < 10 {
			t.Fatalf("message_start input_tokens %d, want the estimate %d", start, want)
		}
		// The final count is the upstream's: the simulator counts the chat
		// body it was sent, a quarter of its bytes.
		if final <= 0 || final == start {
			t.Errorf("message_delta input_tokens %d (message_start %d)", final, start)
		}
	})

	t.Run("JSON 404 and 405", func(t *testing.T) {
		cases := []struct {
			method, path string
			status       int
			allow        string
			messages     bool
		}{
			{"GET", "/v1/foo", 404, "", false},
			{"POST", "/v1/completions", 404, "", false},
			{"GET", "/compat/v1/foo", 404, "", true},
			{"DELETE", "/v1/models", 405, "GET, HEAD", false},
			{"GET", "/v1/chat/completions", 405, "POST", false},
			{"GET", "/compat/v1/messages/count_tokens", 405, "POST", true},
		}
		for _, tc := range cases {
			req, _ := http.NewRequest(tc.method, c.URL()+tc.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body := string(b)
			if resp.StatusCode != tc.status || resp.Header.Get("Allow") != tc.allow ||
				!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Errorf("%s %s: %s, Allow %q, %s: %s", tc.method, tc.path, resp.Status, resp.Header.Get("Allow"), resp.Header.Get("Content-Type"), body)
				continue
			}
			if tc.messages != (gjson.Get(body, "type").Str == "error") || gjson.Get(body, "error.message").Str == "" {
				t.Errorf("%s %s: body %s", tc.method, tc.path, body)
			}
		}
	})
}
