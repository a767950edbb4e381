package translate

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// codexBody reads the body of a captured Codex request.
func codexBody(t testing.TB, name string) []byte {
	t.Helper()
	var c struct{ Body json.RawMessage }
	if err := json.Unmarshal(readFile(t, "testdata/clients/codex-0.169.0-"+name+".json"), &c); err != nil {
		t.Fatal(err)
	}
	return c.Body
}

func translateResponses(t *testing.T, up Format, body string) (gjson.Result, Request) {
	t.Helper()
	out, req, err := TranslateRequest(Responses, []byte(body), &Config{Upstream: up}, nil)
	if err != nil {
		t.Fatalf("%v\nbody: %s", err, body)
	}
	if !gjson.ValidBytes(out) {
		t.Fatalf("not JSON: %s", out)
	}
	// What the gate checked translates the same way.
	vout, vreq, verr := TranslateValidRequest(Responses, []byte(body), &Config{Upstream: up}, nil)
	if verr != nil || string(vout) != string(out) || vreq != req {
		t.Fatalf("TranslateValidRequest differs: %s %v", vout, verr)
	}
	return gjson.ParseBytes(out), req
}

func wantEq(t *testing.T, what string, got, want any) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestResponsesCodexToChat(t *testing.T) {
	for _, name := range []string{"first", "tool-result"} {
		t.Run(name, func(t *testing.T) {
			body := codexBody(t, name)
			out, req := translateResponses(t, Chat, string(body))
			if !req.Stream || !req.Reasoning || !req.IncludeUsage {
				t.Errorf("req = %+v", req)
			}
			if !req.resp.encrypted || req.resp.namespaces != "multi_agent_v1\x00" || respSummaries[req.resp.summary] != "auto" || respEfforts[req.resp.effort] != "high" {
				t.Errorf("resp options = %+v", req.resp)
			}
			wantEq(t, "model", out.Get("model").String(), "Qwen/Qwen3-32B")
			wantEq(t, "reasoning_effort", out.Get("reasoning_effort").String(), "high")
			wantEq(t, "include_usage", out.Get("stream_options.include_usage").Bool(), true)
			for _, k := range []string{"input", "store", "include", "prompt_cache_key", "client_metadata", "reasoning", "parallel_tool_calls", "tool_choice"} {
				if out.Get(k).Exists() {
					t.Errorf("%s went upstream: %s", k, out.Get(k).Raw)
				}
			}
			msgs := out.Get("messages").Array()
			// The two developer messages join the system message.
			wantEq(t, "messages.0.role", msgs[0].Get("role").String(), "system")
			sys := msgs[0].Get("content").String()
			if !strings.HasPrefix(sys, "You are a coding agent running in the Codex CLI") ||
				!strings.Contains(sys, "\n\n<skills_instructions>") || !strings.Contains(sys, "\n\n<permissions instructions>") {
				t.Errorf("system = %.300q", sys)
			}
			wantEq(t, "messages.1.role", msgs[1].Get("role").String(), "user")
			wantEq(t, "messages.2.content", msgs[2].Get("content.0.text").String(), "run echo hi")
			// Tools: functions and the namespace's, flattened; web_search withdrawn.
			var names []string
			for _, tl := range out.Get("tools").Array() {
				wantEq(t, "tool type", tl.Get("type").String(), "function")
				names = append(names, tl.Get("function.name").String())
			}
			got := strings.Join(names, " ")
			for _, n := range []string{"exec_command", "view_image", "multi_agent_v1__spawn_agent", "multi_agent_v1__wait_agent", "update_goal"} {
				if !strings.Contains(" "+got+" ", " "+n+" ") {
					t.Errorf("tool %s missing from %s", n, got)
				}
			}
			if strings.Contains(got, "web_search") || len(names) != 12 {
				t.Errorf("tools = %s", got)
			}
			if name == "first" {
				wantEq(t, "messages", len(msgs), 3)
				return
			}
			wantEq(t, "messages", len(msgs), 5)
			a := msgs[3]
			wantEq(t, "assistant role", a.Get("role").String(), "assistant")
			wantEq(t, "assistant content", a.Get("content").Type, gjson.Null)
			// Not ours: the summary stands in for the reasoning.
			wantEq(t, "reasoning_content", a.Get("reasoning_content").String(), "Run echo.")
			wantEq(t, "call id", a.Get("tool_calls.0.id").String(), "call_1")
			wantEq(t, "call name", a.Get("tool_calls.0.function.name").String(), "exec_command")
			wantEq(t, "call args", a.Get("tool_calls.0.function.arguments").String(), `{"cmd": "echo hi"}`)
			wantEq(t, "tool role", msgs[4].Get("role").String(), "tool")
			wantEq(t, "tool_call_id", msgs[4].Get("tool_call_id").String(), "call_1")
			if !strings.HasSuffix(msgs[4].Get("content").String(), "Output:\nhi\n") {
				t.Errorf("tool content = %q", msgs[4].Get("content").String())
			}
		})
	}
}

