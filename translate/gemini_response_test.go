package translate

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// geminiWhole translates a whole upstream answer for a Gemini client whose
// request path named pathModel.
func geminiWhole(t *testing.T, up Format, in string, prefilled bool) gjson.Result {
	t.Helper()
	req := Request{Reasoning: prefilled, call: Call{Model: "gemini-path-model"}}
	out, err := TranslateResponse(Gemini, up, []byte(in), req, &Config{Upstream: up, ThinkPrefilled: prefilled}, []byte("keep"))
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
	r := gjson.ParseBytes(out)
	checkGeminiResponse(t, r, true)
	return r
}

// checkGeminiResponse checks what every GenerateContentResponse the writers
// make must hold; final is the whole answer, or a stream's last event.
func checkGeminiResponse(t testing.TB, r gjson.Result, final bool) {
	t.Helper()
	cands := r.Get("candidates").Array()
	if len(cands) != 1 {
		t.Fatalf("candidates: %s", r.Raw)
	}
	c := cands[0]
	if c.Get("content.role").String() != "model" || c.Get("index").Raw != "0" {
		t.Errorf("candidate: %s", c.Raw)
	}
	parts := c.Get("content.parts").Array()
	if len(parts) == 0 {
		t.Errorf("no parts: %s", c.Raw)
	}
	for _, p := range parts {
		switch {
		case p.Get("functionCall").Exists():
			fc := p.Get("functionCall")
			if fc.Get("name").String() == "" || fc.Get("id").String() == "" || !fc.Get("args").IsObject() {
				t.Errorf("functionCall: %s", p.Raw)
			}
		case p.Get("text").Type != gjson.String:
			t.Errorf("part: %s", p.Raw)
		case p.Get("thought").Exists() && p.Get("thought").Raw != "true":
			t.Errorf("thought: %s", p.Raw)
		}
	}
	if got := c.Get("finishReason").Exists(); got != final {
		t.Errorf("finishReason present = %v: %s", got, c.Raw)
	}
	if !final && r.Get("usageMetadata").Exists() {
		t.Errorf("usage before the end: %s", r.Raw)
	}
	u := r.Get("usageMetadata")
	u.ForEach(func(k, v gjson.Result) bool {
		if v.Int() <= 0 {
			t.Errorf("usage %s = %s: zero counts are left out", k, v.Raw)
		}
		return true
	})
	if u.Exists() && u.Get("totalTokenCount").Int() != u.Get("promptTokenCount").Int()+u.Get("candidatesTokenCount").Int()+u.Get("thoughtsTokenCount").Int() {
		t.Errorf("total: %s", u.Raw)
	}
	if r.Get("modelVersion").String() == "" || r.Get("responseId").String() == "" {
		t.Errorf("modelVersion, responseId: %s", r.Raw)
	}
}

// geminiParts sums up a response's (or stream's) parts.
type geminiParts struct {
	thoughts, text string
	calls          []gjson.Result // the functionCall objects
	kinds          []string       // per part: thought, text, call
}

func (g *geminiParts) add(r gjson.Result) {
	for _, p := range r.Get("candidates.0.content.parts").Array() {
		switch {
		case p.Get("functionCall").Exists():
			g.calls = append(g.calls, p.Get("functionCall"))
			g.kinds = append(g.kinds, "call")
		case p.Get("thought").Bool():
			g.thoughts += p.Get("text").String()
			g.kinds = append(g.kinds, "thought")
		default:
			if p.Get("text").String() != "" {
				g.text += p.Get("text").String()
				g.kinds = append(g.kinds, "text")
			}
		}
	}
}

func partsOf(r gjson.Result) geminiParts {
	var g geminiParts
	g.add(r)
	return g
}

func TestGeminiResponseFixtures(t *testing.T) {
	for _, c := range responseFixtures {
		t.Run(c.name, func(t *testing.T) {
			in := readFile(t, filepath.Join("testdata", "responses", c.name+".json"))
			r := geminiWhole(t, c.up, string(in), false)
			compareJSON(t, filepath.Join("testdata", "gemini", c.name+".want.json"), []byte(r.Raw))
		})
	}
}

