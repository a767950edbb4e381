package translate

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The single-pass walk (walk.go) was checked against the readers before it
// (f786ef7) by differential fuzzing; what those readers made of every body
// in testdata/walk is the golden corpus (walk_golden_test.go) now. Each
// FuzzWalk* target fuzzes one pair of formats from that corpus and checks
// what holds of any body, for every configuration of that upstream:
// translating never panics; an error is a 4xx with a message, and leaves
// the buffer as it was; a translation is one JSON object appended to the
// buffer, the same on every run and whatever the buffer held; what the
// gate checked (TranslateValidRequest) translates as what it did not; and
// a body the validator alone refuses is refused.

func FuzzWalkChatPass(f *testing.F)       { fuzzWalk(f, Chat, Chat) }
func FuzzWalkMessagesPass(f *testing.F)   { fuzzWalk(f, Messages, Messages) }
func FuzzWalkMessagesToChat(f *testing.F) { fuzzWalk(f, Messages, Chat) }
func FuzzWalkChatToMessages(f *testing.F) { fuzzWalk(f, Chat, Messages) }

func fuzzWalk(f *testing.F, client, up Format) {
	for _, name := range walkGoldenFiles(f) {
		_, body, err := walkBody(parseWalkGolden(readFile(f, name)))
		if err != nil {
			f.Fatalf("%s: %v", name, err)
		}
		f.Add(body)
	}
	for _, n := range []int{1 << 10, 4 << 10} {
		f.Add(history(client, n))
	}
	var cfgs []*Config
	for i := range fuzzConfigs {
		if fuzzConfigs[i].Upstream == up {
			cfgs = append(cfgs, &fuzzConfigs[i])
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var verr *Error
		if s := trimJSON(string(body)); isObj(s) && gjson.Valid(s) {
			verr = validateBody(client, s)
		}
		for _, cfg := range cfgs {
			checkWalk(t, client, cfg, body, verr)
		}
	})
}

// checkWalk checks one translation of body by what holds of any body;
// verr is the validator's verdict on it.
func checkWalk(t *testing.T, client Format, cfg *Config, body []byte, verr *Error) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%v -> %v (%+v): "+format+"\nbody %s", append(append([]any{client, cfg.Upstream, *cfg}, args...), body)...)
	}
	out, req, err := translateRequest(client, Call{}, body, cfg, nil, false)
	if err != nil {
		if err.Status < 400 || err.Status > 499 || err.Message == "" {
			fail("error %+v: want a 4xx with a message", *err)
		}
		if len(out) != 0 || req != (Request{}) {
			fail("error %v, and %s %+v", err, out, req)
		}
	} else {
		if verr != nil {
			fail("the validator refuses (%v), the translation does not:\n%s", verr, out)
		}
		if s := trimJSON(string(out)); !isObj(s) || !gjson.Valid(s) || len(s) != len(out) {
			fail("not one JSON object: %s", out)
		}
	}
	same := func(what string, o []byte, r Request, e *Error) {
		t.Helper()
		if string(o) != string(out) || r != req || !sameError(e, err) {
			fail("%s:\n got %s %+v %v\nwant %s %+v %v", what, o, r, e, out, req, err)
		}
	}
	o, r, e := translateRequest(client, Call{}, body, cfg, nil, false)
	same("translated again", o, r, e)
	prefix := []byte("prefix")
	o, r, e = translateRequest(client, Call{}, body, cfg, prefix[:len(prefix):len(prefix)], false)
	if p, ok := bytes.CutPrefix(o, prefix); !ok {
		fail("the buffer's %q became %q", prefix, o)
	} else {
		same("after a prefix", p, r, e)
	}
	if gjson.ValidBytes(body) { // TranslateValidRequest wants what the gate checked
		o, r, e = translateRequest(client, Call{}, body, cfg, nil, true)
		same("checked", o, r, e)
	}
}

func sameError(a, b *Error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// TestWalkHistory: the benchmark's histories, every pair and
// configuration, by the fuzzers' checks (their answers are in the golden
// corpus).
func TestWalkHistory(t *testing.T) {
	for _, client := range []Format{Chat, Messages} {
		for _, n := range []int{0, 2 << 10, 20 << 10} {
			b := history(client, n)
			verr := validateBody(client, string(b))
			for i := range fuzzConfigs {
				checkWalk(t, client, &fuzzConfigs[i], b, verr)
			}
		}
	}
}

// The references for the order of tool results (issue 31), written apart
// from toolorder.go: a pass over the finished messages. dst[from:] is the
// inside of the messages array; the elements are reordered in place (the
// length stays).

// refChatToolOrder: after an assistant message with tool_calls, up to the
// next assistant message, the tool messages come first, the others after
// them, each in their order.
func refChatToolOrder(dst []byte, from int) {
	if from < len(dst) && dst[from] == ',' { // after the system message
		from++
	}
	msgs := elems("[" + string(dst[from:]) + "]")
	var out []string
	for i := 0; i < len(msgs); {
		out = append(out, msgs[i])
		role := field(msgs[i], "role")
		i++
		if !strEq(role, "assistant") || !isArr(field(msgs[i-1], "tool_calls")) {
			continue
		}
		var tools, rest []string
		for ; i < len(msgs) && !strEq(field(msgs[i], "role"), "assistant"); i++ {
			if strEq(field(msgs[i], "role"), "tool") {
				tools = append(tools, msgs[i])
			} else {
				rest = append(rest, msgs[i])
			}
		}
		out = append(append(out, tools...), rest...)
	}
	copy(dst[from:], strings.Join(out, ","))
}

// refMessagesToolOrder: in each user turn the tool_result blocks come
// first, the others after them, each in their order.
func refMessagesToolOrder(dst []byte, from int) {
	turns := elems("[" + string(dst[from:]) + "]")
	for i, t := range turns {
		if !strEq(field(t, "role"), "user") {
			continue
		}
		var results, rest []string
		for _, b := range elems(field(t, "content")) {
			if strEq(field(b, "type"), "tool_result") {
				results = append(results, b)
			} else {
				rest = append(rest, b)
			}
		}
		turns[i] = `{"role":"user","content":[` + strings.Join(append(results, rest...), ",") + `]}`
	}
	copy(dst[from:], strings.Join(turns, ","))
}

func elems(arr string) []string {
	var l []string
	it, _ := arrIter(arr)
	for {
		e, ok := it.elem()
		if !ok {
			return l
		}
		l = append(l, e)
	}
}
