package translate

// The Gemini stream (streamGenerateContent?alt=sse): every event is a
// whole GenerateContentResponse, `data: {…}` and a blank line, written
// from the chat chunks of the inner stream (pivot.go):
//
//	a chunk's reasoning and text: one event, its parts the deltas
//	  ({"text":…,"thought":true}, then {"text":…});
//	a tool call: held while chat streams its argument string in pieces,
//	  then one event with the functionCall, args a JSON object, once its
//	  arguments are a whole JSON text and it has a name, or when the answer
//	  ends (the chunk with finish_reason); calls complete in one chunk share
//	  an event;
//	the end ([DONE]): one event with finishReason and usageMetadata (chat
//	  reports usage after finish_reason, in a chunk of its own). Gemini ends
//	  the stream with no marker: the last event is the end.
//
// Events end with "\r\n\r\n", as Google's server sends them; the Go SDK
// (genai's scan) and the JS SDK (@google/genai's processStreamResponse)
// split on it as on "\n\n". A chunk with nothing for the client (a role, an
// empty delta) writes no event.
//
// An upstream error ends the stream with an event whose data is Google's
// error body, {"error":{"code","message","status"}}. The Go SDK turns it
// into an APIError; the JS SDK (Gemini CLI's) reads errors from the HTTP
// status and a bare JSON body only, and yields the event as a response
// with no candidates, so Gemini CLI sees a stream that ended without a
// finish reason, a failure it reports (and retries), not a silent end.
//
// Calls without a name are dropped when the answer ends, as the other
// clients' writers drop them (dropTool, respPromote): no client can run one.

// geminiSSEEnd ends an event, as Google's server does.
const geminiSSEEnd = "\r\n\r\n"

type geminiCall struct {
	key  int    // its tool_calls index
	id   []byte // raw literal, empty until the upstream sends one
	name []byte // escaped
	args []byte // the arguments' JSON text, decoded
	jt   jsonTracker
	sent bool // written, or dropped
}

type geminiStream struct {
	pathModel string // the model the request's path named
	started   bool
	tail      []byte // `,"modelVersion":…,"responseId":…}`, the same for every event
	parts     []byte // the parts of the event being written
	calls     []geminiCall
	stop      stopReason
	refusal   bool
	u         usage
	dropped   int
}

func (s *Stream) geminiSink() chatSink {
	if s.gx == nil {
		s.gx = new(geminiStream)
	}
	return s.gx
}

func (x *geminiStream) reset(_ Format, req Request, _ *Config) {
	*x = geminiStream{
		pathModel: req.call.Model,
		tail:      x.tail[:0], parts: x.parts[:0], calls: x.calls[:0],
	}
}

func (x *geminiStream) droppedCalls() int { return x.dropped }

// chunk takes the chat chunk d, read into r.
func (x *geminiStream) chunk(s *Stream, r *chunkRead, d string) {
	t := &r.top
	if !isNull(t.err) {
		x.fail(s, streamError(d))
		return
	}
	x.start(t.id, t.model)
	if isObj(t.usage) {
		x.u.readChat(t.usage)
	}
	x.parts = x.parts[:0]
	for i := range r.choices {
		c := &r.choices[i]
		if isObj(c.chunkChoice.delta) {
			x.delta(&c.delta.chunkDelta)
		}
		if isStr(c.finish) && x.stop == stopNone {
			x.stop = chatFinish(c.finish)
			x.flushCalls(true) // the answer is over: every call is complete
		}
	}
	if len(x.parts) > 0 {
		x.event(s, false)
	}
}

// final ends the client's stream after the upstream's answer.
func (x *geminiStream) final(s *Stream) {
	x.start("", "")
	x.parts = x.parts[:0]
	x.flushCalls(true)
	if x.stop == stopNone {
		x.stop = stopEnd
	}
	if x.stop == stopEnd && x.refusal {
		x.stop = stopRefusal
	}
	if len(x.parts) == 0 {
		x.parts = append(x.parts, `{"text":""}`...) // as Google's last event has it
	}
	x.event(s, true)
	s.done = true
}

// fail ends the client's stream with e, in Google's error body.
func (x *geminiStream) fail(s *Stream, e *Error) {
	if s.done {
		return
	}
	s.out = append(s.out, "data: "...)
	s.out = appendGeminiError(s.out, e, e.Kind)
	s.out = append(s.out, geminiSSEEnd...)
	s.done = true
}

// start takes the response's id and model from its first chunk.
func (x *geminiStream) start(idLit, modelLit string) {
	if x.started {
		return
	}
	x.started = true
	x.tail = appendGeminiTail(x.tail[:0], idLit, modelLit, x.pathModel)
}

