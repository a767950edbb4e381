package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// checkResponsesGrammar checks a Responses event stream: response.created
// and response.in_progress first; sequence numbers counting from 0; items
// added one at a time in output_index order, each opened, filled and closed
// with the events of its kind, deltas adding up to the done texts, a call
// done with the call_id and name it was added with; and one
// terminal event last — response.completed or response.incomplete, whose
// output is the items done, or response.failed after an error event.
// content asks that function arguments add up to JSON (when the upstream's
// do and the answer was not cut short).
func checkResponsesGrammar(evs []sseEvent, content bool) error {
	if len(evs) < 3 {
		return fmt.Errorf("%d events", len(evs))
	}
	var (
		open     = -1 // output_index of the open item
		kind     string
		itemID   string
		call     string // a function_call item's call_id and name when added
		acc      strings.Builder
		partOpen bool
		done     []string // the items done, raw
		failed   bool
	)
	for i, ev := range evs {
		if !gjson.Valid(ev.Data) {
			return fmt.Errorf("event %d: data is not JSON: %s", i, ev.Data)
		}
		d := gjson.Parse(ev.Data)
		typ := d.Get("type").String()
		if typ != ev.Event {
			return fmt.Errorf("event %d: event %q carries type %q", i, ev.Event, typ)
		}
		if n := d.Get("sequence_number"); n.Type != gjson.Number || n.Int() != int64(i) {
			return fmt.Errorf("event %d (%s): sequence_number %s", i, typ, n.Raw)
		}
		if d.Get("error").Exists() {
			return fmt.Errorf("event %d: a top-level error member ends SDK streams: %s", i, ev.Data)
		}
		if (i == 0) != (typ == "response.created") || (i == 1) != (typ == "response.in_progress") {
			return fmt.Errorf("event %d is %s", i, typ)
		}
		if failed && typ != "response.failed" {
			return fmt.Errorf("event %d (%s) after an error event", i, typ)
		}
		ref := func() error {
			if d.Get("output_index").Int() != int64(open) || open < 0 || (d.Get("item_id").Exists() && d.Get("item_id").String() != itemID) {
				return fmt.Errorf("event %d (%s) is not for the open item %d %s: %s", i, typ, open, itemID, ev.Data)
			}
			return nil
		}
		switch typ {
		case "response.created", "response.in_progress":
			if r := d.Get("response"); r.Get("status").String() != "in_progress" || r.Get("output.#").Int() != 0 || !strings.HasPrefix(r.Get("id").String(), "resp_") {
				return fmt.Errorf("event %d: %s", i, ev.Data)
			}
		case "response.output_item.added":
			if open >= 0 {
				return fmt.Errorf("event %d: item added while item %d is open", i, open)
			}
			if d.Get("output_index").Int() != int64(len(done)) {
				return fmt.Errorf("event %d: output_index %d, want %d", i, d.Get("output_index").Int(), len(done))
			}
			open, kind, itemID = len(done), d.Get("item.type").String(), d.Get("item.id").String()
			acc.Reset()
			partOpen = false
			if kind == "function_call" && (d.Get("item.call_id").String() == "" || d.Get("item.arguments").String() != "") {
				return fmt.Errorf("event %d: %s", i, ev.Data)
			}
			call = d.Get("item.call_id").String() + " " + d.Get("item.name").String()
		case "response.reasoning_summary_part.added", "response.content_part.added":
			if err := ref(); err != nil {
				return err
			}
			if partOpen || acc.Len() > 0 || (kind == "reasoning") != (typ == "response.reasoning_summary_part.added") {
				return fmt.Errorf("event %d: %s in a %s item", i, typ, kind)
			}
			partOpen = true
		case "response.reasoning_summary_text.delta", "response.output_text.delta", "response.function_call_arguments.delta":
			if err := ref(); err != nil {
				return err
			}
			want := map[string]string{"reasoning": "response.reasoning_summary_text.delta", "message": "response.output_text.delta", "function_call": "response.function_call_arguments.delta"}[kind]
			if typ != want || (kind != "function_call" && !partOpen) {
				return fmt.Errorf("event %d: %s in a %s item", i, typ, kind)
			}
			acc.WriteString(d.Get("delta").String())
		case "response.reasoning_summary_text.done", "response.output_text.done", "response.function_call_arguments.done":
			if err := ref(); err != nil {
				return err
			}
			field := "text"
			if kind == "function_call" {
				field = "arguments"
			}
			if got := d.Get(field).String(); got != acc.String() {
				return fmt.Errorf("event %d: done %q, deltas gave %q", i, got, acc.String())
			}
		case "response.reasoning_summary_part.done", "response.content_part.done":
			if err := ref(); err != nil {
				return err
			}
			if !partOpen || d.Get("part.text").String() != acc.String() {
				return fmt.Errorf("event %d: part %s, deltas gave %q", i, d.Get("part").Raw, acc.String())
			}
			partOpen = false
		case "response.output_item.done":
			if err := ref(); err != nil {
				return err
			}
			if partOpen {
				return fmt.Errorf("event %d: item done with its part open", i)
			}
			item := d.Get("item")
			var got string
			switch kind {
			case "reasoning":
				got = item.Get("summary.0.text").String()
			case "message":
				got = item.Get("content.0.text").String()
			case "function_call":
				got = item.Get("arguments").String()
				if c := item.Get("call_id").String() + " " + item.Get("name").String(); c != call {
					return fmt.Errorf("event %d: call %q done, %q added", i, c, call)
				}
				if content && item.Get("status").String() == "completed" && got != "" && !json.Valid([]byte(got)) {
					return fmt.Errorf("event %d: arguments %q are not JSON", i, got)
				}
			}
			if got != acc.String() || item.Get("id").String() != itemID || item.Get("type").String() != kind {
				return fmt.Errorf("event %d: item %s, deltas gave %q", i, item.Raw, acc.String())
			}
			done = append(done, item.Raw)
			open = -1
		case "error":
			if d.Get("message").String() == "" || d.Get("code").String() == "" {
				return fmt.Errorf("event %d: %s", i, ev.Data)
			}
			failed = true
		case "response.completed", "response.incomplete", "response.failed":
			if i != len(evs)-1 {
				return fmt.Errorf("event %d: %s before the end", i, typ)
			}
			r := d.Get("response")
			want := map[string]string{"response.completed": "completed", "response.incomplete": "incomplete", "response.failed": "failed"}[typ]
			if r.Get("status").String() != want || r.Get("id").String() != gjson.Get(evs[0].Data, "response.id").String() {
				return fmt.Errorf("event %d: %s", i, ev.Data)
			}
			if typ == "response.failed" {
				if !failed || r.Get("error.message").String() == "" {
					return fmt.Errorf("response.failed without an error event or message: %s", ev.Data)
				}
				return nil
			}
			if open >= 0 {
				return fmt.Errorf("event %d: %s with item %d open", i, typ, open)
			}
			var out []string
			for _, it := range r.Get("output").Array() {
				out = append(out, it.Raw)
			}
			if !reflect.DeepEqual(out, done) {
				return fmt.Errorf("final output %v, items done %v", out, done)
			}
			if u := r.Get("usage"); !u.Get("input_tokens").Exists() || !u.Get("output_tokens_details.reasoning_tokens").Exists() {
				return fmt.Errorf("final usage %s", u.Raw)
			}
			return nil
		default:
			return fmt.Errorf("event %d: unexpected %s", i, typ)
		}
	}
	return fmt.Errorf("the stream has no terminal event")
}

