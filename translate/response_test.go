package translate

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestResponseFixtures(t *testing.T) {
	cases := []struct {
		name string
		up   Format
		req  Request
		cfg  Config
	}{
		{name: "vllm_reasoning_tool", up: Chat},
		{name: "llamacpp_think_inline", up: Chat},
		{name: "ollama_lone_close", up: Chat},
		{name: "ollama_tool_stop", up: Chat},
		{name: "sglang_length_tool", up: Chat},
		{name: "vllm_stop_string", up: Chat},
		{name: "anthropic_message", up: Messages},
		{name: "messages_inline_think", up: Messages},
		{name: "messages_stop_sequence", up: Messages},
	}
	for _, c := range cases {
		in := readFile(t, filepath.Join("testdata", "responses", c.name+".json"))
		for _, client := range []Format{Chat, Messages} {
			t.Run(c.name+"/"+client.String(), func(t *testing.T) {
				c.cfg.Upstream = c.up
				out, err := TranslateResponse(client, c.up, in, c.req, &c.cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				compareJSON(t, filepath.Join("testdata", "responses", c.name+"."+client.String()+".want.json"), out)
			})
		}
	}
}

func TestResponseBadBodies(t *testing.T) {
	cfg := &Config{Upstream: Chat}
	for _, body := range []string{``, `<html>bad gateway</html>`, `{"choices":[`, `{"error":{"message":"boom","type":"server_error"}}`} {
		for _, client := range []Format{Chat, Messages} {
			_, err := TranslateResponse(client, Chat, []byte(body), Request{}, cfg, nil)
			if err == nil || err.Status != 502 {
				t.Errorf("%q: %v", body, err)
			}
		}
	}
}

// A choice may list finish_reason before its message (llama.cpp's server
// does): the tool_calls it becomes is written as a member, not after a comma
// of its own.
func TestResponseFinishReasonFirst(t *testing.T) {
	body := []byte(`{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"finish_reason":"stop",` +
		`"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",` +
		`"function":{"name":"f","arguments":"{}"}}]}}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
	out, err := TranslateResponse(Chat, Chat, body, Request{}, &Config{Upstream: Chat}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if e := json.Unmarshal(out, &v); e != nil || len(v.Choices) != 1 || v.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("%s: %v, want one choice finishing with tool_calls", out, e)
	}
}

// A chat answer read for a messages or Responses client in one walk: the
// first choice counts, of the last choices member, and the members after
// the choices are still read.
func TestResponseChatReadsFirstChoice(t *testing.T) {
	for _, c := range []struct{ name, body, text, stop string }{
		{"choices again", `{"choices":[],"choices":[{"message":{"content":"a"},"finish_reason":"length"}],"model":"m2"}`, "a", "max_tokens"},
		{"empty after", `{"choices":[{"message":{"content":"a"}}],"choices":[],"model":"m2"}`, "", "end_turn"},
		{"first not an object", `{"choices":[7,{"message":{"content":"b"}}],"model":"m2"}`, "", "end_turn"},
		{"first message", `{"choices":[{"message":{"content":"a"},"message":{"content":"b"},"finish_reason":"stop","finish_reason":"length"},{"message":{"content":"c"}}],"model":"m2"}`, "a", "end_turn"},
		{"stop string", `{"choices":[{"stop_reason":null,"matched_stop":"END","message":{"content":"a"},"finish_reason":"stop"}],"model":"m2"}`, "a", "stop_sequence"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := TranslateResponse(Messages, Chat, []byte(c.body), Request{}, &Config{Upstream: Chat}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var v struct {
				Model   string
				Content []struct{ Type, Text string }
				Stop    string `json:"stop_reason"`
			}
			if e := json.Unmarshal(out, &v); e != nil {
				t.Fatalf("%s: %v", out, e)
			}
			text := ""
			for _, b := range v.Content {
				text += b.Text
			}
			if v.Model != "m2" || text != c.text || v.Stop != c.stop {
				t.Fatalf("%s: want model m2, text %q, stop_reason %s", out, c.text, c.stop)
			}
		})
	}
}

// A chat answer passes to a chat client member for member, also when a
// choice or its message has more members than the walk keeps on the stack.
func TestResponsePassManyMembers(t *testing.T) {
	var extra strings.Builder
	for i := range 14 {
		extra.WriteString(`"x` + strconv.Itoa(i) + `":` + strconv.Itoa(i) + `,`)
	}
	choice := `{` + extra.String() + `"index":0,"message":{` + extra.String() + `"role":"assistant","content":"hi"},"finish_reason":"stop"}`
	body := []byte(`{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[` + choice + `]}`)
	out, err := TranslateResponse(Chat, Chat, body, Request{}, &Config{Upstream: Chat}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got, want struct{ Choices []json.RawMessage }
	if e := json.Unmarshal(out, &got); e != nil || len(got.Choices) != 1 {
		t.Fatalf("%s: %v", out, e)
	}
	if e := json.Unmarshal(body, &want); e != nil {
		t.Fatal(e)
	}
	if string(got.Choices[0]) != string(want.Choices[0]) {
		t.Fatalf("choice changed:\n got %s\nwant %s", got.Choices[0], want.Choices[0])
	}
}

func TestTranslateErrorBody(t *testing.T) {
	cases := []struct {
		name         string
		client, up   Format
		status       int
		body         string
		wantKind     string
		wantContains string
	}{
		{"openai style", Messages, Chat, 400, `{"error":{"message":"max_tokens too large","type":"invalid_request_error","param":"max_tokens","code":null}}`, "invalid_request_error", "max_tokens too large"},
		{"vllm old style", Messages, Chat, 400, `{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}`, "invalid_request_error", "maximum context length"},
		{"ollama", Messages, Chat, 404, `{"error":"model \"llama9\" not found, try pulling it first"}`, "not_found_error", "llama9"},
		{"fastapi", Messages, Chat, 422, `{"detail":[{"loc":["body","messages"],"msg":"field required"}]}`, "invalid_request_error", "field required"},
		{"plain text", Messages, Chat, 503, "upstream connect error", "overloaded_error", "upstream connect error"},
		{"html", Chat, Messages, 502, "<html><body>Bad Gateway</body></html>", "api_error", "502 Bad Gateway"},
		{"anthropic", Chat, Messages, 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "overloaded_error", "Overloaded"},
		{"rate limit", Chat, Messages, 429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, "rate_limit_error", "slow down"},
		{"same format kept", Chat, Chat, 400, `{"error":{"message":"bad","type":"invalid_request_error","param":"x","code":"c"}}`, "invalid_request_error", "bad"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := TranslateErrorBody(c.client, c.up, c.status, []byte(c.body), nil)
			var v map[string]any
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			e, _ := v["error"].(map[string]any)
			if c.client == Messages && v["type"] != "error" {
				t.Errorf("messages body without type error: %s", out)
			}
			if e["type"] != c.wantKind || !strings.Contains(e["message"].(string), c.wantContains) {
				t.Errorf("got %s", out)
			}
			if c.client == Chat {
				if _, ok := e["param"]; !ok {
					t.Errorf("chat body without param: %s", out)
				}
			}
		})
	}
	if got := string(TranslateErrorBody(Chat, Chat, 400, []byte(cases[len(cases)-1].body), nil)); got != cases[len(cases)-1].body {
		t.Errorf("a chat error for a chat client was rewritten: %s", got)
	}
}

func TestErrorBodies(t *testing.T) {
	e := NewError(429, "", "lanes full")
	if e.Kind != RateLimit {
		t.Errorf("kind %s", e.Kind)
	}
	if got := string(e.Body(Messages)); got != `{"type":"error","error":{"type":"rate_limit_error","message":"lanes full"}}` {
		t.Errorf("messages body %s", got)
	}
	if got := string(e.Body(Chat)); got != `{"error":{"message":"lanes full","type":"rate_limit_error","param":null,"code":null}}` {
		t.Errorf("chat body %s", got)
	}
	if NewError(0, Overloaded, "x").Status != 529 {
		t.Errorf("overloaded status")
	}
}
