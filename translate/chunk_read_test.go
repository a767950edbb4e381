package translate

import (
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The cursor sees the same members as iter, at every level, for any JSON,
// checked or not.
func TestCursorMatchesIter(t *testing.T) {
	for _, d := range []string{
		`{}`, `[]`, ` { "a" : [ 1 , {"b":"x\"}"} ] , "c":{} } `, `[[],[{}],"]",-1.5e3,true,null]`,
		`{"choices":[{"index":0,"delta":{"content":"a"}}],"usage":null}`,
	} {
		want := iterMembers(d)
		if got := cursorMembers(cursor{s: d}); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: cursor %q, iter %q", d, got, want)
		}
		if d := trimJSON(d); isObj(d) {
			c := checkedCursor(d, eventDepthLimit(d))
			c.i, c.depth = 0, 0 // cursorMembers enters the object itself
			if got := cursorMembers(c); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: checked cursor %q, iter %q", d, got, want)
			}
		}
	}
}

// cursorMembers lists every key and leaf value under the value at c,
// entering containers.
func cursorMembers(c cursor) []string {
	var l []string
	var rec func(obj bool)
	rec = func(obj bool) {
		for {
			var k string
			ok := false
			if obj {
				k, ok = c.key()
			} else {
				ok = c.more()
			}
			if !ok {
				return
			}
			l = append(l, k)
			at := c.begin()
			switch {
			case c.obj():
				rec(true)
				l = append(l, "raw:"+c.since(at))
			case c.arr():
				rec(false)
				l = append(l, "raw:"+c.since(at))
			default:
				l = append(l, c.raw())
			}
		}
	}
	switch {
	case c.obj():
		rec(true)
	case c.arr():
		rec(false)
	}
	return l
}

func iterMembers(d string) []string {
	var l []string
	var rec func(raw string)
	rec = func(raw string) {
		it, ok := objIter(raw)
		if !ok {
			it, _ = arrIter(raw)
		}
		for {
			k, v, ok := it.next()
			if !ok {
				return
			}
			l = append(l, k)
			if isObj(v) || isArr(v) {
				rec(v)
				l = append(l, "raw:"+v)
			} else {
				l = append(l, v)
			}
		}
	}
	rec(trimJSON(d))
	return l
}

// randomID matches the ids the writers make up when the upstream gave none.
var randomID = regexp.MustCompile(`(toolu_|call_|msg_|chatcmpl-|resp_)[0-9A-Za-z]{24}"`)

// chunkState is what a chunk reader leaves behind: its output and the state
// later chunks depend on.
func chunkState(s *Stream) []any {
	st := []any{randomID.ReplaceAllString(string(s.out), `$1…"`), s.u, s.done, s.finished, s.stop,
		string(s.stopSeq), s.reasonBytes, s.otherBytes, s.toolCount, s.refusal, s.sawChatUsageChunk, len(s.tools)}
	if x := s.rx; x != nil {
		st = append(st, x.seq, x.stop, x.u, x.open, x.live, len(x.items))
		for _, it := range x.items {
			// A call id made up here is random on each side.
			st = append(st, it.kind, it.state, string(it.text), randomID.ReplaceAllString(string(it.callID), `$1…"`), it.jt)
		}
	}
	return st
}

