package translate

import (
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// Today's Messages API (Claude Code 2.1.328's requests) on both upstreams,
// the field rule, and the signatures of thinking blocks built here.

// clientFixture is a request captured from a real client.
type clientFixture struct {
	name string
	body []byte
}

func claudeCodeFixtures(t *testing.T) []clientFixture {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join("testdata", "clients", "claude-code-*.json"))
	if len(m) < 2 {
		t.Fatalf("want the Claude Code fixtures (first turn and tool result), found %v", m)
	}
	var fx []clientFixture
	for _, p := range m {
		if strings.Contains(p, "-interactive-") {
			// Interactive sessions' requests (titles, images, PDFs,
			// ToolSearch, compaction) have other shapes than this test's
			// one tool round: TestClientCaptures and the tests beside it.
			continue
		}
		b := readFile(t, p)
		if !gjson.GetBytes(b, "path").Exists() || !strings.Contains(gjson.GetBytes(b, "path").Str, "/v1/messages") {
			t.Fatalf("%s is not a messages request", p)
		}
		fx = append(fx, clientFixture{name: filepath.Base(p), body: []byte(gjson.GetBytes(b, "body").Raw)})
	}
	return fx
}

func mustTranslate(t *testing.T, client Format, body string, cfg Config) (gjson.Result, Request) {
	t.Helper()
	out, req, err := TranslateRequest(client, []byte(body), &cfg, nil)
	if err != nil {
		t.Fatalf("%v → %v: %v\n%s", client, cfg.Upstream, err, body)
	}
	if !json.Valid(out) {
		t.Fatalf("not JSON: %s", out)
	}
	return gjson.ParseBytes(out), req
}

func mustRefuse(t *testing.T, client Format, body string, cfg Config, contains string) {
	t.Helper()
	out, _, err := TranslateRequest(client, []byte(body), &cfg, nil)
	if err == nil {
		t.Fatalf("%v → %v: no error; translated to %s", client, cfg.Upstream, out)
	}
	if err.Status != 400 || err.Kind != InvalidRequest || !strings.Contains(err.Message, contains) {
		t.Fatalf("%v → %v: got %d %s %q, want a 400 invalid_request_error containing %q", client, cfg.Upstream, err.Status, err.Kind, err.Message, contains)
	}
}

func jsonEq(t *testing.T, what string, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: %v in %s", what, err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// blocksText joins the text of a string or of text blocks, as a chat
// system message holds it.
func blocksText(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.Str
	}
	var parts []string
	for _, b := range c.Array() {
		parts = append(parts, b.Get("text").Str)
	}
	return strings.Join(parts, "\n\n")
}