func runResponsesStream(up Format, req Request, cfg Config, in []byte, split func(int) int) []byte {
	cfg.Upstream = up
	s := NewStream(Responses, up, req, &cfg)
	var out []byte
	for len(in) > 0 {
		n := min(split(len(in)), len(in))
		out = s.Write(out, in[:n])
		in = in[n:]
	}
	return s.Close(out)
}

func TestResponsesStreamFixtures(t *testing.T) {
	for _, c := range streamCases() {
		t.Run(c.name, func(t *testing.T) {
			in := readFile(t, filepath.Join("testdata", "streams", c.file+".sse"))
			c.req.resp = respOptions{encrypted: true, effort: 5, summary: 1, namespaces: "ns\x00"}
			out := runResponsesStream(c.cfg.Upstream, c.req, c.cfg, in, whole)
			compareSSE(t, filepath.Join("testdata", "streams", c.name+".responses.want.sse"), out)
			evs := parseSSE(t, out)
			if err := checkResponsesGrammar(evs, true); err != nil {
				t.Fatalf("grammar: %v\n%s", err, out)
			}
			ref := normalizedEvents(t, evs)
			r := rand.New(rand.NewPCG(2, uint64(len(in))))
			for _, split := range []func(int) int{
				func(int) int { return 1 },
				func(int) int { return 1 + r.IntN(40) },
				func(int) int { return 1 + r.IntN(400) },
			} {
				got := runResponsesStream(c.cfg.Upstream, c.req, c.cfg, in, split)
				if g := normalizedEvents(t, parseSSE(t, got)); !reflect.DeepEqual(g, ref) {
					t.Fatalf("chunked input gives other events:\n%s\nwant\n%s", got, out)
				}
			}
		})
	}
}

// streamItems runs a stream and returns its final response object.
func streamFinal(t *testing.T, up Format, req Request, in string) (gjson.Result, []sseEvent) {
	t.Helper()
	out := runResponsesStream(up, req, Config{}, []byte(in), whole)
	evs := parseSSE(t, out)
	if err := checkResponsesGrammar(evs, true); err != nil {
		t.Fatalf("grammar: %v\n%s", err, out)
	}
	return gjson.Get(evs[len(evs)-1].Data, "response"), evs
}