func TestResponsesCodexToMessages(t *testing.T) {
	for _, name := range []string{"first", "tool-result"} {
		t.Run(name, func(t *testing.T) {
			out, req := translateResponses(t, Messages, string(codexBody(t, name)))
			if !req.Stream || !req.Reasoning {
				t.Errorf("req = %+v", req)
			}
			wantEq(t, "stream", out.Get("stream").Bool(), true)
			wantEq(t, "thinking.type", out.Get("thinking.type").String(), "enabled")
			if b := out.Get("thinking.budget_tokens").Int(); b < 1024 || b >= out.Get("max_tokens").Int() {
				t.Errorf("budget %d, max_tokens %d", b, out.Get("max_tokens").Int())
			}
			if sys := out.Get("system").String(); !strings.HasPrefix(sys, "You are a coding agent") || !strings.Contains(sys, "<permissions instructions>") {
				t.Errorf("system = %.200q", sys)
			}
			if n := out.Get("tools.#").Int(); n != 12 || out.Get(`tools.#(name=="multi_agent_v1__close_agent").input_schema.type`).String() != "object" {
				t.Errorf("tools = %s", out.Get("tools.#.name").Raw)
			}
			msgs := out.Get("messages").Array()
			wantEq(t, "turn 0", msgs[0].Get("role").String(), "user")
			wantEq(t, "turn 0 text", msgs[0].Get("content.1.text").String(), "run echo hi")
			if name == "first" {
				wantEq(t, "turns", len(msgs), 1)
				return
			}
			wantEq(t, "turns", len(msgs), 3)
			a := msgs[1]
			wantEq(t, "assistant", a.Get("role").String(), "assistant")
			wantEq(t, "thinking", a.Get("content.0.thinking").String(), "Run echo.")
			wantEq(t, "tool_use", a.Get("content.1.type").String(), "tool_use")
			wantEq(t, "tool_use id", a.Get("content.1.id").String(), "call_1")
			wantEq(t, "tool_use input", a.Get("content.1.input.cmd").String(), "echo hi")
			wantEq(t, "tool_result", msgs[2].Get("content.0.tool_use_id").String(), "call_1")
		})
	}
}

