package translate

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

type streamCase struct {
	name, file string
	cfg        Config
	req        Request
}

func streamCases() []streamCase {
	cs := []streamCase{
		{name: "vllm_reasoning_tools", req: Request{Stream: true, IncludeUsage: true, Reasoning: true}},
		{name: "vllm_stop_sequence", req: Request{Stream: true}},
		{name: "sglang_length_tools", req: Request{Stream: true, IncludeUsage: true}},
		{name: "llamacpp_reasoning", req: Request{Stream: true, IncludeUsage: true, Reasoning: true}},
		{name: "ollama_reasoning_tools", req: Request{Stream: true, IncludeUsage: true, Reasoning: true}},
		{name: "think_tags_split", req: Request{Stream: true, IncludeUsage: true}},
		{name: "think_unclosed", req: Request{Stream: true, IncludeUsage: true}},
		{name: "think_prefilled", req: Request{Stream: true, IncludeUsage: true, Reasoning: true}, cfg: Config{ThinkPrefilled: true}},
		{name: "think_prefilled_unset", file: "think_prefilled", req: Request{Stream: true, IncludeUsage: true, Reasoning: true}},
		{name: "parallel_interleaved", req: Request{Stream: true, IncludeUsage: true}},
		{name: "broken", req: Request{Stream: true}},
		{name: "error_midstream", req: Request{Stream: true}},
		{name: "anthropic_thinking_tools", req: Request{Stream: true, IncludeUsage: true, Reasoning: true}},
		{name: "messages_inline_think", req: Request{Stream: true, IncludeUsage: true}},
		{name: "messages_stop_sequence", req: Request{Stream: true}},
		{name: "messages_overloaded", req: Request{Stream: true}},
		// Calls without arguments as Anthropic streams them: tool_use with
		// input {}, one input_json_delta of "" (issue 31).
		{name: "anthropic_tool_noargs", req: Request{Stream: true, IncludeUsage: true}},
		// message_delta repeating the input and cache counts as zeros, as
		// reported in issue 31 (message_start 471, message_delta 0).
		{name: "messages_usage_zero_delta", req: Request{Stream: true, IncludeUsage: true}},
		// A chat upstream that sends a call's id after its first chunk,
		// made after the DeepSeek and vLLM streams of issue 31 (point 6):
		// the client gets the model's id, not a made-up one.
		{name: "chat_tool_late_id", req: Request{Stream: true, IncludeUsage: true}},
		// Issue 31 point 6's other cases in one stream: calls that arrive
		// with indexes out of order (1 before 0), their ids and one name
		// after their first chunk, and a call whose name never comes
		// (dropped: no client can run it).
		{name: "chat_tool_out_of_order", req: Request{Stream: true, IncludeUsage: true}},
	}
	for i := range cs {
		if cs[i].file == "" {
			cs[i].file = cs[i].name
		}
		cs[i].cfg.Upstream = Chat
		if strings.HasPrefix(cs[i].file, "anthropic_") || strings.HasPrefix(cs[i].file, "messages_") {
			cs[i].cfg.Upstream = Messages
		}
	}
	return cs
}

func runStream(client Format, c *streamCase, in []byte, split func(int) int) []byte {
	s := NewStream(client, c.cfg.Upstream, c.req, &c.cfg)
	var out []byte
	for len(in) > 0 {
		n := min(split(len(in)), len(in))
		out = s.Write(out, in[:n])
		in = in[n:]
	}
	return s.Close(out)
}

func whole(n int) int { return n }

func checkGrammar(client, up Format, evs []sseEvent, content bool) error {
	o := grammarOpts{content: content, pass: client == Chat && up == Chat}
	if client == Messages {
		return checkMessagesGrammar(evs, o)
	}
	return checkChatGrammar(evs, o)
}

func TestStreamFixtures(t *testing.T) {
	for _, c := range streamCases() {
		in := readFile(t, filepath.Join("testdata", "streams", c.file+".sse"))
		for _, client := range []Format{Chat, Messages} {
			t.Run(c.name+"/"+client.String(), func(t *testing.T) {
				out := runStream(client, &c, in, whole)
				compareSSE(t, filepath.Join("testdata", "streams", c.name+"."+client.String()+".want.sse"), out)
				evs := parseSSE(t, out)
				if err := checkGrammar(client, c.cfg.Upstream, evs, true); err != nil {
					t.Fatalf("grammar: %v\n%s", err, out)
				}
				// Any chunking of the upstream bytes gives the same events.
				ref := normalizedEvents(t, evs)
				r := rand.New(rand.NewPCG(1, uint64(len(in))))
				for _, split := range []func(int) int{
					func(int) int { return 1 },
					func(int) int { return 2 },
					func(int) int { return 1 + r.IntN(40) },
					func(int) int { return 1 + r.IntN(400) },
				} {
					got := runStream(client, &c, in, split)
					if g := normalizedEvents(t, parseSSE(t, got)); !reflect.DeepEqual(g, ref) {
						t.Fatalf("chunked input gives other events:\n%s\nwant\n%s", got, out)
					}
				}
			})
		}
	}
}

