package translate

// The chunk readers as they were before the one-pass walk (chunk_read.go),
// kept as the reference for FuzzStreamChunkReaders.

// read is chatTop's reader as it was: each member found whole.
func (t *chatTop) read(s string) {
	*t = chatTop{}
	it, _ := objIter(s)
	for {
		k, v, ok := it.next()
		if !ok {
			return
		}
		t.set(k, v)
	}
}

// chunkChoices walks the choices of a chunk.
type chunkChoices struct{ it iter }

func chunkChoicesOf(raw string) chunkChoices {
	it, _ := arrIter(raw)
	return chunkChoices{it}
}

// next reads into c the next element of the first choice (index 0, or
// none): a translated client asked for one choice. It reports false at the
// end. (The readers fill the caller's value: on the hot path that is
// measurably cheaper than returning these structs.)
func (cs *chunkChoices) next(c *chunkChoice) bool {
	for {
		raw, ok := cs.it.elem()
		if !ok {
			return false
		}
		*c = chunkChoice{}
		it, _ := objIter(raw)
		for {
			k, v, ok := it.next()
			if !ok {
				break
			}
			switch k {
			case "index":
				c.index = v
			case "delta":
				c.delta, c.deltaOrMessage = v, v
			case "message":
				c.deltaOrMessage = v
			case "finish_reason":
				c.finish = v
			case "stop_reason", "matched_stop":
				if isStr(v) {
					c.matched = v
				}
			}
		}
		if n, ok := toInt(c.index); !ok || n == 0 {
			return true
		}
	}
}

// read is chunkDelta's reader as it was.
func (x *chunkDelta) read(d string) {
	*x = chunkDelta{}
	it, _ := objIter(d)
	for {
		k, v, ok := it.next()
		if !ok {
			return
		}
		x.set(k, v)
	}
}

func (s *Stream) chatChunkOld(d string) {
	var t chatTop
	t.read(d)
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
	cs := chunkChoicesOf(t.choices)
	var c chunkChoice
	for cs.next(&c) {
		if isObj(c.deltaOrMessage) {
			s.chatDeltaOld(c.deltaOrMessage)
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

func (s *Stream) chatDeltaOld(delta string) {
	var x chunkDelta
	x.read(delta)
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

func (s *Stream) passChunkOld(d string) {
	s.began = true
	s.enc = append(s.enc[:0], '{')
	changed := false
	var choices, usageV string
	it, _ := objIter(d)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch k {
		case "error":
			if !isNull(v) {
				s.fail(streamError(d))
				return
			}
		case "choices":
			choices = v
			s.enc = key(s.enc, "choices")
			if s.passChoicesOld(v) {
				changed = true
			}
			continue
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
		ci, _ := arrIter(choices)
		if _, any := ci.elem(); !any && !s.req.IncludeUsage {
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
		s.out = append(s.out, d...)
	}
	s.out = append(s.out, "\n\n"...)
}

func (s *Stream) passChoicesOld(v string) bool {
	ci, ok := arrIter(v)
	if !ok {
		s.enc = append(s.enc, v...)
		return false
	}
	changed := false
	s.enc = append(s.enc, '[')
	for {
		c, ok := ci.elem()
		if !ok {
			break
		}
		s.enc = sep(s.enc)
		if s.passChoiceOld(c) {
			changed = true
		}
	}
	s.enc = append(s.enc, ']')
	return changed
}

func (s *Stream) passChoiceOld(c string) bool {
	var idx, delta, finish string
	mi, ok := objIter(c)
	if !ok {
		s.enc = append(s.enc, c...)
		return false
	}
	for {
		k, v, ok := mi.next()
		if !ok {
			break
		}
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
	s.enc = append(s.enc, '{')
	mi, _ = objIter(c)
	for {
		k, v, ok := mi.next()
		if !ok {
			break
		}
		switch {
		case k == "delta" && cs != nil && isObj(v):
			s.enc = key(s.enc, "delta")
			if s.passDelta(cs, objMembers(v), isStr(finish), nil) {
				changed = true
			}
		case k == "finish_reason" && cs != nil && cs.tools && strEq(v, "stop"):
			// Written as a member: the literal with its own comma made
			// `{,` when finish_reason came first (fixed in both).
			s.enc = appendRawMember(s.enc, k, `"tool_calls"`)
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
		s.passDelta(cs, nil, true, nil)
		changed = true
	}
	s.enc = append(s.enc, '}')
	return changed
}

func (s *Stream) respChunkOld(d string) {
	x := s.rx
	var t chatTop
	t.read(d)
	if !isNull(t.err) {
		s.respFail(streamError(d))
		return
	}
	s.respStart(t.id, t.model)
	if isObj(t.usage) {
		x.u.readChat(t.usage)
	}
	cs := chunkChoicesOf(t.choices)
	var c chunkChoice
	for cs.next(&c) {
		if isObj(c.delta) {
			s.respDeltaOld(c.delta)
		}
		if isStr(c.finish) && x.stop == stopNone {
			x.stop = chatFinish(c.finish)
			s.respCloseAll()
		}
	}
}

func (s *Stream) respDeltaOld(d string) {
	var x chunkDelta
	x.read(d)
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

// objMembers lists the members of the object raw, as the old readers found
// them with objIter.
func objMembers(raw string) []rawMember {
	var l []rawMember
	it, _ := objIter(raw)
	for {
		k, v, ok := it.next()
		if !ok {
			return l
		}
		l = append(l, rawMember{k: k, v: v})
	}
}
