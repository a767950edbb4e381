package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func newTranslate(t *testing.T, caddyfileText string) *Translate {
	t.Helper()
	tr := new(Translate)
	if err := tr.UnmarshalCaddyfile(caddyfile.NewTestDispenser(caddyfileText)); err != nil {
		t.Fatal(err)
	}
	if err := tr.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestTranslateCaddyfile(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate chat {\n reasoning effort_scale low high max\n think_prefilled\n}")
	if tr.Reasoning != "effort_scale" || len(tr.EffortScale) != 3 || !tr.ThinkPrefilled || tr.Path != "/v1/chat/completions" {
		t.Errorf("parsed %+v", tr)
	}
	tr = newTranslate(t, "timeblock_translate messages {\n reasoning chat_template_kwargs\n think_prefilled false\n}")
	if tr.Reasoning != "chat_template_kwargs" || tr.ThinkPrefilled || tr.Path != "/v1/messages" {
		t.Errorf("parsed %+v", tr)
	}
	for _, bad := range []string{
		"timeblock_translate chat {\n reasoning\n}",
		"timeblock_translate chat {\n reasoning deepseek\n}",
		"timeblock_translate chat {\n reasoning openai low high\n}",
		"timeblock_translate chat {\n think_prefilled maybe\n}",
	} {
		if err := new(Translate).UnmarshalCaddyfile(caddyfile.NewTestDispenser(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// upstreamSSE answers like a chat server streaming, in small writes.
func upstreamSSE(t *testing.T, seen *http.Request, seenBody *[]byte, events []string, fail error) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		*seen = *r
		*seenBody, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Content-Length", "999")
		w.WriteHeader(http.StatusOK)
		for _, e := range events {
			for i := 0; i < len(e); i += 17 {
				if _, err := w.Write([]byte(e[i:min(i+17, len(e))])); err != nil {
					return err
				}
				if err := http.NewResponseController(w).Flush(); err != nil {
					t.Errorf("flush: %v", err)
				}
			}
		}
		return fail
	})
}

var chatEvents = []string{
	"data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"qwen3\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
	"data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"qwen3\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"Think.\"},\"finish_reason\":null}]}\n\n",
	"data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"qwen3\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi!\"},\"finish_reason\":null}]}\n\n",
	"data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"qwen3\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
	"data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"qwen3\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":4,\"total_tokens\":9}}\n\n",
	"data: [DONE]\n\n",
}

func TestTranslateServeStream(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate chat {\n path /upstream/v1/chat/completions\n reasoning chat_template_kwargs\n}")
	body := `{"model":"qwen3","max_tokens":64,"stream":true,"thinking":{"type":"enabled"},"messages":[{"role":"user","content":"Hi"}]}`
	r := httptest.NewRequest(http.MethodPost, "/compat/v1/messages", strings.NewReader(body))
	r.Header.Set("Accept-Encoding", "gzip")
	w := httptest.NewRecorder()
	var seen http.Request
	var seenBody []byte
	if err := tr.ServeHTTP(w, r, upstreamSSE(t, &seen, &seenBody, chatEvents, nil)); err != nil {
		t.Fatal(err)
	}
	if seen.URL.Path != "/upstream/v1/chat/completions" || seen.ContentLength != int64(len(seenBody)) || seen.Header.Get("Accept-Encoding") != "identity" {
		t.Errorf("upstream request: path %s, length %d/%d, accept-encoding %q", seen.URL.Path, seen.ContentLength, len(seenBody), seen.Header.Get("Accept-Encoding"))
	}
	var up map[string]any
	if err := json.Unmarshal(seenBody, &up); err != nil {
		t.Fatal(err)
	}
	if up["chat_template_kwargs"].(map[string]any)["enable_thinking"] != true || up["stream_options"].(map[string]any)["include_usage"] != true {
		t.Errorf("upstream body %s", seenBody)
	}
	res := w.Result()
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") || res.Header.Get("Content-Length") != "" {
		t.Errorf("headers %v", res.Header)
	}
	out := w.Body.String()
	for _, want := range []string{"event: message_start", `"id":"msg_7"`, `"type":"thinking_delta","thinking":"Think."`, `"text":"Hi!"`, `"stop_reason":"end_turn"`, `"output_tokens":4`, "event: message_stop"} {
		if !strings.Contains(out, want) {
			t.Errorf("client stream lacks %s:\n%s", want, out)
		}
	}
	if !w.Flushed {
		t.Error("the stream was never flushed")
	}
}

func TestTranslateServeBrokenStream(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate chat")
	body := `{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(body))
	w := httptest.NewRecorder()
	var seen http.Request
	var seenBody []byte
	err := tr.ServeHTTP(w, r, upstreamSSE(t, &seen, &seenBody, chatEvents[:3], errors.New("connection reset by peer")))
	if err != nil {
		t.Fatalf("a failed stream returns %v; the client already has its error event", err)
	}
	out := w.Body.String()
	if !strings.Contains(out, "event: error") || strings.Contains(out, "message_stop") {
		t.Errorf("client stream:\n%s", out)
	}
}

func TestTranslateServeWholeAndErrors(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate messages")
	body := `{"model":"m","messages":[{"role":"user","content":"Hi"}]}`
	upstream := func(status int, ct, resp string) caddyhttp.Handler {
		return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Type", ct)
			w.Header().Set("Content-Length", "3")
			w.WriteHeader(status)
			_, err := io.WriteString(w, resp)
			return err
		})
	}
	// A whole response, translated.
	w := httptest.NewRecorder()
	msg := `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`
	if err := tr.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)), upstream(200, "application/json", msg)); err != nil {
		t.Fatal(err)
	}
	var got struct {
		ID      string
		Choices []struct {
			Message struct{ Content string }
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.ID != "chatcmpl-1" || got.Choices[0].Message.Content != "Hello" || w.Header().Get("Content-Length") != strconv.Itoa(w.Body.Len()) {
		t.Errorf("whole response: %v %s (length %s)", err, w.Body, w.Header().Get("Content-Length"))
	}
	// An upstream error, in the client's format.
	w = httptest.NewRecorder()
	if err := tr.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)),
		upstream(529, "application/json", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)); err != nil {
		t.Fatal(err)
	}
	if w.Code != 529 || !strings.Contains(w.Body.String(), `"error":{"message":"Overloaded","type":"overloaded_error"`) {
		t.Errorf("error response %d %s", w.Code, w.Body)
	}
	// A bad request never reaches the upstream.
	w = httptest.NewRecorder()
	called := false
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { called = true; return nil })
	if err := tr.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[],"n":3}`)), next); err != nil {
		t.Fatal(err)
	}
	if called || w.Code != 400 || !strings.Contains(w.Body.String(), `"type":"invalid_request_error"`) {
		t.Errorf("bad request: called=%v %d %s", called, w.Code, w.Body)
	}
	// Other paths pass untouched.
	called = false
	if err := tr.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v1/models", nil), next); err != nil || !called {
		t.Errorf("other path: %v %v", err, called)
	}
}