// TestClaudeCodeRequests: every captured Claude Code request translates to
// a chat upstream with its content intact and what chat cannot carry gone,
// and passes to a messages upstream unchanged.
func TestClaudeCodeRequests(t *testing.T) {
	for _, fx := range claudeCodeFixtures(t) {
		in := gjson.ParseBytes(fx.body)
		t.Run(fx.name+"/chat", func(t *testing.T) {
			out, req := mustTranslate(t, Messages, string(fx.body), Config{Upstream: Chat})
			if !req.Stream || !req.Reasoning {
				t.Errorf("request %+v: want stream and reasoning (adaptive thinking)", req)
			}
			if out.Get("model").Str != in.Get("model").Str || out.Get("max_tokens").Int() != in.Get("max_tokens").Int() ||
				!out.Get("stream").Bool() || !out.Get("stream_options.include_usage").Bool() {
				t.Errorf("model, max_tokens, stream: %s %s %s %s", out.Get("model"), out.Get("max_tokens"), out.Get("stream"), out.Get("stream_options"))
			}
			// output_config.effort high on adaptive thinking → the openai dialect's high.
			if out.Get("reasoning_effort").Str != "high" {
				t.Errorf("reasoning_effort = %s", out.Get("reasoning_effort").Raw)
			}
			if u := out.Get("user"); u.Str != in.Get("metadata.user_id").Str {
				t.Errorf("user = %s, want metadata.user_id", u.Raw)
			}
			for _, k := range []string{"thinking", "output_config", "context_management", "metadata", "system", "cache_control"} {
				if out.Get(k).Exists() {
					t.Errorf("%s reached the chat upstream: %s", k, out.Get(k).Raw)
				}
			}
			raw := out.Raw
			for _, hint := range []string{"cache_control", "defer_loading", "ephemeral", "clear_thinking", "signature"} {
				if strings.Contains(raw, hint) {
					t.Errorf("%q reached the chat upstream", hint)
				}
			}

			// The conversation, message by message: the top-level system
			// prompt first, then each turn where it was, system ones included.
			msgs := out.Get("messages").Array()
			type turn struct{ role, text string }
			var want []turn
			// Less the per-request billing header block, which would spoil
			// the upstream's prefix cache (issue 31).
			sys := in.Get(`system.#(text%"x-anthropic-billing-header:*")#`)
			if len(sys.Array()) != 1 {
				t.Fatalf("the capture has no billing header block: %s", in.Get("system").Raw)
			}
			want = append(want, turn{"system", blocksText(in.Get(`system.#(text!%"x-anthropic-billing-header:*")#`))})
			if strings.Contains(out.Raw, "x-anthropic-billing-header") {
				t.Errorf("the billing header reached the chat upstream")
			}
			for _, m := range in.Get("messages").Array() {
				switch m.Get("role").Str {
				case "system":
					want = append(want, turn{"system", blocksText(m.Get("content"))})
				case "user":
					var texts []string
					for _, b := range m.Get("content").Array() {
						switch b.Get("type").Str {
						case "tool_result":
							want = append(want, turn{"tool", b.Get("content").Str})
						case "text":
							texts = append(texts, b.Get("text").Str)
						}
					}
					if len(texts) > 0 {
						want = append(want, turn{"user", strings.Join(texts, "|")})
					}
				case "assistant":
					want = append(want, turn{"assistant", ""})
				}
			}
			if len(msgs) != len(want) {
				t.Fatalf("%d chat messages, want %d: %s", len(msgs), len(want), out.Get("messages").Raw)
			}
			for i, w := range want {
				m := msgs[i]
				if m.Get("role").Str != w.role {
					t.Fatalf("messages.%d.role = %s, want %s", i, m.Get("role").Str, w.role)
				}
				var got string
				switch w.role {
				case "user":
					var texts []string
					for _, p := range m.Get("content").Array() {
						texts = append(texts, p.Get("text").Str)
					}
					got = strings.Join(texts, "|")
				case "assistant":
					got = ""
				default:
					got = m.Get("content").Str
				}
				if got != w.text {
					t.Errorf("messages.%d (%s) text = %q, want %q", i, w.role, got, w.text)
				}
			}
			// The turn after a tool call: its thinking rides along as
			// reasoning_content, the call and its result keep their id.
			for _, m := range in.Get("messages").Array() {
				if m.Get("role").Str != "assistant" {
					continue
				}
				var a gjson.Result
				for _, om := range msgs {
					if om.Get("role").Str == "assistant" {
						a = om
					}
				}
				use := m.Get(`content.#(type=="tool_use")`)
				if a.Get("reasoning_content").Str != m.Get(`content.#(type=="thinking").thinking`).Str {
					t.Errorf("reasoning_content = %s", a.Get("reasoning_content").Raw)
				}
				call := a.Get("tool_calls.0")
				if call.Get("id").Str != use.Get("id").Str || call.Get("function.name").Str != use.Get("name").Str {
					t.Errorf("tool call %s, want %s", call.Raw, use.Raw)
				}
				jsonEq(t, "arguments", call.Get("function.arguments").Str, use.Get("input").Raw)
				if tm := out.Get(`messages.#(role=="tool")`); tm.Get("tool_call_id").Str != use.Get("id").Str {
					t.Errorf("tool message %s", tm.Raw)
				}
			}

			tools := out.Get("tools").Array()
			inTools := in.Get("tools").Array()
			if len(tools) != len(inTools) {
				t.Fatalf("%d tools, want %d", len(tools), len(inTools))
			}
			for i, tl := range tools {
				if tl.Get("type").Str != "function" || tl.Get("function.name").Str != inTools[i].Get("name").Str ||
					tl.Get("function.description").Str != inTools[i].Get("description").Str {
					t.Errorf("tools.%d = %.200s", i, tl.Raw)
				}
				jsonEq(t, "tools parameters", tl.Get("function.parameters").Raw, inTools[i].Get("input_schema").Raw)
			}
		})
		t.Run(fx.name+"/messages", func(t *testing.T) {
			out, req := mustTranslate(t, Messages, string(fx.body), Config{Upstream: Messages})
			if !req.Stream || !req.Reasoning {
				t.Errorf("request %+v", req)
			}
			// Passed unchanged: the same document, member order aside.
			jsonEq(t, "pass-through body", out.Raw, string(fx.body))
		})
	}
}

