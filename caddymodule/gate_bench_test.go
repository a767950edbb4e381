package caddymodule

// Benchmarks of Timeblock's own handlers on the hot path: the gate alone,
// and gate → translate → an instant upstream, for small requests and for a
// stream. Caddy's own work (connections, routing, reverse_proxy) is left
// out; examples/loadbench measures the whole server against a bare
// reverse_proxy.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// caddyRequest gives r0 what Caddy's server gives every request before the
// handlers run: a fresh replacer with the HTTP placeholders mapped, a vars
// map, its own URL, and the body. The requests share r0's header map, so the credential
// the gate removed from the last one is put back (without allocating).
func caddyRequest(r0 *http.Request, body *strings.Reader, text string) *http.Request {
	if strings.HasSuffix(r0.URL.Path, "/v1/messages") {
		r0.Header["X-Api-Key"] = benchAPIKey
	} else {
		r0.Header["Authorization"] = benchBearer
	}
	repl := caddy.NewReplacer()
	repl.Map(func(string) (any, bool) { return nil, false })
	ctx := context.WithValue(r0.Context(), caddy.ReplacerCtxKey, repl)
	ctx = context.WithValue(ctx, caddyhttp.VarsCtxKey, make(map[string]any, 4))
	r := r0.WithContext(ctx)
	u := *r0.URL // the translator rewrites the path
	r.URL = &u
	body.Reset(text)
	r.Body = io.NopCloser(body)
	r.ContentLength = int64(len(text))
	return r
}

// The credential headers of the benchmarks' requests.
var (
	benchAPIKey = []string{tKey}
	benchBearer = []string{"Bearer " + tKey}
)

// benchRequest is an admitted request of the gate fixture's key, with the
// headers an SDK sends (the key is set by caddyRequest).
func benchRequest(path, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	if strings.HasSuffix(path, "/v1/messages") {
		r.Header.Set("Anthropic-Version", "2023-06-01")
	}
	return r
}

const (
	benchGemini = `{"systemInstruction":{"parts":[{"text":"You are a concise assistant."}]},` +
		`"contents":[{"role":"user","parts":[{"text":"Write a haiku about load balancers."}]}],` +
		`"generationConfig":{"maxOutputTokens":256,"temperature":0.7}}`
	benchChat = `{"model":"qwen3-32b","messages":[{"role":"system","content":"You are a concise assistant."},` +
		`{"role":"user","content":"Write a haiku about load balancers."}],"max_tokens":256,"temperature":0.7}`
	benchMessages = `{"model":"qwen3-32b","max_tokens":256,"system":"You are a concise assistant.",` +
		`"messages":[{"role":"user","content":"Write a haiku about load balancers."}],"temperature":0.7}`
	benchResponses = `{"model":"qwen3-32b","max_output_tokens":256,"instructions":"You are a concise assistant.",` +
		`"input":"Write a haiku about load balancers.","temperature":0.7}`
	benchCompletion = `{"id":"chatcmpl-5f0c1b7e9a2d4c3b8e6f","object":"chat.completion","created":1767225600,"model":"qwen3-32b",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Packets drift through the night, one server breathes while another rests.",` +
		`"tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],` +
		`"usage":{"prompt_tokens":31,"total_tokens":81,"completion_tokens":50},"prompt_logprobs":null}`
)

