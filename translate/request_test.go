package translate

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

type requestCase struct {
	name, file string
	client     Format
	cfg        Config
	want       Request
}

func requestCases() []requestCase {
	return []requestCase{
		{name: "messages_full.openai", file: "messages_full", client: Messages, cfg: Config{Upstream: Chat}, want: Request{Stream: true, Reasoning: true, InputTokens: 5102}},
		{name: "messages_full.kwargs", file: "messages_full", client: Messages, cfg: Config{Upstream: Chat, Reasoning: DialectChatTemplateKwargs, OmitTopK: true}, want: Request{Stream: true, Reasoning: true, InputTokens: 5102}},
		{name: "messages_full.thinking", file: "messages_full", client: Messages, cfg: Config{Upstream: Chat, Reasoning: DialectThinking}, want: Request{Stream: true, Reasoning: true, InputTokens: 5102}},
		{name: "messages_full.effort_scale", file: "messages_full", client: Messages, cfg: Config{Upstream: Chat, Reasoning: DialectEffortScale}, want: Request{Stream: true, Reasoning: true, InputTokens: 5102}},
		{name: "messages_tool_choice", client: Messages, cfg: Config{Upstream: Chat, Reasoning: DialectEffortScale}, want: Request{Reasoning: true}},
		{name: "messages_nothink.kwargs", file: "messages_nothink", client: Messages, cfg: Config{Upstream: Chat, Reasoning: DialectChatTemplateKwargs}},
		{name: "messages_nothink.openai", file: "messages_nothink", client: Messages, cfg: Config{Upstream: Chat}},
		{name: "chat_full", client: Chat, cfg: Config{Upstream: Messages}, want: Request{Stream: true, IncludeUsage: true, Reasoning: true}},
		{name: "chat_full.openai", file: "chat_full", client: Chat, cfg: Config{Upstream: Messages, Reasoning: DialectOpenAI}, want: Request{Stream: true, IncludeUsage: true, Reasoning: true}},
		{name: "chat_simple", client: Chat, cfg: Config{Upstream: Messages}, want: Request{Reasoning: true}},
		{name: "chat_pass.kwargs", file: "chat_pass", client: Chat, cfg: Config{Upstream: Chat, Reasoning: DialectChatTemplateKwargs}, want: Request{Stream: true}},
		{name: "chat_pass.openai", file: "chat_pass", client: Chat, cfg: Config{Upstream: Chat}, want: Request{Stream: true}},
		{name: "chat_pass_on", client: Chat, cfg: Config{Upstream: Chat}, want: Request{Reasoning: true}},
		{name: "messages_pass", client: Messages, cfg: Config{Upstream: Messages}, want: Request{Stream: true, Reasoning: true}},
		// Issue 31 point 3: a user message between tool calls and their
		// results. Codex's approval flow as issue 31 describes it (function_call,
		// a user message, function_call_output, another user message), in
		// the items Codex 0.169.0 writes (testdata/clients): the tool
		// message follows the assistant's (chat), the tool_result leads the
		// user turn (messages).
		{name: "responses_codex_approval.chat", file: "responses_codex_approval", client: Responses, cfg: Config{Upstream: Chat},
			want: Request{Stream: true, IncludeUsage: true, resp: respOptions{noParallel: true, tools: codexApprovalTools}}},
		{name: "responses_codex_approval.messages", file: "responses_codex_approval", client: Responses, cfg: Config{Upstream: Messages},
			want: Request{Stream: true, IncludeUsage: true, resp: respOptions{noParallel: true, tools: codexApprovalTools}}},
		// The same pattern from a chat client, with two calls answered on
		// either side of user messages.
		{name: "chat_tool_approval", client: Chat, cfg: Config{Upstream: Messages}},
		// From a messages client: [text, tool_result, text, tool_result]
		// after a separate user message, to a chat upstream.
		{name: "messages_tool_result_mid", client: Messages, cfg: Config{Upstream: Chat}},
		// Issue 31 point 8: a JSON schema response format to a messages
		// upstream becomes output_config.format (OpenAI's structured
		// outputs example: calendar_event).
		{name: "chat_json_schema", client: Chat, cfg: Config{Upstream: Messages}},
		{name: "responses_json_schema", client: Responses, cfg: Config{Upstream: Messages}, want: Request{IncludeUsage: true}},
	}
}