func TestResponsesRequestShapes(t *testing.T) {
	enc := encPrefix + base64.StdEncoding.EncodeToString([]byte(`I should list the files \"first\".\nThen read them.`))
	for _, c := range []struct {
		name string
		up   Format
		body string
		want map[string]any // gjson path → value (string, bool, int64, or nil for absent)
	}{
		{"string input", Chat, `{"model":"m","input":"hi","instructions":"be brief","max_output_tokens":100,"temperature":0.5,"top_p":0.9,"store":true,"metadata":{"a":"b"}}`,
			map[string]any{"messages.0.role": "system", "messages.0.content": "be brief", "messages.1.role": "user", "messages.1.content": "hi",
				"max_tokens": int64(100), "temperature": 0.5, "top_p": 0.9, "store": nil, "metadata": nil, "stream": nil, "reasoning_effort": nil}},
		{"easy messages and roles", Chat, `{"model":"m","input":[{"role":"system","content":"s1"},{"role":"user","content":"u1"},{"role":"assistant","content":"a1"},{"role":"developer","content":[{"type":"input_text","text":"d1"}]},{"role":"user","content":"u2"}]}`,
			map[string]any{"messages.0.content": "s1", "messages.1.content": "u1", "messages.2.role": "assistant", "messages.2.content": "a1",
				"messages.3.role": "system", "messages.3.content": "d1", "messages.4.content": "u2", "messages.#": int64(5)}},
		// The input array is written where the walk meets it; the
		// instructions and model may come after it.
		{"instructions after the input join its system items", Chat, `{"input":[{"role":"system","content":"s1"},{"role":"user","content":"u"}],"model":"m","instructions":"i"}`,
			map[string]any{"model": "m", "messages.0.role": "system", "messages.0.content": "i\n\ns1", "messages.1.content": "u", "messages.#": int64(2)}},
		{"instructions after an input without system items", Chat, `{"input":[{"role":"user","content":"u"}],"instructions":"i","model":"m"}`,
			map[string]any{"model": "m", "messages.0.role": "system", "messages.0.content": "i", "messages.1.content": "u", "messages.#": int64(2)}},
		{"instructions after an empty system item", Chat, `{"input":[{"role":"system","content":""},{"role":"user","content":"u"}],"model":"m","instructions":"i"}`,
			map[string]any{"messages.0.content": "i", "messages.1.content": "u", "messages.#": int64(2)}},
		{"instructions after an empty input", Chat, `{"input":[],"model":"m","instructions":"i","stream":true}`,
			map[string]any{"messages.0.content": "i", "messages.#": int64(1), "stream": true}},
		{"system items, no instructions", Chat, `{"input":[{"role":"system","content":"s1"}],"model":"m","instructions":""}`,
			map[string]any{"messages.0.content": "s1", "messages.#": int64(1)}},
		{"input given twice: the last counts", Chat, `{"model":"m","input":[{"role":"user","content":"a"}],"input":"b"}`,
			map[string]any{"messages.0.content": "b", "messages.#": int64(1)}},
		{"assistant output_text parts and reasoning without calls", Chat, `{"model":"m","input":[{"type":"reasoning","summary":[{"type":"summary_text","text":"hmm"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"one "},{"type":"output_text","text":"two"}]}]}`,
			map[string]any{"messages.0.content": "one two", "messages.0.reasoning_content": nil, "messages.#": int64(1)}},
		{"reasoning alone is dropped", Chat, `{"model":"m","input":[{"type":"reasoning","summary":[]},{"role":"user","content":"u"}]}`,
			map[string]any{"messages.#": int64(1), "messages.0.role": "user"}},
		{"images and files", Chat, `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"data:image/png;base64,iVBO","detail":"low"},{"type":"input_file","file_data":"data:application/pdf;base64,JVBE","filename":"a.pdf"}]}]}`,
			map[string]any{"messages.0.content.0.text": "look", "messages.0.content.1.image_url.url": "data:image/png;base64,iVBO",
				"messages.0.content.1.image_url.detail": "low", "messages.0.content.2.file.filename": "a.pdf"}},
		{"images to messages", Messages, `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,iVBO"}]}]}`,
			map[string]any{"messages.0.content.0.type": "image", "messages.0.content.0.source.data": "iVBO", "max_tokens": int64(8192)}},
		{"namespaced call, encrypted reasoning restored", Chat, `{"model":"m","input":[{"role":"user","content":"go"},` +
			`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"short"}],"encrypted_content":"` + enc + `"},` +
			`{"type":"function_call","call_id":"c1","name":"spawn_agent","namespace":"agents","arguments":"{}"},` +
			`{"type":"function_call","call_id":"c2","name":"ls","arguments":"{\"d\":1}"},` +
			`{"type":"function_call_output","call_id":"c1","output":"ok"},{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}]}`,
			map[string]any{"messages.1.reasoning_content": "I should list the files \"first\".\nThen read them.",
				"messages.1.tool_calls.0.function.name": "agents__spawn_agent", "messages.1.tool_calls.1.function.name": "ls",
				"messages.1.tool_calls.#": int64(2), "messages.2.tool_call_id": "c1", "messages.3.content": "a\nb", "messages.#": int64(4)}},
		{"encrypted reasoning reaches a messages upstream", Messages, `{"model":"m","input":[{"role":"user","content":"go"},` +
			`{"type":"reasoning","summary":[],"encrypted_content":"` + enc + `"},{"type":"function_call","call_id":"c1","name":"ls","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"x"}]}`,
			map[string]any{"messages.1.content.0.type": "thinking", "messages.1.content.0.thinking": "I should list the files \"first\".\nThen read them.",
				"messages.1.content.1.name": "ls"}},
		{"tampered encrypted content falls back on the summary", Chat, `{"model":"m","input":[{"type":"reasoning","summary":[{"type":"summary_text","text":"sum"}],"encrypted_content":"tb1:IiI="},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`,
			map[string]any{"messages.0.reasoning_content": "sum"}},
		{"tool output with an image", Chat, `{"model":"m","input":[{"type":"function_call","call_id":"c","name":"view_image","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]}]}`,
			map[string]any{"messages.1.role": "tool", "messages.1.content": "(attached below)", "messages.2.role": "user",
				"messages.2.content.0.text": "Attached to the output of tool call c:", "messages.2.content.1.image_url.url": "data:image/png;base64,AAAA"}},
		{"text.format json_schema", Chat, `{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"out","schema":{"type":"object"},"strict":true},"verbosity":"low"}}`,
			map[string]any{"response_format.type": "json_schema", "response_format.json_schema.name": "out", "response_format.json_schema.strict": true, "verbosity": nil}},
		{"text.format text", Messages, `{"model":"m","input":"x","text":{"format":{"type":"text"}}}`, map[string]any{"response_format": nil}},
		{"effort none", Chat, `{"model":"m","input":"x","reasoning":{"effort":"none"}}`, map[string]any{"reasoning_effort": nil}},
		{"effort minimal", Chat, `{"model":"m","input":"x","reasoning":{"effort":"minimal"}}`, map[string]any{"reasoning_effort": "low"}},
		{"effort xhigh", Messages, `{"model":"m","input":"x","max_output_tokens":40000,"reasoning":{"effort":"xhigh"}}`, map[string]any{"thinking.budget_tokens": int64(32768)}},
		{"summary asks for reasoning", Chat, `{"model":"m","input":"x","reasoning":{"summary":"auto"}}`, map[string]any{"reasoning_effort": "medium"}},
		{"hosted tools withdrawn", Chat, `{"model":"m","input":"x","tools":[{"type":"web_search"},{"type":"file_search","vector_store_ids":["v"]}],"tool_choice":"auto"}`,
			map[string]any{"tools": nil, "tool_choice": nil}},
		{"tool_choice required, parallel off", Messages, `{"model":"m","input":"x","parallel_tool_calls":false,"tools":[{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"web_search"}],"tool_choice":"required"}`,
			map[string]any{"tools.#": int64(1), "tool_choice.type": "any", "tool_choice.disable_parallel_tool_use": true}},
		{"tool_choice a namespaced function", Chat, `{"model":"m","input":"x","tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"f"}]}],"tool_choice":{"type":"function","name":"f","namespace":"ns"}}`,
			map[string]any{"tool_choice.function.name": "ns__f", "tools.0.function.parameters.type": "object"}},
		{"allowed_tools", Chat, `{"model":"m","input":"x","tools":[{"type":"function","name":"a"},{"type":"function","name":"b"}],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"b"}]}}`,
			map[string]any{"tools.#": int64(1), "tools.0.function.name": "b", "tool_choice": "required"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, _ := translateResponses(t, c.up, c.body)
			for path, want := range c.want {
				v := out.Get(path)
				switch w := want.(type) {
				case nil:
					if v.Exists() {
						t.Errorf("%s = %s, want absent\n%s", path, v.Raw, out.Raw)
					}
				case string:
					if v.Type != gjson.String || v.String() != w {
						t.Errorf("%s = %s, want %q\n%s", path, v.Raw, w, out.Raw)
					}
				case bool:
					if !v.IsBool() || v.Bool() != w {
						t.Errorf("%s = %s, want %v\n%s", path, v.Raw, w, out.Raw)
					}
				case int64:
					if v.Type != gjson.Number || v.Int() != w {
						t.Errorf("%s = %s, want %d\n%s", path, v.Raw, w, out.Raw)
					}
				case float64:
					if v.Type != gjson.Number || v.Float() != w {
						t.Errorf("%s = %s, want %v\n%s", path, v.Raw, w, out.Raw)
					}
				}
			}
		})
	}
}

