package translate

// The client-side event writers. Messages clients get the full grammar —
// message_start, then blocks each opened, filled and closed, then
// message_delta and message_stop — whatever order the upstream's pieces come
// in; chat clients get chat.completion.chunk objects and [DONE].

type blockKind uint8

const (
	bkNone blockKind = iota
	bkText
	bkThinking
	bkRaw // a block passed through from a messages upstream as it came
)

type msgState struct {
	started bool
	next    int // next block index
	open    blockKind
	openIdx int
	// The open thinking block's digest, for the signature it gets at its
	// end unless the upstream signed it (signed).
	sig    sigHash
	signed bool
}

type chatState struct {
	started bool
	tools   int
}

type toolPhase uint8

const (
	toolPending toolPhase = iota
	toolLive
	toolClosed
)

// toolState is one tool call. A messages client sees one block at a time, so
// of several tool calls only one streams live; the arguments of the others
// are held until it is complete — when parallel calls come interleaved by
// index, each fragment still lands in its own block. A call is also held
// until it is ready (ready): its block names its id and tool, which some
// chat upstreams send after the call's first chunk.
type toolState struct {
	key      int
	id, name []byte // raw literals
	out      int    // chat clients: the tool call index
	phase    toolPhase
	ended    bool
	hasArgs  bool   // some argument text came
	args     []byte // decoded, held while pending
	jt       jsonTracker
}

// jsonTracker follows a JSON text fed in pieces, to tell when it is complete.
type jsonTracker struct {
	depth               int32
	inStr, esc, started bool
	done                bool
}

func (j *jsonTracker) feed(b []byte) {
	for _, c := range b {
		if j.inStr {
			switch {
			case j.esc:
				j.esc = false
			case c == '\\':
				j.esc = true
			case c == '"':
				j.inStr = false
				if j.depth == 0 {
					j.done = true
				}
			}
			continue
		}
		switch c {
		case '"':
			j.inStr, j.started = true, true
		case '{', '[':
			j.depth++
			j.started = true
		case '}', ']':
			j.depth--
			if j.depth <= 0 {
				j.done = true
			}
		}
	}
}

// ready reports whether a held call can open its block: it has a name, and
// its id, or it has argument text to send or has ended (an id that has not
// come by then is made up, and is the call's for good).
func (t *toolState) ready() bool {
	return len(t.name) > 2 && (len(t.id) > 2 || t.hasArgs || t.ended)
}

func (s *Stream) findTool(key int) int {
	for i := range s.tools {
		if s.tools[i].key == key {
			return i
		}
	}
	return -1
}

func (s *Stream) addTool(key int, idLit, nameLit string) int {
	n := len(s.tools)
	var t *toolState
	s.tools, t = extend(s.tools)
	*t = toolState{key: key, id: t.id[:0], name: t.name[:0], args: t.args[:0]}
	if isStr(idLit) {
		t.id = append(t.id, idLit...)
	}
	if isStr(nameLit) {
		t.name = append(t.name, nameLit...)
	}
	return n
}

// toolStart records a tool call the upstream began.
func (s *Stream) toolStart(key int, idLit, nameLit string) int {
	if i := s.findTool(key); i >= 0 {
		t := &s.tools[i]
		if t.phase == toolPending && s.client == Messages {
			if len(t.name) <= 2 && isStr(nameLit) {
				t.name = append(t.name[:0], nameLit...)
			}
			if len(t.id) <= 2 && isStr(idLit) {
				t.id = append(t.id[:0], idLit...)
			}
			if s.live < 0 {
				s.mPromote() // a late id or name may make it ready
			}
		}
		return i
	}
	s.flushThink() // the answer's text ends where tool calls begin
	i := s.addTool(key, idLit, nameLit)
	s.toolCount++
	if s.client == Chat {
		s.cToolStart(i)
		return i
	}
	s.mStart()
	s.mCloseBlock()
	s.mPromote()
	return i
}