// event writes an event of the parts gathered; the final one carries the
// finish reason and the usage.
func (x *geminiStream) event(s *Stream, final bool) {
	s.out = append(s.out, `data: {"candidates":[{"content":{"role":"model","parts":[`...)
	s.out = append(s.out, x.parts...)
	s.out = append(s.out, "]}"...)
	if final {
		s.out = append(s.out, `,"finishReason":"`...)
		s.out = append(s.out, geminiFinish(x.stop)...)
		s.out = append(s.out, '"')
	}
	s.out = append(s.out, `,"index":0}]`...)
	if final && x.u.seen {
		// The inner chat stream's usage chunk counts the reasoning tokens
		// (the upstream's count or its estimate).
		s.out = append(s.out, `,"usageMetadata":`...)
		s.out = appendGeminiUsage(s.out, &x.u, x.u.reasoning)
	}
	s.out = append(s.out, x.tail...)
	s.out = append(s.out, geminiSSEEnd...)
}

// delta takes a delta of the inner chat writer (reasoning always in
// reasoning_content).
func (x *geminiStream) delta(d *chunkDelta) {
	if isStr(d.reasoningContent) && !emptyStr(d.reasoningContent) {
		x.partSep()
		x.parts = append(x.parts, `{"text":`...)
		x.parts = append(x.parts, d.reasoningContent...)
		x.parts = append(x.parts, `,"thought":true}`...)
	}
	if isStr(d.content) && !emptyStr(d.content) {
		x.textPart(d.content)
	}
	if isStr(d.refusal) && !emptyStr(d.refusal) {
		// Gemini has no refusal part: the text, and SAFETY at the end.
		x.refusal = true
		x.textPart(d.refusal)
	}
	if ci, ok := arrIter(d.toolCalls); ok {
		for pos := 0; ; pos++ {
			c, ok := ci.elem()
			if !ok {
				break
			}
			x.call(c, pos)
		}
		x.flushCalls(false)
	}
}

// partSep separates the next part from the one before it, if any.
func (x *geminiStream) partSep() {
	if len(x.parts) > 0 {
		x.parts = append(x.parts, ',')
	}
}

func (x *geminiStream) textPart(lit string) {
	x.partSep()
	x.parts = append(x.parts, `{"text":`...)
	x.parts = append(x.parts, lit...)
	x.parts = append(x.parts, '}')
}

// call takes one element of a chunk's tool_calls: the start of a call, or
// more of one (its id or name, late, or a piece of its arguments).
func (x *geminiStream) call(c string, pos int) {
	idx, id, name, args := readToolCallDelta(c)
	key, last := pos, true // without an index: the last call, unless it begins another
	if n, ok := toInt(idx); ok && n >= 0 && n < 1<<20 {
		key, last = int(n), false
	}
	i := -1
	for j := len(x.calls) - 1; j >= 0; j-- {
		if last || x.calls[j].key == key {
			i = j
			break
		}
	}
	if i < 0 || x.calls[i].other(id, name) {
		var t *geminiCall
		x.calls, t = extend(x.calls)
		*t = geminiCall{key: key, id: t.id[:0], name: t.name[:0], args: t.args[:0]}
		i = len(x.calls) - 1
	}
	t := &x.calls[i]
	if t.sent {
		return // complete already: only trailing whitespace can follow
	}
	if len(t.id) == 0 && isStr(id) && !emptyStr(id) {
		t.id = append(t.id, id...)
	}
	if len(t.name) == 0 && isStr(name) {
		t.name = append(t.name, inner(name)...)
	}
	mark := len(t.args)
	switch {
	case isStr(args):
		t.args = appendUnescaped(t.args, inner(args))
	case isObj(args): // some servers send the object itself
		t.args = append(t.args, args...)
	}
	t.jt.feed(t.args[mark:])
}

// other reports whether a tool_calls element with id and name (raw), found
// under the key of call t, begins another call: some servers number every
// call 0. An element naming a call after t was written is another call;
// so is one with another id, or (t still without an id) another name.
func (t *geminiCall) other(id, name string) bool {
	hasID := isStr(id) && !emptyStr(id)
	switch {
	case t.sent:
		return hasID || named(name)
	case !hasID:
		return false
	case len(t.id) == 0: // its id, late, unless it names another tool
		return named(name) && len(t.name) > 0 && inner(name) != b2s(t.name)
	}
	return b2s(t.id) != id
}

// flushCalls writes the calls that are complete, in order, as parts of the
// event being written; all reports that the answer is over: every call is
// written, and one still without a name is dropped.
func (x *geminiStream) flushCalls(all bool) {
	for i := range x.calls {
		t := &x.calls[i]
		if t.sent || (!all && !(len(t.name) > 0 && t.jt.done)) {
			continue
		}
		t.sent = true
		if len(t.name) == 0 {
			x.dropped++
			continue
		}
		x.partSep()
		x.parts = appendGeminiCall(x.parts, t.id, b2s(t.name), b2s(t.args))
	}
}