// TestMessagesTodayFields covers each of today's fields on both upstreams.
func TestMessagesTodayFields(t *testing.T) {
	const base = `"model":"m","max_tokens":4000,"messages":[{"role":"user","content":"hi"}]`
	chat := Config{Upstream: Chat}
	msgs := Config{Upstream: Messages}

	t.Run("system role between turns", func(t *testing.T) {
		body := `{"model":"m","max_tokens":10,"system":"top","messages":[{"role":"user","content":"a"},` +
			`{"role":"system","content":[{"type":"text","text":"env"},{"type":"text","text":"more","cache_control":{"type":"ephemeral"}}]},` +
			`{"role":"assistant","content":"b"},{"role":"system","content":"late"},{"role":"system","content":[]},{"role":"user","content":"c"}]}`
		out, _ := mustTranslate(t, Messages, body, chat)
		jsonEq(t, "messages", out.Get("messages").Raw, `[{"role":"system","content":"top"},{"role":"user","content":"a"},`+
			`{"role":"system","content":"env\n\nmore"},{"role":"assistant","content":"b"},{"role":"system","content":"late"},{"role":"user","content":"c"}]`)
		pass, _ := mustTranslate(t, Messages, body, msgs)
		jsonEq(t, "messages (pass)", pass.Get("messages").Raw, gjson.Get(body, "messages").Raw)

		mustRefuse(t, Messages, `{"model":"m","max_tokens":10,"messages":[{"role":"system","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}`,
			chat, "messages.0.content.0: only text blocks")
		mustRefuse(t, Messages, `{"model":"m","max_tokens":10,"messages":[{"role":"system","content":5}]}`, chat, "messages.0.content")
	})

	type reasoningCase struct {
		name     string
		members  string // after base
		cfg      Config
		want     map[string]string // path → raw JSON ("" = absent)
		thinking bool              // Request.Reasoning
	}
	cases := []reasoningCase{
		{"adaptive default effort", `"thinking":{"type":"adaptive"}`, chat,
			map[string]string{"reasoning_effort": `"high"`, "thinking": ""}, true},
		{"adaptive low", `"thinking":{"type":"adaptive"},"output_config":{"effort":"low"}`, chat,
			map[string]string{"reasoning_effort": `"low"`, "output_config": ""}, true},
		{"adaptive max on openai", `"thinking":{"type":"adaptive"},"output_config":{"effort":"max"}`, chat,
			map[string]string{"reasoning_effort": `"high"`}, true},
		{"adaptive xhigh effort scale", `"thinking":{"type":"adaptive"},"output_config":{"effort":"xhigh"}`, Config{Upstream: Chat, Reasoning: DialectEffortScale},
			map[string]string{"reasoning_effort": `"max"`}, true},
		{"adaptive medium effort scale", `"thinking":{"type":"adaptive"},"output_config":{"effort":"low"}`, Config{Upstream: Chat, Reasoning: DialectEffortScale},
			map[string]string{"reasoning_effort": `"low"`}, true},
		{"adaptive kwargs", `"thinking":{"type":"adaptive","display":"omitted"}`, Config{Upstream: Chat, Reasoning: DialectChatTemplateKwargs},
			map[string]string{"chat_template_kwargs": `{"enable_thinking":true}`, "reasoning_effort": ""}, true},
		{"display omitted dropped on chat", `"thinking":{"type":"adaptive","display":"omitted"},"output_config":{"effort":"medium"}`, chat,
			map[string]string{"reasoning_effort": `"medium"`, "display": ""}, true},
		{"effort alone is a level, not a switch", `"output_config":{"effort":"high"}`, chat,
			map[string]string{"reasoning_effort": "", "output_config": ""}, false},
		{"disabled with effort", `"thinking":{"type":"disabled"},"output_config":{"effort":"high"}`, chat,
			map[string]string{"reasoning_effort": ""}, false},
		{"adaptive passes unchanged", `"thinking":{"type":"adaptive","display":"omitted"},"output_config":{"effort":"high"}`, msgs,
			map[string]string{"thinking": `{"type":"adaptive","display":"omitted"}`, "output_config": `{"effort":"high"}`, "max_tokens": "4000"}, true},
		{"adaptive in the openai dialect", `"thinking":{"type":"adaptive"},"output_config":{"effort":"low"}`, Config{Upstream: Messages, Reasoning: DialectOpenAI},
			map[string]string{"thinking": "", "reasoning_effort": `"low"`, "output_config": `{"effort":"low"}`}, true},
		{"enabled keeps display", `"thinking":{"type":"enabled","budget_tokens":2000,"display":"omitted"}`, msgs,
			map[string]string{"thinking": `{"type":"enabled","budget_tokens":2000,"display":"omitted"}`}, true},
		{"adaptive with reasoning_effort", `"thinking":{"type":"adaptive"},"reasoning_effort":"low"`, msgs,
			map[string]string{"thinking": `{"type":"enabled","budget_tokens":1024}`, "reasoning_effort": ""}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, req := mustTranslate(t, Messages, `{`+base+`,`+c.members+`}`, c.cfg)
			for path, want := range c.want {
				if path == "display" {
					if strings.Contains(out.Raw, `"display"`) {
						t.Errorf("display reached the upstream: %s", out.Raw)
					}
					continue
				}
				got := out.Get(path)
				switch {
				case want == "" && got.Exists():
					t.Errorf("%s = %s, want it absent", path, got.Raw)
				case want != "" && !got.Exists():
					t.Errorf("%s absent, want %s", path, want)
				case want != "":
					jsonEq(t, path, got.Raw, want)
				}
			}
			if req.Reasoning != c.thinking {
				t.Errorf("Request.Reasoning = %v", req.Reasoning)
			}
		})
	}
	t.Run("effort errors", func(t *testing.T) {
		for _, cfg := range []Config{chat, msgs} {
			mustRefuse(t, Messages, `{`+base+`,"output_config":{"effort":"extreme"}}`, cfg, "output_config.effort")
			mustRefuse(t, Messages, `{`+base+`,"output_config":{"effort":"none"}}`, cfg, "output_config.effort")
			mustRefuse(t, Messages, `{`+base+`,"output_config":"high"}`, cfg, "output_config: must be an object")
			mustRefuse(t, Messages, `{`+base+`,"thinking":{"type":"adaptive","display":3}}`, cfg, "thinking.display")
			mustRefuse(t, Messages, `{`+base+`,"thinking":{"type":"adaptive"},"reasoning_effort":"none"}`, cfg, "conflicting")
		}
	})

	t.Run("output format", func(t *testing.T) {
		schema := `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`
		body := `{` + base + `,"output_config":{"effort":"low","format":{"type":"json_schema","schema":` + schema + `}}}`
		out, _ := mustTranslate(t, Messages, body, chat)
		jsonEq(t, "response_format", out.Get("response_format").Raw,
			`{"type":"json_schema","json_schema":{"name":"output","strict":true,"schema":`+schema+`}}`)
		pass, _ := mustTranslate(t, Messages, body, msgs)
		jsonEq(t, "output_config (pass)", pass.Get("output_config").Raw, gjson.Get(body, "output_config").Raw)

		beta := `{` + base + `,"output_format":{"type":"json_schema","schema":` + schema + `}}`
		out, _ = mustTranslate(t, Messages, beta, chat)
		if out.Get("response_format.json_schema.schema.required.0").Str != "a" {
			t.Errorf("output_format → response_format: %s", out.Get("response_format").Raw)
		}

		mustRefuse(t, Messages, `{`+base+`,"output_config":{"format":{"type":"regex","pattern":"a+"}}}`, chat,
			"output_config.format: only {type: json_schema, schema} can be enforced")
		mustRefuse(t, Messages, `{`+base+`,"output_format":{"type":"grammar"}}`, chat, "output_format: only")
		mustRefuse(t, Messages, `{`+base+`,"output_config":{"format":{"type":"json_schema"}}}`, chat, "output_config.format.schema")
		mustTranslate(t, Messages, `{`+base+`,"output_config":{"format":{"type":"regex","pattern":"a+"}}}`, msgs)
		// An output_config member nobody classified: dropped on chat, passed on messages.
		out, _ = mustTranslate(t, Messages, `{`+base+`,"output_config":{"effort":"low","task_budget":{"total":5}}}`, chat)
		if strings.Contains(out.Raw, "task_budget") {
			t.Errorf("an unclassified output_config member reached chat: %s", out.Raw)
		}
		pass, _ = mustTranslate(t, Messages, `{`+base+`,"output_config":{"effort":"low","task_budget":{"total":5}}}`, msgs)
		if pass.Get("output_config.task_budget.total").Int() != 5 {
			t.Errorf("output_config on messages: %s", pass.Get("output_config").Raw)
		}
	})

	t.Run("hints", func(t *testing.T) {
		body := `{"model":"m","max_tokens":10,"cache_control":{"type":"ephemeral"},"service_tier":"auto","speed":"fast",` +
			`"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},"metadata":{"user_id":"u1","other":1},` +
			`"future_field":{"x":1},` +
			`"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral","ttl":"1h"}}],` +
			`"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}],` +
			`"tools":[{"name":"a","input_schema":{"type":"object"},"defer_loading":true,"cache_control":{"type":"ephemeral"},"input_examples":[{}],"strict":true},` +
			`{"name":"b","input_schema":{"type":"object"},"eager_input_streaming":true,"newer_member":1}]}`
		out, _ := mustTranslate(t, Messages, body, chat)
		for _, k := range []string{"cache_control", "service_tier", "speed", "context_management", "metadata", "future_field",
			"defer_loading", "input_examples", "eager_input_streaming", "newer_member", "ephemeral", "other"} {
			if strings.Contains(out.Raw, k) {
				t.Errorf("%s reached the chat upstream: %s", k, out.Raw)
			}
		}
		if out.Get("user").Str != "u1" || out.Get("messages.0.content").Str != "sys" || out.Get("messages.1.content").Str != "hi" {
			t.Errorf("carried members lost: %s", out.Raw)
		}
		if !out.Get("tools.0.function.strict").Bool() || out.Get("tools.1.function.strict").Exists() {
			t.Errorf("strict: %s", out.Get("tools").Raw)
		}
		pass, _ := mustTranslate(t, Messages, body, msgs)
		jsonEq(t, "pass-through body", pass.Raw, body)
	})

	t.Run("server-side fields refused everywhere", func(t *testing.T) {
		for _, cfg := range []Config{chat, msgs} {
			mustRefuse(t, Messages, `{`+base+`,"mcp_servers":[{"type":"url","url":"https://x","name":"x"}]}`, cfg, "mcp_servers: MCP servers are server-side tools")
			mustRefuse(t, Messages, `{`+base+`,"container":"c_1"}`, cfg, "container: server-side code execution")
			mustTranslate(t, Messages, `{`+base+`,"mcp_servers":[],"container":null}`, cfg)
		}
	})
}

