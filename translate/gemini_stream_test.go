package translate

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

var geminiReq = Request{Stream: true, call: Call{Model: "gemini-path-model", Stream: true}, showThoughts: true}

func runGeminiStream(up Format, req Request, cfg Config, in []byte, split func(int) int) (*Stream, []byte) {
	cfg.Upstream = up
	s := NewStream(Gemini, up, req, &cfg)
	var out []byte
	for len(in) > 0 {
		n := min(split(len(in)), len(in))
		out = s.Write(out, in[:n])
		in = in[n:]
	}
	return s, s.Close(out)
}

// geminiEvents reads a Gemini stream as the SDKs do: events end with a
// blank line ("\r\n\r\n", as Google sends), each one line `data: <JSON>`.
func geminiEvents(t testing.TB, out []byte) ([]gjson.Result, error) {
	t.Helper()
	if len(out) > 0 && !bytes.HasSuffix(out, []byte("\r\n\r\n")) {
		return nil, fmt.Errorf("the stream does not end with a blank line")
	}
	var evs []gjson.Result
	for _, ev := range strings.SplitAfter(string(out), "\r\n\r\n") {
		if ev == "" {
			continue
		}
		ev = strings.TrimSuffix(ev, "\r\n\r\n")
		d, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.ContainsAny(d, "\r\n") || !gjson.Valid(d) || !strings.HasPrefix(d, "{") {
			return nil, fmt.Errorf("event %q", ev)
		}
		evs = append(evs, gjson.Parse(d))
	}
	return evs, nil
}

// checkGeminiStream checks a stream's shape: events of parts, the last one
// the end (finishReason and usage) or an error; one model and response id.
func checkGeminiStream(t testing.TB, evs []gjson.Result) {
	t.Helper()
	if len(evs) == 0 {
		t.Fatalf("no events")
	}
	var model, id string
	for i, ev := range evs {
		last := i == len(evs)-1
		if ev.Get("error").Exists() {
			if !last {
				t.Fatalf("event after the error")
			}
			e := ev.Get("error")
			if e.Get("code").Int() < 400 || e.Get("message").String() == "" || e.Get("status").String() == "" {
				t.Errorf("error %s", ev.Raw)
			}
			continue
		}
		checkGeminiResponse(t, ev, last)
		if i == 0 {
			model, id = ev.Get("modelVersion").String(), ev.Get("responseId").String()
		} else if ev.Get("modelVersion").String() != model || ev.Get("responseId").String() != id {
			t.Errorf("event %d: model or id changed: %s", i, ev.Raw)
		}
	}
}

// geminiSummary sums up a stream's events.
func geminiSummary(evs []gjson.Result) (g geminiParts, last gjson.Result) {
	for _, ev := range evs {
		g.add(ev)
	}
	return g, evs[len(evs)-1]
}

// normalizedGemini is the events with ids made up here (calls', the
// response's) replaced by their order of appearance.
func normalizedGemini(t testing.TB, evs []gjson.Result) []any {
	ids := map[string]string{}
	var l []any
	for _, ev := range evs {
		s := ev.Raw
		for _, p := range []string{"responseId", "candidates.0.content.parts.#.functionCall.id"} {
			for _, v := range append(ev.Get(p).Array(), ev.Get(p)) {
				if v.Type == gjson.String {
					if _, ok := ids[v.String()]; !ok {
						ids[v.String()] = fmt.Sprint("id", len(ids))
					}
					s = strings.ReplaceAll(s, v.Raw, `"`+ids[v.String()]+`"`)
				}
			}
		}
		l = append(l, normalize(unmarshal(t, "event", []byte(s))))
	}
	return l
}

