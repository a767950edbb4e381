package translate

// Chat completions upstream streams: translated for messages clients
// (chatChunk) or passed to chat clients with reasoning normalised
// (passChunk).

// chatChunk translates one chat.completion.chunk for a messages client.
func (s *Stream) chatChunk(d string) {
	r := &s.cr
	if !r.readChecked(d) {
		s.badEvent()
		return
	}
	t := &r.top
	if !isNull(t.err) {
		s.fail(streamError(d))
		return
	}
	if isObj(t.usage) {
		s.u.readChat(t.usage)
	}
	if !s.began {
		s.began = true
		s.setID(t.id)
		s.setModel(t.model)
		s.mStart()
	}
	for i := range r.choices {
		c := &r.choices[i]
		if isObj(c.deltaOrMessage) {
			s.chatDelta(c.members())
		}
		if isStr(c.finish) {
			s.finished = true
			s.stop = chatFinish(c.finish)
			if s.stop == stopEnd && c.matched != "" && !emptyStr(c.matched) {
				s.stop = stopSeq
				s.stopSeq = append(s.stopSeq[:0], c.matched...)
			}
			// The answer is over: close its blocks now rather than at [DONE].
			s.flushThink()
			s.mCloseBlock()
			s.mEndTools()
		}
	}
}

func (s *Stream) chatDelta(x *chunkDelta) {
	// Servers that fill both fields fill them with the same text.
	if isStr(x.reasoningContent) && !emptyStr(x.reasoningContent) {
		s.onReasoning(x.reasoningContent)
	} else if isStr(x.reasoning) {
		s.onReasoning(x.reasoning)
	}
	s.onText(x.content)
	if isStr(x.refusal) && !emptyStr(x.refusal) {
		s.refusal = true
		s.onText(x.refusal)
	}
	if ci, ok := arrIter(x.toolCalls); ok {
		for pos := 0; ; pos++ {
			c, ok := ci.elem()
			if !ok {
				break
			}
			s.chatToolCall(c, pos)
		}
	}
	if isObj(x.functionCall) {
		s.chatFunction(0, "", field(x.functionCall, "name"), field(x.functionCall, "arguments"))
	}
}

func (s *Stream) chatToolCall(c string, pos int) {
	idx, id, name, args := readToolCallDelta(c)
	key := -1
	if n, ok := toInt(idx); ok && n >= 0 && n < 1<<20 {
		key = int(n)
	} else if isStr(id) && !emptyStr(id) {
		// No index (some servers): a new id is a new call, unless the
		// last call came without one and this names no other tool: then
		// it is that call's id, late.
		key = len(s.tools)
		for i := range s.tools {
			if b2s(s.tools[i].id) == id {
				key = s.tools[i].key
			}
		}
		if n := len(s.tools); key == n && n > 0 {
			if t := &s.tools[n-1]; len(t.id) <= 2 && (!isStr(name) || emptyStr(name) || len(t.name) <= 2 || name == b2s(t.name)) {
				key = t.key
			}
		}
	} else if len(s.tools) > 0 {
		key = s.tools[len(s.tools)-1].key
	} else {
		key = pos
	}
	s.chatFunction(key, id, name, args)
}

func (s *Stream) chatFunction(key int, id, name, args string) {
	if (isStr(id) && !emptyStr(id)) || (isStr(name) && !emptyStr(name)) || s.findTool(key) < 0 {
		s.toolStart(key, id, name)
	}
	switch {
	case isStr(args):
		s.toolArgs(key, args)
	case isObj(args): // some servers send the arguments as an object
		s.lit = appendStr(s.lit[:0], args)
		s.toolArgs(key, b2s(s.lit))
	}
}

// choiceState is the per-choice state of a chat pass-through.
type choiceState struct {
	think thinkParser
	tools bool
}

// maxChoices bounds the per-choice state a pass-through keeps (n).
const maxChoices = 128

func (s *Stream) choice(idx string) *choiceState {
	n, ok := toInt(idx)
	if !ok {
		n = 0
	}
	if n < 0 || n >= maxChoices {
		return nil
	}
	for int(n) >= len(s.choices) {
		if len(s.choices) < cap(s.choices) {
			s.choices = s.choices[:len(s.choices)+1]
			c := &s.choices[len(s.choices)-1]
			*c = choiceState{think: thinkParser{pend: c.think.pend[:0]}}
		} else {
			s.choices = append(s.choices, choiceState{})
		}
		s.choices[len(s.choices)-1].think.reset(s.cfg.ThinkPrefilled && s.req.Reasoning)
	}
	return &s.choices[n]
}

