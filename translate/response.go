package translate

import (
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"strings"
	"unicode/utf8"
)

// TranslateResponse rewrites a whole (non-streaming, 2xx) upstream response
// body for the client, appending to dst. Pass-through (client == upstream)
// only normalises: reasoning out of inline <think> tags and the `reasoning`
// field, the stop reason of tool turns, and usage completed with zeros. An
// upstream body that is not a response is a 502 in the client's format.
func TranslateResponse(client, upstream Format, body []byte, req Request, cfg *Config, dst []byte) ([]byte, *Error) {
	s := trimJSON(b2s(body))
	// The check finds the error member on its way: the first one counts,
	// as field would find it, without a second pass over the answer.
	var e string
	if !isObj(s) || !scanMembers(s, cfg.maxDepth(), func(k, v string) {
		if e == "" && k == `"error"` {
			e = v
		}
	}) {
		return dst, NewError(http.StatusBadGateway, APIError, "the upstream answered with a body that is not a JSON object")
	}
	if !isNull(e) {
		return dst, UpstreamError(http.StatusBadGateway, body)
	}
	prefilled := cfg.ThinkPrefilled && req.Reasoning
	c, ok := codecFor(client)
	if !ok {
		c = &codecs[upstream]
	}
	return c.response(dst, s, upstream, &req, prefilled), nil
}

// answer is a response's content, gathered for rewriting.
type answer struct {
	reasoning, text    string // decoded
	reasonLit, textLit string // raw literals, used when nothing was decoded
	stop               stopReason
	stopSeq            string // raw literal
	refusal            bool
	tools              int
}

// splitAnswer settles reasoning and text: reasoning the upstream separated
// wins; otherwise inline <think> tags are split out of the text.
func (a *answer) split(prefilled bool) {
	if a.reasonLit != "" || a.reasoning != "" {
		return
	}
	if a.textLit != "" && strings.IndexByte(a.textLit, '<') < 0 && !strings.Contains(a.textLit, `\u003`) && !prefilled {
		return
	}
	t := a.text
	if a.textLit != "" {
		t = str(a.textLit)
	}
	if r, rest, ok := splitThink(t, prefilled); ok {
		a.reasoning, a.text, a.textLit = r, rest, ""
	}
}

func (a *answer) appendReasoning(dst []byte) []byte {
	if a.reasonLit != "" {
		return append(dst, a.reasonLit...)
	}
	return appendStr(dst, a.reasoning)
}

func (a *answer) appendText(dst []byte) []byte {
	if a.textLit != "" {
		return append(dst, a.textLit...)
	}
	return appendStr(dst, a.text)
}

func (a *answer) hasReasoning() bool {
	return (a.reasonLit != "" && !emptyStr(a.reasonLit)) || a.reasoning != ""
}

func (a *answer) hasText() bool {
	return (a.textLit != "" && !emptyStr(a.textLit)) || a.text != ""
}

func (a *answer) reasonLen() int64 {
	if a.reasonLit != "" {
		return int64(len(a.reasonLit) - 2)
	}
	return int64(len(a.reasoning))
}

func (a *answer) textLen() int64 {
	if a.textLit != "" {
		return int64(len(a.textLit) - 2)
	}
	return int64(len(a.text))
}

func (a *answer) finalStop() stopReason {
	r := a.stop
	if r == stopNone {
		r = stopEnd
	}
	if r == stopEnd && a.tools > 0 {
		r = stopTool
	}
	if r == stopTool && a.tools == 0 {
		r = stopEnd // no call to run (one without a name is dropped)
	}
	if r == stopEnd && a.refusal {
		r = stopRefusal
	}
	return r
}

// chatMessageReader gathers a chat message into an answer, member by member.
type chatMessageReader struct{ rc, rs, calls string }

