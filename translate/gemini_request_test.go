package translate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

var bothUpstreams = [...]Format{Chat, Messages}

// translateGemini translates a Gemini body for cfg and checks that the
// checked path (TranslateCallRequest with checked) gives the same.
func translateGemini(t *testing.T, cfg Config, call Call, body string) (gjson.Result, Request) {
	t.Helper()
	out, req, err := TranslateCallRequest(Gemini, call, []byte(body), &cfg, nil, false)
	if err != nil {
		t.Fatalf("→ %v: %v\nbody: %s", cfg.Upstream, err, body)
	}
	if !json.Valid(out) {
		t.Fatalf("not JSON: %s", out)
	}
	vout, vreq, verr := TranslateCallRequest(Gemini, call, []byte(body), &cfg, nil, true)
	if verr != nil || string(vout) != string(out) || vreq != req {
		t.Fatalf("the checked path differs: %s %v", vout, verr)
	}
	return gjson.ParseBytes(out), req
}

var gemCall = Call{Model: "Qwen/Qwen3-32B"}

// A conversation with every part kind, translated whole for both upstreams.
const geminiConversation = `{
  "model": "models/ignored",
  "systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "Use tools."}]},
  "contents": [
    {"role": "user", "parts": [{"text": "What is in /tmp?"}, {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]},
    {"role": "model", "parts": [
      {"text": "I should list it.", "thought": true},
      {"text": "Let me look."},
      {"functionCall": {"name": "ls", "args": {"dir": "/tmp"}}, "thoughtSignature": "c2ln"}
    ]},
    {"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {"output": "a.txt\nb.txt"}}}]},
    {"role": "model", "parts": [{"text": "Two files."}]},
    {"parts": [{"text": "Thanks"}]}
  ],
  "tools": [{"functionDeclarations": [{"name": "ls", "description": "List a directory",
    "parameters": {"type": "OBJECT", "properties": {"dir": {"type": "STRING"}}, "required": ["dir"], "propertyOrdering": ["dir"]}}]}],
  "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
  "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}],
  "generationConfig": {"temperature": 0.2, "topP": 0.9, "topK": 40, "maxOutputTokens": 4096,
    "stopSequences": ["END"], "seed": 7, "presencePenalty": 0.5, "frequencyPenalty": 0.25, "candidateCount": 1}
}`

func TestGeminiConversation(t *testing.T) {
	want := map[Format]string{
		Chat: `{"model":"Qwen/Qwen3-32B","messages":[
			{"role":"system","content":"Be brief.\n\nUse tools."},
			{"role":"user","content":[{"type":"text","text":"What is in /tmp?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]},
			{"role":"assistant","content":"Let me look.","reasoning_content":"I should list it.","tool_calls":[{"id":"call_1_2","type":"function","function":{"name":"ls","arguments":"{\"dir\": \"/tmp\"}"}}]},
			{"role":"tool","tool_call_id":"call_1_2","content":"a.txt\nb.txt"},
			{"role":"assistant","content":"Two files."},
			{"role":"user","content":"Thanks"}],
			"max_tokens":4096,"temperature":0.2,"top_p":0.9,"stop":["END"],"seed":7,"presence_penalty":0.5,"frequency_penalty":0.25,"top_k":40,
			"tools":[{"type":"function","function":{"name":"ls","description":"List a directory","parameters":{"type":"object","properties":{"dir":{"type":"string"}},"required":["dir"]}}}],
			"tool_choice":"auto"}`,
		Messages: `{"model":"Qwen/Qwen3-32B","max_tokens":4096,"system":"Be brief.\n\nUse tools.","messages":[
			{"role":"user","content":[{"type":"text","text":"What is in /tmp?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},
			{"role":"assistant","content":[{"type":"thinking","thinking":"I should list it."},{"type":"text","text":"Let me look."},{"type":"tool_use","id":"call_1_2","name":"ls","input":{"dir":"/tmp"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1_2","content":"a.txt\nb.txt"}]},
			{"role":"assistant","content":[{"type":"text","text":"Two files."}]},
			{"role":"user","content":[{"type":"text","text":"Thanks"}]}],
			"stop_sequences":["END"],"temperature":0.2,"top_p":0.9,"top_k":40,
			"tools":[{"name":"ls","description":"List a directory","input_schema":{"type":"object","properties":{"dir":{"type":"string"}},"required":["dir"]}}]}`, // auto is the default
	}
	for _, up := range bothUpstreams {
		out, req := translateGemini(t, Config{Upstream: up}, gemCall, geminiConversation)
		jsonEq(t, up.String(), out.Raw, want[up])
		if req.Stream || req.IncludeUsage || req.Reasoning {
			t.Errorf("%v: req = %+v", up, req)
		}
	}
}

