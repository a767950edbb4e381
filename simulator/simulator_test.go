package simulator

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func newTestSimulator(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func simDo(t testing.TB, s *Server, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	w := httptest.NewRecorder()
	if err := s.Serve(w, r); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	return w
}

// simPost sends body and checks for 200 and the content type of the mode.
func simPost(t testing.TB, s *Server, path, body string) string {
	t.Helper()
	w := simDo(t, s, http.MethodPost, path, body)
	if w.Code != http.StatusOK {
		t.Fatalf("POST %s %s: status %d, body %s", path, body, w.Code, w.Body)
	}
	want := "application/json"
	if gjson.Get(body, "stream").Bool() {
		want = "text/event-stream"
	}
	if ct := w.Header().Get("Content-Type"); ct != want {
		t.Fatalf("Content-Type = %q, want %q", ct, want)
	}
	return w.Body.String()
}

type sseEvent struct{ name, data string }

// parseSSE splits a stream into events and checks the framing: every event
// ends with a blank line and has exactly one data line.
func parseSSE(t testing.TB, stream string) []sseEvent {
	t.Helper()
	if !strings.HasSuffix(stream, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", stream)
	}
	var events []sseEvent
	for _, block := range strings.Split(strings.TrimSuffix(stream, "\n\n"), "\n\n") {
		var ev sseEvent
		var datas int
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
				datas++
			default:
				t.Fatalf("unexpected SSE line %q", line)
			}
		}
		if datas != 1 {
			t.Fatalf("event %q has %d data lines", block, datas)
		}
		if ev.data != "[DONE]" && !gjson.Valid(ev.data) {
			t.Fatalf("event data is not JSON: %s", ev.data)
		}
		events = append(events, ev)
	}
	return events
}

func jsonEqual(t testing.TB, what, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: %v in %s", what, err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: %v in %s", what, err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got  %s\n want %s", what, got, want)
	}
}

const weatherToolChat = `[{"type":"function","function":{"name":"get_weather","description":"Weather now","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]},"days":{"type":"integer"},"detail":{"type":"object","properties":{"hourly":{"type":"boolean"}}}},"required":["city"]}}}]`

const weatherToolMessages = `[{"name":"get_weather","description":"Weather now","input_schema":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]},"days":{"type":"integer"},"detail":{"type":"object","properties":{"hourly":{"type":"boolean"}}}},"required":["city"]}}]`

const wantWeatherArgs = `{"city":"Weather in Paris?","unit":"celsius","days":1,"detail":{"hourly":true}}`

// chatCase is one chat request, its expected non-streamed message and
// finish reason, and usage.
type chatCase struct {
	name       string
	sim        Config
	body       string // without "stream"
	content    string // "" means null
	reasoning  string // "" means absent
	args       string // tool call arguments, "" means no tool call
	finish     string
	completion int64
}