// TestChatClientFieldRule: the chat client's refusals come from the table,
// at their neutral values they are dropped, and unclassified members are
// dropped on translation and passed to a chat upstream.
func TestChatClientFieldRule(t *testing.T) {
	const base = `"model":"m","messages":[{"role":"user","content":"hi"}]`
	toMsgs := Config{Upstream: Messages}
	refused := map[string]string{
		`"n":2`:            "n: this model's upstream returns one choice",
		`"logprobs":true`:  "logprobs: ",
		`"top_logprobs":2`: "top_logprobs: ",
		`"response_format":{"type":"json_object"}`: "response_format: ",
		`"logit_bias":{"1":2}`:                     "logit_bias: ",
		`"audio":{"voice":"x"}`:                    "audio: ",
		`"modalities":["text","audio"]`:            "modalities: ",
		`"functions":[{"name":"f"}]`:               "functions: legacy functions",
		`"function_call":"auto"`:                   "function_call: legacy functions",
		`"web_search_options":{}`:                  "web_search_options: server-side web search",
	}
	for m, want := range refused {
		mustRefuse(t, Chat, `{`+base+`,`+m+`}`, toMsgs, want)
	}
	neutral := `{` + base + `,"n":1,"logprobs":false,"top_logprobs":0,"response_format":{"type":"text"},"logit_bias":{},` +
		`"audio":null,"modalities":["text"],"functions":null,"seed":7,"frequency_penalty":0.5,"store":true,` +
		`"metadata":{"a":"b"},"prompt_cache_key":"k","service_tier":"auto","safety_identifier":"s","verbosity":"low","brand_new":1}`
	out, _ := mustTranslate(t, Chat, neutral, toMsgs)
	for _, k := range []string{"seed", "frequency_penalty", "store", "prompt_cache_key", "service_tier", "safety_identifier",
		"verbosity", "brand_new", "logprobs", "response_format", "modalities", `"n"`, "metadata"} {
		if strings.Contains(out.Raw, k) {
			t.Errorf("%s reached the messages upstream: %s", k, out.Raw)
		}
	}
	// To a chat upstream everything passes but server-side fields.
	pass, _ := mustTranslate(t, Chat, `{`+base+`,"n":2,"logprobs":true,"brand_new":1}`, Config{Upstream: Chat})
	if pass.Get("n").Int() != 2 || !pass.Get("logprobs").Bool() || pass.Get("brand_new").Int() != 1 {
		t.Errorf("chat pass-through dropped members: %s", pass.Raw)
	}
	mustRefuse(t, Chat, `{`+base+`,"web_search_options":{}}`, Config{Upstream: Chat}, "web_search_options")
}