func TestGeminiStream(t *testing.T) {
	body := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	call := Call{Model: "m", Stream: true}
	out, req := translateGemini(t, Config{Upstream: Chat}, call, body)
	jsonEq(t, "chat", out.Raw, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
	if !req.Stream || req.IncludeUsage {
		t.Errorf("req = %+v", req)
	}
	out, req = translateGemini(t, Config{Upstream: Messages}, call, body)
	jsonEq(t, "messages", out.Raw, `{"model":"m","max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stream":true}`)
	if !req.Stream {
		t.Errorf("req = %+v", req)
	}
}

// geminiCase checks members of the translation for one upstream (or both,
// when up is Unknown): each path of want holds that JSON ("" for absent).
type geminiCase struct {
	name string
	up   Format
	body string
	want map[string]string
}

func runGeminiCases(t *testing.T, cases []geminiCase, cfg Config) {
	t.Helper()
	for _, c := range cases {
		for _, up := range bothUpstreams {
			if c.up != Unknown && c.up != up {
				continue
			}
			t.Run(c.name+"/"+up.String(), func(t *testing.T) {
				cfg := cfg
				cfg.Upstream = up
				out, _ := translateGemini(t, cfg, gemCall, c.body)
				for path, want := range c.want {
					got := out.Get(path)
					if want == "" {
						if got.Exists() {
							t.Errorf("%s = %s, want it absent\n%s", path, got.Raw, out.Raw)
						}
						continue
					}
					if !got.Exists() {
						t.Errorf("%s absent, want %s\n%s", path, want, out.Raw)
						continue
					}
					jsonEq(t, path, got.Raw, want)
				}
			})
		}
	}
}

func userText(s string) string {
	return `{"contents":[{"role":"user","parts":[{"text":"` + s + `"}]}]`
}

func withGen(gen string) string { return userText("x") + `,"generationConfig":` + gen + `}` }

func TestGeminiMappings(t *testing.T) {
	close := func(s string) string { return s + "}" }
	runGeminiCases(t, []geminiCase{
		{name: "snake_case names", body: `{"contents":[{"role":"user","parts":[{"text":"a"},{"inline_data":{"mime_type":"image/jpeg","data":"AAA"}}]}],
			"system_instruction":{"parts":[{"text":"sys"}]},"generation_config":{"max_output_tokens":5,"stop_sequences":["x"]}}`,
			want: map[string]string{"max_tokens": `5`}},
		{name: "snake_case chat", up: Chat, body: `{"contents":[{"role":"user","parts":[{"text":"a"},{"inline_data":{"mime_type":"image/jpeg","data":"AAA"}}]}],
			"system_instruction":{"parts":[{"text":"sys"}]}}`,
			want: map[string]string{"messages.0": `{"role":"system","content":"sys"}`, "messages.1.content.1.image_url.url": `"data:image/jpeg;base64,AAA"`}},
		{name: "pdf inline", up: Chat, body: close(`{"contents":[{"parts":[{"inlineData":{"mimeType":"application/pdf","data":"JVBE"}}]}]`),
			want: map[string]string{"messages.0.content.0": `{"type":"file","file":{"filename":"document.pdf","file_data":"data:application/pdf;base64,JVBE"}}`}},
		{name: "pdf inline", up: Messages, body: close(`{"contents":[{"parts":[{"inlineData":{"mimeType":"application/pdf","data":"JVBE"}}]}]`),
			want: map[string]string{"messages.0.content.0": `{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"}}`}},
		{name: "image by URL", up: Chat, body: close(`{"contents":[{"parts":[{"text":"see"},{"fileData":{"mimeType":"image/png","fileUri":"https://example.com/a.png"}}]}]`),
			want: map[string]string{"messages.0.content.1": `{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}`}},
		{name: "image by URL", up: Messages, body: close(`{"contents":[{"parts":[{"fileData":{"mimeType":"image/png","fileUri":"https://example.com/a.png"}}]}]`),
			want: map[string]string{"messages.0.content.0": `{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}`}},
		{name: "thoughts of a turn without calls are dropped", body: close(`{"contents":[{"role":"user","parts":[{"text":"q"}]},
			{"role":"model","parts":[{"text":"hmm","thought":true},{"text":"A"},{"text":"B"}]},{"role":"user","parts":[{"text":"q2"}]}]`),
			want: map[string]string{"messages.1.reasoning_content": ""}},
		{name: "model text joined", up: Chat, body: close(`{"contents":[{"role":"user","parts":[{"text":"q"}]},
			{"role":"model","parts":[{"text":"hmm","thought":true},{"text":"A"},{"text":"B"},{"thoughtSignature":"xx"},{"text":""}]},{"role":"user","parts":[{"text":"q2"}]}]`),
			want: map[string]string{"messages.1": `{"role":"assistant","content":"AB"}`}},
		{name: "an empty part is nothing", up: Chat, body: close(`{"contents":[{"role":"user","parts":[{"text":"q"},{}]},
			{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}},{}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{}}}]}]`),
			want: map[string]string{"messages.0": `{"role":"user","content":"q"}`, "messages.1.tool_calls.#": `1`, "messages.2.role": `"tool"`}},
		{name: "thoughts alone are nothing", up: Chat, body: close(`{"contents":[{"role":"user","parts":[{"text":"q"}]},
			{"role":"model","parts":[{"text":"hmm","thought":true}]},{"role":"user","parts":[{"text":"q2"}]}]`),
			want: map[string]string{"messages.1": `{"role":"user","content":"q2"}`}},
		{name: "function role and error response", up: Chat, body: close(`{"contents":[{"role":"user","parts":[{"text":"q"}]},
			{"role":"model","parts":[{"functionCall":{"name":"f"}}]},{"role":"function","parts":[{"functionResponse":{"name":"f","response":{"error":"boom"}}}]}]`),
			want: map[string]string{"messages.1.tool_calls.0.function.arguments": `"{}"`, "messages.1.content": `null`,
				"messages.2": `{"role":"tool","tool_call_id":"call_1_0","content":"Error: boom"}`}},
		{name: "structured response as JSON text", up: Chat, body: close(`{"contents":[{"role":"user","parts":[{"text":"q"}]},
			{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"n":1,"ok":true}}}]}]`),
			want: map[string]string{"messages.2.content": `"{\"n\":1,\"ok\":true}"`}},
		{name: "response media follow the tool message", up: Chat, body: close(`{"contents":[{"role":"user","parts":[{"text":"q"}]},
			{"role":"model","parts":[{"functionCall":{"name":"read","args":{"p":"a.png"}}}]},
			{"role":"user","parts":[{"functionResponse":{"name":"read","response":{},"parts":[{"inlineData":{"mimeType":"image/png","data":"QUJD"}}]}},{"text":"look"}]}]`),
			want: map[string]string{"messages.2": `{"role":"tool","tool_call_id":"call_1_0","content":"(see the attached media)"}`,
				"messages.3": `{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,QUJD"}},{"type":"text","text":"look"}]}`}},
		{name: "response media follow the tool message", up: Messages, body: close(`{"contents":[{"role":"user","parts":[{"text":"q"}]},
			{"role":"model","parts":[{"functionCall":{"name":"read","args":{"p":"a.png"}}}]},
			{"role":"user","parts":[{"functionResponse":{"name":"read","response":{"output":"ok"},"parts":[{"inlineData":{"mimeType":"image/png","data":"QUJD"}}]}}]}]`),
			want: map[string]string{"messages.2.content": `[{"type":"tool_result","tool_use_id":"call_1_0","content":"ok"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"QUJD"}}]`}},
		{name: "system instruction as a string", up: Chat, body: `{"systemInstruction":"sys","contents":[{"parts":[{"text":"q"}]}]}`,
			want: map[string]string{"messages.0": `{"role":"system","content":"sys"}`}},
		{name: "body model ignored", body: `{"model":"models/gemini-2.5-pro","contents":[{"parts":[{"text":"q"}]}]}`,
			want: map[string]string{"model": `"Qwen/Qwen3-32B"`}},
		{name: "hints dropped", body: close(userText("x") + `,"safetySettings":[],"labels":{"a":"b"},"generationConfig":{"mediaResolution":"MEDIA_RESOLUTION_LOW","responseLogprobs":false,"candidateCount":1,"responseModalities":["TEXT"]}`),
			want: map[string]string{"safetySettings": "", "labels": "", "generationConfig": "", "n": ""}},
		{name: "unclassified members dropped", body: close(userText("x") + `,"somethingNew":{"a":1}`),
			want: map[string]string{"somethingNew": ""}},
		{name: "top_k omitted on request", up: Chat, body: withGen(`{"topK":5}`), want: map[string]string{"top_k": `5`}},
		{name: "penalties and seed", up: Messages, body: withGen(`{"seed":1,"presencePenalty":1,"frequencyPenalty":1}`),
			want: map[string]string{"seed": "", "presence_penalty": "", "frequency_penalty": ""}},
		{name: "json object", up: Chat, body: withGen(`{"responseMimeType":"application/json"}`),
			want: map[string]string{"response_format": `{"type":"json_object"}`}},
		{name: "text/plain", body: withGen(`{"responseMimeType":"text/plain"}`),
			want: map[string]string{"response_format": "", "output_config": ""}},
		{name: "json schema", up: Chat, body: withGen(`{"responseMimeType":"application/json","responseSchema":{"type":"ARRAY","items":{"type":"STRING","enum":["a","b"],"format":"enum"},"minItems":"1"}}`),
			want: map[string]string{"response_format": `{"type":"json_schema","json_schema":{"name":"response","schema":{"type":"array","items":{"type":"string","enum":["a","b"]},"minItems":1}}}`}},
		{name: "json schema", up: Messages, body: withGen(`{"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"a":{"type":"integer"}}}}`),
			want: map[string]string{"output_config": `{"format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}`}},
	}, Config{})
	// OmitTopK drops topK going to a chat upstream.
	out, _ := translateGemini(t, Config{Upstream: Chat, OmitTopK: true}, gemCall, withGen(`{"topK":5}`))
	if out.Get("top_k").Exists() {
		t.Errorf("top_k went upstream with OmitTopK: %s", out.Raw)
	}
}

func TestGeminiTools(t *testing.T) {
	decls := `"tools":[{"functionDeclarations":[{"name":"a","parametersJsonSchema":{"type":"object","properties":{"x":{"type":"integer"}}}},{"name":"b"}]},{"functionDeclarations":[{"name":"c","description":"C"}]}]`
	body := func(cfg string) string { return userText("x") + "," + decls + cfg + "}" }
	runGeminiCases(t, []geminiCase{
		{name: "declarations", up: Chat, body: body(""), want: map[string]string{
			"tools": `[{"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{"x":{"type":"integer"}}}}},
				{"type":"function","function":{"name":"b","parameters":{"type":"object","properties":{}}}},
				{"type":"function","function":{"name":"c","description":"C","parameters":{"type":"object","properties":{}}}}]`,
			"tool_choice": ""}},
		{name: "ANY", up: Chat, body: body(`,"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}`), want: map[string]string{"tool_choice": `"required"`, "tools.#": "3"}},
		{name: "ANY", up: Messages, body: body(`,"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}`), want: map[string]string{"tool_choice": `{"type":"any"}`}},
		{name: "ANY one allowed", up: Chat, body: body(`,"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["b"]}}`),
			want: map[string]string{"tool_choice": `{"type":"function","function":{"name":"b"}}`, "tools.#": "1"}},
		{name: "ANY one allowed", up: Messages, body: body(`,"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["b"]}}`),
			want: map[string]string{"tool_choice": `{"type":"tool","name":"b"}`, "tools.#": "1"}},
		{name: "ANY two allowed", up: Chat, body: body(`,"toolConfig":{"functionCallingConfig":{"mode":"any","allowedFunctionNames":["a","c"]}}`),
			want: map[string]string{"tool_choice": `"required"`, "tools.#.function.name": `["a","c"]`}},
		{name: "NONE", up: Chat, body: body(`,"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}`), want: map[string]string{"tool_choice": `"none"`}},
		{name: "NONE", up: Messages, body: body(`,"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}`), want: map[string]string{"tool_choice": `{"type":"none"}`}},
		{name: "VALIDATED", up: Chat, body: body(`,"toolConfig":{"function_calling_config":{"mode":"VALIDATED"},"retrievalConfig":{}}`), want: map[string]string{"tool_choice": `"auto"`}},
		{name: "no tools, AUTO", body: userText("x") + `,"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}}}`, want: map[string]string{"tools": "", "tool_choice": ""}},
	}, Config{})
}

func TestGeminiSchema(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"type":"OBJECT","properties":{"name":{"type":"STRING","description":"d"},"age":{"type":"INTEGER","format":"int32","minimum":0}},"required":["name"],"propertyOrdering":["name","age"]}`,
			`{"type":"object","properties":{"name":{"type":"string","description":"d"},"age":{"type":"integer","format":"int32","minimum":0}},"required":["name"]}`},
		{`{"type":"STRING","nullable":true,"enum":["a","b"],"format":"enum"}`, `{"type":["string","null"],"enum":["a","b",null]}`},
		{`{"nullable":true,"anyOf":[{"type":"NUMBER"},{"type":"BOOLEAN"}]}`, `{"anyOf":[{"type":"number"},{"type":"boolean"},{"type":"null"}]}`},
		{`{"type":"ARRAY","items":{"type":"OBJECT","properties":{"x":{"type":"NUMBER","nullable":false}}},"minItems":"1","maxItems":"3","example":[]}`,
			`{"type":"array","items":{"type":"object","properties":{"x":{"type":"number"}}},"minItems":1,"maxItems":3}`},
		{`{"type":"TYPE_UNSPECIFIED","title":"t"}`, `{"title":"t"}`},
		// A JSON schema sent as parameters survives.
		{`{"type":"object","properties":{"x":{"type":["string","null"]}},"additionalProperties":false,"$defs":{"y":{"type":"string"}}}`,
			`{"type":"object","properties":{"x":{"type":["string","null"]}},"additionalProperties":false,"$defs":{"y":{"type":"string"}}}`},
	} {
		p := loc{name: "parameters"}
		got, err := appendGeminiSchema(nil, c.in, &p)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		jsonEq(t, c.in, string(got), c.want)
	}
	p := loc{name: "parameters"}
	if _, err := appendGeminiSchema(nil, `{"type":"OBJECT","properties":{"a":{"type":"ARRAY","items":3}}}`, &p); err == nil ||
		err.Message != "parameters.properties.a.items: must be an object (a Schema)" {
		t.Errorf("bad items: %v", err)
	}
}

func TestGeminiCallIDs(t *testing.T) {
	body := `{"contents":[
	  {"role":"user","parts":[{"text":"q"}]},
	  {"role":"model","parts":[{"functionCall":{"name":"read","args":{"p":"a"}}},{"functionCall":{"name":"read","args":{"p":"b"}}},{"functionCall":{"id":"xyz","name":"ls"}}]},
	  {"role":"user","parts":[
	    {"functionResponse":{"id":"xyz","name":"ls","response":{"output":"ls"}}},
	    {"functionResponse":{"name":"read","response":{"output":"A"}}},
	    {"functionResponse":{"name":"read","response":{"output":"B"}}}]},
	  {"role":"model","parts":[{"functionCall":{"name":"read","args":{"p":"c"}}}]},
	  {"role":"user","parts":[{"functionResponse":{"name":"read","response":{"output":"C"}}}]},
	  {"role":"model","parts":[{"functionCall":{"id":"k1","name":"w"}}]},
	  {"role":"user","parts":[{"functionResponse":{"id":"other","name":"w","response":{"output":"W"}}}]}
	]}`
	out, _ := translateGemini(t, Config{Upstream: Chat}, gemCall, body)
	var got []string
	for _, m := range out.Get("messages").Array() {
		for _, c := range m.Get("tool_calls").Array() {
			got = append(got, "call "+c.Get("id").String())
		}
		if m.Get("role").String() == "tool" {
			got = append(got, m.Get("tool_call_id").String()+"="+m.Get("content").String())
		}
	}
	want := "call call_1_0,call call_1_1,call xyz,xyz=ls,call_1_0=A,call_1_1=B,call call_3_0,call_3_0=C,call k1,other=W"
	if strings.Join(got, ",") != want {
		t.Errorf("ids:\n got %s\nwant %s", strings.Join(got, ","), want)
	}
	// The same pairing reaches a messages upstream as tool_use and tool_result.
	out, _ = translateGemini(t, Config{Upstream: Messages}, gemCall, body)
	wantEq(t, "tool_use", out.Get("messages.1.content.#.id").Raw, `["call_1_0","call_1_1","xyz"]`)
	wantEq(t, "tool_result", out.Get("messages.2.content.#.tool_use_id").Raw, `["xyz","call_1_0","call_1_1"]`)
}

func TestGeminiThinking(t *testing.T) {
	type want struct {
		reasoning bool
		chat      string // the reasoning members of a chat body (openai dialect)
		messages  string // the thinking member of a messages body
	}
	for _, c := range []struct {
		cfg string
		want
	}{
		{``, want{false, `{}`, ``}},
		{`{"thinkingBudget":0}`, want{false, `{}`, ``}},
		{`{"thinkingBudget":0,"includeThoughts":true}`, want{false, `{}`, ``}},
		{`{"thinkingBudget":-1}`, want{true, `{"reasoning_effort":"medium"}`, `{"type":"enabled","budget_tokens":8192}`}},
		{`{"thinkingBudget":2000}`, want{true, `{"reasoning_effort":"low"}`, `{"type":"enabled","budget_tokens":2000}`}},
		{`{"thinkingBudget":20000}`, want{true, `{"reasoning_effort":"high"}`, `{"type":"enabled","budget_tokens":20000}`}},
		{`{"thinkingLevel":"low"}`, want{true, `{"reasoning_effort":"low"}`, `{"type":"enabled","budget_tokens":2048}`}},
		{`{"thinkingLevel":"HIGH"}`, want{true, `{"reasoning_effort":"high"}`, `{"type":"enabled","budget_tokens":16384}`}},
		{`{"thinking_level":"minimal"}`, want{true, `{"reasoning_effort":"low"}`, `{"type":"enabled","budget_tokens":2048}`}},
		{`{"includeThoughts":true}`, want{true, `{"reasoning_effort":"medium"}`, `{"type":"enabled","budget_tokens":8192}`}},
		{`{"includeThoughts":false}`, want{false, `{}`, ``}},
	} {
		body := withGen(`{"maxOutputTokens":32000,"thinkingConfig":` + c.cfg + `}`)
		if c.cfg == "" {
			body = withGen(`{"maxOutputTokens":32000}`)
		}
		out, req := translateGemini(t, Config{Upstream: Chat}, gemCall, body)
		wantEq(t, c.cfg+" reasoning", req.Reasoning, c.reasoning)
		got := map[string]any{}
		for _, k := range []string{"reasoning_effort", "thinking", "chat_template_kwargs"} {
			if v := out.Get(k); v.Exists() {
				got[k] = v.Value()
			}
		}
		b, _ := json.Marshal(got)
		jsonEq(t, c.cfg+" chat", string(b), c.chat)

		out, req = translateGemini(t, Config{Upstream: Messages}, gemCall, body)
		wantEq(t, c.cfg+" messages reasoning", req.Reasoning, c.reasoning)
		if c.messages == "" {
			if out.Get("thinking").Exists() {
				t.Errorf("%s: thinking = %s", c.cfg, out.Get("thinking").Raw)
			}
		} else {
			jsonEq(t, c.cfg+" messages", out.Get("thinking").Raw, c.messages)
		}
	}
	// Other dialects: off is written explicitly for hybrid templates.
	out, _ := translateGemini(t, Config{Upstream: Chat, Reasoning: DialectChatTemplateKwargs}, gemCall, withGen(`{"thinkingConfig":{"thinkingBudget":0}}`))
	jsonEq(t, "kwargs off", out.Get("chat_template_kwargs").Raw, `{"enable_thinking":false}`)
	out, _ = translateGemini(t, Config{Upstream: Chat, Reasoning: DialectThinking}, gemCall, withGen(`{"maxOutputTokens":1000,"thinkingConfig":{"thinkingBudget":4000}}`))
	jsonEq(t, "thinking dialect", out.Get("thinking").Raw, `{"type":"enabled","budget_tokens":1024}`)
	wantEq(t, "raised max_tokens", out.Get("max_tokens").Int(), int64(1025))
}

func TestGeminiErrors(t *testing.T) {
	conv := func(parts string) string {
		return `{"contents":[{"role":"user","parts":[{"text":"q"}]},{"role":"model","parts":[{"functionCall":{"name":"f"}}]},{"role":"user","parts":[` + parts + `]}]}`
	}
	for _, c := range []struct {
		up        Format // Unknown: both
		body, msg string
	}{
		{body: `{}`, msg: "contents: required, an array of Content objects {role, parts}"},
		{body: `{"contents":[]}`, msg: "contents: must not be empty"},
		{body: `{"contents":{}}`, msg: "contents: must be an array"},
		{body: `{"contents":[{"parts":[{"text":""}]}]}`, msg: "contents: " + noTurnsMsg},
		{body: `{"contents":[3]}`, msg: "contents.0: must be an object (a Content {role, parts})"},
		{body: `{"contents":[{"role":"assistant","parts":[{"text":"a"}]}]}`, msg: "contents.0.role: must be user or model"},
		{body: `{"contents":[{"role":"user"}]}`, msg: "contents.0.parts: required, an array of parts"},
		{body: `{"contents":[{"role":"user","parts":"hi"}]}`, msg: "contents.0.parts: must be an array of parts"},
		{body: `{"contents":[{"role":"user","parts":["a"]}]}`, msg: "contents.0.parts.0: must be an object (a Part)"},
		{body: `{"contents":[{"role":"user","parts":[{"text":3}]}]}`, msg: "contents.0.parts.0.text: must be a string"},
		{body: `{"contents":[{"role":"user","parts":[{"text":"a","thought":"yes"}]}]}`, msg: "contents.0.parts.0.thought: must be a boolean"},
		{body: `{"contents":[{"role":"user","parts":[{"text":"a","inlineData":{"mimeType":"image/png","data":"x"}}]}]}`, msg: "contents.0.parts.0: a part holds one of"},
		{body: `{"contents":[{"role":"user","parts":[{"inlineData":{"mimeType":"audio/wav","data":"x"}}]}]}`,
			msg: "contents.0.parts.0.inlineData.mimeType: audio/wav is not supported; inline data may be image/png, image/jpeg, image/gif, image/webp and application/pdf"},
		{body: `{"contents":[{"role":"user","parts":[{"inlineData":{"mimeType":"image/png"}}]}]}`, msg: "contents.0.parts.0.inlineData.data: must be a string (base64)"},
		{body: `{"contents":[{"role":"user","parts":[{"fileData":{"mimeType":"image/png","fileUri":"https://generativelanguage.googleapis.com/v1beta/files/abc"}}]}]}`,
			msg: "contents.0.parts.0.fileData.fileUri: files uploaded to the Gemini Files API cannot be read here"},
		{body: `{"contents":[{"role":"user","parts":[{"fileData":{"mimeType":"video/mp4","fileUri":"https://example.com/a.mp4"}}]}]}`,
			msg: "contents.0.parts.0.fileData.mimeType: only images are supported by URL"},
		{body: `{"contents":[{"role":"user","parts":[{"fileData":{"mimeType":"image/png","fileUri":"gs://b/a.png"}}]}]}`,
			msg: "contents.0.parts.0.fileData.fileUri: only http(s) URLs"},
		{body: `{"contents":[{"role":"model","parts":[{"executableCode":{"language":"PYTHON","code":"1"}}]}]}`,
			msg: "contents.0.parts.0: executableCode parts belong to server-side tools (code execution), which are not supported"},
		{body: `{"contents":[{"role":"user","parts":[{"functionCall":{"name":"f"}}]}]}`, msg: "contents.0.parts.0: functionCall parts belong to model turns"},
		{body: `{"contents":[{"role":"model","parts":[{"functionResponse":{"name":"f"}}]}]}`, msg: "contents.0.parts.0: functionResponse parts belong to user turns"},
		{body: `{"contents":[{"role":"model","parts":[{"inlineData":{"mimeType":"image/png","data":"x"}}]}]}`, msg: "contents.0.parts.0: model turns may hold only text"},
		{body: `{"contents":[{"role":"model","parts":[{"functionCall":{"args":{}}}]}]}`, msg: "contents.0.parts.0.functionCall.name: must be a non-empty string"},
		{body: `{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f","args":"{}"}}]}]}`, msg: "contents.0.parts.0.functionCall.args: must be an object"},
		{body: conv(`{"functionResponse":{"name":"g","response":{}}}`), msg: "contents.2.parts.0.functionResponse: no functionCall named g in the last model turn awaits a response"},
		{body: conv(`{"functionResponse":{"name":"f"}},{"functionResponse":{"name":"f"}}`), msg: "contents.2.parts.1.functionResponse: no functionCall named f"},
		{body: conv(`{"functionResponse":{"name":"f","response":"ok"}}`), msg: "contents.2.parts.0.functionResponse.response: must be an object"},
		{body: conv(`{"functionResponse":{"response":{}}}`), msg: "contents.2.parts.0.functionResponse.name: must be a non-empty string"},
		{body: conv(`{"functionResponse":{"name":"f","parts":[{"inlineData":{"mimeType":"text/csv","data":"x"}}]}}`),
			msg: "contents.2.parts.0.functionResponse.parts.0.inlineData.mimeType: text/csv is not supported"},
		{body: `{"systemInstruction":{"parts":[{"inlineData":{"mimeType":"image/png","data":"x"}}]},"contents":[{"parts":[{"text":"q"}]}]}`,
			msg: "systemInstruction.parts.0: only text parts are supported in systemInstruction"},
		{body: `{"systemInstruction":3,"contents":[{"parts":[{"text":"q"}]}]}`, msg: "systemInstruction: must be a Content object"},
		{body: `{"cachedContent":"cachedContents/abc","contents":[{"parts":[{"text":"q"}]}]}`,
			msg: "cachedContent: Timeblock keeps no cached content; send the whole conversation in contents"},
		{body: userText("x") + `,"tools":[{"googleSearch":{}}]}`,
			msg: `tools.0: server-side tool "googleSearch" is not supported; declare the functions your client runs in functionDeclarations instead`},
		{body: userText("x") + `,"tools":[{"functionDeclarations":[{"name":"a"}]},{"code_execution":{}}]}`, msg: `tools.1: server-side tool "codeExecution" is not supported`},
		{body: userText("x") + `,"tools":{}}`, msg: "tools: must be an array"},
		{body: userText("x") + `,"tools":[{"functionDeclarations":[{"description":"d"}]}]}`, msg: "tools.0.functionDeclarations.0.name: must be a non-empty string"},
		{body: userText("x") + `,"tools":[{"functionDeclarations":[{"name":"a","parameters":{},"parametersJsonSchema":{}}]}]}`,
			msg: "tools.0.functionDeclarations.0: send parameters or parametersJsonSchema, not both"},
		{body: userText("x") + `,"tools":[{"functionDeclarations":[{"name":"a","parameters":{"type":"OBJECT","properties":[]}}]}]}`,
			msg: "tools.0.functionDeclarations.0.parameters.properties: must be an object of schemas"},
		{body: userText("x") + `,"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}}`, msg: "toolConfig.functionCallingConfig.mode: ANY requires a function"},
		{body: userText("x") + `,"toolConfig":{"functionCallingConfig":{"mode":"SOMETIMES"}}}`, msg: "toolConfig.functionCallingConfig.mode: must be AUTO, ANY, NONE or VALIDATED"},
		{body: userText("x") + `,"tools":[{"functionDeclarations":[{"name":"a"}]}],"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["a","zz"]}}}`,
			msg: "toolConfig.functionCallingConfig.allowedFunctionNames.1: no function named zz is declared in tools"},
		{body: withGen(`3`), msg: "generationConfig: must be an object"},
		{body: withGen(`{"temperature":1.5}`), msg: "generationConfig.temperature: must be between 0 and 1, got 1.5"},
		{body: withGen(`{"topP":"x"}`), msg: "generationConfig.topP: must be a number"},
		{body: withGen(`{"topK":-3}`), msg: "generationConfig.topK: must be a non-negative integer"},
		{body: withGen(`{"maxOutputTokens":0}`), msg: "generationConfig.maxOutputTokens: must be a positive integer"},
		{body: withGen(`{"stopSequences":"END"}`), msg: "generationConfig.stopSequences: must be an array of strings"},
		{body: withGen(`{"stopSequences":["a",1]}`), msg: "generationConfig.stopSequences.1: must be a string"},
		{body: withGen(`{"seed":"x"}`), msg: "generationConfig.seed: must be an integer"},
		{body: withGen(`{"presencePenalty":3}`), msg: "generationConfig.presencePenalty: must be between -2 and 2"},
		{body: withGen(`{"candidateCount":2}`), msg: "generationConfig.candidateCount: this model's upstream returns one candidate per request"},
		{body: withGen(`{"responseModalities":["TEXT","IMAGE"]}`), msg: "generationConfig.responseModalities: only text output is supported"},
		{body: withGen(`{"speechConfig":{"voiceConfig":{}}}`), msg: "generationConfig.speechConfig: audio output is not supported"},
		{body: withGen(`{"responseLogprobs":true}`), msg: "generationConfig.responseLogprobs: this model's upstream does not return log probabilities"},
		{body: withGen(`{"logprobs":3}`), msg: "generationConfig.logprobs: this model's upstream does not return log probabilities"},
		{body: withGen(`{"responseMimeType":"text/x.enum"}`), msg: "generationConfig.responseMimeType: must be text/plain or application/json"},
		{body: withGen(`{"responseSchema":{"type":"STRING"}}`), msg: "generationConfig.responseMimeType: a response schema needs responseMimeType application/json"},
		{body: withGen(`{"responseMimeType":"application/json","responseSchema":{},"responseJsonSchema":{}}`), msg: "generationConfig: send responseSchema or responseJsonSchema, not both"},
		{up: Messages, body: withGen(`{"responseMimeType":"application/json"}`), msg: "generationConfig.responseMimeType: this model's upstream can enforce only a JSON schema"},
		{body: withGen(`{"thinkingConfig":[]}`), msg: "generationConfig.thinkingConfig: must be an object"},
		{body: withGen(`{"thinkingConfig":{"thinkingBudget":-5}}`), msg: "generationConfig.thinkingConfig.thinkingBudget: must be an integer"},
		{body: withGen(`{"thinkingConfig":{"thinkingBudget":100,"thinkingLevel":"low"}}`), msg: "generationConfig.thinkingConfig: send thinkingBudget or thinkingLevel, not both"},
		{body: withGen(`{"thinkingConfig":{"thinkingLevel":"extreme"}}`), msg: "generationConfig.thinkingConfig.thinkingLevel: must be minimal, low, medium or high"},
		{body: withGen(`{"thinkingConfig":{"includeThoughts":"yes"}}`), msg: "generationConfig.thinkingConfig.includeThoughts: must be a boolean"},
	} {
		for _, up := range bothUpstreams {
			if c.up != Unknown && c.up != up {
				continue
			}
			out, _, err := TranslateCallRequest(Gemini, gemCall, []byte(c.body), &Config{Upstream: up}, nil, false)
			if err == nil {
				t.Errorf("→ %v: %s: no error; translated to %s", up, c.body, out)
				continue
			}
			if err.Status != 400 || err.Kind != InvalidRequest || !strings.HasPrefix(err.Message, c.msg) {
				t.Errorf("→ %v: %s:\n got %d %q\nwant 400 %q", up, c.body, err.Status, err.Message, c.msg)
			}
		}
	}
	// The path must name the model.
	if _, _, err := TranslateCallRequest(Gemini, Call{}, []byte(userText("x")+"}"), &Config{Upstream: Chat}, nil, false); err == nil ||
		!strings.HasPrefix(err.Message, "the request path must name the model") {
		t.Errorf("no model: %v", err)
	}
}

