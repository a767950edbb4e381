package translate

// The Responses event stream: the Responses codec's chat sink (pivot.go).
// The pivot's inner Stream turns the upstream's events into chat completion
// chunks (messages → chat, or the chat pass-through that normalises
// reasoning and tool calls), and respStream writes those chunks as
// Responses events, in the order the official SDKs and Codex expect:
//
//	response.created, response.in_progress,
//	per output item: response.output_item.added, then
//	  reasoning: reasoning_summary_part.added, reasoning_summary_text.delta…,
//	             reasoning_summary_text.done, reasoning_summary_part.done
//	  message:   content_part.added, output_text.delta…, output_text.done,
//	             content_part.done
//	  call:      function_call_arguments.delta…, function_call_arguments.done
//	response.output_item.done;
//	finally response.completed (response.incomplete when cut by max tokens),
//	or error and response.failed when the upstream fails.
//
// Every event carries a sequence_number. One item is open at a time: of
// several tool calls streamed interleaved, one streams live and the others'
// arguments wait until it is complete.

type respItemKind uint8

const (
	riReasoning respItemKind = iota + 1
	riMessage
	riCall
)

// call states
const (
	callPending uint8 = iota // its arguments are held until it goes live
	callLive
	callDone
)

type respItem struct {
	kind   respItemKind
	state  uint8
	key    int    // a call's tool_calls index
	out    int    // output_index; -1 until added
	text   []byte // escaped string content: the reasoning, the text or the arguments
	head   []byte // a text delta event up to its delta, the same for each (respText)
	callID []byte // raw literal
	madeID bool   // callID was made up here: the upstream had sent none
	name   []byte // escaped, as the upstream called it (flattened)
	status string // set when done
	jt     jsonTracker
}

type respStream struct {
	scratch []byte
	opts    respOptions
	seq     int64
	started bool
	base    []byte // the response id without resp_ (escaped)
	model   []byte // raw literal
	created int64
	items   []respItem
	added   []int // indexes in items, in output_index order: a held call can be added after one that came later
	open    int   // index in items of the open reasoning or message item, -1 none
	live    int   // index in items of the call streaming live, -1 none
	dropped int   // calls without a name, dropped (respPromote)
	stop    stopReason
	u       usage
}

var sseEnd = []byte("\n\n")

// respSink is the Responses codec's sink, kept across Resets.
func (s *Stream) respSink() chatSink {
	if s.rx == nil {
		s.rx = new(respStream)
	}
	return s.rx
}

func (x *respStream) reset(_ Format, req Request, _ *Config) {
	*x = respStream{
		scratch: x.scratch[:0], opts: req.resp,
		base: x.base[:0], model: x.model[:0], created: now().Unix(),
		items: x.items[:0], added: x.added[:0], open: -1, live: -1,
	}
}

func (x *respStream) chunk(s *Stream, r *chunkRead, d string) { s.respRead(r, d) }
func (x *respStream) final(s *Stream)                         { s.respFinal() }
func (x *respStream) fail(s *Stream, e *Error)                { s.respFail(e) }
func (x *respStream) droppedCalls() int                       { return x.dropped }

// respRead takes the chat completion chunk d, read into r.
func (s *Stream) respRead(r *chunkRead, d string) {
	x := s.rx
	t := &r.top
	if !isNull(t.err) {
		s.respFail(streamError(d))
		return
	}
	s.respStart(t.id, t.model)
	if isObj(t.usage) {
		x.u.readChat(t.usage)
	}
	for i := range r.choices {
		c := &r.choices[i]
		if isObj(c.chunkChoice.delta) {
			s.respDelta(&c.delta.chunkDelta)
		}
		if isStr(c.finish) && x.stop == stopNone {
			x.stop = chatFinish(c.finish)
			s.respCloseAll()
		}
	}
}