func TestGeminiResponseContent(t *testing.T) {
	fixture := func(name string) string {
		return string(readFile(t, filepath.Join("testdata", "responses", name+".json")))
	}
	t.Run("chat: reasoning_content, text, call", func(t *testing.T) {
		r := geminiWhole(t, Chat, fixture("vllm_reasoning_tool"), false)
		g := partsOf(r)
		wantEq(t, "kinds", strings.Join(g.kinds, ","), "thought,text,call")
		wantEq(t, "finish", r.Get("candidates.0.finishReason").String(), "STOP")
		wantEq(t, "model", r.Get("modelVersion").String(), gjson.Get(fixture("vllm_reasoning_tool"), "model").String())
	})
	t.Run("chat: reasoning member, tool turn called stop", func(t *testing.T) {
		r := geminiWhole(t, Chat, fixture("ollama_tool_stop"), false)
		g := partsOf(r)
		wantEq(t, "thoughts", g.thoughts, "Call the tool.")
		wantEq(t, "kinds", strings.Join(g.kinds, ","), "thought,call")
		wantEq(t, "call id", g.calls[0].Get("id").String(), "call_x1")
		wantEq(t, "args", g.calls[0].Get("args").Raw, `{"q":"go"}`)
		wantEq(t, "finish", r.Get("candidates.0.finishReason").String(), "STOP")
		// The thoughts are estimated as the Responses writer estimates them.
		out, _ := TranslateResponse(Responses, Chat, []byte(fixture("ollama_tool_stop")), Request{}, &Config{Upstream: Chat}, nil)
		thoughts := gjson.GetBytes(out, "usage.output_tokens_details.reasoning_tokens").Int()
		if thoughts == 0 || thoughts >= 15 {
			t.Fatalf("reasoning tokens %d", thoughts)
		}
		wantEq(t, "thoughts", r.Get("usageMetadata.thoughtsTokenCount").Int(), thoughts)
		wantEq(t, "candidates", r.Get("usageMetadata.candidatesTokenCount").Int(), 15-thoughts)
		wantEq(t, "total", r.Get("usageMetadata.totalTokenCount").Int(), int64(45))
	})
	t.Run("chat: <think> tags", func(t *testing.T) {
		g := partsOf(geminiWhole(t, Chat, fixture("llamacpp_think_inline"), false))
		wantEq(t, "thoughts", strings.TrimSpace(g.thoughts), "The capital of France is Paris.")
		wantEq(t, "text", strings.TrimSpace(g.text), "Paris.")
	})
	t.Run("chat: prefilled <think>", func(t *testing.T) {
		in := `{"id":"x","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Plan.</think>Done."},"finish_reason":"stop"}]}`
		g := partsOf(geminiWhole(t, Chat, in, true))
		wantEq(t, "thoughts", g.thoughts, "Plan.")
		wantEq(t, "text", g.text, "Done.")
	})
	t.Run("chat: cut by max tokens mid-call", func(t *testing.T) {
		r := geminiWhole(t, Chat, fixture("sglang_length_tool"), false)
		wantEq(t, "finish", r.Get("candidates.0.finishReason").String(), "MAX_TOKENS")
		wantEq(t, "args", r.Get("candidates.0.content.parts.0.functionCall.args").Raw, `{"arguments":"{\"query\": \"lo"}`)
	})
	t.Run("messages: thinking, text, tool_use", func(t *testing.T) {
		r := geminiWhole(t, Messages, fixture("anthropic_message"), false)
		g := partsOf(r)
		wantEq(t, "kinds", strings.Join(g.kinds, ","), "thought,text,call")
		wantEq(t, "thoughts", g.thoughts, "Weather needs a tool.")
		wantEq(t, "text", g.text, "I'll check.")
		wantEq(t, "call id", g.calls[0].Get("id").String(), "toolu_01A09q90qw90lq917835lq9")
		wantEq(t, "args", g.calls[0].Get("args").Raw, `{"location":"San Francisco, CA","unit":"celsius"}`)
		wantEq(t, "finish", r.Get("candidates.0.finishReason").String(), "STOP")
		wantEq(t, "prompt", r.Get("usageMetadata.promptTokenCount").Int(), int64(2095+1024))
		wantEq(t, "cached", r.Get("usageMetadata.cachedContentTokenCount").Int(), int64(1024))
		wantEq(t, "output", r.Get("usageMetadata.candidatesTokenCount").Int()+r.Get("usageMetadata.thoughtsTokenCount").Int(), int64(503))
		wantEq(t, "id", r.Get("responseId").String(), "01Aq9w938a90dw8q")
	})
	t.Run("messages: inline <think>, max tokens", func(t *testing.T) {
		r := geminiWhole(t, Messages, fixture("messages_inline_think"), false)
		g := partsOf(r)
		wantEq(t, "thoughts", g.thoughts, "Easy.")
		wantEq(t, "text", strings.TrimSpace(g.text), "Paris.")
		wantEq(t, "finish", r.Get("candidates.0.finishReason").String(), "MAX_TOKENS")
	})
	t.Run("finish reasons", func(t *testing.T) {
		for finish, want := range map[string]string{"stop": "STOP", "length": "MAX_TOKENS", "content_filter": "SAFETY", "tool_calls": "STOP"} {
			in := `{"id":"x","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":"` + finish + `"}]}`
			wantEq(t, finish, geminiWhole(t, Chat, in, false).Get("candidates.0.finishReason").String(), want)
		}
		in := `{"id":"x","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"No."},"finish_reason":"stop"}]}`
		r := geminiWhole(t, Chat, in, false)
		wantEq(t, "refusal", r.Get("candidates.0.finishReason").String(), "SAFETY")
		wantEq(t, "refusal text", partsOf(r).text, "No.")
	})
	t.Run("arguments", func(t *testing.T) {
		in := `{"id":"x","model":"","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
			`{"id":"c1","type":"function","function":{"name":"a","arguments":"{\n  \"k\": [1, 2],\n  \"s\": \"x y\"\n}"}},` +
			`{"id":"c2","type":"function","function":{"name":"b","arguments":"[1,2]"}},` +
			`{"id":"c3","type":"function","function":{"name":"c","arguments":""}},` +
			`{"id":"c4","type":"function","function":{"name":"d","arguments":{"o": 1}}},` +
			`{"id":"c5","type":"function","function":{"name":"","arguments":"{}"}},` +
			`{"type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":0}}`
		r := geminiWhole(t, Chat, in, false)
		g := partsOf(r)
		if len(g.calls) != 5 {
			t.Fatalf("calls (the nameless one dropped): %s", r.Raw)
		}
		wantEq(t, "object, compacted", g.calls[0].Get("args").Raw, `{"k":[1,2],"s":"x y"}`)
		wantEq(t, "not an object", g.calls[1].Get("args").Raw, `{"arguments":"[1,2]"}`)
		wantEq(t, "none", g.calls[2].Get("args").Raw, `{}`)
		wantEq(t, "the object itself", g.calls[3].Get("args").Raw, `{"o":1}`)
		if id := g.calls[4].Get("id").String(); !strings.HasPrefix(id, "call_") || len(id) < 10 {
			t.Errorf("made-up id %q", id)
		}
		wantEq(t, "kinds", strings.Join(g.kinds, ","), "call,call,call,call,call")
		wantEq(t, "model from the path", r.Get("modelVersion").String(), "gemini-path-model")
		wantEq(t, "zero counts left out", r.Get("usageMetadata").Raw, `{"promptTokenCount":5,"totalTokenCount":5}`)
	})
	t.Run("empty answer, no usage", func(t *testing.T) {
		r := geminiWhole(t, Chat, `{"choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}]}`, false)
		wantEq(t, "parts", r.Get("candidates.0.content.parts").Raw, `[{"text":""}]`)
		wantEq(t, "usage", r.Get("usageMetadata").Exists(), false)
		if len(r.Get("responseId").String()) < 8 {
			t.Errorf("responseId %s", r.Get("responseId").Raw)
		}
	})
}