func (r *chatMessageReader) member(a *answer, k, v string) {
	switch k {
	case "content":
		if isStr(v) {
			a.textLit = v
		} else if pi, ok := arrIter(v); ok { // content parts
			var b []byte
			for {
				p, ok := pi.elem()
				if !ok {
					break
				}
				if t := field(p, "text"); isStr(t) {
					b = appendUnescaped(b, inner(t))
				}
			}
			a.text = string(b)
		}
	case "reasoning_content":
		r.rc = v
	case "reasoning":
		r.rs = v
	case "refusal":
		if isStr(v) && !emptyStr(v) {
			a.refusal = true
			if !a.hasText() {
				a.textLit = v
			}
		}
	case "tool_calls":
		r.calls = v
	}
}

// finish settles the reasoning and counts the tool calls; it returns the
// message's tool_calls (raw).
func (r *chatMessageReader) finish(a *answer) string {
	if isStr(r.rc) && !emptyStr(r.rc) {
		a.reasonLit = r.rc
	} else if isStr(r.rs) && !emptyStr(r.rs) {
		a.reasonLit = r.rs
	}
	calls := r.calls
	if ci, ok := arrIter(calls); ok {
		for {
			c, ok := ci.elem()
			if !ok {
				break
			}
			if _, name, _ := readChatCall(c); named(name) {
				a.tools++
			}
		}
	}
	return calls
}

// named reports whether a tool call's name (a literal) names a tool. A call
// without one is dropped on the way to a messages or Responses client: no
// client can run it (dropTool).
func named(name string) bool { return isStr(name) && !emptyStr(name) }