// passChunk passes one chunk to a chat client. It is forwarded byte for byte
// unless something needs normalising: `reasoning` renamed reasoning_content,
// inline <think> split out of content, "stop" with tool calls made
// "tool_calls", usage completed with zeros and a reasoning estimate; the
// usage-only chunk is dropped when the client did not ask for it. The
// rewrite into s.enc is built as the chunk is walked, once, and sent when
// the chunk changed.
//
// A pass-through that feeds a Responses writer (keepView) writes no
// rewrite: the walk fills a view (pv) with the chunk as a chat client would
// read it, the values it rewrote included, and the writer reads that view
// instead of the chunk (sinkDrain).
func (s *Stream) passChunk(d string) {
	s.began = true
	if !s.keepView {
		s.enc = append(s.enc[:0], '{')
		s.vals = s.vals[:0]
	}
	pv := s.passView()
	changed, anyChoice := false, false
	var usageV string
	w := checkedCursor(d, eventDepthLimit(d))
	for {
		k, ok := w.key()
		if !ok {
			break
		}
		if k == "choices" {
			s.encKey("choices")
			c, any := s.passChoices(&w, pv)
			changed = changed || c
			anyChoice = any
			continue
		}
		v := w.raw()
		if pv != nil {
			pv.top.set(k, v)
		}
		switch k {
		case "error":
			if !isNull(v) {
				if w.skipObj(); !w.whole() {
					s.badEvent()
				} else {
					s.fail(streamError(d))
				}
				return
			}
		case "usage":
			if isObj(v) {
				usageV = v
				s.u.readChat(v)
				changed = true
				continue // written last, once the reasoning estimate is known
			}
		}
		s.encMember(k, v)
	}
	if !w.whole() {
		s.badEvent() // what the walk changed before it found out is not used again
		return
	}
	if usageV != "" {
		if !anyChoice && !s.req.IncludeUsage {
			return
		}
		usage := s.passUsage()
		s.encMember("usage", usage)
		if pv != nil {
			pv.top.usage = usage
		}
	}
	if changed && !s.keepView {
		s.out = append(s.out, "data: "...)
		s.out = append(s.out, s.enc...)
		s.out = append(s.out, "}\n\n"...)
		return
	}
	s.passAsIs(d, pv)
}

// passUsage returns the usage a chat client gets in the usage chunk: the
// upstream's, completed with zeros and the reasoning estimate (in s.vals).
func (s *Stream) passUsage() string {
	s.sawChatUsageChunk = true
	at := len(s.vals)
	s.vals = s.u.appendChat(s.vals, s.u.reasoningTokens(s.reasonBytes, s.otherBytes))
	return b2s(s.vals[at:])
}

// passAsIs passes the chunk d as the upstream sent it, and keeps its view
// pv (nil: none).
func (s *Stream) passAsIs(d string, pv *chunkRead) {
	s.out = append(s.out, "data: "...)
	if pv != nil {
		s.holdView(len(s.out), len(s.out)+len(d))
	}
	s.out = append(s.out, d...)
	s.out = append(s.out, "\n\n"...)
}

// The rewrite is written through these, which write nothing when nobody
// reads it (keepView).

func (s *Stream) encRaw(p string) {
	if !s.keepView {
		s.enc = append(s.enc, p...)
	}
}

func (s *Stream) encKey(k string) {
	if !s.keepView {
		s.enc = key(s.enc, k)
	}
}

func (s *Stream) encSep() {
	if !s.keepView {
		s.enc = sep(s.enc)
	}
}

func (s *Stream) encMember(k, v string) {
	if !s.keepView {
		s.enc = appendRawMember(s.enc, k, v)
	}
}

// passedView is a chunk a chat pass-through passed, read for a Responses
// writer as a chat client would read it: its JSON is output[at:end], and r
// points into the event's data and into the values the pass-through made,
// both kept until takeViews.
type passedView struct {
	at, end int
	r       chunkRead
}

// passView readies a view for the chunk about to be passed, or returns nil
// when nobody reads it; holdView keeps it.
func (s *Stream) passView() *chunkRead {
	if !s.keepView {
		return nil
	}
	views, v := extend(s.views)
	v.r.top, v.r.choices = chatTop{}, v.r.choices[:0]
	s.views = views[:len(views)-1] // holdView takes it
	return &v.r
}

// holdView keeps the view passView readied, for a chunk whose JSON is
// output[at:end], and the event data its strings point into: the next
// event's data goes after it.
func (s *Stream) holdView(at, end int) {
	n := len(s.views)
	s.views = s.views[:n+1]
	s.views[n].at, s.views[n].end = at, end
	s.dataAt = len(s.data)
}