// The gate's body and boost variables are used: no second read of the body,
// and priority on chat bodies built from messages requests.
func TestTranslateUsesGateVars(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate chat")
	body := []byte(`{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"Hi"}]}`)
	r := httptest.NewRequest(http.MethodPost, "/compat/v1/messages", strings.NewReader("not read"))
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{VarBody: gateBody(body), VarBoost: 2}))
	var up map[string]any
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &up); err != nil {
			t.Errorf("upstream body %s: %v", b, err)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
	if err := tr.ServeHTTP(httptest.NewRecorder(), r, next); err != nil {
		t.Fatal(err)
	}
	if up["priority"] != float64(-2) || up["model"] != "m" {
		t.Errorf("upstream body %v", up)
	}
}

// A chat body that passes through unchanged goes on as it came, whether the
// gate read it or translate did; one that changes goes as translated.
func TestTranslatePassThroughBody(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate chat")
	same := `{"model":"m","messages":[{"role":"user","content":"Hi"}],"max_tokens":9}`
	changed := `{"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":true}`
	for _, c := range []struct {
		name, body string
		fromGate   bool
		want       string
	}{
		{"unchanged, from the gate", same, true, same},
		{"unchanged, read here", same, false, same},
		{"changed, from the gate", changed, true, `{"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(c.body))
			if c.fromGate {
				fb := setBody(r, sharedBytes([]byte(c.body))) // as the gate leaves it
				r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{VarBody: fb}))
			}
			var got []byte
			var length int64
			next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				got, _ = io.ReadAll(r.Body)
				length = r.ContentLength
				w.WriteHeader(http.StatusNoContent)
				return nil
			})
			if err := tr.ServeHTTP(httptest.NewRecorder(), r, next); err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want || length != int64(len(c.want)) {
				t.Errorf("upstream got %d bytes (Content-Length %d):\n%s\nwant\n%s", len(got), length, got, c.want)
			}
		})
	}
}

// opLog is a ResponseWriter that records, in order, what reaches the client
// connection: each Write and each Flush. The header timer flushes from its
// own goroutine, hence the lock.
type opLog struct {
	mu     sync.Mutex
	header http.Header
	ops    []string // "flush" or the bytes written
}

func (o *opLog) Header() http.Header { return o.header }
func (o *opLog) WriteHeader(int)     {}
func (o *opLog) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ops = append(o.ops, string(p))
	return len(p), nil
}
func (o *opLog) Flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ops = append(o.ops, "flush")
}
func (o *opLog) snapshot() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.ops)
}

// upstreamBurst answers like reverse_proxy relaying a fast upstream: the
// headers, an early flush of them, then (after wait returns) a whole stream
// in one write.
func upstreamBurst(events []string, wait func()) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if err := http.NewResponseController(w).Flush(); err != nil {
			return err
		}
		wait()
		_, err := w.Write([]byte(strings.Join(events, "")))
		return err
	})
}

func TestTranslateStreamFirstEventLeavesAlone(t *testing.T) {
	// The burst is ready at once; the hold must not run out before the
	// first event is translated, however slow the machine is (-race, load).
	defer func(d time.Duration) { headerHold = d }(headerHold)
	headerHold = time.Minute
	tr := newTranslate(t, "timeblock_translate chat")
	body := `{"model":"qwen3","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`
	w := &opLog{header: http.Header{}}
	r := httptest.NewRequest(http.MethodPost, "/compat/v1/messages", strings.NewReader(body))
	if err := tr.ServeHTTP(w, r, upstreamBurst(chatEvents, func() {})); err != nil {
		t.Fatal(err)
	}
	ops := w.snapshot()
	if len(ops) < 4 {
		t.Fatalf("ops %q", ops)
	}
	// The early flush of the headers is held for the first event, which is
	// written and flushed before the rest of the burst is translated.
	if ops[0] == "flush" {
		t.Errorf("headers flushed on their own before the first event: %q", ops)
	}
	if !strings.Contains(ops[0], "event: message_start") || strings.Contains(ops[0], "Hi!") || ops[1] != "flush" {
		t.Errorf("first write %q, then %q; want message_start alone, flushed", ops[0], ops[1])
	}
	if all := strings.Join(ops, ""); !strings.Contains(all, `"text":"Hi!"`) || !strings.Contains(all, "event: message_stop") {
		t.Errorf("stream incomplete: %q", ops)
	}
}

func TestTranslateStreamReleasesHeldHeaders(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate chat")
	body := `{"model":"qwen3","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`
	w := &opLog{header: http.Header{}}
	r := httptest.NewRequest(http.MethodPost, "/compat/v1/messages", strings.NewReader(body))
	// An upstream still working on its first token: the client must get the
	// headers without waiting for it.
	waitForFlush := func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if ops := w.snapshot(); len(ops) > 0 {
				return
			}
		}
	}
	if err := tr.ServeHTTP(w, r, upstreamBurst(chatEvents, waitForFlush)); err != nil {
		t.Fatal(err)
	}
	ops := w.snapshot()
	if len(ops) < 2 || ops[0] != "flush" || !strings.Contains(ops[1], "event: message_start") {
		t.Errorf("want the held headers flushed before any event, got %q", ops)
	}
}

// reverse_proxy aborts a stream whose client left by flushing and
// panicking with http.ErrAbortHandler; the header timer the flush armed must
// not fire on the response net/http then closes.
func TestTranslateStreamAbortStopsHeaderTimer(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate chat")
	body := `{"model":"qwen3","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`
	w := &opLog{header: http.Header{}}
	r := httptest.NewRequest(http.MethodPost, "/compat/v1/messages", strings.NewReader(body))
	aborting := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush() // before any event: arms the timer
		panic(http.ErrAbortHandler)
	})
	func() {
		defer func() {
			if p := recover(); p != http.ErrAbortHandler {
				t.Fatalf("recovered %v, want http.ErrAbortHandler passed on", p)
			}
		}()
		tr.ServeHTTP(w, r, aborting)
	}()
	ended := len(w.snapshot())
	time.Sleep(20 * headerHold)
	if ops := w.snapshot(); len(ops) != ended {
		t.Errorf("the header timer reached the writer after the handler ended: %q", ops[ended:])
	}
}

