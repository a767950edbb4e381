package e2e_test

// One validation for every inference endpoint (issue 14, finding 4): what
// a translation refuses, a pass-through refuses too — through a real Caddy,
// answered 400 in the endpoint's own error format, and never sent to the
// model server.

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

func TestValidationPassThrough(t *testing.T) {
	rec := newUpstreamRecorder(t)
	cfg := strings.ReplaceAll(credentialsCaddyfile, "%RECORDER%", strings.TrimPrefix(rec.srv.URL, "http://"))
	c := e2e.Start(t, cfg, e2e.WithEnv(gateSecret, "MODEL_SERVER_KEY="+modelServerKey))
	key := allBlocksKey(t, c, "open")

	// The five shapes of the finding, in each client format.
	type shape struct{ name, body, field string }
	shapes := map[string][]shape{
		"/v1/chat/completions": {
			{"server-side tool", `{"model":"m-open","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305"}]}`, "tools.0"},
			{"role evil", `{"model":"m-open","messages":[{"role":"evil","content":"hi"}]}`, "messages.0.role"},
			{"messages of numbers", `{"model":"m-open","messages":[1,2,3]}`, "messages.0"},
			{"object content", `{"model":"m-open","messages":[{"role":"user","content":{"a":1}}]}`, "messages.0.content"},
			{"tools string", `{"model":"m-open","messages":[{"role":"user","content":"hi"}],"tools":"x"}`, "tools"},
		},
		"/compat/v1/messages": {
			{"server-side tool", `{"model":"m-open","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "tools.0"},
			{"role evil", `{"model":"m-open","max_tokens":8,"messages":[{"role":"evil","content":"hi"}]}`, "messages.0.role"},
			{"messages of numbers", `{"model":"m-open","max_tokens":8,"messages":[1,2,3]}`, "messages.0"},
			{"object content", `{"model":"m-open","max_tokens":8,"messages":[{"role":"user","content":{"a":1}}]}`, "messages.0.content"},
			{"tools string", `{"model":"m-open","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"tools":"x"}`, "tools"},
		},
		"/v1/responses": {
			{"hosted tool required", `{"model":"m-open","input":"hi","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search_preview"}}`, "tool_choice"},
			{"role evil", `{"model":"m-open","input":[{"role":"evil","content":"hi"}]}`, "input.0.role"},
			{"input of numbers", `{"model":"m-open","input":[1,2,3]}`, "input.0"},
			{"object content", `{"model":"m-open","input":[{"role":"user","content":{"a":1}}]}`, "input.0.content"},
			{"tools string", `{"model":"m-open","input":"hi","tools":"x"}`, "tools"},
		},
	}
	for _, upstream := range []string{"chat", "messages"} {
		for _, path := range []string{"/v1/chat/completions", "/compat/v1/messages", "/v1/responses"} {
			for _, s := range shapes[path] {
				t.Run(upstream+path+"/"+s.name, func(t *testing.T) {
					n := rec.count()
					status, body := sendRaw(t, c.URL()+path, s.body, "X-Upstream", upstream, "X-Api-Key", key, "Anthropic-Version", "2023-06-01")
					if status != http.StatusBadRequest {
						t.Fatalf("%d %s, want 400", status, body)
					}
					if got := rec.since(n); len(got) != 0 {
						t.Fatalf("the model server got %d requests (%v)", len(got), got)
					}
					b := gjson.Parse(body)
					msg := b.Get("error.message").Str
					if !strings.HasPrefix(msg, s.field+":") && !strings.HasPrefix(msg, s.field+".") {
						t.Errorf("message %q does not name %s", msg, s.field)
					}
					if path == "/compat/v1/messages" {
						if b.Get("type").Str != "error" || b.Get("error.type").Str != "invalid_request_error" {
							t.Errorf("not a messages error: %s", body)
						}
					} else if b.Get("error.type").Str != "invalid_request_error" || b.Get("type").Exists() {
						t.Errorf("not an OpenAI error: %s", body)
					}
				})
			}
		}
	}

	// A valid request of each kind still reaches the model server.
	for _, upstream := range []string{"chat", "messages"} {
		for path, body := range map[string]string{
			"/v1/chat/completions": `{"model":"m-open","max_tokens":8,"messages":[{"role":"developer","content":"d"},{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
			"/compat/v1/messages":  `{"model":"m-open","max_tokens":8,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
			"/v1/responses":        `{"model":"m-open","max_output_tokens":16,"input":"hi","tools":[{"type":"web_search"}]}`,
		} {
			n := rec.count()
			status, resp := sendRaw(t, c.URL()+path, body, "X-Upstream", upstream, "X-Api-Key", key, "Anthropic-Version", "2023-06-01")
			if status != http.StatusOK || len(rec.since(n)) != 1 {
				t.Errorf("%s to %s: %d %s, %d upstream requests", path, upstream, status, resp, len(rec.since(n)))
			}
		}
	}
}