func TestResponsesRequestErrors(t *testing.T) {
	for _, c := range []struct {
		name, body, msg string
		up              Format
	}{
		{"previous_response_id", `{"model":"m","input":"x","previous_response_id":"resp_1"}`, "previous_response_id: Timeblock keeps no response state", Chat},
		{"background", `{"model":"m","input":"x","background":true}`, "background:", Chat},
		{"no input", `{"model":"m"}`, "input: must be a string or an array", Chat},
		{"no model", `{"input":"x"}`, "model:", Chat},
		{"hosted tool_choice", `{"model":"m","input":"x","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search_preview"}}`, "tool_choice: web_search_preview is a hosted tool", Chat},
		{"required with only hosted tools", `{"model":"m","input":"x","tools":[{"type":"web_search"}],"tool_choice":"required"}`, "hosted tools such as web_search", Messages},
		{"unknown function chosen", `{"model":"m","input":"x","tools":[{"type":"function","name":"a"}],"tool_choice":{"type":"function","name":"b"}}`, "tool_choice.name: no function tool named b", Chat},
		{"custom tool", `{"model":"m","input":"x","tools":[{"type":"custom","name":"apply_patch"}]}`, "tools.0: custom tools", Chat},
		{"item reference", `{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "input.0: item references need stored items", Chat},
		{"hosted tool item", `{"model":"m","input":[{"role":"user","content":"x"},{"type":"web_search_call","id":"ws_1","status":"completed"}]}`, "input.1.type: web_search_call items belong to hosted tools", Chat},
		{"bad role", `{"model":"m","input":[{"role":"tool","content":"x"}]}`, "input.0.role: must be user, assistant, system or developer", Chat},
		{"call without id", `{"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, "input.0.call_id", Chat},
		{"file id", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"file_1"}]}]}`, "input.0.content.0.file_id: uploaded files are not supported", Chat},
		// A JSON schema is carried (output_config.format, issue 31); "any
		// JSON object" cannot be enforced there.
		{"json object to messages", `{"model":"m","input":"x","text":{"format":{"type":"json_object"}}}`, "text.format: this model's upstream can enforce only a JSON schema", Messages},
		{"effort", `{"model":"m","input":"x","reasoning":{"effort":"extreme"}}`, "reasoning.effort: must be one of none, minimal, low, medium, high, xhigh", Chat},
		{"temperature", `{"model":"m","input":"x","temperature":1.5}`, "temperature: must be between 0 and 1", Messages},
		{"logprobs", `{"model":"m","input":"x","include":["message.output_text.logprobs"]}`, "include.0: log probabilities", Chat},
		{"system part", `{"model":"m","input":[{"role":"developer","content":[{"type":"input_image","image_url":"x"}]}]}`, "input.0.content.0: system and developer messages may only hold text parts", Chat},
		{"instructions only to messages", `{"model":"m","instructions":"Be brief.","input":[]}`, "input: at least one user message is required", Messages},
		{"developer only to messages", `{"model":"m","input":[{"role":"developer","content":"Be brief."}]}`, "input: at least one user message is required", Messages},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, _, err := TranslateRequest(Responses, []byte(c.body), &Config{Upstream: c.up}, []byte("keep"))
			if err == nil {
				t.Fatalf("no error; out %s", out)
			}
			if err.Status != 400 || err.Kind != InvalidRequest || !strings.Contains(err.Message, c.msg) {
				t.Errorf("error %d %s %q, want 400 containing %q", err.Status, err.Kind, err.Message, c.msg)
			}
			if string(out) != "keep" {
				t.Errorf("buffer not restored: %q", out)
			}
			// Errors of the Responses endpoint have the chat shape.
			if b := err.Body(Responses); !gjson.GetBytes(b, "error.message").Exists() || !gjson.GetBytes(b, "error.type").Exists() {
				t.Errorf("error body %s", b)
			}
		})
	}
}

func TestSplitFlatName(t *testing.T) {
	for _, c := range []struct{ list, name, ns, rest string }{
		{"", "exec", "", "exec"},
		{"multi_agent_v1\x00", "multi_agent_v1__spawn_agent", "multi_agent_v1", "spawn_agent"},
		{"a\x00a__b\x00", "a__b__c", "a__b", "c"},
		{"a\x00", "a__", "", "a__"},
		{"ab\x00", "a__b", "", "a__b"},
	} {
		ns, rest := splitFlatName(c.list, c.name)
		if ns != c.ns || rest != c.rest {
			t.Errorf("splitFlatName(%q, %q) = %q, %q; want %q, %q", c.list, c.name, ns, rest, c.ns, c.rest)
		}
	}
}
