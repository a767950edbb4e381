package e2e_test

// End-to-end tests of POST /v1/responses: the official openai-go Responses
// client, through the real caddy binary, the gate (a key bought through the
// account API) and timeblock_translate, to the simulator speaking chat
// completions and, under /msg/, the messages format.

import (
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	oaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// responsesCaddyfile: pool "open" sells the block holding the current hour,
// "tiny" too with max_output_tokens 8. %NOW% is filled in by the test.
const responsesCaddyfile = `{
	timeblock {
		secret {$TIMEBLOCK_SECRET}
		pool open {
			model m-open
			slots 5
			block %NOW% 40
		}
		pool tiny {
			model m-tiny
			slots 5
			block %NOW% 40
			max_output_tokens 8
		}
	}
}

:{{.HTTP}} {
	handle /api/* {
		timeblock_accounts
	}
	handle /v1/responses {
		timeblock_gate
		timeblock_translate chat
		reverse_proxy 127.0.0.1:{{.Upstream}}
	}
	handle /msg/v1/responses {
		timeblock_gate
		timeblock_translate messages
		reverse_proxy 127.0.0.1:{{.Upstream}}
	}
}

:{{.Upstream}} {
	timeblock_simulator {
		reasoning_tokens 6
	}
}
`

func TestResponsesEndToEnd(t *testing.T) {
	now := time.Now().UTC()
	if left := time.Duration(8-now.Hour()%8)*time.Hour - time.Duration(now.Minute())*time.Minute; left < 3*time.Minute {
		t.Skipf("too close to the end of the %s block; the window would close mid-test", blockNames[now.Hour()/8])
	}
	c := e2e.Start(t, strings.ReplaceAll(responsesCaddyfile, "%NOW%", blockNames[now.Hour()/8]), e2e.WithEnv(gateSecret))
	a := newAccount(t, c)
	_, key := a.key(t, a.subscribe(t, "open", 1))
	_, tinyKey := a.key(t, a.subscribe(t, "tiny", 1))

	for _, route := range []struct{ name, base string }{
		{"to chat", c.URL() + "/v1/"},
		{"to messages", c.URL() + "/msg/v1/"},
	} {
		t.Run(route.name, func(t *testing.T) {
			rs := c.OpenAIClient(key, oaioption.WithBaseURL(route.base)).Responses
			responsesCases(t, &rs)
			t.Run("clamped by the pool", func(t *testing.T) {
				tiny := c.OpenAIClient(tinyKey, oaioption.WithBaseURL(route.base)).Responses
				resp, _ := responseBothWays(t, &tiny, responses.ResponseNewParams{
					Model:           "m-tiny",
					MaxOutputTokens: openai.Int(100), // above the pool's ceiling: the gate lowers it
					Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("one two three four five six seven eight nine ten eleven twelve")},
				})
				if resp.Status != responses.ResponseStatusIncomplete || resp.IncompleteDetails.Reason != "max_output_tokens" ||
					resp.MaxOutputTokens != 8 || resp.Usage.OutputTokens != 8 {
					t.Errorf("status %s, incomplete %s, max_output_tokens %d, usage %s", resp.Status, resp.IncompleteDetails.RawJSON(), resp.MaxOutputTokens, resp.Usage.RawJSON())
				}
			})
		})
	}
}