// BenchmarkGateServeHTTP is a whole admitted request through the gate on a
// cache hit: headers, body read and scan, admission, placeholders, next.
// "setup" is what the benchmark itself spends building each request the
// way Caddy does; subtract it.
func BenchmarkGateServeHTTP(b *testing.B) {
	f := newGateFixture(b, 0)
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error { return nil })
	w := &discardWriter{h: http.Header{}}
	r0 := benchRequest(chatPath, benchChat)
	body := strings.NewReader(benchChat)
	b.Run("setup", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := next.ServeHTTP(w, caddyRequest(r0, body, benchChat)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := f.gate.ServeHTTP(w, caddyRequest(r0, body, benchChat), next); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGateTranslate is a small non-streaming request through the gate
// and the translator to an upstream that answers at once.
func BenchmarkGateTranslate(b *testing.B) {
	f := newGateFixture(b, 0)
	tr := &Translate{Upstream: "chat"}
	if err := tr.Provision(caddy.Context{}); err != nil {
		b.Fatal(err)
	}
	upstream := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(benchCompletion)))
		w.WriteHeader(http.StatusOK)
		_, err := io.WriteString(w, benchCompletion)
		return err
	})
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error { return tr.ServeHTTP(w, r, upstream) })
	// The responses body with its input as a list of items, which a
	// history joins.
	responses := strings.Replace(benchResponses, `"input":"Write a haiku about load balancers."`,
		`"input":[{"role":"user","content":"Write a haiku about load balancers."}]`, 1)
	f.gate.maxBody = 1 << 20
	for _, c := range []struct{ name, path, body string }{
		{"chat_to_chat", chatPath, benchChat},
		{"messages_to_chat", messagesPath, benchMessages},
		{"chat_to_chat_20k_history", chatPath, withHistory(benchChat, `"messages":[`)},
		{"messages_to_chat_20k_history", messagesPath, withHistory(benchMessages, `"messages":[`)},
		{"responses_to_chat_20k_history", responsesPath, withHistory(responses, `"input":[`)},
		{"gemini_to_chat", "/gemini/v1beta/models/qwen3-32b:generateContent", benchGemini},
	} {
		b.Run(c.name, func(b *testing.B) {
			w := &discardWriter{h: http.Header{}}
			r0 := benchRequest(c.path, c.body)
			body := strings.NewReader(c.body)
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				if err := f.gate.ServeHTTP(w, caddyRequest(r0, body, c.body), next); err != nil || w.code != http.StatusOK {
					b.Fatal(w.code, err)
				}
			}
		})
	}
}

// withHistory puts about 20 KB of conversation (alternating user and
// assistant turns of 530 bytes) into body right after the text after, as
// examples/loadbench's -history 20000 does.
func withHistory(body, after string) string {
	const para = "The build failed because the linker could not find the symbol init_module; " +
		"check the Makefile and the include paths, then run make again with V=1 to see the full command line. "
	var turns strings.Builder
	for i := 0; turns.Len() < 20000; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		turns.WriteString(`{"role":"` + role + `","content":` + strconv.Quote(strings.Repeat(para, 3)) + `},`)
	}
	i := strings.Index(body, after) + len(after)
	return body[:i] + turns.String() + body[i:]
}

// BenchmarkGateTranslateStream is a streamed messages request through the
// gate and the translator from a chat upstream sending 50 token chunks,
// each written and flushed on its own.
func BenchmarkGateTranslateStream(b *testing.B) {
	const chunks = 50
	f := newGateFixture(b, 0)
	tr := &Translate{Upstream: "chat"}
	if err := tr.Provision(caddy.Context{}); err != nil {
		b.Fatal(err)
	}
	const id = `"id":"chatcmpl-5f0c","object":"chat.completion.chunk","created":1767225600,"model":"qwen3-32b"`
	events := [][]byte{[]byte(`data: {` + id + `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n")}
	for range chunks {
		events = append(events, []byte(`data: {`+id+`,"choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}`+"\n\n"))
	}
	events = append(events,
		[]byte(`data: {`+id+`,"choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop"}]}`+"\n\n"),
		[]byte(`data: {`+id+`,"choices":[],"usage":{"prompt_tokens":31,"total_tokens":81,"completion_tokens":50}}`+"\n\n"),
		[]byte("data: [DONE]\n\n"))
	upstream := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return err
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for _, e := range events {
			if _, err := w.Write(e); err != nil {
				return err
			}
			if err := rc.Flush(); err != nil {
				return err
			}
		}
		return nil
	})
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error { return tr.ServeHTTP(w, r, upstream) })
	for _, c := range []struct{ name, path, body string }{
		{"messages", messagesPath, benchMessages},
		{"responses", responsesPath, benchResponses},
	} {
		b.Run(c.name, func(b *testing.B) {
			text := strings.Replace(c.body, `"temperature"`, `"stream":true,"temperature"`, 1)
			w := &discardWriter{h: http.Header{}}
			r0 := benchRequest(c.path, text)
			body := strings.NewReader(text)
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				if err := f.gate.ServeHTTP(w, caddyRequest(r0, body, text), next); err != nil || w.code != http.StatusOK {
					b.Fatal(w.code, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(events)), "ns/chunk")
		})
	}
}