func TestIsEventStream(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream":                  true,
		"text/event-stream; charset=utf-8":   true,
		"Text/Event-Stream;charset=UTF-8":    true,
		" text/event-stream ; charset=utf-8": true,
		"text/event-streams":                 false,
		"text/event-stream-x; a=b":           false,
		"application/json":                   false,
		"text/event":                         false,
		"":                                   false,
	} {
		if got := isEventStream(ct); got != want {
			t.Errorf("isEventStream(%q) = %v, want %v", ct, got, want)
		}
	}
}

// upstreamChunks answers like reverse_proxy relaying a stream chunk by
// chunk: each upstream read is written, then flushed.
func upstreamChunks(events []string) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for _, ev := range events {
			if _, err := w.Write([]byte(ev)); err != nil {
				return err
			}
			if err := rc.Flush(); err != nil {
				return err
			}
		}
		return nil
	})
}

func TestTranslateStreamFlushesEachEventOnce(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate chat")
	body := `{"model":"qwen3","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`
	w := &opLog{header: http.Header{}}
	r := httptest.NewRequest(http.MethodPost, "/compat/v1/messages", strings.NewReader(body))
	if err := tr.ServeHTTP(w, r, upstreamChunks(chatEvents)); err != nil {
		t.Fatal(err)
	}
	ops := w.snapshot()
	// Every write reaches the client flushed, and the relay's flush after
	// a write the translator already flushed adds no second one.
	for i, op := range ops {
		switch {
		case op != "flush" && (i+1 == len(ops) || ops[i+1] != "flush"):
			t.Errorf("write %d (%q) not flushed: %q", i, op, ops)
		case op == "flush" && (i == 0 || ops[i-1] == "flush"):
			t.Errorf("op %d: a flush with nothing written before it: %q", i, ops)
		}
	}
	if all := strings.Join(ops, ""); !strings.Contains(all, `"text":"Hi!"`) || !strings.Contains(all, "event: message_stop") {
		t.Errorf("stream incomplete: %q", ops)
	}
}