// TestFieldRules checks the table itself, and that each top-level rule of
// the two translated clients is what their translators do.
func TestFieldRules(t *testing.T) {
	for i := range fieldRules {
		r := &fieldRules[i]
		if r.client != Chat && r.client != Messages && r.client != Responses && r.client != Gemini {
			t.Errorf("%s: client %v", r.name, r.client)
		}
		if (r.action == fieldHint) != (r.fix == "") {
			t.Errorf("%v %s: a refusal needs a fix, a hint none", r.client, r.name)
		}
		if r.fix != "" && strings.HasPrefix(r.fix, r.name+":") {
			t.Errorf("%v %s: the path is prefixed by uncarried", r.client, r.name)
		}
		if lookupField(r.client, "", r.name) == nil && !strings.Contains(r.name, ".") {
			t.Errorf("%v %s: not indexed", r.client, r.name)
		}
	}
	if uncarried(Messages, "never_classified", `1`) != nil || uncarried(Chat, "n", `null`) != nil {
		t.Error("unclassified or null members must be dropped")
	}
	if err := uncarriedIn(Messages, "tools", 3, "defer_loading", "true"); err != nil {
		t.Errorf("a hint refused: %v", err)
	}
	if err := uncarriedIn(Messages, "output_config", -1, "format", `{"type":"regex"}`); err == nil || !strings.HasPrefix(err.Message, "output_config.format: ") {
		t.Errorf("nested refusal: %v", err)
	}
	if err := uncarried(Responses, "previous_response_id", `"resp_1"`); err == nil || !strings.Contains(err.Message, "previous_response_id: ") {
		t.Errorf("responses refusal: %v", err)
	}

	// A value no rule finds neutral.
	const odd = `["__x"]`
	for i := range fieldRules {
		r := &fieldRules[i]
		if strings.Contains(r.name, ".") || r.client == Responses || r.client == Gemini || r.name == "metadata" {
			continue // nested members, Responses and Gemini are tested on their own; metadata must be an object
		}
		// A value of the member's own type (validate.go refuses a known
		// member of the wrong type on every path), as odd as it allows.
		v := odd
		for _, c := range []string{odd, `"__x"`, `7`, `1.5`, `true`, `{"type":"json_object","__x":1}`} {
			if validateMember(r.client, r.name, c) == nil && (r.neutral == nil || !r.neutral(c)) {
				v = c
				break
			}
		}
		var body string
		var up Format
		if r.client == Messages {
			body = `{"model":"m","max_tokens":5,"messages":[],"` + r.name + `":` + v + `}`
			up = Chat
		} else {
			body = `{"model":"m","messages":[{"role":"user","content":"hi"}],"` + r.name + `":` + v + `}`
			up = Messages
		}
		_, _, err := TranslateRequest(r.client, []byte(body), &Config{Upstream: up}, nil)
		switch {
		case r.action == fieldHint && err != nil:
			t.Errorf("%v %s is a hint, refused: %v", r.client, r.name, err)
		case r.action != fieldHint && (err == nil || !strings.HasPrefix(err.Message, r.name+": ")):
			t.Errorf("%v %s is refused by the table, translator says %v", r.client, r.name, err)
		}
		// On pass-through only server-side fields are refused.
		_, _, err = TranslateRequest(r.client, []byte(body), &Config{Upstream: r.client}, nil)
		if (err != nil) != (r.action == fieldServer) {
			t.Errorf("%v %s on pass-through: %v", r.client, r.name, err)
		}
	}
}

