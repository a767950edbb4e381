package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m) }

// simulatorCaddyfile serves the simulator on the HTTP port for every path:
// it matches its endpoints by suffix, so the SDKs' /v1/chat/completions and
// /compat/v1/messages both reach it.
const simulatorCaddyfile = `
:{{.HTTP}} {
	timeblock_simulator {
		reasoning_tokens 6
		model sim-{{.HTTP}}
	}
}
`

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var weatherSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"city": map[string]any{"type": "string"},
		"unit": map[string]any{"type": "string", "enum": []string{"celsius", "fahrenheit"}},
	},
	"required": []string{"city"},
}

// TestSimulatorSDKs drives the simulator, served by the real caddy binary,
// with both official SDKs, streaming and not.
func TestSimulatorSDKs(t *testing.T) {
	c := e2e.Start(t, simulatorCaddyfile)
	oai := c.OpenAIClient("sk-test")
	ant := c.AnthropicClient("sk-test")

	// chat runs params both ways and checks that the streamed message,
	// accumulated by the SDK, equals the non-streamed one.
	chat := func(t *testing.T, params openai.ChatCompletionNewParams) (*openai.ChatCompletion, string) {
		t.Helper()
		resp, err := oai.Chat.Completions.New(ctxT(t), params)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != 1 {
			t.Fatalf("%d choices", len(resp.Choices))
		}

		params.StreamOptions.IncludeUsage = openai.Bool(true)
		stream := oai.Chat.Completions.NewStreaming(ctxT(t), params)
		var acc openai.ChatCompletionAccumulator
		var reasoning strings.Builder
		var contentSeen bool
		for stream.Next() {
			chunk := stream.Current()
			if !acc.AddChunk(chunk) {
				t.Fatalf("the accumulator rejected %s", chunk.RawJSON())
			}
			if len(chunk.Choices) == 0 {
				continue
			}
			delta := chunk.Choices[0].Delta
			if delta.Content != "" || len(delta.ToolCalls) > 0 {
				contentSeen = true
			}
			if r, ok := delta.JSON.ExtraFields["reasoning_content"]; ok {
				if contentSeen {
					t.Errorf("reasoning_content after content: %s", chunk.RawJSON())
				}
				var s string
				if err := json.Unmarshal([]byte(r.Raw()), &s); err != nil {
					t.Fatal(err)
				}
				reasoning.WriteString(s)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 1 {
			t.Fatalf("accumulated %d choices", len(acc.Choices))
		}
		got, want := acc.Choices[0], resp.Choices[0]
		if got.Message.Content != want.Message.Content || got.FinishReason != want.FinishReason ||
			got.Message.Role != want.Message.Role || acc.ID != resp.ID || acc.Model != resp.Model {
			t.Errorf("streamed %q (%s, %s), not streamed %q (%s, %s)",
				got.Message.Content, got.FinishReason, acc.ID, want.Message.Content, want.FinishReason, resp.ID)
		}
		if len(got.Message.ToolCalls) != len(want.Message.ToolCalls) {
			t.Fatalf("streamed %d tool calls, not streamed %d", len(got.Message.ToolCalls), len(want.Message.ToolCalls))
		}
		for i := range got.Message.ToolCalls {
			g, w := got.Message.ToolCalls[i], want.Message.ToolCalls[i]
			if g.ID != w.ID || g.Function.Name != w.Function.Name || g.Function.Arguments != w.Function.Arguments {
				t.Errorf("streamed tool call %+v, not streamed %+v", g.Function, w.Function)
			}
		}
		if acc.Usage.PromptTokens != resp.Usage.PromptTokens || acc.Usage.CompletionTokens != resp.Usage.CompletionTokens ||
			acc.Usage.CompletionTokensDetails.ReasoningTokens != resp.Usage.CompletionTokensDetails.ReasoningTokens {
			t.Errorf("streamed usage %+v, not streamed %+v", acc.Usage, resp.Usage)
		}
		return resp, reasoning.String()
	}

	t.Run("openai text", func(t *testing.T) {
		resp, streamedReasoning := chat(t, openai.ChatCompletionNewParams{
			Model:    "m-chat",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello over caddy")},
		})
		msg := resp.Choices[0].Message
		if !strings.HasPrefix(msg.Content, "Simulated reply ") || !strings.HasSuffix(msg.Content, ": hello over caddy") {
			t.Errorf("content = %q", msg.Content)
		}
		if resp.Model != "m-chat" || resp.Choices[0].FinishReason != "stop" {
			t.Errorf("model %q, finish_reason %q", resp.Model, resp.Choices[0].FinishReason)
		}
		if _, ok := msg.JSON.ExtraFields["reasoning_content"]; ok || streamedReasoning != "" {
			t.Errorf("reasoning without asking: %s", msg.RawJSON())
		}
		if resp.Usage.PromptTokens < 1 || resp.Usage.CompletionTokens != 6 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+6 {
			t.Errorf("usage = %s", resp.Usage.RawJSON())
		}
	})

	for name, params := range map[string]openai.ChatCompletionNewParams{
		"openai reasoning_effort": {
			Model:           "m-chat",
			ReasoningEffort: shared.ReasoningEffortLow,
			Messages:        []openai.ChatCompletionMessageParamUnion{openai.UserMessage("think first")},
		},
		"openai enable_thinking": func() openai.ChatCompletionNewParams {
			p := openai.ChatCompletionNewParams{
				Model:    "m-chat",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("think first")},
			}
			p.SetExtraFields(map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": true}})
			return p
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			resp, streamedReasoning := chat(t, params)
			msg := resp.Choices[0].Message
			raw, ok := msg.JSON.ExtraFields["reasoning_content"]
			if !ok {
				t.Fatalf("no reasoning_content in %s", msg.RawJSON())
			}
			var reasoning string
			if err := json.Unmarshal([]byte(raw.Raw()), &reasoning); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(reasoning, "Considering request ") || reasoning != streamedReasoning {
				t.Errorf("reasoning %q, streamed %q", reasoning, streamedReasoning)
			}
			if !strings.HasSuffix(msg.Content, ": think first") {
				t.Errorf("content = %q", msg.Content)
			}
			if n := resp.Usage.CompletionTokensDetails.ReasoningTokens; n != 6 {
				t.Errorf("reasoning_tokens = %d, want 6", n)
			}
		})
	}

	t.Run("openai tools", func(t *testing.T) {
		params := openai.ChatCompletionNewParams{
			Model:    "m-chat",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
			Tools:    chatWeatherTools(),
		}
		resp, _ := chat(t, params)
		choice := resp.Choices[0]
		if choice.FinishReason != "tool_calls" || len(choice.Message.ToolCalls) != 1 {
			t.Fatalf("finish_reason %q, message %s", choice.FinishReason, choice.Message.RawJSON())
		}
		call := choice.Message.ToolCalls[0]
		var args struct{ City, Unit string }
		if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil {
			t.Fatalf("arguments %q: %v", call.Function.Arguments, err)
		}
		if call.Function.Name != "get_weather" || args.City != "Weather in Paris?" || args.Unit != "celsius" {
			t.Errorf("tool call %s(%s)", call.Function.Name, call.Function.Arguments)
		}

		// With the tool result last, the model answers in text.
		params.Messages = append(params.Messages, choice.Message.ToParam(), openai.ToolMessage("sunny, 21 C", call.ID))
		resp, _ = chat(t, params)
		if got := resp.Choices[0]; got.FinishReason != "stop" || !strings.HasSuffix(got.Message.Content, ": sunny, 21 C") {
			t.Errorf("after the tool result: %s, %q", got.FinishReason, got.Message.Content)
		}
	})

	t.Run("openai max_tokens", func(t *testing.T) {
		resp, _ := chat(t, openai.ChatCompletionNewParams{
			Model:     "m-chat",
			MaxTokens: openai.Int(2),
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		})
		if got := resp.Choices[0]; got.FinishReason != "length" || got.Message.Content != "Simulated reply" {
			t.Errorf("%s, %q", got.FinishReason, got.Message.Content)
		}
	})

	// message runs params both ways and checks that the streamed message,
	// accumulated by the SDK, equals the non-streamed one.
	message := func(t *testing.T, params anthropic.MessageNewParams) *anthropic.Message {
		t.Helper()
		resp, err := ant.Messages.New(ctxT(t), params)
		if err != nil {
			t.Fatal(err)
		}
		stream := ant.Messages.NewStreaming(ctxT(t), params)
		var acc anthropic.Message
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.ID != resp.ID || acc.Model != resp.Model || acc.StopReason != resp.StopReason ||
			acc.Usage.InputTokens != resp.Usage.InputTokens || acc.Usage.OutputTokens != resp.Usage.OutputTokens {
			t.Errorf("streamed %s %s %s %+v, not streamed %s %s %s %+v", acc.ID, acc.Model, acc.StopReason, acc.Usage,
				resp.ID, resp.Model, resp.StopReason, resp.Usage)
		}
		if len(acc.Content) != len(resp.Content) {
			t.Fatalf("streamed %d blocks, not streamed %d", len(acc.Content), len(resp.Content))
		}
		for i := range acc.Content {
			g, w := acc.Content[i], resp.Content[i]
			if g.Type != w.Type || g.Text != w.Text || g.Thinking != w.Thinking || g.Signature != w.Signature ||
				g.ID != w.ID || g.Name != w.Name || string(g.Input) != string(w.Input) {
				t.Errorf("block %d: streamed %s, not streamed %s", i, g.RawJSON(), w.RawJSON())
			}
		}
		return resp
	}

	t.Run("anthropic thinking", func(t *testing.T) {
		resp := message(t, anthropic.MessageNewParams{
			Model:     "m-messages",
			MaxTokens: 1024,
			Thinking:  anthropic.ThinkingConfigParamOfEnabled(1024),
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("think first"))},
		})
		if len(resp.Content) != 2 || resp.Content[0].Type != "thinking" || resp.Content[1].Type != "text" {
			t.Fatalf("content = %s", resp.RawJSON())
		}
		if th := resp.Content[0]; !strings.HasPrefix(th.Thinking, "Considering request ") || th.Signature == "" {
			t.Errorf("thinking block %s", th.RawJSON())
		}
		if !strings.HasSuffix(resp.Content[1].Text, ": think first") || resp.StopReason != anthropic.StopReasonEndTurn {
			t.Errorf("%s, %q", resp.StopReason, resp.Content[1].Text)
		}
		if resp.Usage.OutputTokens != 6+5 || resp.Model != "m-messages" {
			t.Errorf("model %s, usage %s", resp.Model, resp.Usage.RawJSON())
		}
	})

	t.Run("anthropic tools", func(t *testing.T) {
		params := anthropic.MessageNewParams{
			Model:     "m-messages",
			MaxTokens: 1024,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))},
			Tools: []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
				Properties: weatherSchema["properties"],
				Required:   []string{"city"},
			}, "get_weather")},
		}
		resp := message(t, params)
		if resp.StopReason != anthropic.StopReasonToolUse || len(resp.Content) != 1 || resp.Content[0].Type != "tool_use" {
			t.Fatalf("response %s", resp.RawJSON())
		}
		use := resp.Content[0]
		var input struct{ City, Unit string }
		if err := json.Unmarshal(use.Input, &input); err != nil {
			t.Fatalf("input %s: %v", use.Input, err)
		}
		if use.Name != "get_weather" || input.City != "Weather in Paris?" || input.Unit != "celsius" {
			t.Errorf("tool use %s(%s)", use.Name, use.Input)
		}

		params.Messages = append(params.Messages, resp.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "sunny, 21 C", false)))
		resp = message(t, params)
		if resp.StopReason != anthropic.StopReasonEndTurn || len(resp.Content) != 1 || !strings.HasSuffix(resp.Content[0].Text, ": sunny, 21 C") {
			t.Errorf("after the tool result: %s", resp.RawJSON())
		}
	})

	t.Run("anthropic max_tokens", func(t *testing.T) {
		resp := message(t, anthropic.MessageNewParams{
			Model:     "m-messages",
			MaxTokens: 3,
			Thinking:  anthropic.ThinkingConfigParamOfEnabled(1024),
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
		})
		// Reasoning counts toward max_tokens: three of six thinking tokens, no text.
		if resp.StopReason != anthropic.StopReasonMaxTokens || len(resp.Content) != 1 ||
			strings.Count(resp.Content[0].Thinking, " ") != 2 || resp.Usage.OutputTokens != 3 {
			t.Errorf("response %s", resp.RawJSON())
		}
	})

	t.Run("models", func(t *testing.T) {
		want := "sim-" + strconv.Itoa(c.HTTP)
		page, err := oai.Models.List(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 1 || page.Data[0].ID != want {
			t.Errorf("openai models = %s", page.RawJSON())
		}
		apage, err := ant.Models.List(ctxT(t), anthropic.ModelListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(apage.Data) != 1 || apage.Data[0].ID != want {
			t.Errorf("anthropic models = %s", apage.RawJSON())
		}
	})
}

// TestSimulatorPacing checks that token_rate and first_token_latency reach
// the client through Caddy: each chunk is flushed as it is generated, not
// buffered until the end.
func TestSimulatorPacing(t *testing.T) {
	c := e2e.Start(t, `
:{{.HTTP}} {
	timeblock_simulator {
		first_token_latency 100ms
		token_rate 50
		reply_tokens 20
	}
}
`)
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"x"}]}`},
		{"/compat/v1/messages", `{"stream":true,"max_tokens":100,"messages":[{"role":"user","content":"x"}]}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			start := time.Now()
			req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, c.URL()+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("%s %s", resp.Status, resp.Header.Get("Content-Type"))
			}
			// 100ms to the first token, then 19 more 20ms apart.
			var first, last time.Duration
			var tokens int
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				line := sc.Text()
				if strings.Contains(line, `"content":"`) || strings.Contains(line, `"text_delta"`) {
					if tokens == 0 {
						first = time.Since(start)
					}
					tokens++
					last = time.Since(start)
				}
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			if tokens != 20 {
				t.Fatalf("%d tokens, want 20", tokens)
			}
			if first < 100*time.Millisecond || first > 300*time.Millisecond {
				t.Errorf("first token after %v, want about 100ms", first)
			}
			if spread := last - first; spread < 350*time.Millisecond || spread > 2*time.Second {
				t.Errorf("the tokens came over %v, want about 380ms", spread)
			}
		})
	}
}