func normalizedEvents(t testing.TB, evs []sseEvent) []any {
	var l []any
	for _, e := range evs {
		if e.Data == "[DONE]" {
			l = append(l, "[DONE]")
			continue
		}
		l = append(l, e.Event, normalize(unmarshal(t, "event", []byte(e.Data))))
	}
	return l
}

// A chat pass-through leaves chunks that need nothing byte for byte alone.
func TestStreamPassThroughUntouched(t *testing.T) {
	cfg := &Config{Upstream: Chat}
	in := readFile(t, "testdata/streams/llamacpp_reasoning.sse")
	s := NewStream(Chat, Chat, Request{Stream: true, IncludeUsage: true}, cfg)
	out := string(s.Close(s.Write(nil, in)))
	for _, line := range strings.Split(string(in), "\n") {
		if strings.Contains(line, `"reasoning_content":"Two plus two"`) || strings.Contains(line, `"content":"4"`) {
			if !strings.Contains(out, line) {
				t.Errorf("chunk was rewritten: %s", line)
			}
		}
	}
}

// A chunk the pass-through rewrites stays JSON whichever member comes
// first. The rewrite used to write finish_reason "tool_calls" and a null
// reasoning_content with a comma of their own, so a choice or delta that
// began with them began with `{,`.
func TestStreamPassThroughRewriteIsJSON(t *testing.T) {
	cfg := &Config{Upstream: Chat}
	for _, events := range [][]string{
		{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`,
			`{"choices":[{"finish_reason":"stop","index":0}]}`,
		},
		{`{"choices":[{"index":0,"delta":{"reasoning_content":null,"content":"<thi"}}]}`},
	} {
		s := NewStream(Chat, Chat, Request{Stream: true}, cfg)
		var out []byte
		for _, e := range events {
			out = s.Write(out, []byte("data: "+e+"\n\n"))
		}
		out = s.Close(out)
		for _, e := range parseSSE(t, out) {
			if e.Data != "[DONE]" && !gjson.Valid(e.Data) {
				t.Errorf("not JSON: %s", e.Data)
			}
		}
		if !strings.Contains(string(out), `"tool_calls"`) && !strings.Contains(string(out), `"reasoning_content":null`) {
			t.Errorf("nothing was rewritten:\n%s", out)
		}
	}
}

// A choice that calls tools and says "stop" reaches a chat client as
// "tool_calls", whichever of its members comes first: llama.cpp's server
// writes finish_reason before delta.
func TestStreamPassThroughToolsFinishAnyOrder(t *testing.T) {
	cfg := &Config{Upstream: Chat}
	const call = `"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	for _, choice := range []string{
		`{"index":0,` + call + `,"finish_reason":"stop"}`,
		`{"finish_reason":"stop","index":0,` + call + `}`,
	} {
		s := NewStream(Chat, Chat, Request{Stream: true}, cfg)
		out := s.Close(s.Write(nil, []byte(`data: {"choices":[`+choice+`]}`+"\n\ndata: [DONE]\n\n")))
		var finish []string
		for _, e := range parseSSE(t, out) {
			if f := gjson.Get(e.Data, "choices.0.finish_reason"); f.Type == gjson.String {
				finish = append(finish, f.String())
			}
		}
		if len(finish) != 1 || finish[0] != "tool_calls" {
			t.Errorf("%s: finish reasons %q, want [tool_calls]\n%s", choice, finish, out)
		}
	}
}

// Events are validated as they are read, after their line breaks are
// blanked; an event split over data lines, whose line break falls inside a
// string, is not JSON, so it is still checked before they are blanked.
func TestStreamRefusesLineBreakInString(t *testing.T) {
	events := map[Format]string{
		Chat:     "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\ndata: b\"}}]}\n\n",
		Messages: "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\ndata: b\"}}\n\n",
	}
	primers := map[Format][]byte{Chat: chatContentChunk, Messages: messagesTextEvent}
	for up, event := range events {
		for _, client := range []Format{Chat, Messages, Responses} {
			s := primed(client, up, primers[up])
			out := string(s.Write(nil, []byte(event)))
			if !strings.Contains(out, "not a JSON object") || strings.Contains(out, "a b") || !s.Done() {
				t.Errorf("%v <- %v: %s", client, up, out)
			}
		}
	}
}

// Usage the client did not ask for is not sent; the upstream was asked for it.
func TestStreamUsageChunkOnlyWhenAsked(t *testing.T) {
	cfg := &Config{Upstream: Chat}
	in := readFile(t, "testdata/streams/vllm_stop_sequence.sse")
	for _, want := range []bool{false, true} {
		s := NewStream(Chat, Chat, Request{Stream: true, IncludeUsage: want}, cfg)
		out := string(s.Close(s.Write(nil, in)))
		if got := strings.Contains(out, `"usage"`); got != want {
			t.Errorf("include_usage=%v: usage sent=%v\n%s", want, got, out)
		}
		if in, outTok, _, _ := s.Usage(); in != 31 || outTok != 9 {
			t.Errorf("Usage() = %d, %d", in, outTok)
		}
	}
}

func TestStreamAbortAndEmpty(t *testing.T) {
	for _, client := range []Format{Chat, Messages} {
		for _, up := range []Format{Chat, Messages} {
			cfg := &Config{Upstream: up}
			s := NewStream(client, up, Request{Stream: true}, cfg)
			out := s.Close(nil)
			if err := checkGrammar(client, up, parseSSE(t, out), true); err != nil || !strings.Contains(string(out), "error") {
				t.Errorf("%v<-%v empty upstream: %v\n%s", client, up, err, out)
			}
			s = NewStream(client, up, Request{Stream: true}, cfg)
			out = s.Abort(nil, NewError(502, APIError, "upstream connection reset"))
			out = s.Write(out, []byte("data: {}\n\n"))
			out = s.Close(out)
			if err := checkGrammar(client, up, parseSSE(t, out), true); err != nil || !strings.Contains(string(out), "connection reset") {
				t.Errorf("%v<-%v abort: %v\n%s", client, up, err, out)
			}
		}
	}
}

// A call that ends without argument text reaches chat and Responses clients
// as "{}", as the whole-response path writes it.
func TestStreamToolWithoutArguments(t *testing.T) {
	in := readFile(t, "testdata/streams/anthropic_tool_noargs.sse")
	c := streamCase{cfg: Config{Upstream: Messages}, req: Request{Stream: true}}
	args := map[int]string{}
	for _, e := range parseSSE(t, runStream(Chat, &c, in, whole)) {
		gjson.Get(e.Data, "choices.0.delta.tool_calls").ForEach(func(_, tc gjson.Result) bool {
			args[int(tc.Get("index").Int())] += tc.Get("function.arguments").String()
			return true
		})
	}
	wantEq(t, "chat arguments", len(args), 2)
	for i, a := range args {
		wantEq(t, fmt.Sprint("chat arguments ", i), a, "{}")
	}
	// Closed only by the end of the message.
	cut := strings.ReplaceAll(string(in), `data: {"type":"content_block_stop","index":2}`, `data: {"type":"ping"}`)
	var got string
	for _, e := range parseSSE(t, runStream(Chat, &c, []byte(cut), whole)) {
		if tc := gjson.Get(e.Data, "choices.0.delta.tool_calls.0"); tc.Get("index").Int() == 1 {
			got += tc.Get("function.arguments").String()
		}
	}
	wantEq(t, "unclosed call's arguments", got, "{}")

	r, evs := streamFinal(t, Messages, Request{Stream: true}, string(in))
	wantEq(t, "responses arguments", r.Get(`output.#(type=="function_call")#.arguments`).Raw, `["{}","{}"]`)
	var deltas string
	for _, e := range evs {
		if e.Event == "response.function_call_arguments.delta" {
			deltas += gjson.Get(e.Data, "delta").String()
		}
	}
	wantEq(t, "responses deltas", deltas, "{}{}")

	// A chat upstream's "" arguments, streamed and whole.
	chatIn := "data: {\"id\":\"chatcmpl-1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":\"\"}}]}}]}\n\n" +
		"data: {\"id\":\"chatcmpl-1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n" +
		"data: [DONE]\n\n"
	r, _ = streamFinal(t, Chat, Request{Stream: true}, chatIn)
	wantEq(t, "chat upstream, responses arguments", r.Get("output.0.arguments").String(), "{}")
}

// A zero in message_delta does not replace message_start's input and cache
// counts.
func TestStreamMessageDeltaZeroUsage(t *testing.T) {
	in := readFile(t, "testdata/streams/messages_usage_zero_delta.sse")
	c := streamCase{cfg: Config{Upstream: Messages}, req: Request{Stream: true, IncludeUsage: true}}
	evs := parseSSE(t, runStream(Chat, &c, in, whole))
	u := gjson.Get(evs[len(evs)-2].Data, "usage")
	wantEq(t, "prompt_tokens", u.Get("prompt_tokens").Int(), int64(471+30+2048))
	wantEq(t, "cached_tokens", u.Get("prompt_tokens_details.cached_tokens").Int(), int64(2048))
	wantEq(t, "completion_tokens", u.Get("completion_tokens").Int(), int64(7))

	evs = parseSSE(t, runStream(Messages, &c, in, whole))
	for _, e := range evs {
		if e.Event == "message_delta" {
			u = gjson.Get(e.Data, "usage")
		}
	}
	wantEq(t, "messages usage", u.Raw, `{"input_tokens":471,"cache_creation_input_tokens":30,"cache_read_input_tokens":2048,"output_tokens":7}`)

	r, _ := streamFinal(t, Messages, Request{Stream: true}, string(in))
	wantEq(t, "responses input_tokens", r.Get("usage.input_tokens").Int(), int64(471+30+2048))
	wantEq(t, "responses cached_tokens", r.Get("usage.input_tokens_details.cached_tokens").Int(), int64(2048))

	// A non-zero count there is the final one.
	more := strings.Replace(string(in), `"usage":{"input_tokens":0`, `"usage":{"input_tokens":500`, 1)
	evs = parseSSE(t, runStream(Chat, &c, []byte(more), whole))
	wantEq(t, "replaced prompt_tokens", gjson.Get(evs[len(evs)-2].Data, "usage.prompt_tokens").Int(), int64(500+30+2048))
}

// Issue 31 point 6, the cases the fixtures do not show: a turn whose only
// call has no name ends as a turn without calls, and says it dropped one;
// a server without indexes that sends the id late keeps one call.
func TestStreamToolIDsAndNames(t *testing.T) {
	chunk := func(delta string) string {
		return `data: {"id":"chatcmpl-n","model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
	}
	end := `data: {"id":"chatcmpl-n","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n"
	nameless := chunk(`{"role":"assistant","content":"Let me see."}`) +
		chunk(`{"tool_calls":[{"index":0,"id":"call_x","type":"function","function":{"name":"","arguments":"{\"a\":1}"}}]}`) + end
	c := streamCase{cfg: Config{Upstream: Chat}, req: Request{Stream: true}}
	s := NewStream(Messages, Chat, c.req, &c.cfg)
	out := s.Close(s.Write(nil, []byte(nameless)))
	if strings.Contains(string(out), "tool_use\",\"id") || !strings.Contains(string(out), `"stop_reason":"end_turn"`) {
		t.Errorf("nameless call reached the client or the turn still says tool_use:\n%s", out)
	}
	wantEq(t, "DroppedCalls", s.DroppedCalls(), 1)
	r, _ := streamFinal(t, Chat, Request{Stream: true}, nameless)
	wantEq(t, "responses output", r.Get("output.#.type").Raw, `["message"]`)
	rs := NewStream(Responses, Chat, Request{Stream: true}, &c.cfg)
	rs.Close(rs.Write(nil, []byte(nameless)))
	wantEq(t, "responses DroppedCalls", rs.DroppedCalls(), 1)

	// No index: the first chunk has the name, the next the id and the
	// arguments. One call, the model's id.
	noIndex := chunk(`{"role":"assistant","content":null}`) +
		chunk(`{"tool_calls":[{"type":"function","function":{"name":"get_time","arguments":""}}]}`) +
		chunk(`{"tool_calls":[{"id":"call_late","function":{"arguments":"{\"tz\":\"UTC\"}"}}]}`) + end
	var starts []string
	for _, e := range parseSSE(t, runStream(Messages, &c, []byte(noIndex), whole)) {
		if b := gjson.Get(e.Data, "content_block"); b.Get("type").String() == "tool_use" {
			starts = append(starts, b.Get("id").String()+" "+b.Get("name").String())
		}
	}
	wantEq(t, "tool_use blocks", strings.Join(starts, ", "), "call_late get_time")
	r, _ = streamFinal(t, Chat, Request{Stream: true}, noIndex)
	wantEq(t, "responses calls", r.Get(`output.#(type=="function_call")#.call_id`).Raw, `["call_late"]`)

	// An id that never comes is made up once, and kept.
	noID := strings.ReplaceAll(noIndex, `"id":"call_late",`, "")
	evs := parseSSE(t, runStream(Messages, &c, []byte(noID), whole))
	n := 0
	for _, e := range evs {
		if id := gjson.Get(e.Data, "content_block.id").String(); strings.HasPrefix(id, "toolu_") {
			n++
		}
	}
	wantEq(t, "made-up ids", n, 1)
}