// FuzzStreamChunkReaders: the one-pass chunk readers (chatChunk, passChunk,
// sinkChunk) give the same output and state as the level-by-level readers
// they replaced (stream_old_test.go), for any event dispatch lets through;
// and a pass-through that feeds a Responses writer, which writes no
// rewrite, leaves the state a chat client's does and a view of each chunk
// that reads as the chunk that client got.
func FuzzStreamChunkReaders(f *testing.F) {
	files, _ := filepath.Glob("testdata/streams/*.sse")
	for _, name := range files {
		for _, line := range strings.Split(string(readFile(f, name)), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				f.Add(d)
			}
		}
	}
	for _, c := range [][]byte{chatContentChunk, chatReasoningChunk, chatToolChunk, chatThinkTagChunk} {
		f.Add(strings.TrimSpace(strings.TrimPrefix(string(c), "data: ")))
	}
	f.Add(`{"choices":[{"index":1,"delta":{"content":"x"}},{"delta":{"reasoning":"r"},"message":{"content":"m"},"finish_reason":"stop"}],"choices":[]}`)
	f.Add(`{"choices":[7,[],{"index":0,"delta":"x","finish_reason":"length"}],"usage":{"prompt_tokens":3}}`)
	// Read directly into a view, or left to passChunk (stream_view.go).
	f.Add(`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":"stop"}]}`)
	f.Add(`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}],"tool_calls":[{"index":0}]}}]}`)
	f.Add(`{"choices":[{"delta":{"content":"a"},"delta":{"reasoning":"b"}}],"usage":{"prompt_tokens":1},"usage":{"completion_tokens":2}}`)
	f.Add(`{"error":null,"choices":[{"index":"0","delta":{"content":"<think>r</think>t"},"finish_reason":"length"}],"error":{"message":"x"}}`)
	f.Fuzz(func(t *testing.T, d string) {
		d = trimJSON(d)
		if !isObj(d) || !validEvent(d) {
			return // dispatch fails the stream before any reader runs
		}
		d = strings.NewReplacer("\n", " ", "\r", " ").Replace(d) // as dispatch does
		type run struct {
			name           string
			client         Format
			primer         []byte
			newRun, oldRun func(s *Stream, d string)
		}
		for _, r := range []run{
			{"chat_to_messages", Messages, chatContentChunk, (*Stream).chatChunk, (*Stream).chatChunkOld},
			{"chat_to_messages/tools", Messages, chatToolChunk, (*Stream).chatChunk, (*Stream).chatChunkOld},
			{"chat_pass", Chat, chatContentChunk, (*Stream).passChunk, (*Stream).passChunkOld},
			{"chat_pass/think", Chat, chatThinkTagChunk, (*Stream).passChunk, (*Stream).passChunkOld},
			{"responses", Responses, chatContentChunk, (*Stream).sinkChunk, (*Stream).respChunkOld},
			{"responses/tools", Responses, chatToolChunk, (*Stream).sinkChunk, (*Stream).respChunkOld},
		} {
			a, b := primed(r.client, Chat, r.primer), primed(r.client, Chat, r.primer)
			// v is a pass-through that feeds a Responses writer: it writes
			// no rewrite, and its view of each chunk must be what the
			// Responses writer would read of the chunk a chat client gets.
			// dv reads the chunk into its view directly where it can
			// (viewChunk): its view and state must be v's.
			var v, dv *Stream
			if r.client == Chat {
				v, dv = primed(Chat, Chat, r.primer), primed(Chat, Chat, r.primer)
				v.keepView, dv.keepView = true, true
			}
			// Twice: the second read sees the first's state.
			for i := 0; i < 2; i++ {
				a.out, b.out = nil, nil
				if !a.done {
					r.newRun(a, d)
				}
				if !b.done {
					r.oldRun(b, d)
				}
				if got, want := chunkState(a), chunkState(b); !reflect.DeepEqual(got, want) {
					t.Fatalf("%s, read %d of %s:\nnew %v\nold %v", r.name, i+1, d, got, want)
				}
				if v != nil && !v.done {
					v.out, dv.out = nil, nil
					v.takeViews()
					dv.takeViews()
					v.passChunk(d)
					if !dv.viewChunk(d) {
						dv.passChunk(d)
					}
					checkDirectView(t, r.name, d, dv, v)
					checkView(t, r.name, d, v, a)
				}
			}
		}
	})
}