// respDelta takes a delta of the inner chat writer, whose reasoning is
// always reasoning_content.
func (s *Stream) respDelta(x *chunkDelta) {
	if isStr(x.reasoningContent) && !emptyStr(x.reasoningContent) {
		s.respText(riReasoning, x.reasoningContent)
	}
	if isStr(x.content) && !emptyStr(x.content) {
		s.respText(riMessage, x.content)
	}
	if ci, ok := arrIter(x.toolCalls); ok {
		for pos := 0; ; pos++ {
			c, ok := ci.elem()
			if !ok {
				break
			}
			s.respCall(c, pos)
		}
	}
}

// ---- events ----

// rEvent opens an event of type typ; rEnd closes it with its sequence number.
func (s *Stream) rEvent(typ string) {
	s.out = append(s.out, "event: "...)
	s.out = append(s.out, typ...)
	s.out = append(s.out, "\ndata: {\"type\":\""...)
	s.out = append(s.out, typ...)
	s.out = append(s.out, '"')
}

func (s *Stream) rEnd() {
	s.out = append(s.out, `,"sequence_number":`...)
	s.out = appendInt(s.out, s.rx.seq)
	s.rx.seq++
	s.out = append(s.out, "}\n\n"...)
}

// rItemRef writes the item_id and output_index of item i.
func (s *Stream) rItemRef(i int) {
	x := s.rx
	it := &x.items[i]
	s.out = append(s.out, `,"item_id":`...)
	s.out = appendItemID(s.out, itemPrefix[it.kind], x.base, it.out)
	s.out = append(s.out, `,"output_index":`...)
	s.out = appendInt(s.out, int64(it.out))
}

var itemPrefix = [...]string{riReasoning: "rs_", riMessage: "msg_", riCall: "fc_"}

// appendItem writes item i whole, as it stands.
func (x *respStream) appendItem(dst []byte, i int) []byte {
	it := &x.items[i]
	status := it.status
	if status == "" {
		status = "incomplete" // still open when the response failed
	}
	switch it.kind {
	case riReasoning:
		return appendReasoningItem(dst, x.base, it.out, b2s(it.text), x.opts.encrypted, status)
	case riMessage:
		return appendMessageItem(dst, x.base, it.out, b2s(it.text), status)
	}
	return appendCallItem(dst, x.base, it.out, it.callID, b2s(it.name), x.opts.namespaces, b2s(it.text), status)
}

// rResponse writes the response object: in progress (stop == stopNone, no
// output yet), finished, or failed (e).
func (s *Stream) rResponse(stop stopReason, e *Error) {
	x := s.rx
	s.out = append(s.out, `,"response":`...)
	s.out = appendRespHead(s.out, x.base, x.created, b2s(x.model))
	if stop != stopNone || e != nil {
		for _, i := range x.added {
			s.out = x.appendItem(s.out, i)
		}
	}
	s.out = appendRespTail(s.out, &x.opts, stop, e)
	s.out = append(s.out, `,"usage":`...)
	if stop == stopNone && e == nil {
		s.out = append(s.out, "null}"...)
		return
	}
	s.out = appendRespUsage(s.out, &x.u, x.u.reasoning)
	s.out = append(s.out, '}')
}

func (s *Stream) respStart(idLit, modelLit string) {
	x := s.rx
	if x.started {
		return
	}
	x.started = true
	x.base = appendIDBase(x.base[:0], idLit)
	if isStr(modelLit) {
		x.model = append(x.model[:0], modelLit...)
	} else {
		x.model = append(x.model[:0], `""`...)
	}
	s.rEvent("response.created")
	s.rResponse(stopNone, nil)
	s.rEnd()
	s.rEvent("response.in_progress")
	s.rResponse(stopNone, nil)
	s.rEnd()
}

// respAdd adds an item of kind k (its output_item.added and, for text, the
// opening of its part) and returns its index in items.
func (s *Stream) respAdd(k respItemKind) int {
	x := s.rx
	i := x.newItem(k)
	s.respAdded(i)
	return i
}