var chatCases = []chatCase{
	{
		name:       "plain",
		body:       `{"model":"m1","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"  hello\n there  "}]}`,
		content:    "Simulated reply $D: hello there",
		finish:     "stop",
		completion: 5,
	},
	{
		name:       "content parts and default model",
		body:       `{"messages":[{"role":"user","content":[{"type":"text","text":"part one"},{"type":"image_url","image_url":{"url":"data:,"}},{"type":"text","text":"part two"}]}]}`,
		content:    "Simulated reply $D: part one part two",
		finish:     "stop",
		completion: 7,
	},
	{
		name:       "reasoning_effort",
		sim:        Config{ReasoningTokens: 4},
		body:       `{"model":"m1","reasoning_effort":"low","messages":[{"role":"user","content":"hi"}]}`,
		reasoning:  "Considering request $D: I",
		content:    "Simulated reply $D: hi",
		finish:     "stop",
		completion: 4 + 4,
	},
	{
		name:       "reasoning_effort none",
		body:       `{"model":"m1","reasoning_effort":"none","messages":[{"role":"user","content":"hi"}]}`,
		content:    "Simulated reply $D: hi",
		finish:     "stop",
		completion: 4,
	},
	{
		name:       "enable_thinking with filler",
		sim:        Config{ReasoningTokens: 12},
		body:       `{"model":"m1","chat_template_kwargs":{"enable_thinking":true},"messages":[{"role":"user","content":"hi"}]}`,
		reasoning:  "Considering request $D: I will echo the last message. lorem ipsum dolor",
		content:    "Simulated reply $D: hi",
		finish:     "stop",
		completion: 12 + 4,
	},
	{
		name:       "thinking object with budget",
		body:       `{"model":"m1","thinking":{"type":"enabled","budget_tokens":2},"messages":[{"role":"user","content":"hi"}]}`,
		reasoning:  "Considering request",
		content:    "Simulated reply $D: hi",
		finish:     "stop",
		completion: 2 + 4,
	},
	{
		name:       "max_tokens cuts the reply",
		body:       `{"model":"m1","max_tokens":2,"messages":[{"role":"user","content":"hello there"}]}`,
		content:    "Simulated reply",
		finish:     "length",
		completion: 2,
	},
	{
		name:       "max_completion_tokens wins over max_tokens",
		body:       `{"model":"m1","max_tokens":100,"max_completion_tokens":3,"messages":[{"role":"user","content":"hello there"}]}`,
		content:    "Simulated reply $D:",
		finish:     "length",
		completion: 3,
	},
	{
		name:       "max_tokens inside reasoning",
		sim:        Config{ReasoningTokens: 8},
		body:       `{"model":"m1","reasoning_effort":"high","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`,
		reasoning:  "Considering request $D:",
		finish:     "length",
		completion: 3,
	},
	{
		name:       "reply_tokens pads",
		sim:        Config{ReplyTokens: 7},
		body:       `{"messages":[{"role":"user","content":"hi"}]}`,
		content:    "Simulated reply $D: hi lorem ipsum dolor",
		finish:     "stop",
		completion: 7,
	},
	{
		name:       "reply_tokens cuts",
		sim:        Config{ReplyTokens: 4},
		body:       `{"messages":[{"role":"user","content":"one two three"}]}`,
		content:    "Simulated reply $D: one",
		finish:     "stop",
		completion: 4,
	},
	{
		name:       "stop sequence",
		body:       `{"messages":[{"role":"user","content":"alpha beta gamma"}],"stop":["zeta","gamma"," beta"]}`,
		content:    "Simulated reply $D: alpha",
		finish:     "stop",
		completion: 4,
	},
	{
		name:       "tool call",
		body:       `{"model":"m1","messages":[{"role":"user","content":"Weather in Paris?"}],"tools":` + weatherToolChat + `}`,
		args:       wantWeatherArgs,
		finish:     "tool_calls",
		completion: 10, // 79 bytes of arguments in 8-byte fragments
	},
	{
		name:       "tool call with reasoning and named tool_choice",
		sim:        Config{ReasoningTokens: 2},
		body:       `{"model":"m1","reasoning_effort":"medium","tool_choice":{"type":"function","function":{"name":"get_weather"}},"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":[{"type":"function","function":{"name":"other","parameters":{}}}, ` + weatherToolChat[1:] + `}`,
		reasoning:  "Considering request",
		args:       wantWeatherArgs,
		finish:     "tool_calls",
		completion: 2 + 10,
	},
	{
		name:       "tool call cut by max_tokens",
		body:       `{"model":"m1","max_tokens":3,"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":` + weatherToolChat + `}`,
		args:       `{"city":"Weather in Pari`, // three 8-byte fragments
		finish:     "length",
		completion: 3,
	},
	{
		name:       "tool_choice none",
		body:       `{"model":"m1","tool_choice":"none","messages":[{"role":"user","content":"Weather in Paris?"}],"tools":` + weatherToolChat + `}`,
		content:    "Simulated reply $D: Weather in Paris?",
		finish:     "stop",
		completion: 6,
	},
	{
		name: "after a tool result",
		body: `{"model":"m1","messages":[{"role":"user","content":"Weather in Paris?"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"call_1","content":"sunny, 21 C"}],"tools":` + weatherToolChat + `}`,
		content:    "Simulated reply $D: sunny, 21 C",
		finish:     "stop",
		completion: 6,
	},
}

// expand replaces $D with the reply digest of body.
func expand(body, s string) string {
	req, msg := parseSimRequest(simChat, body)
	if msg != "" {
		panic(msg)
	}
	d := simDigest(req.system.Raw, req.messages.Raw)
	return strings.ReplaceAll(s, "$D", string(simAppendHex32(nil, uint32(d>>32))))
}