// sseSignatures returns the signature of every thinking block of a messages
// event stream, accumulated as the SDKs do.
func sseSignatures(t *testing.T, b []byte) []string {
	t.Helper()
	sigs := map[int64]string{}
	var order []int64
	for _, ev := range parseSSE(t, b) {
		d := gjson.Parse(ev.Data)
		switch d.Get("type").Str {
		case "content_block_start":
			if d.Get("content_block.type").Str == "thinking" {
				order = append(order, d.Get("index").Int())
				sigs[d.Get("index").Int()] = d.Get("content_block.signature").Str
			}
		case "content_block_delta":
			if d.Get("delta.type").Str == "signature_delta" {
				sigs[d.Get("index").Int()] = d.Get("delta.signature").Str
			}
		}
	}
	out := make([]string, len(order))
	for i, idx := range order {
		out[i] = sigs[idx]
	}
	return out
}

// TestThinkingSignatures: thinking blocks built from a chat upstream carry
// a signature, the same streamed and not (however the text is escaped or
// split), and different for different reasoning.
func TestThinkingSignatures(t *testing.T) {
	cfg := &Config{Upstream: Chat}
	req := Request{Stream: true, IncludeUsage: true, Reasoning: true}
	wholeResp := func(reasoning string) string {
		return `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","reasoning_content":` +
			reasoning + `,"content":"Hi."},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`
	}
	chunk := func(delta string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":` + delta + `}]}` + "\n\n"
	}
	stream := chunk(`{"role":"assistant","reasoning_content":"Caf\u00e9 \"q\""}`) + chunk(`{"reasoning_content":"\nok"}`) +
		chunk(`{"content":"Hi."}`) + `data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}` + "\n\ndata: [DONE]\n\n"

	out, err := TranslateResponse(Messages, Chat, []byte(wholeResp(`"Café \"q\"\nok"`)), Request{Reasoning: true}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	sig := gjson.GetBytes(out, `content.#(type=="thinking").signature`).Str
	raw, e := base64.StdEncoding.DecodeString(sig)
	if e != nil || !strings.HasPrefix(string(raw), signatureTag) {
		t.Fatalf("signature %q is not Timeblock's (%v)", sig, e)
	}
	s := NewStream(Messages, Chat, req, cfg)
	sse := s.Close(s.Write(nil, []byte(stream)))
	if got := sseSignatures(t, sse); len(got) != 1 || got[0] != sig {
		t.Errorf("streamed signatures %q, whole %q\n%s", got, sig, sse)
	}
	// Split anywhere, the same.
	s = NewStream(Messages, Chat, req, cfg)
	var split []byte
	for i := 0; i < len(stream); i += 7 {
		split = s.Write(split, []byte(stream[i:min(i+7, len(stream))]))
	}
	if got := sseSignatures(t, s.Close(split)); len(got) != 1 || got[0] != sig {
		t.Errorf("split stream signatures %q, want %q", got, sig)
	}
	other, _ := TranslateResponse(Messages, Chat, []byte(wholeResp(`"Cafe"`)), Request{Reasoning: true}, cfg, nil)
	if gjson.GetBytes(other, `content.0.signature`).Str == sig {
		t.Error("different reasoning, same signature")
	}
	// A messages upstream's own signature passes untouched, with no second one.
	up := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hm\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"UPSTREAM\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	ms := NewStream(Messages, Messages, req, &Config{Upstream: Messages})
	pass := ms.Close(ms.Write(nil, []byte(up)))
	if got := sseSignatures(t, pass); len(got) != 1 || got[0] != "UPSTREAM" || strings.Count(string(pass), "signature_delta") != 1 {
		t.Errorf("upstream signature: %q\n%s", got, pass)
	}
}

// TestThinkingHandedBack: a client hands back thinking blocks (signed by
// Timeblock, by the upstream, or with an empty signature): a chat upstream
// gets their text as reasoning_content on the tool-calling turn, a messages
// upstream gets them as they were.
func TestThinkingHandedBack(t *testing.T) {
	for _, sig := range []string{``, `dGItdGhrAAERRERERERERA==`, `EqQBCgIYAhIM`} {
		body := `{"model":"m","max_tokens":100,"thinking":{"type":"adaptive"},"messages":[{"role":"user","content":"weather?"},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"Need the tool.","signature":"` + sig + `"},` +
			`{"type":"redacted_thinking","data":"xyz"},` +
			`{"type":"tool_use","id":"toolu_1","name":"w","input":{"c":"P"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny","cache_control":{"type":"ephemeral"}}]},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"Answer now.","signature":"` + sig + `"},{"type":"text","text":"Sunny."}]},` +
			`{"role":"user","content":"thanks"}],"tools":[{"name":"w","input_schema":{"type":"object"}}]}`
		out, _ := mustTranslate(t, Messages, body, Config{Upstream: Chat})
		a := out.Get(`messages.#(role=="assistant")`)
		if a.Get("reasoning_content").Str != "Need the tool." || a.Get("tool_calls.0.id").Str != "toolu_1" {
			t.Errorf("signature %q: assistant turn %s", sig, a.Raw)
		}
		// A turn without tool calls keeps only its text.
		last := out.Get(`messages.#(role=="assistant")#`).Array()
		if len(last) != 2 || last[1].Get("content").Str != "Sunny." || last[1].Get("reasoning_content").Exists() {
			t.Errorf("final assistant turn %v", last)
		}
		if strings.Contains(out.Raw, "signature") || strings.Contains(out.Raw, "xyz") {
			t.Errorf("a signature or redacted thinking reached the chat upstream: %s", out.Raw)
		}
		pass, _ := mustTranslate(t, Messages, body, Config{Upstream: Messages})
		jsonEq(t, "messages (pass)", pass.Get("messages").Raw, gjson.Get(body, "messages").Raw)
	}
}

// Claude Code's first system block, "x-anthropic-billing-header: …", differs
// per request: toward a chat upstream it is dropped so that model servers'
// prefix caches match; a messages upstream gets it (issue 31; the shape is
// testdata/clients/claude-code-2.1.328-first.json's).
func TestBillingHeaderDropped(t *testing.T) {
	body := `{"model":"m","max_tokens":9,"system":[` +
		`{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.328.ff0; cc_entrypoint=sdk-cli; cch=5f3a1;"},` +
		`{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}},` +
		`{"type":"text","text":"Quote: x-anthropic-billing-header: kept when not first in its block."}],` +
		`"messages":[{"role":"user","content":"hi"}]}`
	out, _ := mustTranslate(t, Messages, body, Config{Upstream: Chat})
	wantEq(t, "system", out.Get("messages.0.content").String(), "You are Claude Code.\n\nQuote: x-anthropic-billing-header: kept when not first in its block.")
	out, _ = mustTranslate(t, Messages, body, Config{Upstream: Messages})
	wantEq(t, "messages upstream", out.Get("system.0.text").String(), "x-anthropic-billing-header: cc_version=2.1.328.ff0; cc_entrypoint=sdk-cli; cch=5f3a1;")
}