func (x *respStream) newItem(k respItemKind) int {
	var it *respItem
	x.items, it = extend(x.items)
	*it = respItem{kind: k, out: -1, text: it.text[:0], head: it.head[:0], callID: it.callID[:0], name: it.name[:0]}
	return len(x.items) - 1
}

// respAdded writes the events that open item i.
func (s *Stream) respAdded(i int) {
	x := s.rx
	it := &x.items[i]
	it.out = len(x.added)
	x.added = append(x.added, i)
	s.rEvent("response.output_item.added")
	s.out = append(s.out, `,"output_index":`...)
	s.out = appendInt(s.out, int64(it.out))
	s.out = append(s.out, `,"item":`...)
	switch it.kind {
	case riReasoning:
		s.out = appendReasoningItem(s.out, x.base, it.out, "", false, "in_progress")
		s.rEnd()
		s.rEvent("response.reasoning_summary_part.added")
		s.rItemRef(i)
		s.out = append(s.out, `,"summary_index":0,"part":{"type":"summary_text","text":""}`...)
	case riMessage:
		s.out = appendMessageItem(s.out, x.base, it.out, "", "in_progress")
		s.rEnd()
		s.rEvent("response.content_part.added")
		s.rItemRef(i)
		s.out = append(s.out, `,"content_index":0,"part":`...)
		s.out = appendTextPart(s.out, "")
	default:
		if len(it.callID) <= 2 {
			// No id from the upstream yet: the one made up here is the
			// call's for the rest of the stream, in every event that names it.
			it.callID = appendToolID(it.callID[:0], nil, Chat)
			it.madeID = true
		}
		s.out = appendCallItem(s.out, x.base, it.out, it.callID, b2s(it.name), x.opts.namespaces, "", "in_progress")
	}
	s.rEnd()
}

// respCloseItem writes the events that close item i.
func (s *Stream) respCloseItem(i int, status string) {
	x := s.rx
	it := &x.items[i]
	switch it.kind {
	case riReasoning:
		s.rEvent("response.reasoning_summary_text.done")
		s.rItemRef(i)
		s.out = append(s.out, `,"summary_index":0,"text":"`...)
		s.out = append(s.out, it.text...)
		s.out = append(s.out, '"')
		s.rEnd()
		s.rEvent("response.reasoning_summary_part.done")
		s.rItemRef(i)
		s.out = append(s.out, `,"summary_index":0,"part":{"type":"summary_text","text":"`...)
		s.out = append(s.out, it.text...)
		s.out = append(s.out, `"}`...)
		s.rEnd()
	case riMessage:
		s.rEvent("response.output_text.done")
		s.rItemRef(i)
		s.out = append(s.out, `,"content_index":0,"text":"`...)
		s.out = append(s.out, it.text...)
		s.out = append(s.out, `","logprobs":[]`...)
		s.rEnd()
		s.rEvent("response.content_part.done")
		s.rItemRef(i)
		s.out = append(s.out, `,"content_index":0,"part":`...)
		s.out = appendTextPart(s.out, b2s(it.text))
		s.rEnd()
	case riCall:
		if len(it.text) == 0 {
			// No argument text (a chat upstream's "" arguments): "{}", as
			// a whole response has it, so that clients can parse it.
			it.text = append(it.text, "{}"...)
			s.rEvent("response.function_call_arguments.delta")
			s.rItemRef(i)
			s.out = append(s.out, `,"delta":"{}"`...)
			s.rEnd()
		}
		s.rEvent("response.function_call_arguments.done")
		s.rItemRef(i)
		s.out = appendCallName(s.out, b2s(it.name), x.opts.namespaces)
		s.out = append(s.out, `,"arguments":"`...)
		s.out = append(s.out, it.text...)
		s.out = append(s.out, '"')
		s.rEnd()
		it.state = callDone
	}
	it.status = status
	s.rEvent("response.output_item.done")
	s.out = append(s.out, `,"output_index":`...)
	s.out = appendInt(s.out, int64(it.out))
	s.out = append(s.out, `,"item":`...)
	s.out = x.appendItem(s.out, i)
	s.rEnd()
	if x.open == i {
		x.open = -1
	}
	if x.live == i {
		x.live = -1
	}
}