// checkView compares the view that v, a pass-through for a Responses
// writer, kept of the chunk d with what the Responses writer reads
// (respRead) of the chunk a chat client got from a, and their states.
func checkView(t *testing.T, name, d string, v, a *Stream) {
	t.Helper()
	var want []string
	if out, ok := strings.CutPrefix(string(a.out), "data: "); ok && !a.done {
		var r chunkRead
		r.read(strings.TrimSuffix(out, "\n\n"))
		want = respReading(&r)
	}
	var got []string
	if len(v.views) > 1 {
		t.Fatalf("%s: %d views of one chunk %s", name, len(v.views), d)
	}
	if len(v.views) == 1 {
		got = respReading(&v.views[0].r)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: view of %s\n got %q\nwant %q\nchat client got %s", name, d, got, want, a.out)
	}
	a.out, v.out = nil, nil // the outputs differ: one chunk is the rewrite, the other the upstream's
	if got, want := chunkState(v), chunkState(a); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: state after %s:\nview %v\nchat %v", name, d, got, want)
	}
}

// checkDirectView compares what dv, a pass-through for a Responses writer
// that read the chunk d into its view directly where it could, left with
// what v, which passed it with passChunk, left: views, output and state.
func checkDirectView(t *testing.T, name, d string, dv, v *Stream) {
	t.Helper()
	if len(dv.views) != len(v.views) {
		t.Fatalf("%s: %d views of %s read directly, %d passed", name, len(dv.views), d, len(v.views))
	}
	for i := range v.views {
		if got, want := respReading(&dv.views[i].r), respReading(&v.views[i].r); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: view of %s\nread directly %q\npassed        %q", name, d, got, want)
		}
	}
	if got, want := chunkState(dv), chunkState(v); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: state after %s:\nread directly %v\npassed        %v", name, d, got, want)
	}
}

// respReading is what respRead reads of a chunk.
func respReading(r *chunkRead) []string {
	text := func(v string) string {
		if isStr(v) && !emptyStr(v) {
			return v
		}
		return ""
	}
	l := []string{fmt.Sprint(isNull(r.top.err)), r.top.id, r.top.model, r.top.usage}
	for i := range r.choices {
		c := &r.choices[i]
		x := &c.delta.chunkDelta
		l = append(l, fmt.Sprint(isObj(c.chunkChoice.delta)), text(c.finish), text(x.reasoningContent), text(x.content), x.toolCalls)
	}
	return l
}

// A Responses writer does not read again a chunk the inner pass-through
// passed (however many one write holds), whether the pass-through rewrote
// it or not.
func TestResponsesReadsPassedChunkOnce(t *testing.T) {
	s := primed(Responses, Chat, chatContentChunk)
	const unread = "unread"
	readAgain := func() bool { return s.cr.top.id != unread }

	s.cr.top.id = unread
	out := s.Write(nil, chatContentChunk)
	if readAgain() || len(s.pv.inner.views) != 1 || !strings.Contains(string(out), `"delta":" the linker"`) {
		t.Fatalf("read again %v, %d views\n%s", readAgain(), len(s.pv.inner.views), out)
	}
	// A chunk the pass-through rewrote is read through its view too.
	renamed := strings.Replace(string(chatReasoningChunk), `"reasoning_content"`, `"reasoning"`, 1)
	out = s.Write(nil, []byte(renamed))
	if readAgain() || len(s.pv.inner.views) != 1 || !strings.Contains(string(out), "response.reasoning_summary_text.delta") {
		t.Fatalf("rewritten chunk: read again %v, %d views\n%s", readAgain(), len(s.pv.inner.views), out)
	}
	// Three chunks in one write, then the data line of a fourth, read after
	// the data the views point into: each is read once, through its view.
	s.cr.top.id = unread
	fourth := chatContentChunk[:len(chatContentChunk)-1] // no blank line yet
	three := slices.Concat(chatContentChunk, chatContentChunk, chatContentChunk, fourth)
	out = s.Write(nil, three)
	if got := strings.Count(string(out), "event: response.output_text.delta"); got != 3 || readAgain() || len(s.pv.inner.views) != 3 {
		t.Fatalf("%d deltas, read again %v, %d views\n%s", got, readAgain(), len(s.pv.inner.views), out)
	}
	// The fourth's data moves to the front of the buffer and is read whole.
	out = s.Write(nil, []byte("\n"))
	if got := strings.Count(string(out), `"delta":" the linker"`); got != 1 || len(s.pv.inner.views) != 1 {
		t.Fatalf("fourth chunk: %d deltas, %d views\n%s", got, len(s.pv.inner.views), out)
	}
	// Once the event data has grown to hold a write's events, nothing is
	// allocated for them.
	many := slices.Concat(chatContentChunk, chatContentChunk, chatContentChunk, chatContentChunk)
	out = s.Write(out[:0], many)
	if n := testing.AllocsPerRun(50, func() { out = s.Write(out[:0], many) }); n != 0 {
		t.Errorf("%v allocations per write", n)
	}
}

