package translate

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The single-pass walk (walk.go) must not change what a request becomes:
// each FuzzWalk* target runs one pair of formats through today's code and
// through the code before the walk (walk_ref_test.go, generated from
// f786ef7) and wants the same bytes, the same Request and the same error,
// for every configuration of that upstream, and the same verdict from the
// validator alone.

func FuzzWalkChatPass(f *testing.F)       { fuzzWalk(f, Chat, Chat) }
func FuzzWalkMessagesPass(f *testing.F)   { fuzzWalk(f, Messages, Messages) }
func FuzzWalkMessagesToChat(f *testing.F) { fuzzWalk(f, Messages, Chat) }
func FuzzWalkChatToMessages(f *testing.F) { fuzzWalk(f, Chat, Messages) }

func fuzzWalk(f *testing.F, client, up Format) {
	seedFiles(f, "requests/*.in.json")
	seedClientBodies(f)
	for _, c := range refusedShapes[client] {
		f.Add([]byte(c.body))
	}
	for _, b := range acceptedShapes[client] {
		f.Add([]byte(b))
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
		for _, cfg := range cfgs {
			checkWalk(t, client, cfg, body)
		}
		if s := trimJSON(string(body)); isObj(s) && gjson.Valid(s) {
			got, want := validateBody(client, s), oldValidateBody(client, s)
			if !sameError(got, want) {
				t.Fatalf("validator: %v, want %v\n%s", got, want, body)
			}
		}
	})
}

// checkWalk compares one translation with the reference.
func checkWalk(t *testing.T, client Format, cfg *Config, body []byte) {
	t.Helper()
	for _, valid := range []bool{false, true} {
		if valid && !gjson.ValidBytes(body) {
			continue // TranslateValidRequest wants what the gate checked
		}
		out, req, err := translateRequest(client, body, cfg, nil, valid)
		wout, wreq, werr := oldTranslateRequest(client, body, cfg, nil, valid)
		if string(out) != string(wout) || req != wreq || !sameError(err, werr) {
			t.Fatalf("%v -> %v (%+v, valid %v):\n got %s %+v %v\nwant %s %+v %v\nbody %s",
				client, cfg.Upstream, *cfg, valid, out, req, err, wout, wreq, werr, body)
		}
	}
}

// oldTranslateRequest is translateRequest with the readers at f786ef7.
func oldTranslateRequest(client Format, body []byte, cfg *Config, buf []byte, checked bool) ([]byte, Request, *Error) {
	s, err := checkRequest(body, cfg, checked)
	if err != nil {
		return buf, Request{}, err
	}
	mark := len(buf)
	var (
		out []byte
		req Request
	)
	switch {
	case client == Messages && cfg.Upstream == Chat:
		out, req, err = oldMessagesToChat(buf, s, cfg)
	case client == Chat && cfg.Upstream == Messages:
		out, req, err = oldChatToMessages(buf, s, cfg)
	case client == Chat || client == Messages:
		out, req, err = oldPassRequest(client, buf, s, cfg)
	default:
		out, req, err = responsesRequest(buf, s, cfg)
	}
	if err != nil {
		return buf[:mark], Request{}, err
	}
	return out, req, nil
}

func sameError(a, b *Error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func oldValidateBody(f Format, s string) *Error {
	it, _ := objIter(s)
	for {
		k, v, ok := it.next()
		if !ok {
			return nil
		}
		if err := oldValidateMember(f, k, v); err != nil {
			return err
		}
	}
}

// TestWalkHistory: the benchmark's histories, and the captured clients'
// bodies, every pair and configuration, as the reference reads them.
func TestWalkHistory(t *testing.T) {
	for _, client := range []Format{Chat, Messages} {
		for _, n := range []int{0, 2 << 10, 20 << 10} {
			for i := range fuzzConfigs {
				checkWalk(t, client, &fuzzConfigs[i], history(client, n))
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