func TestResponsesStreamContent(t *testing.T) {
	t.Run("chat upstream", func(t *testing.T) {
		r, _ := streamFinal(t, Chat, Request{Stream: true}, string(readFile(t, "testdata/streams/vllm_reasoning_tools.sse")))
		wantEq(t, "types", r.Get("output.#.type").Raw, `["reasoning","message","function_call"]`)
		wantEq(t, "reasoning", r.Get("output.0.summary.0.text").String(), "The user wants the weather in \"Paris\".\n")
		wantEq(t, "no encrypted_content unless asked", r.Get("output.0.encrypted_content").Exists(), false)
		wantEq(t, "text", r.Get("output.1.content.0.text").String(), "Let me check.")
		wantEq(t, "call", r.Get("output.2.name").String(), "get_weather")
		wantEq(t, "arguments", r.Get("output.2.arguments").String(), `{"city": "Paris", "unit": "celsius"}`)
		wantEq(t, "status", r.Get("status").String(), "completed")
		if r.Get("usage.input_tokens").Int() == 0 || r.Get("usage.output_tokens").Int() == 0 || r.Get("usage.output_tokens_details.reasoning_tokens").Int() == 0 {
			t.Errorf("usage %s", r.Get("usage").Raw)
		}
	})
	t.Run("messages upstream", func(t *testing.T) {
		r, _ := streamFinal(t, Messages, Request{Stream: true}, string(readFile(t, "testdata/streams/anthropic_thinking_tools.sse")))
		wantEq(t, "types", r.Get("output.#.type").Raw, `["reasoning","message","function_call"]`)
		wantEq(t, "reasoning", r.Get("output.0.summary.0.text").String(), "I should look up\nthe weather.")
		wantEq(t, "call_id", r.Get("output.2.call_id").String(), "toolu_01T1x1fJ34qAmk2tNTrN7Up6")
		if !json.Valid([]byte(r.Get("output.2.arguments").String())) {
			t.Errorf("arguments %s", r.Get("output.2.arguments").Raw)
		}
	})
	t.Run("cut by max tokens", func(t *testing.T) {
		r, evs := streamFinal(t, Chat, Request{Stream: true}, string(readFile(t, "testdata/streams/sglang_length_tools.sse")))
		wantEq(t, "terminal", evs[len(evs)-1].Event, "response.incomplete")
		wantEq(t, "reason", r.Get("incomplete_details.reason").String(), "max_output_tokens")
		wantEq(t, "last item", r.Get("output.@reverse.0.status").String(), "incomplete")
	})
	t.Run("parallel calls interleaved", func(t *testing.T) {
		r, _ := streamFinal(t, Chat, Request{Stream: true}, string(readFile(t, "testdata/streams/parallel_interleaved.sse")))
		calls := r.Get(`output.#(type=="function_call")#`).Array()
		if len(calls) < 2 {
			t.Fatalf("calls %s", r.Get("output").Raw)
		}
		for _, c := range calls {
			var v map[string]any
			if err := json.Unmarshal([]byte(c.Get("arguments").String()), &v); err != nil {
				t.Errorf("arguments of %s: %v", c.Get("call_id"), err)
			}
		}
	})
	t.Run("held call added after a later one", func(t *testing.T) {
		// Call 1 comes first but cannot be added (a name, no id, no
		// arguments); call 0 becomes ready and goes out first. The final
		// output lists the items in output_index order, as they were added.
		chunk := func(calls string) string {
			return "data: {\"id\":\"chatcmpl-1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":" + calls + "}}]}\n\n"
		}
		in := chunk(`[{"index":1,"type":"function","function":{"name":"time","arguments":""}}]`) +
			chunk(`[{"index":0,"id":"call_A","type":"function","function":{"name":"weather","arguments":"{\"city\":"}}]`) +
			chunk(`[{"index":1,"function":{"arguments":"{}"}},{"index":0,"function":{"arguments":"\"Rome\"}"}}]`) +
			"data: {\"id\":\"chatcmpl-1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"
		r, evs := streamFinal(t, Chat, Request{Stream: true}, in)
		if err := checkResponsesGrammar(evs, true); err != nil {
			t.Fatal(err)
		}
		wantEq(t, "names", r.Get("output.#.name").Raw, `["weather","time"]`)
		wantEq(t, "output_index", r.Get("output.#.id").Raw, `["fc_1_0","fc_1_1"]`)
	})
	t.Run("error mid-stream", func(t *testing.T) {
		_, evs := streamFinal(t, Chat, Request{Stream: true}, string(readFile(t, "testdata/streams/error_midstream.sse")))
		last := gjson.Parse(evs[len(evs)-1].Data)
		wantEq(t, "terminal", last.Get("type").String(), "response.failed")
		wantEq(t, "error event", evs[len(evs)-2].Event, "error")
		if last.Get("response.error.message").String() == "" || last.Get("response.error.code").String() == "" {
			t.Errorf("failed response %s", last.Raw)
		}
	})
	t.Run("namespaced call", func(t *testing.T) {
		in := "data: {\"id\":\"chatcmpl-1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"multi_agent_v1__spawn_agent\",\"arguments\":\"\"}}]}}]}\n\n" +
			"data: {\"id\":\"chatcmpl-1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"message\\\":\\\"go\\\"}\"}}]}}]}\n\n" +
			"data: {\"id\":\"chatcmpl-1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n" +
			"data: {\"id\":\"chatcmpl-1\",\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4,\"total_tokens\":13}}\n\n" +
			"data: [DONE]\n\n"
		r, evs := streamFinal(t, Chat, Request{Stream: true, resp: respOptions{namespaces: "multi_agent_v1\x00"}}, in)
		wantEq(t, "name", r.Get("output.0.name").String(), "spawn_agent")
		wantEq(t, "namespace", r.Get("output.0.namespace").String(), "multi_agent_v1")
		wantEq(t, "usage", r.Get("usage.total_tokens").Int(), int64(13))
		for _, ev := range evs {
			if ev.Event == "response.output_item.added" && gjson.Get(ev.Data, "item.namespace").String() != "multi_agent_v1" {
				t.Errorf("added without the namespace: %s", ev.Data)
			}
		}
	})
}