func TestSimulatorChat(t *testing.T) {
	for _, tc := range chatCases {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSimulator(t, tc.sim)
			resp := simPost(t, s, "/v1/chat/completions", tc.body)
			msg := gjson.Get(resp, "choices.0.message")

			model := gjson.Get(tc.body, "model").String()
			if model == "" {
				model = DefaultModel
			}
			if got := gjson.Get(resp, "model").String(); got != model {
				t.Errorf("model = %q, want %q", got, model)
			}
			if got := gjson.Get(resp, "object").String(); got != "chat.completion" {
				t.Errorf("object = %q", got)
			}
			if !strings.HasPrefix(gjson.Get(resp, "id").String(), "chatcmpl-") {
				t.Errorf("id = %s", gjson.Get(resp, "id"))
			}
			if got := msg.Get("role").String(); got != "assistant" {
				t.Errorf("role = %q", got)
			}
			if want := expand(tc.body, tc.content); want == "" {
				if c := msg.Get("content"); c.Type != gjson.Null {
					t.Errorf("content = %s, want null", c.Raw)
				}
			} else if got := msg.Get("content").String(); got != want {
				t.Errorf("content = %q, want %q", got, want)
			}
			if want, got := expand(tc.body, tc.reasoning), msg.Get("reasoning_content"); want == "" {
				if got.Exists() {
					t.Errorf("reasoning_content = %s, want none", got.Raw)
				}
			} else if got.String() != want {
				t.Errorf("reasoning_content = %q, want %q", got.String(), want)
			}
			calls := msg.Get("tool_calls")
			if tc.args == "" {
				if calls.Exists() {
					t.Errorf("tool_calls = %s, want none", calls.Raw)
				}
			} else {
				if n := len(calls.Array()); n != 1 {
					t.Fatalf("%d tool calls: %s", n, calls.Raw)
				}
				call := calls.Get("0")
				if call.Get("type").String() != "function" || call.Get("function.name").String() != "get_weather" ||
					!strings.HasPrefix(call.Get("id").String(), "call_") {
					t.Errorf("tool call = %s", call.Raw)
				}
				if got := call.Get("function.arguments").String(); got != tc.args {
					t.Errorf("arguments = %s, want %s", got, tc.args)
				}
			}
			if got := gjson.Get(resp, "choices.0.finish_reason").String(); got != tc.finish {
				t.Errorf("finish_reason = %q, want %q", got, tc.finish)
			}

			u := gjson.Get(resp, "usage")
			prompt := u.Get("prompt_tokens").Int()
			if prompt < 1 {
				t.Errorf("prompt_tokens = %d", prompt)
			}
			if got := u.Get("completion_tokens").Int(); got != tc.completion {
				t.Errorf("completion_tokens = %d, want %d", got, tc.completion)
			}
			if got := u.Get("total_tokens").Int(); got != prompt+tc.completion {
				t.Errorf("total_tokens = %d, want %d", got, prompt+tc.completion)
			}
			wantReasoning := int64(strings.Count(expand(tc.body, tc.reasoning), " ") + 1)
			if tc.reasoning == "" {
				wantReasoning = 0
			}
			if got := u.Get("completion_tokens_details.reasoning_tokens").Int(); got != wantReasoning {
				t.Errorf("reasoning_tokens = %d, want %d", got, wantReasoning)
			}

			// The same request streamed carries the same message, usage and
			// finish reason.
			for _, includeUsage := range []bool{false, true} {
				body := `{"stream":true,` + tc.body[1:]
				if includeUsage {
					body = `{"stream_options":{"include_usage":true},` + body[1:]
				}
				got := assembleChatStream(t, simPost(t, s, "/v1/chat/completions", body), includeUsage)
				jsonEqual(t, "streamed message", got.message, msg.Raw)
				if got.finish != tc.finish {
					t.Errorf("streamed finish_reason = %q, want %q", got.finish, tc.finish)
				}
				if includeUsage {
					jsonEqual(t, "streamed usage", got.usage, u.Raw)
				}
				if tc.args != "" && got.fragments < 2 {
					t.Errorf("tool arguments came in %d fragments, want several", got.fragments)
				}
			}
		})
	}
}

type assembledChat struct {
	message, finish, usage string
	fragments              int
}