func chatResponseToMessages(dst []byte, s string, prefilled bool) []byte {
	var cc chatCompletion
	cc.read(s)
	a, calls, u := &cc.a, cc.calls, &cc.u
	matched := cc.stopReason
	if !isStr(matched) {
		matched = cc.matchedStop
	}
	if a.stop == stopEnd && isStr(matched) && !emptyStr(matched) {
		a.stop, a.stopSeq = stopSeq, matched
	}
	a.split(prefilled)

	dst = append(dst, `{"id":`...)
	dst = appendID(dst, Messages, []byte(str(cc.id)))
	dst = append(dst, `,"type":"message","role":"assistant","model":`...)
	dst = appendModel(dst, cc.model)
	dst = append(dst, `,"content":[`...)
	if a.hasReasoning() {
		dst = append(dst, `{"type":"thinking","thinking":`...)
		mark := len(dst)
		dst = a.appendReasoning(dst)
		dst = appendSignature(dst, dst[mark:])
	}
	if a.hasText() {
		dst = sep(dst)
		dst = append(dst, `{"type":"text","text":`...)
		dst = a.appendText(dst)
		dst = append(dst, '}')
	}
	if ti, ok := arrIter(calls); ok {
		for {
			c, ok := ti.elem()
			if !ok {
				break
			}
			idLit, name, args := readChatCall(c)
			if !named(name) {
				continue
			}
			dst = sep(dst)
			dst = append(dst, `{"type":"tool_use","id":`...)
			dst = appendToolID(dst, []byte(idLit), Messages)
			dst = append(dst, `,"name":`...)
			dst = append(dst, name...)
			dst = append(dst, `,"input":`...)
			dst = appendArgsObject(dst, args)
			dst = append(dst, '}')
		}
	}
	stop := a.finalStop()
	dst = append(dst, `],"stop_reason":"`...)
	dst = append(dst, messagesStop[stop]...)
	dst = append(dst, `","stop_sequence":`...)
	if stop == stopSeq && a.stopSeq != "" {
		dst = append(dst, a.stopSeq...)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"usage":`...)
	dst = u.appendMessages(dst)
	return append(dst, '}')
}

func appendModel(dst []byte, model string) []byte {
	if isStr(model) {
		return append(dst, model...)
	}
	return append(dst, `""`...)
}

func messagesResponseToChat(dst []byte, s string, prefilled bool) []byte {
	var id, model, content, stopV, usageV string
	it, _ := objIter(s)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch k {
		case "id":
			id = v
		case "model":
			model = v
		case "content":
			content = v
		case "stop_reason":
			stopV = v
		case "usage":
			usageV = v
		}
	}
	var a answer
	var text, reasoning []byte
	if bi, ok := arrIter(content); ok {
		for {
			b, ok := bi.elem()
			if !ok {
				break
			}
			switch t := field(b, "type"); {
			case strEq(t, "text"):
				if v := field(b, "text"); isStr(v) {
					text = appendUnescaped(text, inner(v))
				}
			case strEq(t, "thinking"):
				if v := field(b, "thinking"); isStr(v) && !emptyStr(v) {
					if len(reasoning) > 0 {
						reasoning = append(reasoning, "\n\n"...)
					}
					reasoning = appendUnescaped(reasoning, inner(v))
				}
			case strEq(t, "tool_use"):
				a.tools++
			}
		}
	} else if isStr(content) {
		text = appendUnescaped(text, inner(content))
	}
	a.text, a.reasoning = string(text), string(reasoning)
	if isStr(stopV) {
		a.stop = messagesFinish(stopV)
	}
	a.split(prefilled)
	var u usage
	u.readMessages(usageV)

	dst = append(dst, `{"id":`...)
	dst = appendID(dst, Chat, []byte(str(id)))
	dst = append(dst, `,"object":"chat.completion","created":`...)
	dst = appendInt(dst, now().Unix())
	dst = append(dst, `,"model":`...)
	dst = appendModel(dst, model)
	dst = append(dst, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	if a.hasText() || a.tools == 0 {
		dst = a.appendText(dst)
	} else {
		dst = append(dst, "null"...)
	}
	if a.hasReasoning() {
		dst = append(dst, `,"reasoning_content":`...)
		dst = a.appendReasoning(dst)
	}
	var toolBytes int64
	if a.tools > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		bi, _ := arrIter(content)
		for {
			b, ok := bi.elem()
			if !ok {
				break
			}
			if !strEq(field(b, "type"), "tool_use") {
				continue
			}
			dst = sep(dst)
			dst = append(dst, `{"id":`...)
			idLit := field(b, "id")
			if !isStr(idLit) {
				idLit = ""
			}
			dst = appendToolID(dst, []byte(idLit), Chat)
			dst = append(dst, `,"type":"function","function":{"name":`...)
			if n := field(b, "name"); isStr(n) {
				dst = append(dst, n...)
			} else {
				dst = append(dst, `""`...)
			}
			dst = append(dst, `,"arguments":`...)
			in := field(b, "input")
			if !isObj(in) {
				in = "{}"
			}
			toolBytes += int64(len(in))
			dst = appendStr(dst, in)
			dst = append(dst, `}}`...)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `},"logprobs":null,"finish_reason":"`...)
	dst = append(dst, chatStop[a.finalStop()]...)
	dst = append(dst, `"}],"usage":`...)
	dst = u.appendChat(dst, u.reasoningTokens(a.reasonLen(), a.textLen()+toolBytes))
	return append(dst, '}')
}

// passChatResponse normalises a chat response for a chat client. It walks
// the answer once, where the choices stand (the text was scanned six times
// when each level found its values' ends and its message was looked up).
func passChatResponse(dst []byte, s string, prefilled bool) []byte {
	var reasonBytes, otherBytes int64
	var u usage
	hasUsage := false
	dst = append(dst, '{')
	c := cursor{s: s}
	c.obj()
	for {
		k, ok := c.key()
		if !ok {
			break
		}
		switch {
		case k == "choices" && c.peek() == '[':
			dst = key(dst, "choices")
			dst = append(dst, '[')
			c.arr()
			for c.more() {
				dst = sep(dst)
				var rb, ob int64
				dst, rb, ob = passChatChoice(dst, &c, prefilled)
				reasonBytes += rb
				otherBytes += ob
			}
			dst = append(dst, ']')
		case k == "usage" && c.peek() == '{':
			u.readChat(c.raw())
			hasUsage = true
		default:
			dst = appendRawMember(dst, k, c.raw())
		}
	}
	if hasUsage {
		dst = key(dst, "usage")
		dst = u.appendChat(dst, u.reasoningTokens(reasonBytes, otherBytes))
	}
	return append(dst, '}')
}

// passChatChoice passes the choice at c, moving c past it. Its members, and
// those of its first message, are read in one walk and kept (the first
// twelve of each on the stack) for writing: finish_reason may come before
// the message it depends on.
func passChatChoice(dst []byte, c *cursor, prefilled bool) ([]byte, int64, int64) {
	if c.peek() != '{' {
		return append(dst, c.raw()...), 0, 0
	}
	var cbuf, mbuf [12]rawMember
	members, msg := cbuf[:0], mbuf[:0]
	first := -1 // members[first] is the first message
	var a answer
	var r chatMessageReader
	c.obj()
	for {
		k, ok := c.key()
		if !ok {
			break
		}
		if k == "message" && first < 0 {
			first = len(members)
			if c.peek() == '{' { // read where it stands; not an object: nothing to read
				at := c.begin()
				c.obj()
				for {
					mk, ok := c.key()
					if !ok {
						break
					}
					mv := c.raw()
					msg = append(msg, rawMember{k: mk, v: mv})
					r.member(&a, mk, mv)
				}
				members = append(members, rawMember{k: k, v: c.finish(at, nil)})
				continue
			}
		}
		members = append(members, rawMember{k: k, v: c.raw()})
	}
	calls := ""
	if first >= 0 && isObj(members[first].v) {
		calls = r.finish(&a)
		a.split(prefilled)
	}
	dst = append(dst, '{')
	for i, m := range members {
		switch {
		case m.k == "message" && isObj(m.v):
			if i != first { // a second message: written from its own members
				msg = msg[:0]
				mi, _ := objIter(m.v)
				for {
					mk, mv, ok := mi.next()
					if !ok {
						break
					}
					msg = append(msg, rawMember{k: mk, v: mv})
				}
			}
			dst = key(dst, "message")
			dst = passChatMessage(dst, msg, &a)
		case m.k == "finish_reason" && strEq(m.v, "stop") && a.tools > 0:
			dst = key(dst, "finish_reason") // a member: it may come first
			dst = append(dst, `"tool_calls"`...)
		default:
			dst = appendRawMember(dst, m.k, m.v)
		}
	}
	return append(dst, '}'), a.reasonLen(), a.textLen() + argBytes(calls)
}

// passChatMessage writes a choice's message from its members, its text and
// reasoning from a.
func passChatMessage(dst []byte, members []rawMember, a *answer) []byte {
	dst = append(dst, '{')
	for _, m := range members {
		switch m.k {
		case "content":
			if a.hasText() || isStr(m.v) {
				dst = key(dst, "content")
				dst = a.appendText(dst)
			} else {
				dst = appendRawMember(dst, m.k, m.v)
			}
		case "reasoning_content", "reasoning":
		default:
			dst = appendRawMember(dst, m.k, m.v)
		}
	}
	if a.hasReasoning() {
		dst = key(dst, "reasoning_content")
		dst = a.appendReasoning(dst)
	}
	return append(dst, '}')
}

// passMessagesResponse normalises a messages response for a messages client.
func passMessagesResponse(dst []byte, s string, prefilled bool) []byte {
	dst = append(dst, '{')
	it, _ := objIter(s)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch {
		case k == "content" && isArr(v):
			dst = key(dst, "content")
			dst = passMessagesContent(dst, v, prefilled)
		case k == "usage" && isObj(v):
			var u usage
			u.readMessages(v)
			dst = key(dst, "usage")
			dst = u.appendMessages(dst)
		default:
			dst = appendRawMember(dst, k, v)
		}
	}
	return append(dst, '}')
}