// An upstream that breaks off a held body leaves nothing behind for Caddy's
// error handling to answer with: not the upstream's Content-Length either.
func TestTranslateBrokenBodyLeavesNoLength(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate chat")
	broken := errors.New("upstream connection reset")
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "300")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"id":`)
		return broken
	})
	r := httptest.NewRequest(http.MethodPost, "/compat/v1/messages",
		strings.NewReader(`{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"Hi"}]}`))
	w := httptest.NewRecorder()
	if err := tr.ServeHTTP(w, r, next); !errors.Is(err, broken) {
		t.Fatalf("error %v, want the upstream's", err)
	}
	if w.Code != http.StatusOK || w.Body.Len() != 0 || w.Header().Get("Content-Length") != "" {
		t.Fatalf("wrote %d %q with Content-Length %q", w.Code, w.Body, w.Header().Get("Content-Length"))
	}
}

// gateBody is body as the gate leaves it in VarBody, without making it the
// request's body: a translator that read the request instead would fail.
func gateBody(body []byte) *forwardedBody {
	fb := new(forwardedBody)
	fb.cur = sharedBytes(body)
	fb.curGen = fb.cur.gen()
	return fb
}

// A request's response writer lives in its forwarded body, once: a second
// translator on the same request gets a writer of its own.
func TestForwardedBodyWriterOnce(t *testing.T) {
	fb := new(forwardedBody)
	first, second := fb.writer(), fb.writer()
	if first != &fb.tw || second == first {
		t.Fatalf("writers %p and %p, the kept one at %p", first, second, &fb.tw)
	}
}