func TestGeminiKey(t *testing.T) {
	for in, want := range map[string]string{
		"contents": "contents", "inline_data": "inlineData", "function_calling_config": "functionCallingConfig",
		"some_new_thing": "someNewThing", "_x": "_x", "topK": "topK",
	} {
		wantEq(t, in, geminiKey(in), want)
	}
	if n := testing.AllocsPerRun(100, func() { geminiKey("inline_data"); geminiKey("inlineData") }); n != 0 {
		t.Errorf("geminiKey of a known name allocates %v times", n)
	}
}

func TestCountGeminiTokens(t *testing.T) {
	inner := `{"model":"models/x","systemInstruction":{"parts":[{"text":"You are a careful assistant."}]},
		"contents":[{"role":"user","parts":[{"text":"Summarise the attached report in three bullet points, please."}]}],
		"tools":[{"functionDeclarations":[{"name":"search","description":"Search the web","parameters":{"type":"OBJECT","properties":{"q":{"type":"STRING"}}}}]}]}`
	cfg := &Config{Upstream: Chat}
	wrapped, err := CountGeminiTokens([]byte(`{"generateContentRequest":`+inner+`}`), "m", cfg)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := CountGeminiTokens([]byte(inner), "m", cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantEq(t, "both shapes", wrapped, direct)
	// The estimate is the messages client's for the same conversation.
	msgs := `{"model":"m","max_tokens":1,"system":"You are a careful assistant.",
		"messages":[{"role":"user","content":[{"type":"text","text":"Summarise the attached report in three bullet points, please."}]}],
		"tools":[{"name":"search","description":"Search the web","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}}]}`
	want, cerr := CountTokens([]byte(msgs))
	if cerr != nil {
		t.Fatal(cerr)
	}
	wantEq(t, "estimate", direct, want)
	if want < 100 {
		t.Errorf("estimate %d leaves the tools out", want)
	}
	// Contents alone.
	n, err := CountGeminiTokens([]byte(`{"contents":[{"parts":[{"text":"hello there"}]}]}`), "", cfg)
	if err != nil || n <= tokensReply {
		t.Errorf("contents alone: %d %v", n, err)
	}
	// Errors name the member in the body sent.
	for body, msg := range map[string]string{
		`{"generateContentRequest":{"contents":[]}}`: "generateContentRequest.contents: must not be empty",
		`{"generateContentRequest":[]}`:              "generateContentRequest: must be an object",
		`{"contents":[{"role":"x","parts":[]}]}`:     "contents.0.role: must be user or model",
		`[]`:                                         "request body must be a JSON object",
	} {
		if _, err := CountGeminiTokens([]byte(body), "m", cfg); err == nil || err.Status != 400 || err.Message[:len(msg)] != msg {
			t.Errorf("%s: %v, want %q", body, err, msg)
		}
	}
	wantEq(t, "answer", string(AppendGeminiCountTokens([]byte("x"), 42)), `x{"totalTokens":42}`)
}

// FuzzGeminiRequest: any body, either upstream: no panic; a translation is
// one JSON object, an error a 4xx.
func FuzzGeminiRequest(f *testing.F) {
	f.Add([]byte(geminiConversation))
	f.Add([]byte(`{"contents":[{"role":"user","parts":[{"text":"q"}]},{"role":"model","parts":[{"functionCall":{"name":"f"}}]},{"role":"function","parts":[{"functionResponse":{"name":"f","response":{"output":"x"},"parts":[{"inlineData":{"mimeType":"image/png","data":"QQ=="}}]}}]}],"generationConfig":{"responseMimeType":"application/json","responseSchema":{"type":"OBJECT","nullable":true,"anyOf":[{"type":"STRING"}]},"thinkingConfig":{"thinkingBudget":-1}}}`))
	f.Add([]byte(`{"contents":[{"parts":[{"text":"hi","thought":true},{"thoughtSignature":"x"}]}],"tool_config":{"function_calling_config":{"mode":"ANY","allowed_function_names":["a"]}},"tools":[{"function_declarations":[{"name":"a"}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, cfg := range fuzzConfigs {
			for _, stream := range [...]bool{false, true} {
				out, _, err := TranslateCallRequest(Gemini, Call{Model: "m", Stream: stream}, body, &cfg, nil, false)
				if err != nil {
					if err.Status < 400 || err.Status > 499 {
						t.Fatalf("status %d: %s", err.Status, err.Message)
					}
					continue
				}
				if !json.Valid(out) || !gjson.ParseBytes(out).IsObject() {
					t.Fatalf("→ %v: not a JSON object: %s\nbody: %s", cfg.Upstream, out, body)
				}
			}
		}
	})
}

// TestGeminiFieldRules: each Gemini row of the field rule is what the
// translator does, top-level or nested, for both upstreams.
func TestGeminiFieldRules(t *testing.T) {
	n := 0
	for i := range fieldRules {
		r := &fieldRules[i]
		if r.client != Gemini {
			continue
		}
		n++
		v := `{"__x":1}`
		switch r.name {
		case "generationConfig.candidateCount", "generationConfig.logprobs":
			v = `3`
		case "generationConfig.responseLogprobs":
			v = `true`
		case "generationConfig.responseModalities":
			v = `["AUDIO"]`
		}
		body := userText("x") + `,"` + r.name + `":` + v + `}`
		if parent, name, nested := strings.Cut(r.name, "."); nested {
			body = userText("x") + `,"` + parent + `":{"` + name + `":` + v + `}}`
		}
		for _, up := range bothUpstreams {
			_, _, err := TranslateCallRequest(Gemini, gemCall, []byte(body), &Config{Upstream: up}, nil, false)
			switch {
			case r.action == fieldHint && err != nil:
				t.Errorf("%s is a hint, refused: %v", r.name, err)
			case r.action != fieldHint && (err == nil || !strings.HasPrefix(err.Message, r.name+": ")):
				t.Errorf("%s is refused by the table, translator says %v", r.name, err)
			}
		}
	}
	if n == 0 {
		t.Fatal("no Gemini rows")
	}
}

// A Gemini request the gate has checked is translated without an
// allocation into a buffer large enough (the parts and calls a conversation
// is read into come from a pool).
func TestGeminiRequestAllocs(t *testing.T) {
	body := []byte(`{"systemInstruction":{"parts":[{"text":"be brief"}]},"contents":[{"role":"user","parts":[{"text":"weather?"}]},` +
		`{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"output":"sunny"}}}]}],` +
		`"tools":[{"functionDeclarations":[{"name":"get_weather","parameters":{"type":"OBJECT","properties":{"city":{"type":"STRING"}}}}]}],` +
		`"generationConfig":{"maxOutputTokens":256,"temperature":0.7}}`)
	for _, up := range bothUpstreams {
		cfg := Config{Upstream: up}
		buf := make([]byte, 0, 8192)
		if n := testing.AllocsPerRun(100, func() {
			buf, _, _ = TranslateCallRequest(Gemini, Call{Model: "m"}, body, &cfg, buf[:0], true)
		}); n != 0 {
			t.Errorf("to %s: %v allocations per request", up, n)
		}
	}
}