func responsesCases(t *testing.T, rs *responses.ResponseService) {
	t.Run("plain", func(t *testing.T) {
		resp, _ := responseBothWays(t, rs, responses.ResponseNewParams{
			Model:        "m-open",
			Instructions: openai.String("be brief"),
			Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("hello over caddy")},
			Store:        openai.Bool(true), // accepted; nothing is stored
		})
		if txt := resp.OutputText(); !strings.HasPrefix(txt, "Simulated reply ") || !strings.HasSuffix(txt, ": hello over caddy") {
			t.Errorf("text %q", txt)
		}
		if len(resp.Output) != 1 || resp.Output[0].Type != "message" || resp.Status != responses.ResponseStatusCompleted || resp.Model != "m-open" ||
			!strings.HasPrefix(resp.ID, "resp_") || gjson.Get(resp.RawJSON(), "store").Raw != "false" || resp.Usage.InputTokens < 1 || resp.Usage.OutputTokens != 6 ||
			resp.Usage.TotalTokens != resp.Usage.InputTokens+resp.Usage.OutputTokens {
			t.Errorf("response %s", resp.RawJSON())
		}
	})

	t.Run("reasoning", func(t *testing.T) {
		resp, evs := responseBothWays(t, rs, responses.ResponseNewParams{
			Model:     "m-open",
			Input:     responses.ResponseNewParamsInputUnion{OfString: openai.String("think first")},
			Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortHigh, Summary: shared.ReasoningSummaryAuto},
			Include:   []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
		})
		if len(resp.Output) != 2 || resp.Output[0].Type != "reasoning" || resp.Output[1].Type != "message" {
			t.Fatalf("output %s", resp.RawJSON())
		}
		r := resp.Output[0].AsReasoning()
		if len(r.Summary) != 1 || r.Summary[0].Text == "" || !strings.HasPrefix(r.EncryptedContent, "tb1:") || r.Status != "completed" {
			t.Errorf("reasoning item %s", r.RawJSON())
		}
		if resp.Usage.OutputTokensDetails.ReasoningTokens < 1 || resp.Reasoning.Effort != shared.ReasoningEffortHigh {
			t.Errorf("usage %s, reasoning %s", resp.Usage.RawJSON(), resp.Reasoning.RawJSON())
		}
		if !hasEvent(evs, "response.reasoning_summary_text.delta") || !hasEvent(evs, "response.reasoning_summary_part.done") {
			t.Errorf("stream events %v", evs)
		}
	})

	t.Run("function tools across two turns", func(t *testing.T) {
		tools := []responses.ToolUnionParam{
			{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Parameters: weatherSchema, Strict: openai.Bool(false)}},
			{OfNamespace: &responses.NamespaceToolParam{Name: "geo", Description: "Places", Tools: []responses.NamespaceToolToolUnionParam{
				{OfFunction: &responses.NamespaceToolToolFunctionParam{Name: "lookup", Parameters: weatherSchema}},
			}}},
			{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}, // withdrawn
		}
		first := []responses.ResponseInputItemUnionParam{
			responses.ResponseInputItemParamOfMessage(`call tool geo__lookup with {"city":"Paris"}`, responses.EasyInputMessageRoleUser),
		}
		params := responses.ResponseNewParams{
			Model:             "m-open",
			Input:             responses.ResponseNewParamsInputUnion{OfInputItemList: first},
			Tools:             tools,
			ParallelToolCalls: openai.Bool(true),
			Reasoning:         shared.ReasoningParam{Effort: shared.ReasoningEffortLow},
			Include:           []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
		}
		resp, evs := responseBothWays(t, rs, params)
		var call responses.ResponseFunctionToolCall
		for _, item := range resp.Output {
			if item.Type == "function_call" {
				call = item.AsFunctionCall()
			}
		}
		if call.Name != "lookup" || call.Namespace != "geo" || call.CallID == "" || gjson.Get(call.Arguments, "city").String() != "Paris" {
			t.Fatalf("call %s in %s", call.RawJSON(), resp.RawJSON())
		}
		if !hasEvent(evs, "response.function_call_arguments.delta") || !hasEvent(evs, "response.function_call_arguments.done") {
			t.Errorf("stream events %v", evs)
		}
		// The second turn hands the output back, reasoning included, with the
		// tool's result; the model answers from it.
		next := append([]responses.ResponseInputItemUnionParam{}, first...)
		for _, item := range resp.Output {
			switch item.Type {
			case "reasoning":
				p := item.AsReasoning().ToParam()
				next = append(next, responses.ResponseInputItemUnionParam{OfReasoning: &p})
			case "function_call":
				p := item.AsFunctionCall().ToParam()
				next = append(next, responses.ResponseInputItemUnionParam{OfFunctionCall: &p})
			case "message":
				p := item.AsMessage().ToParam()
				next = append(next, responses.ResponseInputItemUnionParam{OfOutputMessage: &p})
			}
		}
		out := responses.ResponseInputItemParamOfFunctionCallOutput("sunny, 21 degrees")
		out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
		next = append(next, out)
		params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: next}
		resp2, _ := responseBothWays(t, rs, params)
		if txt := resp2.OutputText(); !strings.Contains(txt, "sunny, 21 degrees") || resp2.Status != responses.ResponseStatusCompleted {
			t.Errorf("second turn %s", resp2.RawJSON())
		}
		for _, item := range resp2.Output {
			if item.Type == "function_call" {
				t.Errorf("called again: %s", resp2.RawJSON())
			}
		}
	})

	t.Run("refusals", func(t *testing.T) {
		_, err := rs.New(ctxT(t), responses.ResponseNewParams{
			Model:              "m-open",
			Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("again")},
			PreviousResponseID: openai.String("resp_123"),
		})
		wantOpenAIError(t, err, 400, "invalid_request_error", "Timeblock keeps no response state")
		_, err = rs.New(ctxT(t), responses.ResponseNewParams{
			Model:      "m-open",
			Input:      responses.ResponseNewParamsInputUnion{OfString: openai.String("search")},
			Tools:      []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}},
			ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)},
		})
		wantOpenAIError(t, err, 400, "invalid_request_error", "web_search")
		_, err = rs.New(ctxT(t), responses.ResponseNewParams{
			Model: "m-other",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")},
		})
		wantOpenAIError(t, err, 404, "not_found_error", "m-other")
	})
}

