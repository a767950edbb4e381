package translate

import (
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The walk sees the same members as iter, at every level, for any JSON.
func TestWalkMatchesIter(t *testing.T) {
	for _, d := range []string{
		`{}`, `[]`, ` { "a" : [ 1 , {"b":"x\"}"} ] , "c":{} } `, `[[],[{}],"]",-1.5e3,true,null]`,
		`{"choices":[{"index":0,"delta":{"content":"a"}}],"usage":null}`,
	} {
		if got, want := walkMembers(d), iterMembers(d); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: walk %q, iter %q", d, got, want)
		}
	}
}

// walkMembers lists every key and leaf value under d, entering containers.
func walkMembers(d string) []string {
	w, ok := walkAt(d, 0)
	if !ok {
		return nil
	}
	var l []string
	var rec func(w *walk)
	rec = func(w *walk) {
		for {
			k, ok := w.next()
			if !ok {
				return
			}
			l = append(l, k)
			open := byte(0)
			if w.i < len(w.s) {
				open = w.s[w.i]
			}
			if in, ok := w.enter(open); ok && (open == '{' || open == '[') {
				rec(&in)
				l = append(l, "raw:"+w.leave(&in))
			} else {
				l = append(l, w.value())
			}
		}
	}
	rec(&w)
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
// respChunk) give the same output and state as the level-by-level readers
// they replaced (stream_old_test.go), for any event dispatch lets through.
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
			{"responses", Responses, chatContentChunk, (*Stream).respChunk, (*Stream).respChunkOld},
			{"responses/tools", Responses, chatToolChunk, (*Stream).respChunk, (*Stream).respChunkOld},
		} {
			a, b := primed(r.client, Chat, r.primer), primed(r.client, Chat, r.primer)
			a.keepView = r.client == Chat // as for a Responses writer
			// Twice: the second read sees the first's state.
			for i := 0; i < 2; i++ {
				a.out, b.out = nil, nil
				if !a.done {
					r.newRun(a, d)
					for _, v := range a.views {
						// A chunk passed as it came: the view is what
						// the Responses writer would read of it.
						var want chunkRead
						want.read(b2s(a.out[v.at:]))
						if !reflect.DeepEqual(v.r, want) {
							t.Fatalf("%s: view of %s\n%+v\nwant %+v", r.name, d, v.r, want)
						}
					}
					a.takeViews()
				}
				if !b.done {
					r.oldRun(b, d)
				}
				if got, want := chunkState(a), chunkState(b); !reflect.DeepEqual(got, want) {
					t.Fatalf("%s, read %d of %s:\nnew %v\nold %v", r.name, i+1, d, got, want)
				}
			}
		}
	})
}

// A Responses writer does not read again a chunk the inner pass-through
// passed as it came (however many one write holds); it reads one the
// pass-through rewrote.
func TestResponsesReadsPassedChunkOnce(t *testing.T) {
	s := primed(Responses, Chat, chatContentChunk)
	const unread = "unread"
	readAgain := func() bool { return s.cr.top.id != unread }

	s.cr.top.id = unread
	out := s.Write(nil, chatContentChunk)
	if readAgain() || len(s.rx.inner.views) != 1 || !strings.Contains(string(out), `"delta":" the linker"`) {
		t.Fatalf("read again %v, %d views\n%s", readAgain(), len(s.rx.inner.views), out)
	}
	renamed := strings.Replace(string(chatReasoningChunk), `"reasoning_content"`, `"reasoning"`, 1)
	out = s.Write(nil, []byte(renamed))
	if !readAgain() || len(s.rx.inner.views) != 0 || !strings.Contains(string(out), "response.reasoning_summary_text.delta") {
		t.Fatalf("rewritten chunk: read again %v, %d views\n%s", readAgain(), len(s.rx.inner.views), out)
	}
	// Three chunks in one write, then the data line of a fourth, read after
	// the data the views point into: each is read once, through its view.
	s.cr.top.id = unread
	fourth := chatContentChunk[:len(chatContentChunk)-1] // no blank line yet
	three := slices.Concat(chatContentChunk, chatContentChunk, chatContentChunk, fourth)
	out = s.Write(nil, three)
	if got := strings.Count(string(out), "event: response.output_text.delta"); got != 3 || readAgain() || len(s.rx.inner.views) != 3 {
		t.Fatalf("%d deltas, read again %v, %d views\n%s", got, readAgain(), len(s.rx.inner.views), out)
	}
	// The fourth's data moves to the front of the buffer and is read whole.
	out = s.Write(nil, []byte("\n"))
	if got := strings.Count(string(out), `"delta":" the linker"`); got != 1 || len(s.rx.inner.views) != 1 {
		t.Fatalf("fourth chunk: %d deltas, %d views\n%s", got, len(s.rx.inner.views), out)
	}
	// Once the event data has grown to hold a write's events, nothing is
	// allocated for them.
	many := slices.Concat(chatContentChunk, chatContentChunk, chatContentChunk, chatContentChunk)
	out = s.Write(out[:0], many)
	if n := testing.AllocsPerRun(50, func() { out = s.Write(out[:0], many) }); n != 0 {
		t.Errorf("%v allocations per write", n)
	}
}
