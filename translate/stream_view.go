package translate

// A chat pass-through that feeds a Responses writer (keepView) writes no
// rewrite, only a view of each chunk as a chat client would read it. Most
// chunks are read into the view directly (viewChunk): one walk, as a
// messages client's chunks are read (chunkRead.readChecked), and then the
// normalisations passChunk makes are made on the view. That skips
// passChunk's machinery for the rewrite: recording each choice's members
// to act on them in a second loop, since a rewrite must keep their order.
//
// A chunk on which the two could differ is left to passChunk: one that is
// not JSON or carries an error; one with a member passChunk acts on each
// time it is given, given twice (choices or usage; a choice's delta; a
// delta's tool_calls); or one with a choice the view drops (a numeric index
// other than 0), whose state passChunk still keeps.

// directViews lets tests send every chunk through passChunk instead, to
// compare the two.
var directViews = true

// viewChunk reads the chunk d into a view for the Responses writer and
// reports whether it did. When it did not, nothing has changed, and the
// caller passes d with passChunk.
func (s *Stream) viewChunk(d string) bool {
	pv := s.passView()
	if !pv.readPlain(d) {
		return false
	}
	s.began = true
	for i := range pv.choices {
		c := &pv.choices[i]
		hasDelta, finishes := isObj(c.chunkChoice.delta), isStr(c.finish)
		if !hasDelta && !finishes {
			continue
		}
		cs := s.choice(c.index) // not nil: the index is 0 or not a number
		x := &c.delta.chunkDelta
		if hasDelta {
			s.viewDelta(cs, x, finishes)
		} else if c.chunkChoice.delta == "" && len(cs.think.pend) > 0 {
			// Held bytes with no delta to carry them: add one, as passChoice does.
			c.delta = deltaRead{raw: "{}"}
			c.tookDelta()
			s.viewDelta(cs, x, true)
		}
		if finishes {
			// Tool calls in this delta count, whichever member came first.
			if cs.tools && strEq(c.finish, "stop") {
				c.finish = toolCallsFinish
			}
			s.finished = true
		}
	}
	if isObj(pv.top.usage) {
		s.u.readChat(pv.top.usage)
		if len(pv.choices) == 0 && !s.req.IncludeUsage {
			return true // the usage-only chunk, which the client did not ask for
		}
		pv.top.usage = s.passUsage()
	}
	s.passAsIs(d, pv)
	return true
}

// viewDelta normalises the delta x of a choice as passDelta does, in place;
// last says the choice finishes here.
func (s *Stream) viewDelta(cs *choiceState, x *chunkDelta, last bool) {
	if x.toolCalls != "" {
		s.countToolCalls(cs, x.toolCalls)
	}
	rc, content, _ := s.normalizeDelta(cs, x.content, x.reasoningContent, x.reasoning, last)
	x.reasoningContent, x.reasoning, x.content = rc, "", content
}

// readPlain reads the chunk d as readChecked does and reports whether
// viewChunk can take it from there (see above).
func (r *chunkRead) readPlain(d string) bool {
	r.top = chatTop{}
	r.choices = r.choices[:0]
	w := checkedCursor(d, eventDepthLimit(d))
	for {
		k, ok := w.key()
		if !ok {
			break
		}
		switch k {
		case "choices":
			if r.top.choices != "" || !r.readPlainChoices(&w) {
				return false
			}
		case "usage":
			if r.top.usage != "" {
				return false
			}
			r.top.usage = w.raw()
		case "error":
			if r.top.err = w.raw(); !isNull(r.top.err) {
				return false // passChunk reports it, wherever it stands
			}
		default:
			r.top.set(k, w.raw())
		}
	}
	return w.whole()
}

// readPlainChoices reads the choices member the cursor is at.
func (r *chunkRead) readPlainChoices(w *cursor) bool {
	at := w.begin()
	if !w.arr() {
		r.top.choices = w.raw()
		return r.top.choices != ""
	}
	for w.more() {
		c := r.add()
		if w.obj() {
			if !c.readPlain(w) {
				return false
			}
		} else {
			w.skip() // not an object: a choice with nothing in it
		}
		if n, ok := toInt(c.index); ok && n != 0 {
			return false
		}
	}
	r.top.choices = w.since(at)
	return r.top.choices != ""
}

// readPlain reads a choice as choiceRead.read does; it reports false for a
// delta, or a delta's tool_calls, given twice. It is a loop of its own so
// that a messages client's chunks, read by choiceRead.read, do not pay for
// the check (a shared loop or helper cost them 44 instructions a chunk).
func (c *choiceRead) readPlain(e *cursor) bool {
	for {
		k, ok := e.key()
		if !ok {
			return true
		}
		switch k {
		case "delta":
			if c.chunkChoice.delta != "" || !c.delta.readPlain(e) {
				return false
			}
			c.tookDelta()
		case "message":
			c.message.readValue(e)
			c.deltaOrMessage, c.fromMessage = c.message.raw, true
		default:
			c.set(k, e.raw())
		}
	}
}

// readPlain reads a delta as readValue does; it reports false for
// tool_calls given twice.
func (x *deltaRead) readPlain(w *cursor) bool {
	x.chunkDelta = chunkDelta{}
	at := w.begin()
	if !w.obj() {
		x.raw = w.raw()
		return x.raw != ""
	}
	for {
		k, ok := w.key()
		if !ok {
			break
		}
		v := w.raw()
		if k == "tool_calls" && x.toolCalls != "" {
			return false
		}
		x.chunkDelta.set(k, v)
	}
	x.raw = w.since(at)
	return x.raw != ""
}