// respText takes reasoning or answer text (a string literal).
func (s *Stream) respText(k respItemKind, lit string) {
	x := s.rx
	if x.open >= 0 && x.items[x.open].kind != k {
		s.respCloseItem(x.open, "completed")
	}
	s.respEndCalls("completed") // text after tool calls ends them
	if x.open < 0 {
		x.open = s.respAdd(k)
	}
	it := &x.items[x.open]
	it.text = append(it.text, inner(lit)...)
	// Every delta of an item is the same event up to its delta: the first
	// one writes it, the others copy it.
	if len(it.head) > 0 {
		s.out = append(s.out, it.head...)
	} else {
		at := len(s.out)
		if k == riReasoning {
			s.rEvent("response.reasoning_summary_text.delta")
			s.rItemRef(x.open)
			s.out = append(s.out, `,"summary_index":0,"delta":`...)
		} else {
			s.rEvent("response.output_text.delta")
			s.rItemRef(x.open)
			s.out = append(s.out, `,"content_index":0,"delta":`...)
		}
		it = &x.items[x.open]
		it.head = append(it.head, s.out[at:]...)
	}
	s.out = append(s.out, lit...)
	if k == riMessage {
		s.out = append(s.out, `,"logprobs":[]`...)
	}
	s.rEnd()
}

// respCall takes one element of a chunk's tool_calls.
func (s *Stream) respCall(c string, pos int) {
	x := s.rx
	idx, id, name, args := readToolCallDelta(c)
	key, last := pos, true // without an index: the last call, unless it begins another
	if n, ok := toInt(idx); ok && n >= 0 && n < 1<<20 {
		key, last = int(n), false
	}
	i := -1
	for j := len(x.items) - 1; j >= 0; j-- {
		if t := &x.items[j]; t.kind == riCall && (last || t.key == key) {
			i = j
			break
		}
	}
	if i < 0 || x.items[i].otherCall(id, name) {
		// A new call: the text before it ends.
		if x.open >= 0 {
			s.respCloseItem(x.open, "completed")
		}
		i = x.newItem(riCall)
		t := &x.items[i]
		t.key = key
		if isStr(id) {
			t.callID = append(t.callID, id...)
		}
		if isStr(name) {
			t.name = append(t.name, inner(name)...)
		}
	} else if t := &x.items[i]; t.state == callPending {
		if len(t.callID) <= 2 && isStr(id) {
			t.callID = append(t.callID[:0], id...)
		}
		if len(t.name) == 0 && isStr(name) {
			t.name = append(t.name, inner(name)...)
		}
	}
	switch {
	case isStr(args) && !emptyStr(args):
		s.respArgs(i, args)
	case isObj(args): // some servers send the object itself
		x.scratch = appendStr(x.scratch[:0], args)
		s.respArgs(i, string(x.scratch))
	}
	s.respPromote("completed", false) // a held call may be ready now
}

// otherCall reports whether a tool_calls element with id and name (raw),
// found under the key of call t, begins another call: some servers number
// every call 0. A call whose id was made up here takes a late id, unless
// the element also names a tool after t had its name and arguments.
func (t *respItem) otherCall(id, name string) bool {
	switch {
	case !isStr(id) || emptyStr(id):
		return false
	case len(t.callID) <= 2: // its id, late, unless it names another tool
		return isStr(name) && !emptyStr(name) && len(t.name) > 0 && inner(name) != b2s(t.name)
	case t.madeID:
		return isStr(name) && !emptyStr(name) && len(t.name) > 0 && len(t.text) > 0
	}
	return b2s(t.callID) != id
}

