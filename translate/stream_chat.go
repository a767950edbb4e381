package translate

// Chat completions upstream streams: translated for messages clients
// (chatChunk) or passed to chat clients with reasoning normalised
// (passChunk).

// chatChunk translates one chat.completion.chunk for a messages client.
func (s *Stream) chatChunk(d string) {
	r := &s.cr
	r.read(d)
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
		// No index (some servers): a new id is a new call.
		key = len(s.tools)
		for i := range s.tools {
			if b2s(s.tools[i].id) == id {
				key = s.tools[i].key
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
// rewrite into s.enc is built as the chunk is walked, once. For a Responses
// writer (keepView), the walk also fills a view (pv), so that a chunk passed
// as it came need not be read again (respDrain).
func (s *Stream) passChunk(d string) {
	s.began = true
	s.enc = append(s.enc[:0], '{')
	pv := s.passView()
	changed, anyChoice := false, false
	var usageV string
	w, _ := walkAt(d, 0)
	for {
		k, ok := w.next()
		if !ok {
			break
		}
		if k == "choices" {
			s.enc = key(s.enc, "choices")
			c, any := s.passChoices(&w, pv)
			changed = changed || c
			anyChoice = any
			continue
		}
		v := w.value()
		if pv != nil {
			pv.top.set(k, v)
		}
		switch k {
		case "error":
			if !isNull(v) {
				s.fail(streamError(d))
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
		s.enc = appendRawMember(s.enc, k, v)
	}
	if usageV != "" {
		if !anyChoice && !s.req.IncludeUsage {
			return
		}
		s.sawChatUsageChunk = true
		s.enc = key(s.enc, "usage")
		s.enc = s.u.appendChat(s.enc, s.u.reasoningTokens(s.reasonBytes, s.otherBytes))
	}
	s.out = append(s.out, "data: "...)
	if changed {
		s.out = append(s.out, s.enc...)
		s.out = append(s.out, '}')
	} else {
		if pv != nil && !s.viewIncomplete {
			s.holdView(len(s.out))
		}
		s.out = append(s.out, d...)
	}
	s.out = append(s.out, "\n\n"...)
}

// passedView is a chunk a chat pass-through passed as it came, read for a
// Responses writer: its JSON starts at at in the output, and r points into
// the event's data, which is kept until takeViews.
type passedView struct {
	at int
	r  chunkRead
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
	s.viewIncomplete = false
	return &v.r
}

// holdView keeps the view passView readied, for a chunk whose JSON is at at
// in the output, and the event data its strings point into: the next
// event's data goes after it.
func (s *Stream) holdView(at int) {
	n := len(s.views)
	s.views = s.views[:n+1]
	s.views[n].at = at
	s.dataAt = len(s.data)
}

// takeViews drops the views kept so far, before a write whose output they
// do not describe, and with them the event data they kept.
func (s *Stream) takeViews() {
	s.views = s.views[:0]
	if s.dataAt > 0 {
		s.data = s.data[:copy(s.data, s.data[s.dataAt:])]
		s.dataAt = 0
	}
}

// passChoices rewrites the choices array the walk is at into s.enc and
// reports whether any choice changed and whether there was any.
func (s *Stream) passChoices(w *walk, pv *chunkRead) (changed, any bool) {
	if pv != nil {
		pv.choices = pv.choices[:0]
	}
	a, ok := w.enter('[')
	if !ok {
		v := w.value()
		s.enc = append(s.enc, v...)
		if pv != nil {
			pv.top.choices = v
		}
		return false, false
	}
	s.enc = append(s.enc, '[')
	for {
		if _, ok := a.next(); !ok {
			break
		}
		any = true
		s.enc = sep(s.enc)
		if s.passChoice(&a, pv) {
			changed = true
		}
	}
	s.enc = append(s.enc, ']')
	raw := w.leave(&a)
	if pv != nil {
		pv.top.choices = raw
	}
	return changed, any
}

// rawMember is an object member as the walk found it.
type rawMember struct{ k, v string }

// passChoice rewrites the choice the walk is at. Its members are read once
// into s.kv: the delta needs the choice's index and finish_reason, which may
// come after it.
func (s *Stream) passChoice(a *walk, pv *chunkRead) bool {
	var c *choiceRead
	if pv != nil {
		c = pv.add()
	}
	e, ok := a.enter('{')
	if !ok {
		s.enc = append(s.enc, a.value()...)
		pv.dropUnlessFirst(c)
		return false
	}
	var idx, delta, finish string
	s.kv = s.kv[:0]
	for {
		k, ok := e.next()
		if !ok {
			break
		}
		v := e.value()
		s.kv = append(s.kv, rawMember{k, v})
		switch k {
		case "index":
			idx = v
		case "delta":
			delta = v
		case "finish_reason":
			finish = v
		}
	}
	a.leave(&e)
	cs := s.choice(idx)
	changed := false
	s.enc = append(s.enc, '{')
	for _, m := range s.kv {
		k, v := m.k, m.v
		if c != nil {
			s.viewMember(c, cs, k, v)
		}
		switch {
		case k == "delta" && cs != nil && isObj(v):
			s.enc = key(s.enc, "delta")
			var x *chunkDelta
			if c != nil {
				x = &c.delta.chunkDelta
			}
			if s.passDelta(cs, v, isStr(finish), x) {
				changed = true
			}
		case k == "finish_reason" && cs != nil && cs.tools && strEq(v, "stop"):
			s.enc = append(s.enc, `,"finish_reason":"tool_calls"`...)
			changed = true
		default:
			s.enc = appendRawMember(s.enc, k, v)
		}
	}
	if isStr(finish) {
		s.finished = true
	}
	if delta == "" && isStr(finish) && cs != nil && len(cs.think.pend) > 0 {
		// Held bytes with no delta to carry them: add one.
		s.enc = key(s.enc, "delta")
		s.passDelta(cs, "{}", true, nil)
		changed = true
	}
	s.enc = append(s.enc, '}')
	pv.dropUnlessFirst(c)
	return changed
}

// viewMember records a choice's member in the view, as choiceRead.read
// would; passDelta fills in the delta's members.
func (s *Stream) viewMember(c *choiceRead, cs *choiceState, k, v string) {
	switch k {
	case "delta":
		c.delta = deltaRead{raw: v}
		c.chunkChoice.delta = v
		c.deltaOrMessage, c.fromMessage = v, false
		if cs == nil && isObj(v) {
			s.viewIncomplete = true // passDelta will not read it
		}
	case "message":
		mw := walk{s: v}
		c.message.readValue(&mw)
		c.deltaOrMessage, c.fromMessage = v, true
	default:
		c.set(k, v)
	}
}

// passDelta rewrites a delta into s.enc; last says the choice finishes here,
// so the think parser lets go of what it holds. x, when not nil, gets the
// delta's members.
func (s *Stream) passDelta(cs *choiceState, d string, last bool, x *chunkDelta) bool {
	var content, rc, rs string
	changed := false
	s.enc = append(s.enc, '{')
	if x != nil {
		*x = chunkDelta{}
	}
	it, _ := objIter(d)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
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
			if !isNull(v) {
				cs.tools = true
				s.otherBytes += argBytes(v)
			}
		}
		s.enc = appendRawMember(s.enc, k, v)
	}
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
		s.enc = key(s.enc, "reasoning_content")
		s.enc = append(s.enc, '"')
		s.enc = append(s.enc, inner(reasoning)...)
		s.enc = appendEscaped(s.enc, b2s(s.rbuf))
		s.enc = append(s.enc, '"')
		s.reasonBytes += int64(len(inner(reasoning)) + len(s.rbuf))
	} else if isNull(rc) && rc != "" {
		s.enc = append(s.enc, `,"reasoning_content":null`...)
	}
	if textLit != "" {
		s.enc = appendRawMember(s.enc, "content", textLit)
		s.otherBytes += int64(len(textLit) - 2)
	} else if len(s.tbuf) > 0 || isStr(content) {
		s.enc = key(s.enc, "content")
		s.enc = appendStr(s.enc, b2s(s.tbuf))
		s.otherBytes += int64(len(s.tbuf))
	} else if content != "" {
		s.enc = appendRawMember(s.enc, "content", content)
	}
	s.enc = append(s.enc, '}')
	return changed
}

// passDone ends a chat pass-through at the upstream's [DONE].
func (s *Stream) passDone() {
	s.out = append(s.out, "data: [DONE]\n\n"...)
	s.done = true
}