// toolArgs takes a fragment of a tool call's arguments (a string literal).
func (s *Stream) toolArgs(key int, lit string) {
	i := s.findTool(key)
	if i < 0 {
		i = s.toolStart(key, "", "")
	}
	if emptyStr(lit) || !isStr(lit) {
		return
	}
	s.tools[i].hasArgs = true
	s.otherBytes += decodedLen(lit)
	if s.client == Chat {
		s.cToolArgs(i, lit)
		return
	}
	t := &s.tools[i]
	switch t.phase {
	case toolLive:
		s.out = append(s.out, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
		s.out = appendInt(s.out, int64(t.out))
		s.out = append(s.out, `,"delta":{"type":"input_json_delta","partial_json":`...)
		s.out = append(s.out, lit...)
		s.out = append(s.out, "}}\n\n"...)
		s.scratch = appendUnescaped(s.scratch[:0], inner(lit))
		t.jt.feed(s.scratch)
		if t.jt.done {
			s.mPromote()
		}
	case toolPending:
		mark := len(t.args)
		t.args = appendUnescaped(t.args, inner(lit))
		t.jt.feed(t.args[mark:])
		if s.live < 0 {
			s.mPromote() // held for its id, it goes now
		}
	}
}

// toolEnd records that the upstream closed a tool call's block.
func (s *Stream) toolEnd(key int) {
	if i := s.findTool(key); i >= 0 {
		s.tools[i].ended = true
		if s.client == Messages {
			s.mPromote()
			return
		}
		s.cNoArgs(i)
	}
}

// cNoArgs gives a chat client "{}" for a call that ended without argument
// text (a messages upstream streams a call without arguments as input {}
// and one empty partial_json): clients parse the arguments, and "" is no
// JSON. The whole-response path writes the same "{}".
func (s *Stream) cNoArgs(i int) {
	if t := &s.tools[i]; !t.hasArgs {
		s.toolArgs(t.key, `"{}"`)
	}
}

// ---- messages client ----

func (s *Stream) mStart() {
	if s.m.started {
		return
	}
	s.m.started = true
	s.out = append(s.out, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"...)
	s.out = appendID(s.out, Messages, s.id)
	s.out = append(s.out, `,"type":"message","role":"assistant","model":`...)
	if len(s.model) == 0 {
		s.model = append(s.model, `""`...)
	}
	s.out = append(s.out, s.model...)
	s.out = append(s.out, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	u := s.usageSoFar()
	s.out = u.appendMessages(s.out)
	s.out = append(s.out, "}}\n\n"...)
}

// usageSoFar is the usage a messages client is told: the upstream's, or,
// while the upstream has reported none (a chat upstream reports it at the
// end), the request's input estimate, so that message_start does not say
// the prompt was empty.
func (s *Stream) usageSoFar() usage {
	if !s.u.seen && s.req.InputTokens > 0 {
		return usage{input: s.req.InputTokens}
	}
	return s.u
}

func (s *Stream) mBlockStop(idx int) {
	s.out = append(s.out, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":"...)
	s.out = appendInt(s.out, int64(idx))
	s.out = append(s.out, "}\n\n"...)
}

func (s *Stream) mBlockStart(content string) int {
	idx := s.m.next
	s.m.next++
	s.out = append(s.out, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
	s.out = appendInt(s.out, int64(idx))
	s.out = append(s.out, `,"content_block":`...)
	s.out = append(s.out, content...)
	s.out = append(s.out, "}\n\n"...)
	return idx
}

func (s *Stream) mCloseBlock() {
	if s.m.open == bkThinking && !s.m.signed {
		// A thinking block built here (from a chat upstream, or split out of
		// text) is signed as a whole response's is (appendSignature).
		s.out = append(s.out, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
		s.out = appendInt(s.out, int64(s.m.openIdx))
		s.out = append(s.out, `,"delta":{"type":"signature_delta"`...)
		s.out = s.m.sig.appendSignature(s.out)
		s.out = append(s.out, "}\n\n"...)
	}
	if s.m.open != bkNone {
		s.mBlockStop(s.m.openIdx)
		s.m.open = bkNone
	}
}

// mOpenBlock makes a text or thinking block the open one. A tool call ends
// the text before it, and text after tool calls ends them.
func (s *Stream) mOpenBlock(k blockKind) {
	if s.m.open == k {
		return
	}
	s.mStart()
	s.mCloseBlock()
	s.mEndTools()
	if k == bkText {
		s.m.openIdx = s.mBlockStart(`{"type":"text","text":""}`)
	} else {
		s.m.openIdx = s.mBlockStart(`{"type":"thinking","thinking":"","signature":""}`)
		s.m.sig, s.m.signed = sigOffset, false
	}
	s.m.open = k
}

func (s *Stream) mDelta(idx int, typ, field, lit string) {
	s.out = append(s.out, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	s.out = appendInt(s.out, int64(idx))
	s.out = append(s.out, `,"delta":{"type":"`...)
	s.out = append(s.out, typ...)
	s.out = append(s.out, `","`...)
	s.out = append(s.out, field...)
	s.out = append(s.out, `":`...)
	s.out = append(s.out, lit...)
	s.out = append(s.out, "}}\n\n"...)
}

func (s *Stream) mText(lit string) {
	s.mOpenBlock(bkText)
	s.mDelta(s.m.openIdx, "text_delta", "text", lit)
}

func (s *Stream) mThinking(lit string) {
	s.mOpenBlock(bkThinking)
	s.m.sig.lit(lit)
	s.mDelta(s.m.openIdx, "thinking_delta", "thinking", lit)
}

// mSignature passes a thinking block's signature through byte for byte.
func (s *Stream) mSignature(lit string) {
	s.mOpenBlock(bkThinking)
	s.m.signed = true
	s.mDelta(s.m.openIdx, "signature_delta", "signature", lit)
}

// mPromote closes the live tool call once it is complete and opens the next
// held one, as far as it can go.
func (s *Stream) mPromote() {
	for {
		if s.live >= 0 {
			t := &s.tools[s.live]
			if !t.ended && !t.jt.done {
				return
			}
			s.mBlockStop(t.out)
			t.phase = toolClosed
			s.live = -1
		}
		next := -1
		for i := range s.tools {
			t := &s.tools[i]
			if t.phase != toolPending {
				continue
			}
			if t.ended && len(t.name) <= 2 {
				s.dropTool(t)
				continue
			}
			if t.ready() {
				next = i
				break
			}
		}
		if next < 0 {
			return
		}
		s.mCloseBlock()
		t := &s.tools[next]
		s.enc = append(s.enc[:0], `{"type":"tool_use","id":`...)
		s.enc = appendToolID(s.enc, t.id, Messages)
		s.enc = append(s.enc, `,"name":`...)
		if len(t.name) >= 2 {
			s.enc = append(s.enc, t.name...)
		} else {
			s.enc = append(s.enc, `""`...)
		}
		s.enc = append(s.enc, `,"input":{}}`...)
		t.out = s.mBlockStart(b2s(s.enc))
		t.phase = toolLive
		s.live = next
		if len(t.args) > 0 {
			s.enc = appendStr(s.enc[:0], b2s(t.args))
			s.mDelta(t.out, "input_json_delta", "partial_json", b2s(s.enc))
			t.args = t.args[:0]
		}
	}
}

// dropTool drops a call that ended without a name: no client can run it
// (a tool_use named "" comes back as an error about a tool that does not
// exist), and its arguments mean nothing without it. Some model servers'
// tool parsers emit such a call when the model's output is cut or
// malformed. DroppedCalls counts them, for the caller's log.
func (s *Stream) dropTool(t *toolState) {
	t.phase = toolClosed
	t.args = t.args[:0]
	s.toolCount--
	s.dropped++
}

// DroppedCalls reports how many tool calls without a name the translation
// dropped so far (dropTool).
func (s *Stream) DroppedCalls() int {
	if s.sink != nil {
		return s.sink.droppedCalls()
	}
	return s.dropped
}

// mEndTools closes every tool call, held ones included.
func (s *Stream) mEndTools() {
	if len(s.tools) == 0 {
		return
	}
	for i := range s.tools {
		s.tools[i].ended = true
	}
	s.mPromote()
}

func (s *Stream) mFinal() {
	s.mStart()
	s.mCloseBlock()
	s.mEndTools()
	stop := s.finalStop()
	s.out = append(s.out, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\""...)
	s.out = append(s.out, messagesStop[stop]...)
	s.out = append(s.out, `","stop_sequence":`...)
	if stop == stopSeq && len(s.stopSeq) > 0 {
		s.out = append(s.out, s.stopSeq...)
	} else {
		s.out = append(s.out, "null"...)
	}
	s.out = append(s.out, `},"usage":`...)
	u := s.usageSoFar()
	s.out = u.appendMessages(s.out)
	s.out = append(s.out, "}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
}

// ---- chat client ----

func (s *Stream) cChunkStart() {
	if len(s.chatPrefix) == 0 {
		p := append(s.chatPrefix, `data: {"id":`...)
		p = appendID(p, Chat, s.id)
		p = append(p, `,"object":"chat.completion.chunk","created":`...)
		p = appendInt(p, s.created)
		p = append(p, `,"model":`...)
		if len(s.model) == 0 {
			s.model = append(s.model, `""`...)
		}
		p = append(p, s.model...)
		s.chatPrefix = p
	}
	s.out = append(s.out, s.chatPrefix...)
}

func (s *Stream) cStart() {
	if s.c.started {
		return
	}
	s.c.started = true
	s.cChunkStart()
	s.out = append(s.out, `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
}

// cDelta writes a chunk whose delta is open + lit + "}".
func (s *Stream) cDelta(open, lit string) {
	s.cStart()
	s.cChunkStart()
	s.out = append(s.out, `,"choices":[{"index":0,"delta":`...)
	s.out = append(s.out, open...)
	s.out = append(s.out, lit...)
	s.out = append(s.out, `},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
}

func (s *Stream) cToolStart(i int) {
	t := &s.tools[i]
	t.out = s.c.tools
	s.c.tools++
	s.enc = append(s.enc[:0], `{"tool_calls":[{"index":`...)
	s.enc = appendInt(s.enc, int64(t.out))
	s.enc = append(s.enc, `,"id":`...)
	s.enc = appendToolID(s.enc, t.id, Chat)
	s.enc = append(s.enc, `,"type":"function","function":{"name":`...)
	if len(t.name) >= 2 {
		s.enc = append(s.enc, t.name...)
	} else {
		s.enc = append(s.enc, `""`...)
	}
	s.enc = append(s.enc, `,"arguments":""}}]`...)
	s.cDelta(b2s(s.enc), "")
}

func (s *Stream) cToolArgs(i int, lit string) {
	s.enc = append(s.enc[:0], `{"tool_calls":[{"index":`...)
	s.enc = appendInt(s.enc, int64(s.tools[i].out))
	s.enc = append(s.enc, `,"function":{"arguments":`...)
	s.enc = append(s.enc, lit...)
	s.enc = append(s.enc, `}}]`...)
	s.cDelta(b2s(s.enc), "")
}

func (s *Stream) cFinal() {
	for i := range s.tools { // calls the upstream never closed
		s.cNoArgs(i)
	}
	s.cStart()
	s.cChunkStart()
	s.out = append(s.out, `,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
	s.out = append(s.out, chatStop[s.finalStop()]...)
	s.out = append(s.out, `"}]}`+"\n\n"...)
	if s.req.IncludeUsage {
		s.cChunkStart()
		s.out = append(s.out, `,"choices":[],"usage":`...)
		s.out = s.u.appendChat(s.out, s.u.reasoningTokens(s.reasonBytes, s.otherBytes))
		s.out = append(s.out, "}\n\n"...)
	}
	s.out = append(s.out, "data: [DONE]\n\n"...)
}