// passMessagesContent splits inline <think> reasoning out of the first text
// block into a thinking block before it, when the upstream sent none.
func passMessagesContent(dst []byte, v string, prefilled bool) []byte {
	bi, _ := arrIter(v)
	first := -1
	for i := 0; ; i++ {
		b, ok := bi.elem()
		if !ok {
			break
		}
		t := field(b, "type")
		if strEq(t, "thinking") || strEq(t, "redacted_thinking") {
			return append(dst, v...)
		}
		if strEq(t, "text") && first < 0 {
			first = i
		}
	}
	if first < 0 {
		return append(dst, v...)
	}
	dst = append(dst, '[')
	bi, _ = arrIter(v)
	for i := 0; ; i++ {
		b, ok := bi.elem()
		if !ok {
			break
		}
		dst = sep(dst)
		if i != first {
			dst = append(dst, b...)
			continue
		}
		a := answer{textLit: field(b, "text")}
		if !isStr(a.textLit) {
			dst = append(dst, b...)
			continue
		}
		a.split(prefilled)
		if !a.hasReasoning() {
			dst = append(dst, b...)
			continue
		}
		dst = append(dst, `{"type":"thinking","thinking":`...)
		mark := len(dst)
		dst = a.appendReasoning(dst)
		dst = appendSignature(dst, dst[mark:])
		if a.hasText() {
			dst = append(dst, `,{"type":"text","text":`...)
			dst = a.appendText(dst)
			dst = append(dst, '}')
		}
	}
	return append(dst, ']')
}

