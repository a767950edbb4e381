package e2e_test

// End-to-end tests of the issue 31 fixes, through the real caddy binary: a
// messages upstream's argument-less tool calls and message_delta zeros
// reaching chat and Responses clients, a system-only chat request answered
// without the upstream, Claude Code's billing header kept from a chat
// upstream, and tool results moved next to their calls (Codex's approval
// flow) for both upstreams.

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	oaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// issue31Caddyfile: /noargs/ and /zero/ reach a messages upstream replaying
// the translate package's fixtures of those shapes; /cc/ reaches a chat
// upstream. %UPSTREAM% is the upstream's address.
const issue31Caddyfile = `
:{{.HTTP}} {
	handle /noargs/* {
		timeblock_translate messages {
			path /noargs/v1/messages
		}
		reverse_proxy %UPSTREAM%
	}
	handle /zero/* {
		timeblock_translate messages {
			path /zero/v1/messages
		}
		reverse_proxy %UPSTREAM%
	}
	handle /order/* {
		timeblock_translate messages {
			path /order/v1/messages
		}
		reverse_proxy %UPSTREAM%
	}
	handle /cc/* {
		timeblock_translate chat {
			path /cc/v1/chat/completions
		}
		reverse_proxy %UPSTREAM%
	}
}
`

// issue31Upstream answers POST /<name>/v1/messages streamed with
// ../../translate/testdata/streams/<script>.sse, unstreamed with a message
// holding the same content, and POST /cc/v1/chat/completions with a short
// completion stream. It records the bodies it gets.
type issue31Upstream struct {
	mu       sync.Mutex
	requests map[string][]string
}

var issue31Scripts = map[string]string{
	"noargs": "anthropic_tool_noargs",
	"zero":   "messages_usage_zero_delta",
	"order":  "messages_usage_zero_delta", // any answer: the request is what counts
}

// The unstreamed counterparts of the scripts.
var issue31Messages = map[string]string{
	"noargs": `{"id":"msg_01HvN2kq8cJ3bL5xT9wYzRaE","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Let me check the time."},{"type":"tool_use","id":"toolu_01Q2mZ8vEw4rT6yU1iO3pA5s","name":"get_time","input":{}},{"type":"tool_use","id":"toolu_01B7nX3cV9mK2lJ4hG6fD8sA","name":"list_files","input":{}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":388,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":52}}`,
	"zero":   `{"id":"msg_01Lr5tY8uI2oP4aS6dF8gH0j","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello there."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":471,"cache_creation_input_tokens":30,"cache_read_input_tokens":2048,"output_tokens":7}}`,
	"order":  `{"id":"msg_01Lr5tY8uI2oP4aS6dF8gH0j","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello there."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":471,"cache_creation_input_tokens":30,"cache_read_input_tokens":2048,"output_tokens":7}}`,
}

func (u *issue31Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.requests[name] = append(u.requests[name], string(body))
	u.mu.Unlock()
	switch {
	case name == "cc" && rest == "v1/chat/completions": // Claude Code streams
		w.Header().Set("Content-Type", "text/event-stream")
		const head = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",`
		io.WriteString(w, head+`"choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}`+"\n\n"+
			head+`"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n"+
			head+`"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`+"\n\ndata: [DONE]\n\n")
	case issue31Scripts[name] != "" && rest == "v1/messages":
		if !gjson.GetBytes(body, "stream").Bool() {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, issue31Messages[name])
			return
		}
		script, err := os.ReadFile("../../translate/testdata/streams/" + issue31Scripts[name] + ".sse")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(script)
	default:
		http.Error(w, "issue31 upstream: no such script", http.StatusNotFound)
	}
}

func (u *issue31Upstream) received(name string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.requests[name]...)
}