// FuzzCheckedCursor: an event read as it is validated (checkedCursor) is
// refused exactly when validEvent refuses it, and a chat chunk it accepts
// reads as the unchecked cursor reads it. A refused event fails the stream
// before the client sees any of it, in every direction: the client gets
// what an event that is not JSON at all gets, which dispatch refuses before
// any reader runs.
func FuzzCheckedCursor(f *testing.F) {
	for _, c := range [][]byte{chatContentChunk, chatReasoningChunk, chatToolChunk, chatThinkTagChunk} {
		f.Add(strings.TrimSpace(strings.TrimPrefix(string(c), "data: ")))
	}
	for _, d := range []string{
		`{}`, `{ }`, `{,}`, `{"a":1,}`, `{"a":1 "b":2}`, `{,"a":1}`, `{"a":1,,"b":2}`, `{"a" 1}`, `{"a":}`,
		`{"choices":[{"delta":{"content":"x"}},]}`, `{"choices":[,{"delta":{"content":"x"}}]}`,
		`{"choices":[{"delta":{"content":"x"} "index":0}]}`, `{"choices":[{"delta":{"content":"x\q"}}]}`,
		"{\"choices\":[{\"delta\":{\"content\":\"a\tb\"}}]}", `{"choices":[{"index":01,"delta":{}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":nul}]}`, `{"id":"x"}}`, `{"id":"x"} 1`,
		`{"k\u00":1}`, `{"error":{"message":"boom"},"choices":[}`, `{"error":{"message":"boom"},"id":tru}`,
		`{"choices":[{"index":0,"delta":{"reasoning":"r","content":"<think>a"}}],"usage":{"prompt_tokens":1},}`,
		`{"choices":[[[[]]]],"usage":{"a":[{"b":[]}]}}`,
	} {
		f.Add(d)
	}
	// Past 64 KiB an event may nest 64 deep: 63 levels pass, 65 do not.
	pad := `"pad":"` + strings.Repeat("x", 1<<16) + `",`
	for _, n := range []int{63, 65} {
		f.Add(`{` + pad + `"choices":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`)
	}
	f.Fuzz(func(t *testing.T, d string) {
		d = trimJSON(d)
		if !isObj(d) || strings.ContainsAny(d, "\r\n") {
			return // dispatch validates these before any reader runs
		}
		valid := validEvent(d)
		w := checkedCursor(d, eventDepthLimit(d))
		if w.skipObj(); w.whole() != valid {
			t.Fatalf("checked cursor: whole %v, validEvent %v: %s", w.whole(), valid, d)
		}
		var got chunkRead
		if ok := got.readChecked(d); ok != valid {
			t.Fatalf("readChecked %v, validEvent %v: %s", ok, valid, d)
		}
		if valid {
			var want chunkRead
			want.read(d)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("checked read of %s\n%+v\nwant %+v", d, got, want)
			}
			return
		}
		primers := map[Format][][]byte{
			Chat:     {chatContentChunk, chatThinkTagChunk, chatToolChunk},
			Messages: {messagesTextEvent, messagesThinkEvent},
		}
		for up, list := range primers {
			for _, client := range []Format{Chat, Messages, Responses} {
				for _, primer := range list {
					a, b := primed(client, up, primer), primed(client, up, primer)
					event := "event: content_block_delta\ndata: "
					got, want := a.Write(nil, []byte(event+d+"\n\n")), b.Write(nil, []byte(event+"x\n\n"))
					if string(got) != string(want) || !a.Done() {
						t.Fatalf("%v <- %v: refused event %s\ngot  %s\nwant %s", client, up, d, got, want)
					}
				}
			}
		}
	})
}