// assembleChatStream checks the chunk grammar and rebuilds the message the
// way a client accumulator does.
func assembleChatStream(t *testing.T, stream string, includeUsage bool) assembledChat {
	t.Helper()
	events := parseSSE(t, stream)
	if last := events[len(events)-1]; last.data != "[DONE]" {
		t.Fatalf("last event = %q, want [DONE]", last.data)
	}
	events = events[:len(events)-1]
	var out assembledChat
	var id string
	var content, reasoning, args strings.Builder
	var hasContent, hasReasoning bool
	var call string
	for i, ev := range events {
		if ev.name != "" {
			t.Errorf("chat chunk %d has an event name %q", i, ev.name)
		}
		c := gjson.Parse(ev.data)
		if c.Get("object").String() != "chat.completion.chunk" {
			t.Fatalf("chunk %d object = %s", i, c.Get("object"))
		}
		if id == "" {
			id = c.Get("id").String()
		} else if c.Get("id").String() != id {
			t.Errorf("chunk %d id %s, want %s", i, c.Get("id"), id)
		}
		if includeUsage {
			if !c.Get("usage").Exists() {
				t.Errorf("chunk %d lacks usage with include_usage", i)
			}
		} else if c.Get("usage").Exists() {
			t.Errorf("chunk %d has usage without include_usage", i)
		}
		if includeUsage && i == len(events)-1 {
			if n := len(c.Get("choices").Array()); n != 0 {
				t.Errorf("usage chunk has %d choices", n)
			}
			out.usage = c.Get("usage").Raw
			continue
		}
		if c.Get("usage").Type != gjson.Null && c.Get("usage").Exists() {
			t.Errorf("chunk %d usage = %s before the usage chunk", i, c.Get("usage").Raw)
		}
		choice := c.Get("choices.0")
		delta := choice.Get("delta")
		if i == 0 {
			if delta.Raw != `{"role":"assistant"}` {
				t.Errorf("first delta = %s", delta.Raw)
			}
			continue
		}
		if f := choice.Get("finish_reason"); f.Type != gjson.Null {
			if out.finish != "" {
				t.Errorf("second finish_reason %s", f.Raw)
			}
			out.finish = f.String()
			if delta.Raw != "{}" {
				t.Errorf("finish chunk delta = %s", delta.Raw)
			}
			continue
		}
		if out.finish != "" {
			t.Errorf("chunk %d after the finish reason: %s", i, ev.data)
		}
		n := 0
		delta.ForEach(func(k, v gjson.Result) bool {
			n++
			switch k.String() {
			case "reasoning_content":
				if hasContent || call != "" {
					t.Errorf("reasoning_content after content or a tool call")
				}
				hasReasoning = true
				reasoning.WriteString(v.String())
			case "content":
				if call != "" {
					t.Errorf("content after a tool call")
				}
				hasContent = true
				content.WriteString(v.String())
			case "tool_calls":
				tc := v.Get("0")
				if tc.Get("index").Int() != 0 {
					t.Errorf("tool call index %s", tc.Get("index").Raw)
				}
				if tc.Get("id").Exists() {
					if call != "" {
						t.Errorf("second tool call header")
					}
					call = tc.Raw
					if tc.Get("function.arguments").String() != "" {
						t.Errorf("header carries arguments: %s", tc.Raw)
					}
				} else {
					if call == "" {
						t.Errorf("tool arguments before the tool call header")
					}
					out.fragments++
				}
				args.WriteString(tc.Get("function.arguments").String())
			default:
				t.Errorf("unexpected delta field %s", k)
			}
			return true
		})
		if n != 1 {
			t.Errorf("delta %s has %d fields, want 1", delta.Raw, n)
		}
	}
	if out.finish == "" {
		t.Errorf("no finish_reason")
	}
	if includeUsage && out.usage == "" {
		t.Errorf("no usage chunk")
	}

	msg := []byte(`{"role":"assistant","content":`)
	if hasContent {
		msg = gjson.AppendJSONString(msg, content.String())
	} else {
		msg = append(msg, "null"...)
	}
	if hasReasoning {
		msg = append(msg, `,"reasoning_content":`...)
		msg = gjson.AppendJSONString(msg, reasoning.String())
	}
	if call != "" {
		c := gjson.Parse(call)
		msg = append(msg, `,"tool_calls":[{"id":`...)
		msg = append(msg, c.Get("id").Raw...)
		msg = append(msg, `,"type":"function","function":{"name":`...)
		msg = append(msg, c.Get("function.name").Raw...)
		msg = append(msg, `,"arguments":`...)
		msg = gjson.AppendJSONString(msg, args.String())
		msg = append(msg, `}}]`...)
	}
	out.message = string(append(msg, `,"refusal":null}`...))
	return out
}

// messagesCase is one messages request and its expected content.
type messagesCase struct {
	name    string
	sim     Config
	body    string // without "stream"
	content string // JSON array; $D is the reply digest, $SIG any signature
	stop    string
	stopSeq string
	output  int64
}