// ready reports whether a held call can be added: it has a name, and its
// id or argument text (an id that has not come by then is made up, and is
// the call's for good).
func (t *respItem) ready() bool {
	return len(t.name) > 0 && (len(t.callID) > 2 || len(t.text) > 0)
}

// respArgs takes a fragment of a call's arguments (a string literal).
func (s *Stream) respArgs(i int, lit string) {
	x := s.rx
	t := &x.items[i]
	if t.state == callDone {
		return // complete already: only trailing whitespace can follow
	}
	t.text = append(t.text, inner(lit)...)
	x.scratch = appendUnescaped(x.scratch[:0], inner(lit))
	t.jt.feed(x.scratch)
	if t.state != callLive {
		return
	}
	s.rEvent("response.function_call_arguments.delta")
	s.rItemRef(i)
	s.out = append(s.out, `,"delta":`...)
	s.out = append(s.out, lit...)
	s.rEnd()
	if t.jt.done {
		s.respCloseItem(i, "completed")
		s.respPromote("completed", false)
	}
}

// respGoLive adds the held call i and sends the arguments it holds.
func (s *Stream) respGoLive(i int) {
	x := s.rx
	x.live = i
	x.items[i].state = callLive
	s.respAdded(i)
	if t := &x.items[i]; len(t.text) > 0 {
		s.rEvent("response.function_call_arguments.delta")
		s.rItemRef(i)
		s.out = append(s.out, `,"delta":"`...)
		s.out = append(s.out, t.text...)
		s.out = append(s.out, '"')
		s.rEnd()
	}
}

// respPromote sends the held calls that are ready, in order, as far as
// they are complete; all reports that the answer is over, so every call is
// closed, and one still without a name is dropped (no client can run it;
// see dropTool).
func (s *Stream) respPromote(status string, all bool) {
	x := s.rx
	for x.live < 0 {
		next := -1
		for j := range x.items {
			it := &x.items[j]
			if it.kind != riCall || it.state != callPending {
				continue
			}
			if all && len(it.name) == 0 {
				it.state = callDone // never added: not in the output
				x.dropped++
				continue
			}
			if all || it.ready() {
				next = j
				break
			}
		}
		if next < 0 {
			return
		}
		s.respGoLive(next)
		if all || x.items[next].jt.done {
			s.respCloseItem(next, status)
		}
	}
}

// respEndCalls closes every call, held ones included.
func (s *Stream) respEndCalls(status string) {
	x := s.rx
	if x.live >= 0 {
		s.respCloseItem(x.live, status)
	}
	s.respPromote(status, true)
}

// respCloseAll closes whatever is open at the end of the answer.
func (s *Stream) respCloseAll() {
	x := s.rx
	status := itemStatus(x.stop, false)
	if x.open >= 0 {
		s.respCloseItem(x.open, status)
	}
	s.respEndCalls(status)
}

// respFinal ends the stream after the upstream's answer.
func (s *Stream) respFinal() {
	x := s.rx
	s.respStart("", "")
	if x.stop == stopNone {
		x.stop = stopEnd
	}
	s.respCloseAll()
	if x.stop == stopMax || x.stop == stopRefusal {
		s.rEvent("response.incomplete")
	} else {
		s.rEvent("response.completed")
	}
	s.rResponse(x.stop, nil)
	s.rEnd()
	s.done = true
}

// respFail ends the stream with an error event and response.failed.
func (s *Stream) respFail(e *Error) {
	s.respStart("", "")
	s.rEvent("error")
	s.out = append(s.out, `,"code":`...)
	s.out = appendStr(s.out, respErrorCode(e))
	s.out = append(s.out, `,"message":`...)
	s.out = appendStr(s.out, e.Message)
	s.out = append(s.out, `,"param":null`...)
	s.rEnd()
	s.rEvent("response.failed")
	s.rResponse(stopNone, e)
	s.rEnd()
	s.done = true
}