// signatureTag opens the signatures Timeblock gives the thinking blocks it
// builds (from a chat upstream's reasoning, or split out of inline <think>
// text).
const signatureTag = "tb-thk\x00\x01"

// sigHash is a running FNV-1a digest of reasoning text. It is fed JSON
// string literals, whole or a stream's chunks, and digests what they decode
// to, so a reasoning signs the same streamed and not, however it was
// escaped or split.
type sigHash uint64

const (
	sigOffset sigHash = 14695981039346656037
	sigPrime  sigHash = 1099511628211
)

func (h *sigHash) feed(b string) {
	v := *h
	for i := 0; i < len(b); i++ {
		v ^= sigHash(b[i])
		v *= sigPrime
	}
	*h = v
}

// lit digests the text of the string literal lit.
func (h *sigHash) lit(lit string) {
	in := inner(lit)
	var buf [utf8.UTFMax]byte
	for {
		k := strings.IndexByte(in, '\\')
		if k < 0 {
			h.feed(in)
			return
		}
		h.feed(in[:k])
		in = in[k:]
		n := 2
		if len(in) > 1 && in[1] == 'u' {
			var r rune
			r, n = decodeU(in)
			h.feed(b2s(utf8.AppendRune(buf[:0], r)))
		} else {
			h.feed(b2s(appendUnescaped(buf[:0], in[:min(2, len(in))])))
		}
		in = in[min(n, len(in)):]
	}
}

// appendSignature ends a thinking block with its signature,
// `,"signature":"…"}`. Clients keep a thinking block's signature and hand it
// back with the block, as the messages API asks, and some take an empty one
// for a broken block. Nothing upstream verifies it: a chat upstream gets
// the reasoning text, and a messages upstream gets the block as the client
// sent it. So it is opaque and deterministic: base64 of a tag and the
// digest of the reasoning, as the simulator signs its own.
func (h sigHash) appendSignature(dst []byte) []byte {
	var raw [16]byte
	copy(raw[:8], signatureTag)
	binary.BigEndian.PutUint64(raw[8:], uint64(h))
	dst = append(dst, `,"signature":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, raw[:])
	return append(dst, `"}`...)
}

// appendSignature ends a thinking block whose reasoning literal is lit.
func appendSignature(dst, lit []byte) []byte {
	h := sigOffset
	h.lit(b2s(lit))
	return h.appendSignature(dst)
}