var messagesCases = []messagesCase{
	{
		name:    "plain with system",
		body:    `{"model":"m2","max_tokens":100,"system":"be brief","messages":[{"role":"user","content":"hello there"}]}`,
		content: `[{"type":"text","text":"Simulated reply $D: hello there"}]`,
		stop:    "end_turn",
		output:  5,
	},
	{
		name:    "thinking",
		sim:     Config{ReasoningTokens: 3},
		body:    `{"model":"m2","max_tokens":100,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		content: `[{"type":"thinking","thinking":"Considering request $D:","signature":"$SIG"},{"type":"text","text":"Simulated reply $D: hi"}]`,
		stop:    "end_turn",
		output:  3 + 4,
	},
	{
		name:    "thinking disabled",
		body:    `{"model":"m2","max_tokens":100,"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"hi"}]}`,
		content: `[{"type":"text","text":"Simulated reply $D: hi"}]`,
		stop:    "end_turn",
		output:  4,
	},
	{
		name:    "reasoning_effort",
		sim:     Config{ReasoningTokens: 1},
		body:    `{"model":"m2","max_tokens":100,"reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}`,
		content: `[{"type":"thinking","thinking":"Considering","signature":"$SIG"},{"type":"text","text":"Simulated reply $D: hi"}]`,
		stop:    "end_turn",
		output:  1 + 4,
	},
	{
		name:    "max_tokens",
		body:    `{"model":"m2","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`,
		content: `[{"type":"text","text":"Simulated"}]`,
		stop:    "max_tokens",
		output:  1,
	},
	{
		name:    "max_tokens inside thinking",
		sim:     Config{ReasoningTokens: 5},
		body:    `{"model":"m2","max_tokens":2,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`,
		content: `[{"type":"thinking","thinking":"Considering request","signature":"$SIG"}]`,
		stop:    "max_tokens",
		output:  2,
	},
	{
		name:    "stop sequence",
		body:    `{"model":"m2","max_tokens":100,"stop_sequences":["beta"],"messages":[{"role":"user","content":"alpha beta"}]}`,
		content: `[{"type":"text","text":"Simulated reply $D: alpha "}]`,
		stop:    "stop_sequence",
		stopSeq: "beta",
		output:  5,
	},
	{
		name:    "tool use",
		body:    `{"model":"m2","max_tokens":100,"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":` + weatherToolMessages + `}`,
		content: `[{"type":"tool_use","id":"toolu_sim$ID","name":"get_weather","input":` + wantWeatherArgs + `}]`,
		stop:    "tool_use",
		output:  10,
	},
	{
		name:    "tool use after thinking, server tools skipped",
		sim:     Config{ReasoningTokens: 1},
		body:    `{"model":"m2","max_tokens":100,"thinking":{"type":"enabled","budget_tokens":1024},"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":[{"type":"web_search_20250305","name":"web_search"},` + weatherToolMessages[1:] + `}`,
		content: `[{"type":"thinking","thinking":"Considering","signature":"$SIG"},{"type":"tool_use","id":"toolu_sim$ID","name":"get_weather","input":` + wantWeatherArgs + `}]`,
		stop:    "tool_use",
		output:  1 + 10,
	},
	{
		name:    "tool use cut by max_tokens",
		body:    `{"model":"m2","max_tokens":2,"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":` + weatherToolMessages + `}`,
		content: `[{"type":"tool_use","id":"toolu_sim$ID","name":"get_weather","input":{}}]`,
		stop:    "max_tokens",
		output:  2,
	},
	{
		name:    "tool_choice none",
		body:    `{"model":"m2","max_tokens":100,"tool_choice":{"type":"none"},"messages":[{"role":"user","content":"Paris"}],"tools":` + weatherToolMessages + `}`,
		content: `[{"type":"text","text":"Simulated reply $D: Paris"}]`,
		stop:    "end_turn",
		output:  4,
	},
	{
		name: "after a tool result",
		body: `{"model":"m2","max_tokens":100,"messages":[{"role":"user","content":"Weather in Paris?"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny, 21 C"}]}]}],"tools":` + weatherToolMessages + `}`,
		content: `[{"type":"text","text":"Simulated reply $D: sunny, 21 C"}]`,
		stop:    "end_turn",
		output:  6,
	},
}

func TestSimulatorMessages(t *testing.T) {
	for _, tc := range messagesCases {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSimulator(t, tc.sim)
			resp := simPost(t, s, "/compat/v1/messages", tc.body)

			for field, want := range map[string]string{"type": "message", "role": "assistant", "model": "m2", "stop_reason": tc.stop} {
				if got := gjson.Get(resp, field).String(); got != want {
					t.Errorf("%s = %q, want %q", field, got, want)
				}
			}
			if !strings.HasPrefix(gjson.Get(resp, "id").String(), "msg_") {
				t.Errorf("id = %s", gjson.Get(resp, "id"))
			}
			if seq := gjson.Get(resp, "stop_sequence"); tc.stopSeq == "" && seq.Type != gjson.Null || seq.String() != tc.stopSeq {
				t.Errorf("stop_sequence = %s, want %q", seq.Raw, tc.stopSeq)
			}

			content := gjson.Get(resp, "content")
			want := expand(tc.body, tc.content)
			want = strings.ReplaceAll(want, "$ID", strings.TrimPrefix(gjson.Get(resp, "id").String(), "msg_sim"))
			if sig := content.Get(`#(type=="thinking").signature`); strings.Contains(want, "$SIG") {
				if len(sig.String()) < 16 {
					t.Errorf("signature = %s", sig.Raw)
				}
				want = strings.ReplaceAll(want, "$SIG", sig.String())
			}
			jsonEqual(t, "content", content.Raw, want)

			usage := gjson.Get(resp, "usage")
			if usage.Get("input_tokens").Int() < 1 {
				t.Errorf("input_tokens = %s", usage.Get("input_tokens").Raw)
			}
			if got := usage.Get("output_tokens").Int(); got != tc.output {
				t.Errorf("output_tokens = %d, want %d", got, tc.output)
			}

			got := assembleMessagesStream(t, simPost(t, s, "/compat/v1/messages", `{"stream":true,`+tc.body[1:]))
			jsonEqual(t, "streamed message", got, resp)
		})
	}
}

