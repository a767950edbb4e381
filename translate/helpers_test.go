package translate

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

func TestMain(m *testing.M) {
	// Pin chat's `created`, so that rewritten goldens do not churn.
	now = func() time.Time { return time.Unix(1732280000, 0) }
	os.Exit(m.Run())
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func unmarshal(t testing.TB, what string, b []byte) any {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s is not JSON: %v\n%s", what, err, b)
	}
	return v
}

func pretty(b []byte) []byte {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return b
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// normalize drops what differs from run to run: chunk creation times.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "created" {
				x[k] = "*"
				continue
			}
			x[k] = normalize(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
	}
	return v
}

// compareJSON compares got with the golden file structurally (or rewrites it).
func compareJSON(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, pretty(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readFile(t, golden)
	g, w := normalize(unmarshal(t, "output", got)), normalize(unmarshal(t, golden, want))
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: output differs\n got: %s\nwant: %s", golden, pretty(got), want)
	}
}

// sseEvent is one parsed event: its name (may be empty) and data.
type sseEvent struct {
	Event string
	Data  string
}

func parseSSE(t testing.TB, b []byte) []sseEvent {
	t.Helper()
	var evs []sseEvent
	for _, block := range strings.Split(string(b), "\n\n") {
		if strings.TrimSpace(block) == "" {
			continue
		}
		var ev sseEvent
		comment := true
		for _, line := range strings.Split(block, "\n") {
			if strings.HasPrefix(line, ":") {
				continue // keep-alive comment
			}
			comment = false
			name, val, _ := strings.Cut(line, ":")
			val = strings.TrimPrefix(val, " ")
			switch name {
			case "event":
				ev.Event = val
			case "data":
				if ev.Data != "" {
					ev.Data += "\n"
				}
				ev.Data += val
			default:
				t.Fatalf("unexpected SSE line %q", line)
			}
		}
		if !comment {
			evs = append(evs, ev)
		}
	}
	if !bytes.HasSuffix(b, []byte("\n\n")) && len(b) > 0 {
		t.Fatalf("SSE output does not end with a blank line")
	}
	return evs
}

// compareSSE compares SSE output with the golden file event by event,
// each event's data structurally.
func compareSSE(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	g, w := parseSSE(t, got), parseSSE(t, readFile(t, golden))
	if len(g) != len(w) {
		t.Errorf("%s: %d events, want %d\n%s", golden, len(g), len(w), got)
		return
	}
	for i := range g {
		if g[i].Event != w[i].Event {
			t.Errorf("%s: event %d is %q, want %q", golden, i, g[i].Event, w[i].Event)
			continue
		}
		if g[i].Data == "[DONE]" || w[i].Data == "[DONE]" {
			if g[i].Data != w[i].Data {
				t.Errorf("%s: event %d data %q, want %q", golden, i, g[i].Data, w[i].Data)
			}
			continue
		}
		gv := normalize(unmarshal(t, "event", []byte(g[i].Data)))
		wv := normalize(unmarshal(t, "golden event", []byte(w[i].Data)))
		if !reflect.DeepEqual(gv, wv) {
			t.Errorf("%s: event %d differs\n got: %s\nwant: %s", golden, i, g[i].Data, w[i].Data)
		}
	}
}

func fixtures(t *testing.T, dir, ext string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	if err != nil || len(m) == 0 {
		t.Fatalf("no fixtures in testdata/%s", dir)
	}
	return m
}

// checkMessagesGrammar checks a messages SSE stream: one message_start
// first, blocks opened in index order one at a time, deltas only into the
// open block and of its kind, every block closed, then message_delta and
// message_stop — or an error event, which ends the stream. Tool inputs must
// add up to JSON objects.
func checkMessagesGrammar(evs []sseEvent, o grammarOpts) error {
	if len(evs) == 0 {
		return fmt.Errorf("empty stream")
	}
	started, stopped, deltaSeen := false, false, false
	open, next := -1, 0
	var kind string
	var badInput error // tolerated only when the turn was cut by max_tokens
	var input strings.Builder
	for i, ev := range evs {
		if stopped {
			return fmt.Errorf("event %d (%s) after the end", i, ev.Event)
		}
		var d map[string]any
		if err := decodeNum(ev.Data, &d); err != nil {
			return fmt.Errorf("event %d: data is not JSON: %v", i, err)
		}
		if d["type"] != ev.Event {
			return fmt.Errorf("event %d: event %q carries type %v", i, ev.Event, d["type"])
		}
		if ev.Event == "error" {
			e, _ := d["error"].(map[string]any)
			if e == nil || e["type"] == nil || e["message"] == nil {
				return fmt.Errorf("event %d: malformed error %s", i, ev.Data)
			}
			stopped = true
			continue
		}
		if !started && ev.Event != "message_start" {
			return fmt.Errorf("event %d: %s before message_start", i, ev.Event)
		}
		idx := -1
		if f, ok := toF(d["index"]); ok {
			idx = int(f)
		}
		switch ev.Event {
		case "message_start":
			if started {
				return fmt.Errorf("event %d: second message_start", i)
			}
			started = true
		case "content_block_start":
			if open >= 0 {
				return fmt.Errorf("event %d: block %d opened while %d is open", i, idx, open)
			}
			if idx != next || deltaSeen {
				return fmt.Errorf("event %d: block index %d, want %d", i, idx, next)
			}
			cb, _ := d["content_block"].(map[string]any)
			kind, _ = cb["type"].(string)
			open = idx
			next++
			input.Reset()
		case "content_block_delta":
			if idx != open || open < 0 {
				return fmt.Errorf("event %d: delta into block %d, open is %d", i, idx, open)
			}
			dl, _ := d["delta"].(map[string]any)
			dt, _ := dl["type"].(string)
			ok := map[string][]string{
				"text":     {"text_delta", "citations_delta"},
				"thinking": {"thinking_delta", "signature_delta"},
				"tool_use": {"input_json_delta"},
			}[kind]
			if ok != nil && !contains(ok, dt) {
				return fmt.Errorf("event %d: %s into a %s block", i, dt, kind)
			}
			if dt == "input_json_delta" {
				p, _ := dl["partial_json"].(string)
				input.WriteString(p)
			}
		case "content_block_stop":
			if idx != open || open < 0 {
				return fmt.Errorf("event %d: stop of block %d, open is %d", i, idx, open)
			}
			if kind == "tool_use" && input.Len() > 0 {
				var obj map[string]any
				if err := json.Unmarshal([]byte(input.String()), &obj); err != nil {
					badInput = fmt.Errorf("event %d: tool input %q is not an object: %v", i, input.String(), err)
				}
			}
			open = -1
		case "message_delta":
			if open >= 0 {
				return fmt.Errorf("event %d: message_delta with block %d open", i, open)
			}
			dl, _ := d["delta"].(map[string]any)
			sr, ok := dl["stop_reason"].(string)
			if !ok {
				return fmt.Errorf("event %d: message_delta without stop_reason", i)
			}
			if badInput != nil && sr != "max_tokens" && o.content {
				return badInput
			}
			u, _ := d["usage"].(map[string]any)
			for _, k := range []string{"input_tokens", "output_tokens", "cache_read_input_tokens"} {
				if _, ok := toF(u[k]); !ok {
					return fmt.Errorf("event %d: usage lacks %s", i, k)
				}
			}
			deltaSeen = true
		case "message_stop":
			if !deltaSeen {
				return fmt.Errorf("event %d: message_stop without message_delta", i)
			}
			stopped = true
		case "ping":
		default:
			return fmt.Errorf("event %d: unknown event %q", i, ev.Event)
		}
	}
	if !stopped {
		return fmt.Errorf("stream does not end with message_stop or error")
	}
	return nil
}