// responseBothWays sends params unstreamed and streamed, checks that the
// stream's events come in the order the SDK expects and that its final
// response carries the same output, and returns the unstreamed response and
// the stream's event types.
func responseBothWays(t *testing.T, rs *responses.ResponseService, params responses.ResponseNewParams) (*responses.Response, []string) {
	t.Helper()
	resp, err := rs.New(ctxT(t), params)
	if err != nil {
		t.Fatal(err)
	}
	stream := rs.NewStreaming(ctxT(t), params)
	defer stream.Close()
	var (
		types []string
		text  strings.Builder
		args  = map[int64]string{} // by output index
		final responses.Response
		seq   int64
		open  = -1
		items int64
	)
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if ev.SequenceNumber != seq {
			t.Errorf("event %d (%s): sequence_number %d", seq, ev.Type, ev.SequenceNumber)
		}
		seq++
		switch ev.Type {
		case "response.output_item.added":
			if open >= 0 || ev.OutputIndex != items {
				t.Errorf("item %d added while %d open", ev.OutputIndex, open)
			}
			open = int(ev.OutputIndex)
		case "response.output_item.done":
			if open != int(ev.OutputIndex) {
				t.Errorf("item %d done while %d open", ev.OutputIndex, open)
			}
			open = -1
			items++
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.function_call_arguments.delta":
			args[ev.OutputIndex] += ev.Delta
		case "response.completed", "response.incomplete":
			final = ev.Response
		case "response.failed", "error":
			t.Fatalf("stream failed: %s", ev.RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(types) < 4 || types[0] != "response.created" || types[1] != "response.in_progress" {
		t.Fatalf("events %v", types)
	}
	if final.ID == "" || !strings.HasPrefix(final.ID, "resp_") {
		t.Fatalf("no final response; events %v", types)
	}
	if final.OutputText() != resp.OutputText() || text.String() != resp.OutputText() {
		t.Errorf("streamed text %q (final %q), unstreamed %q", text.String(), final.OutputText(), resp.OutputText())
	}
	if len(final.Output) != len(resp.Output) || int64(len(final.Output)) != items || final.Status != resp.Status {
		t.Errorf("streamed output %s\nunstreamed %s", final.RawJSON(), resp.RawJSON())
	}
	for i := range min(len(final.Output), len(resp.Output)) {
		f, u := final.Output[i], resp.Output[i]
		if f.Type != u.Type || f.Name != u.Name || f.Namespace != u.Namespace || f.Arguments.OfString != u.Arguments.OfString {
			t.Errorf("output %d: streamed %s, unstreamed %s", i, f.RawJSON(), u.RawJSON())
		}
		if f.Type == "function_call" && f.Arguments.OfString != args[int64(i)] {
			t.Errorf("argument deltas %q, final %q", args[int64(i)], f.Arguments.OfString)
		}
	}
	if final.Usage.OutputTokens != resp.Usage.OutputTokens || final.Usage.OutputTokensDetails.ReasoningTokens != resp.Usage.OutputTokensDetails.ReasoningTokens {
		t.Errorf("streamed usage %s, unstreamed %s", final.Usage.RawJSON(), resp.Usage.RawJSON())
	}
	return resp, types
}

func hasEvent(types []string, typ string) bool {
	for _, t := range types {
		if t == typ {
			return true
		}
	}
	return false
}