// takeViews drops the views kept so far, before a write whose output they
// do not describe, and with them the event data and the values they kept.
func (s *Stream) takeViews() {
	s.views = s.views[:0]
	s.vals = s.vals[:0]
	if s.dataAt > 0 {
		s.data = s.data[:copy(s.data, s.data[s.dataAt:])]
		s.dataAt = 0
	}
}

// passChoices rewrites the choices array the cursor is at into s.enc and
// reports whether any choice changed and whether there was any.
func (s *Stream) passChoices(w *cursor, pv *chunkRead) (changed, any bool) {
	if pv != nil {
		pv.choices = pv.choices[:0]
	}
	at := w.begin()
	if !w.arr() {
		v := w.raw()
		s.encRaw(v)
		if pv != nil {
			pv.top.choices = v
		}
		return false, false
	}
	s.encRaw("[")
	for w.more() {
		any = true
		s.encSep()
		if s.passChoice(w, pv) {
			changed = true
		}
	}
	s.encRaw("]")
	raw := w.since(at)
	if pv != nil {
		pv.top.choices = raw
	}
	return changed, any
}

// rawMember is an object member as the cursor found it. The members of a
// choice's delta, read in the same walk, are s.dkv[lo:hi].
type rawMember struct {
	k, v   string
	lo, hi int
}

// readMembers reads the value the cursor is at and, when it is an object,
// its members into s.dkv: it returns the value raw and its members' bounds.
func (s *Stream) readMembers(w *cursor) (raw string, lo, hi int) {
	lo = len(s.dkv)
	at := w.begin()
	if !w.obj() {
		return w.raw(), lo, lo
	}
	for {
		k, ok := w.key()
		if !ok {
			break
		}
		s.dkv = append(s.dkv, rawMember{k: k, v: w.raw()})
	}
	return w.since(at), lo, len(s.dkv)
}

// passChoice rewrites the choice the cursor is at. Its members are read once
// into s.kv: the delta needs the choice's index and finish_reason, which may
// come after it.
func (s *Stream) passChoice(a *cursor, pv *chunkRead) bool {
	var c *choiceRead
	if pv != nil {
		c = pv.add()
	}
	if !a.obj() {
		s.encRaw(a.raw())
		pv.dropUnlessFirst(c)
		return false
	}
	var idx, delta, finish string
	s.kv, s.dkv = s.kv[:0], s.dkv[:0]
	for {
		k, ok := a.key()
		if !ok {
			break
		}
		m := rawMember{k: k}
		if k == "delta" {
			m.v, m.lo, m.hi = s.readMembers(a)
		} else {
			m.v = a.raw()
		}
		s.kv = append(s.kv, m)
		v := m.v
		switch k {
		case "index":
			idx = v
		case "delta":
			delta = v
		case "finish_reason":
			finish = v
		}
	}
	cs := s.choice(idx)
	changed := false
	s.encRaw("{")
	for i := range s.kv {
		m := &s.kv[i]
		k, v := m.k, m.v
		if c != nil {
			viewMember(c, k, v)
		}
		switch {
		case k == "delta" && cs != nil && isObj(v):
			s.encKey("delta")
			var x *chunkDelta
			if c != nil {
				x = &c.delta.chunkDelta
			}
			if s.passDelta(cs, s.dkv[m.lo:m.hi], isStr(finish), x) {
				changed = true
			}
		// A delta that calls tools makes the choice's "stop" "tool_calls",
		// also when finish_reason comes before it (llama.cpp's order).
		case k == "finish_reason" && cs != nil && strEq(v, "stop") && (cs.tools || s.callsTools()):
			s.encMember(k, toolCallsFinish)
			if c != nil {
				c.finish = toolCallsFinish
			}
			changed = true
		default:
			s.encMember(k, v)
		}
	}
	if isStr(finish) {
		s.finished = true
	}
	if delta == "" && isStr(finish) && cs != nil && len(cs.think.pend) > 0 {
		// Held bytes with no delta to carry them: add one.
		s.encKey("delta")
		var x *chunkDelta
		if c != nil {
			viewMember(c, "delta", "{}")
			x = &c.delta.chunkDelta
		}
		s.passDelta(cs, nil, true, x)
		changed = true
	}
	s.encRaw("}")
	pv.dropUnlessFirst(c)
	return changed
}

const toolCallsFinish = `"tool_calls"`

// callsTools reports whether a delta among the choice's members (s.kv) has
// tool calls, as passDelta counts them.
func (s *Stream) callsTools() bool {
	for _, m := range s.kv {
		if m.k != "delta" || !isObj(m.v) {
			continue
		}
		for _, d := range s.dkv[m.lo:m.hi] {
			if d.k == "tool_calls" && !isNull(d.v) {
				return true
			}
		}
	}
	return false
}

