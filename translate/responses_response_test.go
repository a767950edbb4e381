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

// responseFixtures are the whole upstream responses in testdata/responses.
var responseFixtures = []struct {
	name string
	up   Format
}{
	{"vllm_reasoning_tool", Chat},
	{"llamacpp_think_inline", Chat},
	{"ollama_lone_close", Chat},
	{"ollama_tool_stop", Chat},
	{"sglang_length_tool", Chat},
	{"vllm_stop_string", Chat},
	{"anthropic_message", Messages},
	{"messages_inline_think", Messages},
	{"messages_stop_sequence", Messages},
}

// checkResponseObject checks what every response object must hold.
func checkResponseObject(t *testing.T, r gjson.Result) {
	t.Helper()
	if !strings.HasPrefix(r.Get("id").String(), "resp_") || r.Get("object").String() != "response" ||
		r.Get("created_at").Type != gjson.Number || r.Get("model").Type != gjson.String || !r.Get("output").IsArray() ||
		r.Get("store").Raw != "false" || !r.Get("usage.input_tokens_details.cached_tokens").Exists() ||
		!r.Get("usage.output_tokens_details.reasoning_tokens").Exists() {
		t.Errorf("not a response object: %s", r.Raw)
	}
	if u := r.Get("usage"); u.Get("total_tokens").Int() != u.Get("input_tokens").Int()+u.Get("output_tokens").Int() {
		t.Errorf("usage does not add up: %s", u.Raw)
	}
	status := r.Get("status").String()
	incomplete := r.Get("incomplete_details.reason").String()
	if (status == "incomplete") != (incomplete != "") {
		t.Errorf("status %s with incomplete_details %s", status, r.Get("incomplete_details").Raw)
	}
	ids := map[string]bool{}
	for i, item := range r.Get("output").Array() {
		id := item.Get("id").String()
		if ids[id] || id == "" {
			t.Errorf("output.%d: id %q missing or repeated", i, id)
		}
		ids[id] = true
		switch item.Get("type").String() {
		case "reasoning":
			if !strings.HasPrefix(id, "rs_") || item.Get("summary.0.type").String() != "summary_text" {
				t.Errorf("output.%d: %s", i, item.Raw)
			}
		case "message":
			if !strings.HasPrefix(id, "msg_") || item.Get("role").String() != "assistant" || item.Get("content.0.type").String() != "output_text" {
				t.Errorf("output.%d: %s", i, item.Raw)
			}
		case "function_call":
			if !strings.HasPrefix(id, "fc_") || item.Get("call_id").String() == "" || item.Get("name").String() == "" || item.Get("arguments").Type != gjson.String {
				t.Errorf("output.%d: %s", i, item.Raw)
			}
		default:
			t.Errorf("output.%d: type %s", i, item.Get("type").Raw)
		}
	}
}