func TestTranslateIssue31(t *testing.T) {
	up := &issue31Upstream{requests: map[string][]string{}}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	c := e2e.Start(t, strings.ReplaceAll(issue31Caddyfile, "%UPSTREAM%", srv.Listener.Addr().String()))
	chatAt := func(name string) openai.Client {
		return c.OpenAIClient("sk-test", oaioption.WithBaseURL(c.URL()+"/"+name+"/v1/"))
	}
	noTools := []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_time"}),
		openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "list_files"}),
	}

	// 1: a call without arguments is "{}" to chat and Responses clients,
	// streamed as unstreamed.
	t.Run("tool call without arguments", func(t *testing.T) {
		cresp, _ := chatBothWays(t, chatAt("noargs"), openai.ChatCompletionNewParams{
			Model:    "claude-sonnet-4-5",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What time is it?")},
			Tools:    noTools,
		})
		calls := cresp.Choices[0].Message.ToolCalls
		if len(calls) != 2 {
			t.Fatalf("response %s", cresp.RawJSON())
		}
		for _, call := range calls {
			if call.Function.Arguments != "{}" {
				t.Errorf("call %s: arguments %q", call.Function.Name, call.Function.Arguments)
			}
		}

		rs := c.OpenAIClient("sk-test", oaioption.WithBaseURL(c.URL()+"/noargs/v1/")).Responses
		resp, _ := responseBothWays(t, &rs, responses.ResponseNewParams{
			Model: "claude-sonnet-4-5",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What time is it?")},
			Tools: []responses.ToolUnionParam{
				{OfFunction: &responses.FunctionToolParam{Name: "get_time", Parameters: map[string]any{"type": "object"}}},
				{OfFunction: &responses.FunctionToolParam{Name: "list_files", Parameters: map[string]any{"type": "object"}}},
			},
		})
		n := 0
		for _, it := range resp.Output {
			if it.Type == "function_call" {
				n++
				if it.Arguments.OfString != "{}" {
					t.Errorf("function_call %s: arguments %q", it.Name, it.Arguments.OfString)
				}
			}
		}
		if n != 2 {
			t.Errorf("output %s", resp.RawJSON())
		}
	})

	// 2: message_delta's zeros do not replace message_start's counts.
	t.Run("message_delta zeros", func(t *testing.T) {
		acc, _ := accumulateChat(t, chatAt("zero"), openai.ChatCompletionNewParams{
			Model:    "claude-sonnet-4-5",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		if u := acc.Usage; u.PromptTokens != 471+30+2048 || u.PromptTokensDetails.CachedTokens != 2048 || u.CompletionTokens != 7 {
			t.Errorf("chat usage: prompt %d (cached %d), completion %d", u.PromptTokens, u.PromptTokensDetails.CachedTokens, u.CompletionTokens)
		}
		rs := c.OpenAIClient("sk-test", oaioption.WithBaseURL(c.URL()+"/zero/v1/")).Responses
		stream := rs.NewStreaming(ctxT(t), responses.ResponseNewParams{
			Model: "claude-sonnet-4-5",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
		})
		defer stream.Close()
		var final responses.Response
		for stream.Next() {
			if ev := stream.Current(); ev.Type == "response.completed" {
				final = ev.Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if u := final.Usage; u.InputTokens != 471+30+2048 || u.InputTokensDetails.CachedTokens != 2048 || u.OutputTokens != 7 {
			t.Errorf("responses usage %s", u.RawJSON())
		}
	})

	// 4: a system prompt alone is answered here, in the client's error
	// shape, and never reaches the upstream.
	t.Run("system message only", func(t *testing.T) {
		before := len(up.received("noargs"))
		chat := chatAt("noargs")
		_, err := chat.Chat.Completions.New(ctxT(t), openai.ChatCompletionNewParams{
			Model:    "claude-sonnet-4-5",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse.")},
		})
		wantOpenAIError(t, err, http.StatusBadRequest, "invalid_request_error", "messages: at least one user message")
		rs := c.OpenAIClient("sk-test", oaioption.WithBaseURL(c.URL()+"/noargs/v1/")).Responses
		_, err = rs.New(ctxT(t), responses.ResponseNewParams{
			Model: "claude-sonnet-4-5",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("You are terse.", responses.EasyInputMessageRoleDeveloper),
			}},
		})
		wantOpenAIError(t, err, http.StatusBadRequest, "invalid_request_error", "input: at least one user message")
		if n := len(up.received("noargs")); n != before {
			t.Errorf("the upstream got the request")
		}
	})

	// 5: Claude Code's billing header block stays away from a chat upstream.
	t.Run("billing header", func(t *testing.T) {
		// The captured request's bytes, as Claude Code sends them.
		fx := claudeCodeFirst(t)
		if !strings.HasPrefix(fx.Get("body.system.0.text").Str, "x-anthropic-billing-header:") {
			t.Fatalf("the capture's first system block: %s", fx.Get("body.system.0").Raw)
		}
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, c.URL()+"/cc/v1/messages?beta=true", strings.NewReader(fx.Get("body").Raw))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(out), "message_stop") {
			t.Fatalf("%d %s", res.StatusCode, out)
		}
		reqs := up.received("cc")
		if len(reqs) != 1 {
			t.Fatalf("the upstream got %d requests", len(reqs))
		}
		sys := gjson.Get(reqs[0], "messages.0")
		if sys.Get("role").Str != "system" || strings.Contains(reqs[0], "x-anthropic-billing-header") ||
			!strings.HasPrefix(sys.Get("content").Str, fx.Get("body.system.1.text").Str[:40]) {
			t.Errorf("the chat upstream got system %.300s", sys.Raw)
		}
	})
}

// TestTranslateIssue31ToolOrder: 3, Codex's approval flow (function_call,
// a user message, function_call_output, another user message) sent as
// Codex sends it: the chat upstream gets the tool message right after the
// assistant's tool_calls, the messages upstream the tool_result first in
// its user turn.
func TestTranslateIssue31ToolOrder(t *testing.T) {
	up := &issue31Upstream{requests: map[string][]string{}}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	c := e2e.Start(t, strings.ReplaceAll(issue31Caddyfile, "%UPSTREAM%", srv.Listener.Addr().String()))
	body, err := os.ReadFile("../../translate/testdata/requests/responses_codex_approval.in.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, site := range []string{"cc", "order"} {
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, c.URL()+"/"+site+"/v1/responses", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(out), "response.completed") {
			t.Fatalf("%s: %d %s", site, res.StatusCode, out)
		}
		reqs := up.received(site)
		if len(reqs) != 1 {
			t.Fatalf("%s: the upstream got %d requests", site, len(reqs))
		}
		got := gjson.Get(reqs[0], "messages")
		if site == "cc" {
			roles := got.Get("#.role").Raw
			if roles != `["system","user","assistant","tool","user","user"]` || got.Get("3.tool_call_id").Str != "call_1" {
				t.Errorf("chat upstream got roles %s: %s", roles, got.Raw)
			}
			continue
		}
		if turn := got.Get("2.content.#.type").Raw; turn != `["tool_result","text","text"]` {
			t.Errorf("messages upstream got the user turn %s: %s", turn, got.Raw)
		}
	}
}

// claudeCodeFirst is a first request captured from Claude Code (its system
// prompt begins with the billing header block).
func claudeCodeFirst(t *testing.T) gjson.Result {
	b, err := os.ReadFile("../../translate/testdata/clients/claude-code-2.1.328-first.json")
	if err != nil {
		t.Fatal(err)
	}
	return gjson.ParseBytes(b)
}