func TestGeminiStreamFixtures(t *testing.T) {
	for _, c := range streamCases() {
		t.Run(c.name, func(t *testing.T) {
			in := readFile(t, filepath.Join("testdata", "streams", c.file+".sse"))
			req := geminiReq
			req.Reasoning = c.req.Reasoning
			s, out := runGeminiStream(c.cfg.Upstream, req, c.cfg, in, whole)
			if !s.Done() {
				t.Fatalf("not done")
			}
			evs, err := geminiEvents(t, out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			checkGeminiStream(t, evs)
			ref := normalizedGemini(t, evs)
			check := func(what string, got []byte) {
				t.Helper()
				g, err := geminiEvents(t, got)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if !reflect.DeepEqual(normalizedGemini(t, g), ref) {
					t.Fatalf("%s gives other events:\n%s\nwant\n%s", what, got, out)
				}
			}
			// Any chunking of the upstream bytes gives the same events: in
			// two pieces split at every byte, and in pieces of every size
			// up to 8 and at random.
			for at := 1; at < len(in); at++ {
				cfg := c.cfg
				cfg.Upstream = c.cfg.Upstream
				s := NewStream(Gemini, cfg.Upstream, req, &cfg)
				check(fmt.Sprint("split at ", at), s.Close(s.Write(s.Write(nil, in[:at]), in[at:])))
			}
			r := rand.New(rand.NewPCG(3, uint64(len(in))))
			for n := 1; n <= 8; n++ {
				_, got := runGeminiStream(c.cfg.Upstream, req, c.cfg, in, func(int) int { return n })
				check(fmt.Sprint("pieces of ", n), got)
			}
			_, got := runGeminiStream(c.cfg.Upstream, req, c.cfg, in, func(int) int { return 1 + r.IntN(400) })
			check("random pieces", got)
		})
	}
}

// geminiStreamOf runs the stream in and returns its events, checked.
func geminiStreamOf(t *testing.T, up Format, req Request, cfg Config, in string) (*Stream, []gjson.Result) {
	t.Helper()
	s, out := runGeminiStream(up, req, cfg, []byte(in), whole)
	evs, err := geminiEvents(t, out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	checkGeminiStream(t, evs)
	return s, evs
}

func fixtureStream(t *testing.T, name string) string {
	return string(readFile(t, filepath.Join("testdata", "streams", name+".sse")))
}

func TestGeminiStreamContent(t *testing.T) {
	t.Run("chat upstream: reasoning, text, call, usage", func(t *testing.T) {
		_, evs := geminiStreamOf(t, Chat, geminiReq, Config{}, fixtureStream(t, "vllm_reasoning_tools"))
		g, last := geminiSummary(evs)
		wantEq(t, "thoughts", g.thoughts, "The user wants the weather in \"Paris\".\n")
		wantEq(t, "text", g.text, "Let me check.")
		wantEq(t, "kinds", strings.Join(g.kinds, ","), "thought,thought,text,call")
		wantEq(t, "call", g.calls[0].Raw, `{"id":"chatcmpl-tool-5c0e9b1f","name":"get_weather","args":{"city":"Paris","unit":"celsius"}}`)
		wantEq(t, "finish", last.Get("candidates.0.finishReason").String(), "STOP")
		wantEq(t, "usage", last.Get("usageMetadata").Raw, `{"promptTokenCount":187,"candidatesTokenCount":24,"totalTokenCount":229,"cachedContentTokenCount":128,"thoughtsTokenCount":18}`)
		wantEq(t, "model", last.Get("modelVersion").String(), "Qwen/Qwen3-8B")
		// One event per chunk with something in it: four deltas and the end.
		wantEq(t, "events", len(evs), 5)
	})
	t.Run("messages upstream: thinking, text, tool_use", func(t *testing.T) {
		_, evs := geminiStreamOf(t, Messages, geminiReq, Config{}, fixtureStream(t, "anthropic_thinking_tools"))
		g, last := geminiSummary(evs)
		wantEq(t, "thoughts", g.thoughts, "I should look up\nthe weather.")
		wantEq(t, "text", g.text, "Checking the weather now.")
		wantEq(t, "call id", g.calls[0].Get("id").String(), "toolu_01T1x1fJ34qAmk2tNTrN7Up6")
		wantEq(t, "args", g.calls[0].Get("args").Raw, `{"location":"San Francisco, CA"}`)
		wantEq(t, "usage", last.Get("usageMetadata.totalTokenCount").Int(), int64(1581))
		wantEq(t, "thoughts counted", last.Get("usageMetadata.thoughtsTokenCount").Int() > 0, true)
	})
	t.Run("messages upstream: call without arguments", func(t *testing.T) {
		_, evs := geminiStreamOf(t, Messages, geminiReq, Config{}, fixtureStream(t, "anthropic_tool_noargs"))
		g, _ := geminiSummary(evs)
		if len(g.calls) == 0 {
			t.Fatal("no call")
		}
		for _, c := range g.calls {
			wantEq(t, "args", c.Get("args").Raw, `{}`)
		}
	})
	t.Run("prefilled <think>", func(t *testing.T) {
		_, evs := geminiStreamOf(t, Chat, Request{Stream: true, Reasoning: true, showThoughts: true}, Config{ThinkPrefilled: true}, fixtureStream(t, "think_prefilled"))
		g, _ := geminiSummary(evs)
		if g.thoughts == "" || strings.Contains(g.text, "</think>") || strings.Contains(g.thoughts, "</think>") {
			t.Errorf("thoughts %q text %q", g.thoughts, g.text)
		}
		wantEq(t, "model from upstream", evs[0].Get("modelVersion").Exists(), true)
	})
	t.Run("cut by max tokens mid-call", func(t *testing.T) {
		_, evs := geminiStreamOf(t, Chat, geminiReq, Config{}, fixtureStream(t, "sglang_length_tools"))
		g, last := geminiSummary(evs)
		wantEq(t, "finish", last.Get("candidates.0.finishReason").String(), "MAX_TOKENS")
		if len(g.calls) == 0 {
			t.Fatal("no call")
		}
		for _, c := range g.calls {
			if !c.Get("args").IsObject() {
				t.Errorf("args %s", c.Raw)
			}
		}
	})
	t.Run("calls out of order, late names and ids, one nameless", func(t *testing.T) {
		s, evs := geminiStreamOf(t, Chat, geminiReq, Config{}, fixtureStream(t, "chat_tool_out_of_order"))
		g, _ := geminiSummary(evs)
		got := map[string]string{}
		for _, c := range g.calls {
			got[c.Get("name").String()] = c.Get("id").String() + " " + c.Get("args").Raw
		}
		wantEq(t, "calls", fmt.Sprint(got), `map[time:call_B {"tz":"UTC"} weather:call_A {"city":"Rome"}]`)
		wantEq(t, "dropped", s.DroppedCalls(), 1)
	})
	t.Run("late id", func(t *testing.T) {
		_, evs := geminiStreamOf(t, Chat, geminiReq, Config{}, fixtureStream(t, "chat_tool_late_id"))
		g, _ := geminiSummary(evs)
		for _, c := range g.calls {
			if strings.HasPrefix(c.Get("id").String(), "call_") && len(c.Get("id").String()) == 29 {
				t.Errorf("made-up id, the upstream's came late: %s", c.Raw)
			}
		}
	})
	t.Run("parallel calls interleaved", func(t *testing.T) {
		_, evs := geminiStreamOf(t, Chat, geminiReq, Config{}, fixtureStream(t, "parallel_interleaved"))
		g, _ := geminiSummary(evs)
		if len(g.calls) < 2 {
			t.Fatalf("calls %v", g.calls)
		}
		seen := map[string]bool{}
		for _, c := range g.calls {
			if seen[c.Get("id").String()] {
				t.Errorf("call twice: %s", c.Raw)
			}
			seen[c.Get("id").String()] = true
		}
	})
	t.Run("every call 0, no ids", func(t *testing.T) {
		in := "data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"a\",\"arguments\":\"{\\\"x\\\":\"}}]}}]}\n\n" +
			"data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"1}\"}}]}}]}\n\n" +
			"data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"b\",\"arguments\":\"[2]\"}}]}}]}\n\n" +
			"data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"
		_, evs := geminiStreamOf(t, Chat, geminiReq, Config{}, in)
		g, last := geminiSummary(evs)
		if len(g.calls) != 2 {
			t.Fatalf("calls %v", g.calls)
		}
		wantEq(t, "first", g.calls[0].Get("args").Raw, `{"x":1}`)
		wantEq(t, "second, not an object", g.calls[1].Get("args").Raw, `{"arguments":"[2]"}`)
		wantEq(t, "no usage reported", last.Get("usageMetadata").Exists(), false)
		// The first call is written as soon as its arguments are whole.
		wantEq(t, "first event", evs[0].Get("candidates.0.content.parts.0.functionCall.name").String(), "a")
	})
	t.Run("content filter, model from the path", func(t *testing.T) {
		in := "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"no\"}}]}\n\n" +
			"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"content_filter\"}]}\n\ndata: [DONE]\n\n"
		_, evs := geminiStreamOf(t, Chat, geminiReq, Config{}, in)
		_, last := geminiSummary(evs)
		wantEq(t, "finish", last.Get("candidates.0.finishReason").String(), "SAFETY")
		wantEq(t, "model", last.Get("modelVersion").String(), "gemini-path-model")
	})
	t.Run("keep-alives are not sent", func(t *testing.T) {
		in := ": keep-alive\n\n" + fixtureStream(t, "vllm_stop_sequence")
		_, out := runGeminiStream(Chat, geminiReq, Config{}, []byte(in), whole)
		if _, err := geminiEvents(t, out); err != nil || bytes.Contains(out, []byte("keep-alive")) {
			t.Errorf("%v\n%s", err, out)
		}
		in = "event: ping\ndata: {\"type\":\"ping\"}\n\n" + fixtureStream(t, "anthropic_thinking_tools")
		_, out = runGeminiStream(Messages, geminiReq, Config{}, []byte(in), whole)
		if _, err := geminiEvents(t, out); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	})
}

func TestGeminiStreamErrors(t *testing.T) {
	errorOf := func(t *testing.T, evs []gjson.Result) gjson.Result {
		t.Helper()
		last := evs[len(evs)-1]
		for _, ev := range evs {
			if ev.Get("candidates.0.finishReason").Exists() {
				t.Errorf("a failed stream has a finish reason: %s", ev.Raw)
			}
		}
		if !last.Get("error").Exists() {
			t.Fatalf("last event %s", last.Raw)
		}
		return last.Get("error")
	}
	t.Run("upstream error mid-stream", func(t *testing.T) {
		s, evs := geminiStreamOf(t, Chat, geminiReq, Config{}, fixtureStream(t, "error_midstream"))
		g, _ := geminiSummary(evs)
		wantEq(t, "text before", g.text, "Partial")
		e := errorOf(t, evs)
		wantEq(t, "message", e.Get("message").String(), "CUDA out of memory")
		wantEq(t, "done", s.Done(), true)
	})
	t.Run("messages upstream overloaded", func(t *testing.T) {
		_, evs := geminiStreamOf(t, Messages, geminiReq, Config{}, fixtureStream(t, "messages_overloaded"))
		e := errorOf(t, evs)
		if e.Get("code").Int() < 500 {
			t.Errorf("error %s", e.Raw)
		}
	})
	t.Run("upstream breaks off", func(t *testing.T) {
		_, evs := geminiStreamOf(t, Chat, geminiReq, Config{}, fixtureStream(t, "broken"))
		g, _ := geminiSummary(evs)
		wantEq(t, "held call not written", len(g.calls), 0)
		e := errorOf(t, evs)
		wantEq(t, "code", e.Get("code").Int(), int64(502))
		wantEq(t, "status", e.Get("status").String(), "UNAVAILABLE")
	})
	for _, up := range []Format{Chat, Messages} {
		t.Run("empty upstream "+up.String(), func(t *testing.T) {
			_, evs := geminiStreamOf(t, up, geminiReq, Config{}, "")
			errorOf(t, evs)
		})
		t.Run("abort "+up.String(), func(t *testing.T) {
			cfg := &Config{Upstream: up}
			s := NewStream(Gemini, up, geminiReq, cfg)
			in := []byte(fixtureStream(t, "vllm_reasoning_tools"))
			if up == Messages {
				in = []byte(fixtureStream(t, "anthropic_thinking_tools"))
			}
			out := s.Write(nil, in[:len(in)/2])
			out = s.Abort(out, NewError(502, APIError, "upstream connection reset"))
			n := len(out)
			out = s.Write(out, in[len(in)/2:])
			out = s.Close(out)
			out = s.Abort(out, NewError(500, APIError, "again"))
			if len(out) != n || !s.Done() {
				t.Errorf("written after the end:\n%s", out[n:])
			}
			evs, err := geminiEvents(t, out)
			if err != nil {
				t.Fatal(err)
			}
			checkGeminiStream(t, evs)
			wantEq(t, "message", errorOf(t, evs).Get("message").String(), "upstream connection reset")
		})
	}
}

// A pooled Stream reused for another client and back writes the same.
func TestGeminiStreamReuse(t *testing.T) {
	in := readFile(t, "testdata/streams/chat_tool_out_of_order.sse")
	cfg := &Config{Upstream: Chat}
	s := NewStream(Gemini, Chat, geminiReq, cfg)
	first := s.Close(s.Write(nil, in))
	s.Reset(Chat, Chat, Request{Stream: true}, cfg)
	if out := s.Close(s.Write(nil, in)); bytes.Contains(out, []byte("candidates")) {
		t.Errorf("chat client after reuse got Gemini events")
	}
	s.Reset(Responses, Chat, Request{Stream: true}, cfg)
	s.Close(s.Write(nil, in))
	s.Reset(Gemini, Chat, geminiReq, cfg)
	again := s.Close(s.Write(nil, in))
	a, _ := geminiEvents(t, again)
	b, _ := geminiEvents(t, first)
	if !reflect.DeepEqual(normalizedGemini(t, a), normalizedGemini(t, b)) {
		t.Errorf("reused stream differs:\n%s\nwant\n%s", again, first)
	}
	wantEq(t, "dropped after reuse", s.DroppedCalls(), 1)
}

// A reused stream writes without allocating once its buffers have grown.
func TestGeminiStreamAllocs(t *testing.T) {
	in := readFile(t, "testdata/streams/vllm_reasoning_tools.sse")
	cfg := &Config{Upstream: Chat}
	s := NewStream(Gemini, Chat, geminiReq, cfg)
	out := make([]byte, 0, 64<<10)
	s.Close(s.Write(out, in))
	n := testing.AllocsPerRun(20, func() {
		s.Reset(Gemini, Chat, geminiReq, cfg)
		s.Close(s.Write(out[:0], in))
	})
	if n > 4 {
		t.Errorf("%v allocations per stream", n)
	}
}

// FuzzGeminiStream: any upstream bytes, split anywhere, either upstream: no
// panic, every event a JSON object on one data line, the stream ends, and
// nothing is written after its end.
func FuzzGeminiStream(f *testing.F) {
	seedFiles(f, "streams/*.sse")
	f.Fuzz(func(t *testing.T, in []byte) {
		var b byte
		if len(in) > 0 {
			b = in[0]
		}
		split := 1 + int(b>>3)%32
		up := Format(1 + b&1)
		reasoning := b&4 != 0
		cfg := &Config{Upstream: up, ThinkPrefilled: reasoning}
		req := geminiReq
		req.Reasoning = reasoning
		s := NewStream(Gemini, up, req, cfg)
		out := writeInPieces(s, in, split)
		if !s.Done() {
			t.Fatalf("stream not done after Close")
		}
		n := len(out)
		out = s.Write(out, []byte("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n"))
		out = s.Abort(s.Close(out), NewError(502, APIError, "late"))
		if len(out) != n {
			t.Fatalf("written after the end: %q", out[n:])
		}
		evs, err := geminiEvents(t, out)
		if err != nil {
			t.Fatalf("<- %v: %v\nin:\n%q\nout:\n%s", up, err, in, out)
		}
		if len(evs) == 0 {
			t.Fatalf("no events")
		}
		last := evs[len(evs)-1]
		if !last.Get("error").Exists() && !last.Get("candidates.0.finishReason").Exists() {
			t.Fatalf("the stream does not end with an end: %s", out)
		}
		for _, ev := range evs[:len(evs)-1] {
			if ev.Get("error").Exists() || ev.Get("candidates.0.finishReason").Exists() {
				t.Fatalf("an end before the last event: %s", out)
			}
		}
	})
}

func BenchmarkGeminiStreamChunk(b *testing.B) { benchClientChunks(b, Gemini, false) }

// Steady-state chunks allocate nothing (a call's arguments grow, amortised),
// and a text chunk is an event of its own.
func TestGeminiStreamChunkAllocs(t *testing.T) {
	for _, c := range responsesBenchCases {
		s := primed(Gemini, c.up, c.chunk)
		out := make([]byte, 0, 4096)
		if n := testing.AllocsPerRun(200, func() { out = s.Write(out[:0], c.chunk) }); n != 0 {
			t.Errorf("%s: %v allocs per chunk", c.name, n)
		}
		if strings.HasSuffix(c.name, "/text") && !strings.Contains(string(out), `{"text":"`) {
			t.Errorf("%s: no text part in %s", c.name, out)
		}
	}
}