// assembleMessagesStream checks the event grammar and rebuilds the message
// the way a client accumulator does.
func assembleMessagesStream(t *testing.T, stream string) string {
	t.Helper()
	events := parseSSE(t, stream)
	for i, ev := range events {
		if typ := gjson.Get(ev.data, "type").String(); typ != ev.name {
			t.Fatalf("event %d is named %q but has type %q", i, ev.name, typ)
		}
	}
	next := func(want string) gjson.Result {
		t.Helper()
		if len(events) == 0 {
			t.Fatalf("stream ended, want %s", want)
		}
		ev := events[0]
		if ev.name != want {
			t.Fatalf("event %s: %s, want %s", ev.name, ev.data, want)
		}
		events = events[1:]
		return gjson.Parse(ev.data)
	}

	start := next("message_start").Get("message")
	if start.Get("content").Raw != "[]" || start.Get("stop_reason").Type != gjson.Null {
		t.Errorf("message_start = %s", start.Raw)
	}
	next("ping")
	var blocks []string
	for len(events) > 0 && events[0].name == "content_block_start" {
		ev := next("content_block_start")
		if got := ev.Get("index").Int(); got != int64(len(blocks)) {
			t.Fatalf("block index %d, want %d", got, len(blocks))
		}
		block := ev.Get("content_block")
		var text, sig, input strings.Builder
		var deltas int
		for events[0].name == "content_block_delta" {
			d := next("content_block_delta")
			if d.Get("index").Int() != int64(len(blocks)) {
				t.Fatalf("delta for block %d in block %d", d.Get("index").Int(), len(blocks))
			}
			switch typ := d.Get("delta.type").String(); {
			case typ == "thinking_delta" && block.Get("type").String() == "thinking":
				if sig.Len() > 0 {
					t.Errorf("thinking after the signature")
				}
				text.WriteString(d.Get("delta.thinking").String())
			case typ == "signature_delta" && block.Get("type").String() == "thinking":
				sig.WriteString(d.Get("delta.signature").String())
			case typ == "text_delta" && block.Get("type").String() == "text":
				text.WriteString(d.Get("delta.text").String())
			case typ == "input_json_delta" && block.Get("type").String() == "tool_use":
				input.WriteString(d.Get("delta.partial_json").String())
			default:
				t.Fatalf("%s in a %s block", typ, block.Get("type"))
			}
			deltas++
		}
		if next("content_block_stop").Get("index").Int() != int64(len(blocks)) {
			t.Fatalf("content_block_stop index")
		}
		var b []byte
		switch block.Get("type").String() {
		case "thinking":
			if block.Raw != `{"type":"thinking","thinking":"","signature":""}` {
				t.Errorf("thinking block start = %s", block.Raw)
			}
			if sig.Len() == 0 {
				t.Errorf("thinking block without a signature")
			}
			b = append(b, `{"type":"thinking","thinking":`...)
			b = gjson.AppendJSONString(b, text.String())
			b = append(b, `,"signature":`...)
			b = gjson.AppendJSONString(b, sig.String())
			b = append(b, '}')
		case "text":
			if block.Raw != `{"type":"text","text":""}` {
				t.Errorf("text block start = %s", block.Raw)
			}
			b = append(b, `{"type":"text","text":`...)
			b = gjson.AppendJSONString(b, text.String())
			b = append(b, '}')
		case "tool_use":
			if block.Get("input").Raw != "{}" {
				t.Errorf("tool_use block start = %s", block.Raw)
			}
			in := input.String()
			if !gjson.Valid(in) {
				in = "{}" // cut short, as the SDK accumulators treat it
			} else if deltas < 2 {
				t.Errorf("tool input came in %d fragments, want several", deltas)
			}
			b = append(b, `{"type":"tool_use","id":`...)
			b = append(b, block.Get("id").Raw...)
			b = append(b, `,"name":`...)
			b = append(b, block.Get("name").Raw...)
			b = append(b, `,"input":`...)
			b = append(b, in...)
			b = append(b, '}')
		}
		blocks = append(blocks, string(b))
	}
	md := next("message_delta")
	next("message_stop")
	if len(events) > 0 {
		t.Fatalf("events after message_stop: %v", events)
	}

	msg := []byte(start.Raw)
	msg = []byte(strings.Replace(string(msg), `"content":[]`, `"content":[`+strings.Join(blocks, ",")+`]`, 1))
	var m map[string]any
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatal(err)
	}
	m["stop_reason"] = md.Get("delta.stop_reason").Value()
	m["stop_sequence"] = md.Get("delta.stop_sequence").Value()
	m["usage"] = md.Get("usage").Value()
	if md.Get("usage.input_tokens").Int() != start.Get("usage.input_tokens").Int() {
		t.Errorf("input_tokens differ between message_start and message_delta")
	}
	out, _ := json.Marshal(m)
	return string(out)
}