// codexApprovalTools is the tools array of responses_codex_approval.in.json,
// compacted, as the response object echoes it.
const codexApprovalTools = `[{"type":"function","name":"exec_command","description":"Runs a command.","strict":false,"parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}}]`

func TestRequestFixtures(t *testing.T) {
	for _, c := range requestCases() {
		if c.file == "" {
			c.file = c.name
		}
		t.Run(c.name, func(t *testing.T) {
			in := readFile(t, filepath.Join("testdata", "requests", c.file+".in.json"))
			prefix := []byte("pooled:")
			out, req, err := TranslateRequest(c.client, in, &c.cfg, prefix)
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if string(out[:len(prefix)]) != "pooled:" {
				t.Fatalf("the caller's buffer was not appended to")
			}
			out = out[len(prefix):]
			if req != c.want {
				t.Errorf("request info %+v, want %+v", req, c.want)
			}
			compareJSON(t, filepath.Join("testdata", "requests", c.name+".want.json"), out)
			// A body the gate already parsed skips one check, not the translation.
			vout, vreq, verr := TranslateValidRequest(c.client, in, &c.cfg, nil)
			if verr != nil || string(vout) != string(out) || vreq != req {
				t.Errorf("TranslateValidRequest differs: %v, %+v\n%s", verr, vreq, vout)
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	cases := []struct {
		name     string
		client   Format
		up       Format
		body     string
		status   int
		contains string
	}{
		{"not json", Messages, Chat, `{"model":`, 400, "not valid JSON"},
		{"not object", Chat, Messages, `[1,2]`, 400, "JSON object"},
		{"deep", Chat, Chat, `{"model":"m","messages":` + deep + `}`, 400, "nested"},
		{"messages not array", Messages, Chat, `{"model":"m","max_tokens":1,"messages":{}}`, 400, "messages: must be an array"},
		{"model type", Chat, Messages, `{"model":3,"messages":[]}`, 400, "model"},
		{"max_tokens type", Messages, Chat, `{"model":"m","max_tokens":"100","messages":[]}`, 400, "max_tokens"},
		{"max_tokens missing", Messages, Chat, `{"model":"m","messages":[]}`, 400, "max_tokens: required"},
		{"max_tokens missing pass", Messages, Messages, `{"model":"m","messages":[]}`, 400, "max_tokens: required"},
		{"temperature high", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[],"temperature":1.5}`, 400, "temperature: must be between 0 and 1"},
		{"temperature high chat", Chat, Messages, `{"model":"m","messages":[],"temperature":2}`, 400, "temperature"},
		{"temperature high pass", Chat, Chat, `{"model":"m","messages":[],"temperature":-0.1}`, 400, "temperature"},
		{"temperature type", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[],"temperature":"hot"}`, 400, "temperature: must be a number"},
		{"stream type", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[],"stream":"yes"}`, 400, "stream"},
		{"web search tool", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, 400, "server-side tool type \"web_search_20250305\""},
		{"bash tool pass", Messages, Messages, `{"model":"m","max_tokens":1,"messages":[],"tools":[{"type":"bash_20250124","name":"bash"}]}`, 400, "server-side"},
		{"computer tool", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[],"tools":[{"type":"computer_20250124","name":"computer"}]}`, 400, "server-side"},
		{"code execution pass", Messages, Messages, `{"model":"m","max_tokens":1,"messages":[],"tools":[{"type":"code_execution_20250522","name":"x"}]}`, 400, "server-side"},
		{"text editor", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[],"tools":[{"type":"text_editor_20250429","name":"x"}]}`, 400, "server-side"},
		{"web fetch", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[],"tools":[{"type":"web_fetch_20250910","name":"x"}]}`, 400, "server-side"},
		{"server block in history", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]}]}`, 400, "server-side"},
		{"mcp servers", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[],"mcp_servers":[{"type":"url","url":"https://x"}]}`, 400, "server-side"},
		{"n", Chat, Messages, `{"model":"m","messages":[],"n":2}`, 400, "n:"},
		{"logprobs", Chat, Messages, `{"model":"m","messages":[],"logprobs":true}`, 400, "logprobs"},
		{"top_logprobs", Chat, Messages, `{"model":"m","messages":[],"top_logprobs":3}`, 400, "top_logprobs"},
		{"response_format", Chat, Messages, `{"model":"m","messages":[],"response_format":{"type":"json_schema","json_schema":{}}}`, 400, "response_format"},
		{"logit_bias", Chat, Messages, `{"model":"m","messages":[],"logit_bias":{"50256":-100}}`, 400, "logit_bias"},
		{"audio part", Chat, Messages, `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, 400, "audio"},
		{"function role", Chat, Messages, `{"model":"m","messages":[{"role":"function","name":"f","content":"x"}]}`, 400, "function messages"},
		{"bad role", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[{"role":"tool","content":"x"}]}`, 400, "role: must be user, assistant or system"},
		{"bad block", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"video"}]}]}`, 400, "video"},
		{"bad image", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`, 400, "base64 or url"},
		{"content type", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":5}]}`, 400, "content"},
		{"conflict", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[],"thinking":{"type":"disabled"},"reasoning_effort":"high"}`, 400, "conflicting"},
		{"bad effort", Chat, Chat, `{"model":"m","messages":[],"reasoning_effort":"extreme"}`, 400, "reasoning_effort"},
		{"bad thinking", Messages, Messages, `{"model":"m","max_tokens":1,"messages":[],"thinking":{"type":"sometimes"}}`, 400, "thinking.type"},
		{"bad budget", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[],"thinking":{"type":"enabled","budget_tokens":-5}}`, 400, "budget_tokens"},
		{"bad tool_choice", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[],"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"sometimes"}}`, 400, "tool_choice"},
		{"bad chat tool", Chat, Messages, `{"model":"m","messages":[],"tools":[{"type":"custom","custom":{"name":"x"}}]}`, 400, "function tools"},
		{"tool without name", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[],"tools":[{"input_schema":{}}]}`, 400, "name"},
		{"tool_use without id", Messages, Chat, `{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}]}`, 400, "tool_use needs id"},
		{"tool message without id", Chat, Messages, `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, 400, "tool_call_id"},
		{"stop type", Chat, Messages, `{"model":"m","messages":[],"stop":[1]}`, 400, "stop.0"},
		// issue 31: messages: [] is refused by a messages upstream.
		{"system only", Chat, Messages, `{"model":"m","messages":[{"role":"system","content":"Be brief."}]}`, 400, "messages: at least one user message is required"},
		{"developer only", Chat, Messages, `{"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"Be brief."}]}]}`, 400, "at least one user message"},
		{"no messages", Chat, Messages, `{"model":"m","messages":[]}`, 400, "at least one user message"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := &Config{Upstream: c.up}
			out, _, err := TranslateRequest(c.client, []byte(c.body), cfg, []byte("keep"))
			if err == nil {
				t.Fatalf("no error; translated to %s", out)
			}
			if string(out) != "keep" {
				t.Errorf("the buffer was not restored: %q", out)
			}
			if err.Status != c.status || err.Kind != InvalidRequest || !strings.Contains(err.Message, c.contains) {
				t.Errorf("got %d %s %q, want %d invalid_request_error containing %q", err.Status, err.Kind, err.Message, c.status, c.contains)
			}
			// Only well-formedness and depth (CheckBody) are the caller's
			// word; every other check stays.
			if c.name != "not json" && c.name != "deep" {
				if _, _, verr := TranslateValidRequest(c.client, []byte(c.body), cfg, nil); verr == nil || verr.Message != err.Message {
					t.Errorf("TranslateValidRequest: %v, want %q", verr, err.Message)
				}
			}
			// The error renders in the client's format.
			var body map[string]any
			if e := json.Unmarshal(err.Body(c.client), &body); e != nil {
				t.Fatal(e)
			}
			if c.client == Messages && (body["type"] != "error" || body["error"].(map[string]any)["type"] != "invalid_request_error") {
				t.Errorf("messages error body %v", body)
			}
			if c.client == Chat && body["error"].(map[string]any)["message"] != err.Message {
				t.Errorf("chat error body %v", body)
			}
		})
	}
}