// viewMember records a choice's member in the view, as choiceRead.read
// would; passDelta fills in the delta's members. A delta passDelta does not
// read (cs == nil) belongs to a choice whose index is a number other than
// 0, which the view drops.
func viewMember(c *choiceRead, k, v string) {
	switch k {
	case "delta":
		c.delta = deltaRead{raw: v}
		c.tookDelta()
	case "message":
		mw := cursor{s: v}
		c.message.readValue(&mw)
		c.deltaOrMessage, c.fromMessage = v, true
	default:
		c.set(k, v)
	}
}

// passDelta rewrites a delta, given its members, into s.enc; last says the
// choice finishes here, so the think parser lets go of what it holds. x,
// when not nil, gets the delta's members as the rewrite has them.
func (s *Stream) passDelta(cs *choiceState, members []rawMember, last bool, x *chunkDelta) bool {
	var content, rc, rs string
	s.encRaw("{")
	if x != nil {
		*x = chunkDelta{}
	}
	for _, m := range members {
		k, v := m.k, m.v
		if x != nil {
			x.set(k, v)
		}
		switch k {
		case "content":
			content = v
			continue
		case "reasoning_content":
			rc = v
			continue
		case "reasoning":
			rs = v
			continue
		case "tool_calls":
			s.countToolCalls(cs, v)
		}
		s.encMember(k, v)
	}
	rcOut, contentOut, changed := s.normalizeDelta(cs, content, rc, rs, last)
	if rcOut != "" {
		s.encMember("reasoning_content", rcOut)
	}
	if contentOut != "" {
		s.encMember("content", contentOut)
	}
	s.encRaw("}")
	if x != nil {
		x.reasoningContent, x.reasoning, x.content = rcOut, "", contentOut
	}
	return changed
}

// countToolCalls notes a delta's tool_calls member v: the choice calls
// tools, and their arguments count towards the output that is not
// reasoning.
func (s *Stream) countToolCalls(cs *choiceState, v string) {
	if !isNull(v) {
		cs.tools = true
		s.otherBytes += argBytes(v)
	}
}

// normalizeDelta works out a delta's reasoning and text as a chat client
// gets them, from its content, reasoning_content and reasoning members (""
// when absent): reasoning in reasoning_content, inline <think> split out
// of content. It returns the values of the two members ("" for none) and
// whether they differ from the upstream's; a value made here is in s.vals,
// where a view may point.
func (s *Stream) normalizeDelta(cs *choiceState, content, rc, rs string, last bool) (rcOut, contentOut string, changed bool) {
	reasoning := ""
	switch {
	case isStr(rc) && !emptyStr(rc):
		reasoning = rc
	case isStr(rs):
		reasoning = rs
		changed = true
	}
	s.rbuf, s.tbuf = s.rbuf[:0], s.tbuf[:0]
	if reasoning != "" && !emptyStr(reasoning) {
		cs.think.off(&s.tbuf)
	}
	textLit := ""
	if isStr(content) {
		if (emptyStr(content) || cs.think.passes(content)) && len(s.tbuf) == 0 {
			textLit = content
		} else {
			s.scratch = appendUnescaped(s.scratch[:0], inner(content))
			cs.think.feed(s.scratch, &s.rbuf, &s.tbuf)
			changed = true
		}
	}
	if last && len(cs.think.pend) > 0 {
		cs.think.flush(&s.rbuf, &s.tbuf)
		changed = true
	}
	if reasoning != "" || len(s.rbuf) > 0 {
		at := len(s.vals)
		s.vals = append(s.vals, '"')
		s.vals = append(s.vals, inner(reasoning)...)
		s.vals = appendEscaped(s.vals, b2s(s.rbuf))
		s.vals = append(s.vals, '"')
		rcOut = b2s(s.vals[at:])
		s.reasonBytes += int64(len(inner(reasoning)) + len(s.rbuf))
	} else if isNull(rc) && rc != "" {
		rcOut = "null"
	}
	switch {
	case textLit != "":
		contentOut = textLit
		s.otherBytes += int64(len(textLit) - 2)
	case len(s.tbuf) > 0 || isStr(content):
		at := len(s.vals)
		s.vals = appendStr(s.vals, b2s(s.tbuf))
		contentOut = b2s(s.vals[at:])
		s.otherBytes += int64(len(s.tbuf))
	default:
		contentOut = content
	}
	return rcOut, contentOut, changed
}

// passDone ends a chat pass-through at the upstream's [DONE].
func (s *Stream) passDone() {
	s.out = append(s.out, "data: [DONE]\n\n"...)
	s.done = true
}