func contains(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

// grammarOpts relaxes the checks: content asks for content checks too (tool
// inputs that add up to objects, reasoning before text), which only hold when
// the upstream's own content is sound; pass marks a chat pass-through, where
// the upstream's chunks are forwarded as they are.
type grammarOpts struct{ content, pass bool }

// checkChatGrammar checks a chat SSE stream: chunks, each a JSON object, at
// most one finish_reason per choice and nothing after it but usage, tool
// arguments that add up to JSON objects, [DONE] last. strictOrder also asks
// that no reasoning follows answer text.
func checkChatGrammar(evs []sseEvent, o grammarOpts) error {
	if len(evs) == 0 || evs[len(evs)-1].Data != "[DONE]" {
		return fmt.Errorf("stream does not end with [DONE]")
	}
	finished := map[float64]bool{}
	args := map[string]*strings.Builder{}
	text := map[float64]bool{}
	failed, cut := false, false
	for i, ev := range evs[:len(evs)-1] {
		if ev.Event != "" {
			return fmt.Errorf("event %d: chat streams carry no event names (%q)", i, ev.Event)
		}
		if ev.Data == "[DONE]" {
			return fmt.Errorf("event %d: [DONE] before the end", i)
		}
		if failed {
			return fmt.Errorf("event %d after an error", i)
		}
		var d map[string]any
		if err := decodeNum(ev.Data, &d); err != nil {
			return fmt.Errorf("event %d: data is not JSON: %v", i, err)
		}
		if e, ok := d["error"].(map[string]any); ok {
			if _, ok := e["message"].(string); !ok {
				return fmt.Errorf("event %d: malformed error", i)
			}
			failed = true
			continue
		}
		choices, _ := d["choices"].([]any)
		for _, c := range choices {
			cm, _ := c.(map[string]any)
			idx, _ := toF(cm["index"])
			dl, _ := cm["delta"].(map[string]any)
			if finished[idx] && len(dl) > 0 && !o.pass {
				return fmt.Errorf("event %d: delta after finish_reason on choice %v", i, idx)
			}
			if s, _ := dl["reasoning_content"].(string); s != "" && text[idx] && o.content && !o.pass {
				return fmt.Errorf("event %d: reasoning after answer text", i)
			}
			if s, _ := dl["content"].(string); s != "" {
				text[idx] = true
			}
			tcs, _ := dl["tool_calls"].([]any)
			for _, tc := range tcs {
				tm, _ := tc.(map[string]any)
				k := fmt.Sprint(idx, "/", tm["index"])
				if args[k] == nil {
					args[k] = &strings.Builder{}
				}
				fn, _ := tm["function"].(map[string]any)
				a, _ := fn["arguments"].(string)
				args[k].WriteString(a)
			}
			if fr, ok := cm["finish_reason"].(string); ok {
				if fr == "length" {
					cut = true
				}
				if finished[idx] && !o.pass {
					return fmt.Errorf("event %d: second finish_reason on choice %v", i, idx)
				}
				finished[idx] = true
			}
		}
	}
	if !failed && !cut && o.content && !o.pass {
		for k, a := range args {
			if a.Len() == 0 {
				continue
			}
			var obj map[string]any
			if err := json.Unmarshal([]byte(a.String()), &obj); err != nil {
				return fmt.Errorf("tool call %s: arguments %q are not an object", k, a.String())
			}
		}
	}
	return nil
}

func decodeNum(s string, v any) error {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}

func toF(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return 0, true // a number, just not a float64 one
		}
		return f, true
	}
	return 0, false
}