func TestRequestTooLarge(t *testing.T) {
	cfg := &Config{Upstream: Chat, MaxBodyBytes: 64}
	_, _, err := TranslateRequest(Chat, []byte(`{"model":"m","messages":[{"role":"user","content":"`+strings.Repeat("x", 100)+`"}]}`), cfg, nil)
	if err == nil || err.Status != 413 || err.Kind != RequestTooLarge {
		t.Fatalf("got %v", err)
	}
}

// A chat upstream is always asked for the final usage of a stream.
func TestRequestIncludeUsage(t *testing.T) {
	cfg := &Config{Upstream: Chat}
	for _, body := range []string{
		`{"model":"m","messages":[],"stream":true}`,
		`{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":false}}`,
		`{"model":"m","messages":[],"stream":true,"stream_options":null}`,
	} {
		out, req, err := TranslateRequest(Chat, []byte(body), cfg, nil)
		if err != nil || !req.Stream || req.IncludeUsage {
			t.Fatalf("%s: %v %+v", body, err, req)
		}
		var v struct {
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if e := json.Unmarshal(out, &v); e != nil || !v.StreamOptions.IncludeUsage {
			t.Errorf("%s -> %s", body, out)
		}
	}
}

func TestParseDialect(t *testing.T) {
	for in, want := range map[string]Dialect{"openai": DialectOpenAI, "chat_template_kwargs": DialectChatTemplateKwargs, "thinking": DialectThinking, "effort_scale": DialectEffortScale, "": DialectAuto} {
		d, err := ParseDialect(in)
		if err != nil || d != want {
			t.Errorf("ParseDialect(%q) = %v, %v", in, d, err)
		}
		if in != "" && d.String() != in {
			t.Errorf("%v.String() = %q", d, d.String())
		}
	}
	if _, err := ParseDialect("deepseek"); err == nil || !strings.Contains(err.Error(), "openai, chat_template_kwargs, thinking or effort_scale") {
		t.Errorf("unknown dialect: %v", err)
	}
}

func TestFormatFromPath(t *testing.T) {
	for p, want := range map[string]Format{
		"/v1/chat/completions": Chat, "/compat/v1/messages": Messages, "/v1/messages/": Messages,
		"/v1/models": Unknown, "/api/keys": Unknown,
	} {
		if got := FormatFromPath(p); got != want {
			t.Errorf("FormatFromPath(%q) = %v", p, got)
		}
	}
}

// The thinking budget stays at least 1024 and below max_tokens.
func TestThinkingBudget(t *testing.T) {
	cfg := &Config{Upstream: Messages}
	for _, c := range []struct {
		body          string
		budget, maxTk int64
	}{
		{`{"thinking":{"type":"enabled","budget_tokens":100},"max_tokens":4000}`, 1024, 4000},
		{`{"thinking":{"type":"enabled","budget_tokens":9000},"max_tokens":4000}`, 3999, 4000},
		{`{"thinking":{"type":"enabled"},"max_tokens":500}`, 1024, 1025},
		{`{"thinking":{"type":"enabled","budget_tokens":4000},"max_tokens":1000}`, 1024, 1025},
		{`{"reasoning_effort":"low","max_tokens":32000}`, 2048, 32000},
		{`{"reasoning_effort":"high","max_tokens":8000}`, 6000, 8000},
	} {
		body := `{"model":"m","messages":[],` + c.body[1:]
		out, _, err := TranslateRequest(Messages, []byte(body), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			MaxTokens int64 `json:"max_tokens"`
			Thinking  struct {
				Budget int64 `json:"budget_tokens"`
			}
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatal(err)
		}
		if v.Thinking.Budget != c.budget || v.MaxTokens != c.maxTk {
			t.Errorf("%s: budget %d max %d, want %d %d", c.body, v.Thinking.Budget, v.MaxTokens, c.budget, c.maxTk)
		}
	}
}

// A turn is read block by block once and written in several passes; turns
// with more blocks than the reader keeps on the stack come out the same.
func TestRequestManyBlocks(t *testing.T) {
	var assistant, user []string
	var wantText []string
	for i := range 11 {
		assistant = append(assistant, fmt.Sprintf(`{"type":"text","text":"a%d"}`, i))
		user = append(user, fmt.Sprintf(`{"type":"text","text":"u%d"}`, i))
		wantText = append(wantText, fmt.Sprintf("a%d", i))
	}
	assistant = append(assistant,
		`{"type":"thinking","thinking":"hmm","signature":"s"}`,
		`{"type":"tool_use","id":"c1","name":"f","input":{"x":1}}`,
		`{"type":"tool_use","name":"g","id":"c2"}`)
	body := `{"model":"m","max_tokens":8,"messages":[{"role":"assistant","content":[` + strings.Join(assistant, ",") +
		`]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"r1"},{"type":"text","text":"r2"}]},` +
		`{"type":"tool_result","tool_use_id":"c2","is_error":true},` + strings.Join(user, ",") + `]}]}`
	out, _, err := TranslateRequest(Messages, []byte(body), &Config{Upstream: Chat}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Messages []struct {
			Role             string `json:"role"`
			Content          any    `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			ToolCallID       string `json:"tool_call_id"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	m := got.Messages
	if len(m) != 4 {
		t.Fatalf("want assistant, two tool messages, user; got %s", out)
	}
	if m[0].Content != strings.Join(wantText, "\n") || m[0].ReasoningContent != "hmm" || len(m[0].ToolCalls) != 2 ||
		m[0].ToolCalls[0].ID != "c1" || m[0].ToolCalls[0].Function.Arguments != `{"x":1}` ||
		m[0].ToolCalls[1].ID != "c2" || m[0].ToolCalls[1].Function.Name != "g" || m[0].ToolCalls[1].Function.Arguments != "{}" {
		t.Errorf("assistant turn: %+v", m[0])
	}
	if m[1].Role != "tool" || m[1].ToolCallID != "c1" || m[1].Content != "r1\nr2" ||
		m[2].Role != "tool" || m[2].ToolCallID != "c2" || m[2].Content != "error" {
		t.Errorf("tool messages: %+v %+v", m[1], m[2])
	}
	parts, _ := m[3].Content.([]any)
	if m[3].Role != "user" || len(parts) != 11 || parts[10].(map[string]any)["text"] != "u10" {
		t.Errorf("user turn: %+v", m[3])
	}
}

// System and developer messages, wherever they are in a chat conversation,
// become the messages request's system prompt, in order; the conversation is
// gone over once, so they are gathered while the turns are written.
func TestRequestSystemGathered(t *testing.T) {
	msgs := []string{`{"role":"system","content":"s0"}`, `{"role":"user","content":"hi"}`,
		`{"role":"developer","content":[{"type":"text","text":"d1"},{"type":"text","text":"d2"}]}`,
		`{"role":"assistant","content":"yo"}`, `{"role":"system","content":""}`}
	want := []string{"s0", "d1", "d2"}
	for i := range 9 {
		msgs = append(msgs, fmt.Sprintf(`{"role":"system","content":"x%d"}`, i))
		want = append(want, fmt.Sprintf("x%d", i))
	}
	body := `{"model":"m","messages":[` + strings.Join(msgs, ",") + `]}`
	out, _, err := TranslateRequest(Chat, []byte(body), &Config{Upstream: Messages}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		System   string `json:"system"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.System != strings.Join(want, "\n\n") || len(got.Messages) != 2 || got.Messages[0].Role != "user" || got.Messages[1].Role != "assistant" {
		t.Errorf("got %s", out)
	}
	// A bad system message is reported with its place in the conversation.
	_, _, err = TranslateRequest(Chat, []byte(`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"system","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`), &Config{Upstream: Messages}, nil)
	if err == nil || !strings.Contains(err.Error(), "messages.1.content.0: system messages may only hold text parts") {
		t.Errorf("got %v", err)
	}
}

// Toward a chat upstream an assistant turn's separate text blocks are joined
// with "\n" (as vLLM joins text parts), not run together, and a failed
// tool's result says so (issue 31).
func TestAssistantTextsAndToolErrorsToChat(t *testing.T) {
	body := `{"model":"m","max_tokens":8,"messages":[` +
		`{"role":"user","content":"go"},` +
		`{"role":"assistant","content":[{"type":"text","text":"pre"},{"type":"tool_use","id":"c1","name":"f","input":{}},{"type":"text","text":"post"},{"type":"tool_use","id":"c2","name":"f","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","is_error":true,"content":"file not found"},` +
		`{"type":"tool_result","tool_use_id":"c2","is_error":true,"content":[{"type":"text","text":"exit 1"},{"type":"text","text":"no such file"}]}]}]}`
	out, _ := mustTranslate(t, Messages, body, Config{Upstream: Chat})
	wantEq(t, "assistant content", out.Get("messages.1.content").String(), "pre\npost")
	wantEq(t, "string result", out.Get("messages.2.content").String(), "Error: file not found")
	wantEq(t, "blocks result", out.Get("messages.3.content").String(), "Error: exit 1\nno such file")
}

// Issue 31 point 8: structured output to a messages upstream. A JSON schema
// is carried as output_config.format; json_object (any object) has no
// counterpart there and is refused saying what to send.
func TestStructuredOutputToMessages(t *testing.T) {
	cfg := Config{Upstream: Messages}
	base := `"model":"m","messages":[{"role":"user","content":"x"}]`
	out, _, err := TranslateRequest(Chat, []byte(`{`+base+`,"response_format":{"type":"json_schema","json_schema":{"name":"o","schema":{"type":"object"}}}}`), &cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantEq(t, "output_config", gjson.GetBytes(out, "output_config").Raw, `{"format":{"type":"json_schema","schema":{"type":"object"}}}`)
	mustRefuse(t, Chat, `{`+base+`,"response_format":{"type":"json_object"}}`, cfg, "response_format: this model's upstream can enforce only a JSON schema")
	mustRefuse(t, Chat, `{`+base+`,"response_format":{"type":"json_schema","json_schema":{"name":"o"}}}`, cfg, "response_format.json_schema.schema: must be a JSON schema object")
	out, _, err = TranslateRequest(Chat, []byte(`{`+base+`,"response_format":{"type":"text"}}`), &cfg, nil)
	if err != nil || gjson.GetBytes(out, "output_config").Exists() {
		t.Fatalf("text format: %v %s", err, out)
	}
	mustRefuse(t, Responses, `{"model":"m","input":"x","text":{"format":{"type":"json_object"}}}`, cfg, "text.format: this model's upstream can enforce only a JSON schema")
}

// A chat body built from another format gets the boost the caller decided
// as priority; a chat client's own body and a messages upstream's do not.
func TestCallBoost(t *testing.T) {
	msgs := []byte(`{"model":"m","max_tokens":5,"priority":7,"messages":[{"role":"user","content":"hi"}]}`)
	chat := []byte(`{"model":"m","max_tokens":5,"priority":7,"messages":[{"role":"user","content":"hi"}]}`)
	for _, c := range []struct {
		client, upstream Format
		body             []byte
		want             string
	}{
		{Messages, Chat, msgs, "-3"},
		{Chat, Chat, chat, "7"}, // the gate edits a chat client's body
		{Chat, Messages, chat, ""},
		{Messages, Messages, msgs, "7"}, // a pass-through keeps what it does not know
	} {
		cfg := Config{Upstream: c.upstream}
		out, _, err := TranslateCallRequest(c.client, Call{Boost: 3}, c.body, &cfg, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := gjson.GetBytes(out, PriorityField).Raw; got != c.want || !gjson.ValidBytes(out) {
			t.Errorf("%s to %s: priority %q, want %q: %s", c.client, c.upstream, got, c.want, out)
		}
	}
}