func TestResponsesResponseFixtures(t *testing.T) {
	for _, c := range responseFixtures {
		t.Run(c.name, func(t *testing.T) {
			in := readFile(t, filepath.Join("testdata", "responses", c.name+".json"))
			req := Request{resp: respOptions{encrypted: true, effort: 5, summary: 1}}
			out, err := TranslateResponse(Responses, c.up, in, req, &Config{Upstream: c.up}, []byte("keep"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(out), "keep") {
				t.Fatalf("dst overwritten: %.20q", out)
			}
			out = out[4:]
			if !gjson.ValidBytes(out) {
				t.Fatalf("not JSON: %s", out)
			}
			checkResponseObject(t, gjson.ParseBytes(out))
			compareJSON(t, filepath.Join("testdata", "responses", c.name+".responses.want.json"), out)
		})
	}
}

func TestResponsesResponseContent(t *testing.T) {
	translate := func(t *testing.T, up Format, body string, req Request) gjson.Result {
		t.Helper()
		out, err := TranslateResponse(Responses, up, []byte(body), req, &Config{Upstream: up}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := gjson.ParseBytes(out)
		checkResponseObject(t, r)
		return r
	}
	t.Run("chat reasoning, text, call", func(t *testing.T) {
		r := translate(t, Chat, string(readFile(t, "testdata/responses/vllm_reasoning_tool.json")), Request{})
		wantEq(t, "id", r.Get("id").String(), "resp_8f1e2d")
		wantEq(t, "status", r.Get("status").String(), "completed")
		wantEq(t, "types", r.Get("output.#.type").Raw, `["reasoning","message","function_call"]`)
		wantEq(t, "summary", r.Get("output.0.summary.0.text").String(), "The user wants Paris weather.")
		wantEq(t, "no encrypted_content unless asked", r.Get("output.0.encrypted_content").Exists(), false)
		wantEq(t, "text", r.Get("output.1.content.0.text").String(), "Let me look.")
		wantEq(t, "call_id", r.Get("output.2.call_id").String(), "chatcmpl-tool-1a2b")
		wantEq(t, "name", r.Get("output.2.name").String(), "get_weather")
		wantEq(t, "arguments", r.Get("output.2.arguments").String(), `{"city": "Paris"}`)
		wantEq(t, "input", r.Get("usage.input_tokens").Int(), int64(120))
		wantEq(t, "cached", r.Get("usage.input_tokens_details.cached_tokens").Int(), int64(64))
		wantEq(t, "output", r.Get("usage.output_tokens").Int(), int64(40))
		if n := r.Get("usage.output_tokens_details.reasoning_tokens").Int(); n < 1 || n >= 40 {
			t.Errorf("reasoning tokens %d", n)
		}
	})
	t.Run("messages thinking, text, tool_use", func(t *testing.T) {
		r := translate(t, Messages, string(readFile(t, "testdata/responses/anthropic_message.json")), Request{})
		wantEq(t, "types", r.Get("output.#.type").Raw, `["reasoning","message","function_call"]`)
		wantEq(t, "summary", r.Get("output.0.summary.0.text").String(), "Weather needs a tool.")
		wantEq(t, "call_id", r.Get("output.2.call_id").String(), "toolu_01A09q90qw90lq917835lq9")
		wantEq(t, "arguments", r.Get("output.2.arguments").String(), `{"location":"San Francisco, CA","unit":"celsius"}`)
		wantEq(t, "input", r.Get("usage.input_tokens").Int(), int64(2095+1024))
		wantEq(t, "cached", r.Get("usage.input_tokens_details.cached_tokens").Int(), int64(1024))
	})
	t.Run("cut by max tokens", func(t *testing.T) {
		r := translate(t, Chat, string(readFile(t, "testdata/responses/sglang_length_tool.json")), Request{resp: respOptions{maxOutput: 16}})
		wantEq(t, "status", r.Get("status").String(), "incomplete")
		wantEq(t, "reason", r.Get("incomplete_details.reason").String(), "max_output_tokens")
		wantEq(t, "last item", r.Get("output.@reverse.0.status").String(), "incomplete")
		wantEq(t, "max_output_tokens", r.Get("max_output_tokens").Int(), int64(16))
	})
	t.Run("inline think split", func(t *testing.T) {
		r := translate(t, Chat, string(readFile(t, "testdata/responses/llamacpp_think_inline.json")), Request{})
		wantEq(t, "types", r.Get("output.#.type").Raw, `["reasoning","message"]`)
		if strings.Contains(r.Get("output.1.content.0.text").String(), "think>") {
			t.Errorf("think tags in the text: %s", r.Get("output.1").Raw)
		}
	})
	t.Run("namespaced call", func(t *testing.T) {
		body := `{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
			`{"id":"call_a","type":"function","function":{"name":"multi_agent_v1__spawn_agent","arguments":"{\"message\":\"hi\"}"}},` +
			`{"id":"call_b","type":"function","function":{"name":"exec_command","arguments":{"cmd":"ls"}}}]},"finish_reason":"tool_calls"}]}`
		r := translate(t, Chat, body, Request{resp: respOptions{namespaces: "multi_agent_v1\x00", noParallel: true}})
		wantEq(t, "types", r.Get("output.#.type").Raw, `["function_call","function_call"]`)
		wantEq(t, "name", r.Get("output.0.name").String(), "spawn_agent")
		wantEq(t, "namespace", r.Get("output.0.namespace").String(), "multi_agent_v1")
		wantEq(t, "plain name", r.Get("output.1.name").String(), "exec_command")
		wantEq(t, "no namespace", r.Get("output.1.namespace").Exists(), false)
		wantEq(t, "object arguments", r.Get("output.1.arguments").String(), `{"cmd":"ls"}`)
		wantEq(t, "parallel_tool_calls", r.Get("parallel_tool_calls").Raw, "false")
		wantEq(t, "usage", r.Get("usage.total_tokens").Int(), int64(0))
	})
}

// A reasoning handed out as encrypted_content comes back whole on the
// assistant turn of the next request, escapes and all.
func TestResponsesEncryptedRoundTrip(t *testing.T) {
	reasoning := "Plan:\n1. run \"ls\" — then\tread\\files ✓ 😀"
	chat := `{"id":"chatcmpl-7","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"","reasoning_content":` +
		string(appendStr(nil, reasoning)) + `,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"ls","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
	out, err := TranslateResponse(Responses, Chat, []byte(chat), Request{resp: respOptions{encrypted: true}}, &Config{Upstream: Chat}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := gjson.ParseBytes(out)
	wantEq(t, "summary", r.Get("output.0.summary.0.text").String(), reasoning)
	enc := r.Get("output.0.encrypted_content").String()
	if !strings.HasPrefix(enc, encPrefix) {
		t.Fatalf("encrypted_content %q", enc)
	}
	if _, err := base64.StdEncoding.DecodeString(enc[len(encPrefix):]); err != nil {
		t.Fatalf("encrypted_content is not base64: %v", err)
	}
	// The next turn hands the items back, the summary dropped: only the
	// encrypted content carries the reasoning.
	items := []string{`{"role":"user","content":"list"}`}
	for _, item := range r.Get("output").Array() {
		s := item.Raw
		if item.Get("type").String() == "reasoning" {
			s = `{"type":"reasoning","id":"` + item.Get("id").String() + `","summary":[],"encrypted_content":"` + enc + `"}`
		}
		items = append(items, s)
	}
	items = append(items, `{"type":"function_call_output","call_id":"call_1","output":"a b"}`)
	body := `{"model":"m","input":[` + strings.Join(items, ",") + `]}`
	for _, up := range []Format{Chat, Messages} {
		next, _ := translateResponses(t, up, body)
		path := "messages.1.reasoning_content"
		if up == Messages {
			path = "messages.1.content.0.thinking"
		}
		wantEq(t, up.String()+" reasoning restored", next.Get(path).String(), reasoning)
	}
}

// Issue 31 point 7: the response object echoes the request's tools, as the
// Responses API does, whole and streamed.
func TestResponsesEchoTools(t *testing.T) {
	body := codexBody(t, "tool-result")
	_, req, err := TranslateRequest(Responses, body, &Config{Upstream: Chat}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := gjson.GetBytes(body, "tools")
	check := func(what string, got gjson.Result) {
		t.Helper()
		var g, w any
		if e := json.Unmarshal([]byte(got.Raw), &g); e != nil {
			t.Fatalf("%s: tools %q: %v", what, got.Raw, e)
		}
		_ = json.Unmarshal([]byte(want.Raw), &w)
		if !reflect.DeepEqual(g, w) || len(got.Array()) == 0 {
			t.Errorf("%s: tools %s, want the request's %s", what, got.Raw, want.Raw)
		}
	}
	out, terr := TranslateResponse(Responses, Chat, readFile(t, "testdata/responses/vllm_reasoning_tool.json"), req, &Config{Upstream: Chat}, nil)
	if terr != nil {
		t.Fatal(terr)
	}
	check("whole", gjson.GetBytes(out, "tools"))
	req.Stream = true
	r, evs := streamFinal(t, Chat, req, string(readFile(t, "testdata/streams/vllm_reasoning_tools.sse")))
	check("response.completed", r.Get("tools"))
	check("response.created", gjson.Get(evs[0].Data, "response.tools"))
	// Pretty-printed in the request, one line in the stream's events.
	pretty, _ := json.MarshalIndent(gjson.ParseBytes(body).Value(), "", "  ")
	if _, req, err = TranslateRequest(Responses, pretty, &Config{Upstream: Chat}, nil); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(req.resp.tools, "\n\t") {
		t.Errorf("tools not compacted: %.200s", req.resp.tools)
	}
}