func TestSimulatorDeterministic(t *testing.T) {
	s := newTestSimulator(t, Config{})
	body := `{"model":"m","messages":[{"role":"user","content":"same"}]}`
	a := simPost(t, s, "/v1/chat/completions", body)
	b := simPost(t, s, "/v1/chat/completions", body)
	c := simPost(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"other"}]}`)
	if gjson.Get(a, "id").String() != gjson.Get(b, "id").String() ||
		gjson.Get(a, "choices.0.message.content").String() != gjson.Get(b, "choices.0.message.content").String() {
		t.Errorf("the same conversation got different answers:\n%s\n%s", a, b)
	}
	if gjson.Get(a, "choices.0.message.content").String()[:24] == gjson.Get(c, "choices.0.message.content").String()[:24] {
		t.Errorf("different conversations got the same digest:\n%s\n%s", a, c)
	}
}

func TestSimulatorErrors(t *testing.T) {
	s := newTestSimulator(t, Config{})
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		errType                  string
		messages                 bool
	}{
		{"malformed chat", "POST", "/v1/chat/completions", `{"messages":[`, 400, "invalid_request_error", false},
		{"malformed messages", "POST", "/compat/v1/messages", `{"messages":`, 400, "invalid_request_error", true},
		{"not an object", "POST", "/v1/chat/completions", `[1]`, 400, "invalid_request_error", false},
		{"no messages", "POST", "/v1/chat/completions", `{"model":"m"}`, 400, "invalid_request_error", false},
		{"empty messages", "POST", "/v1/messages", `{"max_tokens":5,"messages":[]}`, 400, "invalid_request_error", true},
		{"messages without max_tokens", "POST", "/v1/messages", `{"messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request_error", true},
		{"bad max_tokens", "POST", "/v1/chat/completions", `{"max_tokens":1.5,"messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request_error", false},
		{"zero max_tokens", "POST", "/v1/messages", `{"max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request_error", true},
		{"GET completions", "GET", "/v1/chat/completions", ``, 405, "invalid_request_error", false},
		{"POST models", "POST", "/v1/models", `{}`, 405, "invalid_request_error", false},
		{"unknown path", "POST", "/v1/embeddings", `{}`, 404, "invalid_request_error", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := simDo(t, s, tc.method, tc.path, tc.body)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			body := w.Body.String()
			if w.Header().Get("Content-Type") != "application/json" || !gjson.Valid(body) {
				t.Fatalf("error body is not JSON: %q", body)
			}
			if tc.messages {
				if gjson.Get(body, "type").String() != "error" || gjson.Get(body, "error.type").String() != tc.errType ||
					gjson.Get(body, "error.message").String() == "" {
					t.Errorf("messages error = %s", body)
				}
			} else if gjson.Get(body, "error.type").String() != tc.errType || gjson.Get(body, "error.message").String() == "" ||
				!gjson.Get(body, "error.param").Exists() || !gjson.Get(body, "error.code").Exists() {
				t.Errorf("chat error = %s", body)
			}
		})
	}
}

func TestSimulatorModels(t *testing.T) {
	s := newTestSimulator(t, Config{Model: `qwen/"3"`})
	w := simDo(t, s, http.MethodGet, "/v1/models", "")
	if w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	body := w.Body.String()
	if !gjson.Valid(body) || gjson.Get(body, "object").String() != "list" ||
		gjson.Get(body, "data.0.id").String() != `qwen/"3"` || gjson.Get(body, "data.0.type").String() != "model" ||
		gjson.Get(body, "last_id").String() != `qwen/"3"` {
		t.Errorf("models = %s", body)
	}
	// The configured model answers requests that name none.
	resp := simPost(t, s, "/v1/messages", `{"max_tokens":10,"messages":[{"role":"user","content":"x"}]}`)
	if got := gjson.Get(resp, "model").String(); got != `qwen/"3"` {
		t.Errorf("model = %q", got)
	}
}

func TestSimulatorTiming(t *testing.T) {
	s := newTestSimulator(t, Config{TokenRate: 100, FirstTokenLatency: 50 * time.Millisecond, ReplyTokens: 11})
	// 50ms to the first token, then 10 more tokens 10ms apart.
	const want = 150 * time.Millisecond
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"x"}]}`,
		`{"stream":true,"messages":[{"role":"user","content":"x"}]}`,
		`{"stream":true,"max_tokens":100,"messages":[{"role":"user","content":"x"}]}`,
	} {
		path := "/v1/chat/completions"
		if strings.Contains(body, "max_tokens") {
			path = "/v1/messages"
		}
		start := time.Now()
		simPost(t, s, path, body)
		if d := time.Since(start); d < want || d > want+time.Second {
			t.Errorf("%s took %v, want about %v", body, d, want)
		}
	}
}

func TestSimulatorClientGone(t *testing.T) {
	s := newTestSimulator(t, Config{TokenRate: 10, ReplyTokens: 1000})
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, path,
			strings.NewReader(`{"stream":true,"max_tokens":2000,"messages":[{"role":"user","content":"x"}]}`))
		w := httptest.NewRecorder()
		start := time.Now()
		if err := s.Serve(w, r); err != nil {
			t.Fatal(err)
		}
		cancel()
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("%s: the stream went on %v after the client left", path, d)
		}
		if w.Code != 200 || strings.Contains(w.Body.String(), "[DONE]") || strings.Contains(w.Body.String(), "message_stop") {
			t.Errorf("%s: the stream should stop mid-way: %s", path, w.Body)
		}
	}
}

func BenchmarkSimulator(b *testing.B) {
	s := newTestSimulator(b, Config{ReplyTokens: 64})
	for _, bc := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hello there, how are you today?"}]}`},
		{"chat stream", "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello there, how are you today?"}]}`},
		{"messages stream thinking", "/v1/messages", `{"model":"m","stream":true,"max_tokens":500,"thinking":{"type":"enabled","budget_tokens":1000},"messages":[{"role":"user","content":"hello there, how are you today?"}]}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			w := &discardWriter{h: http.Header{}}
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, bc.path, strings.NewReader(bc.body))
				clear(w.h)
				if err := s.Serve(w, r); err != nil || w.code != 200 {
					b.Fatal(err, w.code)
				}
			}
		})
	}
}

type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Flush()                      {}

// A Server is a plain http.Handler: served by net/http, it streams and
// answers as under Caddy.
func TestServerIsHandler(t *testing.T) {
	srv := httptest.NewServer(newTestSimulator(t, Config{ReplyTokens: 3}))
	defer srv.Close()
	body := `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	resp, err := http.Post(srv.URL+"/compat/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b.String())
	}
	if got := assembleMessagesStream(t, b.String()); gjson.Get(got, "content.0.text").Str != expand(body, "Simulated reply $D:") ||
		gjson.Get(got, "usage.output_tokens").Int() != 3 || gjson.Get(got, "stop_reason").Str != "end_turn" {
		t.Errorf("message = %s", got)
	}
	if _, err := New(Config{TokenRate: -1}); err == nil || !strings.Contains(err.Error(), "token_rate") {
		t.Errorf("New with a negative token_rate: %v", err)
	}
}
