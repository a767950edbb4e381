package caddymodule

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
)

// A Responses client on a chat upstream, streaming: path and body rewritten,
// the chat stream answered as Responses events.
func TestTranslateResponsesStream(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate chat")
	body := `{"model":"qwen3","stream":true,"instructions":"be brief","input":[{"role":"user","content":"Hi"}],"reasoning":{"effort":"high","summary":"auto"},"tools":[{"type":"web_search"}],"store":false}`
	r := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(body))
	w := httptest.NewRecorder()
	var seen http.Request
	var seenBody []byte
	if err := tr.ServeHTTP(w, r, upstreamSSE(t, &seen, &seenBody, chatEvents, nil)); err != nil {
		t.Fatal(err)
	}
	up := gjson.ParseBytes(seenBody)
	if seen.URL.Path != "/v1/chat/completions" || up.Get("messages.0.content").String() != "be brief" || up.Get("messages.1.content").String() != "Hi" ||
		up.Get("reasoning_effort").String() != "high" || !up.Get("stream_options.include_usage").Bool() || up.Get("tools").Exists() || up.Get("input").Exists() {
		t.Errorf("upstream request %s: %s", seen.URL.Path, seenBody)
	}
	if ct := w.Result().Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("content type %q", ct)
	}
	out := w.Body.String()
	for _, want := range []string{"event: response.created", `"delta":"Think."`, "event: response.output_text.delta", `"delta":"Hi!"`,
		"event: response.completed", `"input_tokens":5`, `"output_tokens":4`} {
		if !strings.Contains(out, want) {
			t.Errorf("client stream lacks %s:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(out, "event: response.created\n") || !w.Flushed {
		t.Errorf("stream start %.60q, flushed %v", out, w.Flushed)
	}
}

// A chat body built from a Responses request gets the gate's boost as
// priority; a priority the client sent does not go upstream.
func TestTranslateResponsesBoost(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate chat")
	for _, c := range []struct {
		boost any
		want  any
	}{{3, float64(-3)}, {0, nil}, {nil, nil}} {
		body := []byte(`{"model":"m","input":"Hi","priority":-100}`)
		r := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader("not read"))
		vars := map[string]any{VarBody: gateBody(body)}
		if c.boost != nil {
			vars[VarBoost] = c.boost
		}
		r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars))
		var up gjson.Result
		next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			b, _ := io.ReadAll(r.Body)
			up = gjson.ParseBytes(b)
			w.WriteHeader(http.StatusNoContent)
			return nil
		})
		if err := tr.ServeHTTP(httptest.NewRecorder(), r, next); err != nil {
			t.Fatal(err)
		}
		if got := up.Get("priority").Value(); got != c.want || up.Get("model").String() != "m" {
			t.Errorf("boost %v: upstream body %s", c.boost, up.Raw)
		}
	}
}

// A Responses client on a messages upstream, whole: the response object;
// upstream errors and bad requests in the chat error shape.
func TestTranslateResponsesWholeAndErrors(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate messages")
	body := `{"model":"m","input":"Hi","max_output_tokens":50}`
	upstream := func(status int, resp string, seen *[]byte) caddyhttp.Handler {
		return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			if seen != nil {
				*seen, _ = io.ReadAll(r.Body)
			}
			if r.URL.Path != "/v1/messages" || r.Header.Get("anthropic-version") == "" {
				t.Errorf("upstream request %s %v", r.URL.Path, r.Header)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, err := io.WriteString(w, resp)
			return err
		})
	}
	w := httptest.NewRecorder()
	var seen []byte
	msg := `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`
	if err := tr.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(body)), upstream(200, msg, &seen)); err != nil {
		t.Fatal(err)
	}
	if up := gjson.ParseBytes(seen); up.Get("max_tokens").Int() != 50 || up.Get("messages.0.content.0.text").String() != "Hi" {
		t.Errorf("upstream body %s", seen)
	}
	got := gjson.Parse(w.Body.String())
	if w.Code != 200 || got.Get("object").String() != "response" || got.Get("id").String() != "resp_1" ||
		got.Get("output.0.content.0.text").String() != "Hello" || got.Get("usage.total_tokens").Int() != 4 || got.Get("status").String() != "completed" {
		t.Errorf("whole response %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	if err := tr.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(body)),
		upstream(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, nil)); err != nil {
		t.Fatal(err)
	}
	if w.Code != 529 || gjson.Get(w.Body.String(), "error.message").String() != "Overloaded" || gjson.Get(w.Body.String(), "error.type").String() != "overloaded_error" {
		t.Errorf("error response %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	called := false
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { called = true; return nil })
	if err := tr.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(`{"model":"m","input":"x","previous_response_id":"resp_1"}`)), next); err != nil {
		t.Fatal(err)
	}
	if called || w.Code != 400 || !strings.Contains(gjson.Get(w.Body.String(), "error.message").String(), "previous_response_id") {
		t.Errorf("bad request: called=%v %d %s", called, w.Code, w.Body)
	}
}

func TestTranslateResponsesBrokenStream(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate chat")
	r := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(`{"model":"m","stream":true,"input":"Hi"}`))
	w := httptest.NewRecorder()
	var seen http.Request
	var seenBody []byte
	if err := tr.ServeHTTP(w, r, upstreamSSE(t, &seen, &seenBody, chatEvents[:3], errors.New("connection reset by peer"))); err != nil {
		t.Fatalf("a failed stream returns %v; the client already has its error events", err)
	}
	out := w.Body.String()
	if !strings.Contains(out, "event: error\n") || !strings.HasSuffix(out, "\n\n") || !strings.Contains(out, "event: response.failed\n") || strings.Contains(out, "response.completed") {
		t.Errorf("client stream:\n%s", out)
	}
}
