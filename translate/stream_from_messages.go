package translate

// Messages upstream streams, for either client.

type upKind uint8

const (
	ukText upKind = iota
	ukThinking
	ukTool
	ukRaw  // passed through to a messages client as it is (re-indexed)
	ukDrop // a block a chat client cannot hold
)

type upBlock struct {
	idx  int
	kind upKind
	out  int
}

func (s *Stream) findUB(idx int) *upBlock {
	for i := len(s.ub) - 1; i >= 0; i-- {
		if s.ub[i].idx == idx {
			return &s.ub[i]
		}
	}
	return nil
}

const maxBlocks = 4096

func (s *Stream) messagesEvent(d string) {
	var typ, index, message, cb, delta, usageV string
	w := checkedCursor(d, eventDepthLimit(d))
	for {
		k, ok := w.key()
		if !ok {
			break
		}
		v := w.raw()
		switch k {
		case "type":
			typ = v
		case "index":
			index = v
		case "message":
			message = v
		case "content_block":
			cb = v
		case "delta":
			delta = v
		case "usage":
			usageV = v
		}
	}
	if !w.whole() {
		s.badEvent()
		return
	}
	n, _ := toInt(index)
	idx := int(n)
	switch inner(typ) {
	case "message_start":
		if s.began {
			return
		}
		s.began = true
		s.setID(field(message, "id"))
		s.setModel(field(message, "model"))
		if u := field(message, "usage"); isObj(u) {
			s.u.readMessages(u)
		}
		if s.client == Messages {
			s.mStart()
		} else {
			s.cStart()
		}
	case "content_block_start":
		s.beginIfNeeded()
		if len(s.ub) >= maxBlocks {
			s.fail(NewError(502, APIError, "the upstream sent too many content blocks"))
			return
		}
		s.blockStart(idx, cb)
	case "content_block_delta":
		b := s.findUB(idx)
		if b == nil {
			return
		}
		dt := field(delta, "type")
		switch inner(dt) {
		case "text_delta":
			s.onText(field(delta, "text"))
		case "thinking_delta":
			s.onReasoning(field(delta, "thinking"))
		case "signature_delta":
			if s.client == Messages {
				if sig := field(delta, "signature"); isStr(sig) {
					s.mSignature(sig)
				}
			}
		case "input_json_delta":
			s.toolArgs(idx, field(delta, "partial_json"))
		default:
			if s.client != Messages || !isObj(delta) {
				return
			}
			switch {
			case b.kind == ukRaw && s.m.open == bkRaw && s.m.openIdx == b.out:
				s.mRawDelta(b.out, delta)
			case b.kind == ukText && s.m.open == bkText && strEq(dt, "citations_delta"):
				s.mRawDelta(s.m.openIdx, delta)
			}
		}
	case "content_block_stop":
		b := s.findUB(idx)
		if b == nil {
			return
		}
		switch b.kind {
		case ukText:
			s.flushThink()
			if s.client == Messages && s.m.open == bkText {
				s.mCloseBlock()
			}
		case ukThinking:
			if s.client == Messages && s.m.open == bkThinking {
				s.mCloseBlock()
			}
		case ukTool:
			s.toolEnd(idx)
		case ukRaw:
			if s.m.open == bkRaw && s.m.openIdx == b.out {
				s.mCloseBlock()
			}
		}
		b.kind = ukDrop
	case "message_delta":
		if sr := field(delta, "stop_reason"); isStr(sr) {
			s.finished = true
			s.stop = messagesFinish(sr)
			if ss := field(delta, "stop_sequence"); isStr(ss) {
				s.stopSeq = append(s.stopSeq[:0], ss...)
			}
		}
		if isObj(usageV) {
			s.u.readMessagesDelta(usageV)
		}
	case "message_stop":
		s.beginIfNeeded()
		s.finished = true
		s.final()
	case "error":
		s.fail(streamError(d))
	case "ping":
		s.keepAlive()
	}
}

func (s *Stream) beginIfNeeded() {
	if !s.began {
		s.began = true
		if s.client == Messages {
			s.mStart()
		} else {
			s.cStart()
		}
	}
}

func (s *Stream) blockStart(idx int, cb string) {
	t := field(cb, "type")
	b := upBlock{idx: idx}
	switch inner(t) {
	case "text":
		b.kind = ukText
		s.ub = append(s.ub, b)
		s.onText(field(cb, "text"))
	case "thinking":
		b.kind = ukThinking
		s.ub = append(s.ub, b)
		s.onReasoning(field(cb, "thinking"))
		if s.client == Messages {
			s.flushThink()
			// Consecutive thinking blocks stay apart.
			if s.m.open == bkThinking {
				s.mCloseBlock()
			}
			if sig := field(cb, "signature"); isStr(sig) && !emptyStr(sig) {
				s.mSignature(sig)
			}
		}
	case "tool_use":
		b.kind = ukTool
		s.ub = append(s.ub, b)
		s.toolStart(idx, field(cb, "id"), field(cb, "name"))
		if in := field(cb, "input"); isObj(in) && trimJSON(in) != "{}" {
			s.lit = appendStr(s.lit[:0], in)
			s.toolArgs(idx, b2s(s.lit))
		}
	default: // redacted_thinking, server tool blocks: only a messages client can hold them
		if s.client != Messages || !isObj(cb) {
			b.kind = ukDrop
			s.ub = append(s.ub, b)
			return
		}
		s.flushThink()
		s.mStart()
		s.mCloseBlock()
		s.mEndTools()
		b.kind = ukRaw
		b.out = s.mBlockStart(cb)
		s.m.open, s.m.openIdx = bkRaw, b.out
		s.ub = append(s.ub, b)
	}
}

func (s *Stream) mRawDelta(idx int, delta string) {
	s.out = append(s.out, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	s.out = appendInt(s.out, int64(idx))
	s.out = append(s.out, `,"delta":`...)
	s.out = append(s.out, delta...)
	s.out = append(s.out, "}\n\n"...)
}