func TestResponsesStreamAbortAndEmpty(t *testing.T) {
	for _, up := range []Format{Chat, Messages} {
		cfg := &Config{Upstream: up}
		s := NewStream(Responses, up, Request{Stream: true}, cfg)
		out := s.Close(nil)
		if err := checkResponsesGrammar(parseSSE(t, out), true); err != nil || !s.Done() {
			t.Errorf("%v empty upstream: %v\n%s", up, err, out)
		}
		s = NewStream(Responses, up, Request{Stream: true}, cfg)
		out = s.Abort(nil, NewError(502, APIError, "upstream connection reset"))
		out = s.Write(out, []byte("data: {}\n\n"))
		out = s.Close(out)
		if err := checkResponsesGrammar(parseSSE(t, out), true); err != nil || !strings.Contains(string(out), "connection reset") {
			t.Errorf("%v abort: %v\n%s", up, err, out)
		}
	}
	// A pooled Stream reused for another client and back.
	s := NewStream(Responses, Chat, Request{Stream: true}, &Config{Upstream: Chat})
	in := readFile(t, "testdata/streams/vllm_stop_sequence.sse")
	first := s.Close(s.Write(nil, in))
	s.Reset(Chat, Chat, Request{Stream: true}, &Config{Upstream: Chat})
	if out := s.Close(s.Write(nil, in)); strings.Contains(string(out), "response.") {
		t.Errorf("chat client after reuse got Responses events")
	}
	s.Reset(Responses, Chat, Request{Stream: true}, &Config{Upstream: Chat})
	if again := s.Close(s.Write(nil, in)); !reflect.DeepEqual(normalizedEvents(t, parseSSE(t, again)), normalizedEvents(t, parseSSE(t, first))) {
		t.Errorf("reused stream differs:\n%s\nwant\n%s", again, first)
	}
	if in, out, _, _ := s.Usage(); in != 31 || out != 9 {
		t.Errorf("Usage() = %d, %d", in, out)
	}
}

// A text delta's event head is kept per output item (respItem.head); a
// pooled Stream reused for another response must not send the first
// response's item ids in the second's deltas.
func TestResponsesStreamReuseDeltaItemIDs(t *testing.T) {
	in := readFile(t, "testdata/streams/vllm_stop_sequence.sse")
	s := NewStream(Responses, Chat, Request{Stream: true}, &Config{Upstream: Chat})
	s.Close(s.Write(nil, in))
	s.Reset(Responses, Chat, Request{Stream: true}, &Config{Upstream: Chat})
	out := s.Close(s.Write(nil, bytes.ReplaceAll(in, []byte("chatcmpl-a71c"), []byte("chatcmpl-b82d"))))
	var added string
	deltas := 0
	for _, e := range parseSSE(t, out) {
		switch e.Event {
		case "response.output_item.added":
			added = gjson.Get(e.Data, "item.id").Str
		case "response.output_text.delta":
			deltas++
			if id := gjson.Get(e.Data, "item_id").Str; id != added || !strings.Contains(id, "b82d") {
				t.Fatalf("delta of item %q in the second response (its item: %q)\n%s", id, added, out)
			}
		}
	}
	if deltas == 0 {
		t.Fatalf("no text deltas\n%s", out)
	}
}
