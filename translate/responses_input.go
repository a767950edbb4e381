package translate

// A Responses request's input items as chat messages: instructions and
// system and developer items as the system message, user items and their
// content parts, and the walk that gathers runs of assistant-side items
// (responses_runs.go writes them).

import "slices"

// item kinds of the input
const (
	ikSystem uint8 = iota + 1
	ikUser
	ikAssistant // an assistant message, a reasoning item or a function call
	ikOutput    // a function call's output
)

// inputWriter writes the input items as chat messages. Consecutive
// assistant-side items (reasoning, assistant messages, function calls) make
// one assistant message, and consecutive function call outputs one run of
// tool messages: each such run is written when it ends, from its items.
type inputWriter struct {
	dst      []byte
	items    string // the text the walk reads (offsets of runs are into it)
	sysMark  int    // where the system message starts
	sysFirst bool   // nothing is in the system message yet
	lead     bool   // only system items so far: they join the system message
	run      uint8  // ikAssistant, ikOutput or 0
	runPos   int    // the offset in items of the run's first item
	runN     int    // items in the run
	runIndex int    // index of the run's first item
	// h holds the messages after an assistant turn that calls tools, so
	// that the outputs that come after them still follow the calls
	// (Codex's approval flow: function_call, a user message, its output).
	h held
}

// appendStringInput writes the chat messages for instructions and an input
// that is a string.
func appendStringInput(dst []byte, input, instructions string) []byte {
	w := inputWriter{dst: append(dst, sysOpen...), sysMark: len(dst), sysFirst: true, lead: true}
	if isStr(instructions) {
		w.dst = appendJoinedInner(w.dst, instructions, `\n\n`, &w.sysFirst)
	}
	w.endLead()
	if !emptyStr(input) {
		w.dst = sep(w.dst)
		w.dst = append(w.dst, `{"role":"user","content":`...)
		w.dst = append(w.dst, input...)
		w.dst = append(w.dst, '}')
	}
	return w.dst
}

// sysOpen opens a system message; its text follows.
const sysOpen = `{"role":"system","content":"`

// inputItems is an input array written as chat messages where the walk of
// the request met it: dst[mark+1:end], after a '[' that makes the first
// message need no comma. The instructions, which lead the system message,
// and the members the chat body starts with may come later in the request;
// place writes them in front.
type inputItems struct {
	walked bool
	end    int
	// lead: the messages begin with the system message of the leading
	// system items, open for the instructions to be put before its text.
	lead bool
	err  *Error // the input's error, given where the chat body needs it
}

// appendInputItems writes the input array at c as chat messages (its
// leading system items as one system message) and leaves c past it, or
// where it found an error.
func appendInputItems(dst []byte, c *cursor) ([]byte, inputItems) {
	dst = append(dst, '[')
	w := inputWriter{dst: dst, items: c.s, sysMark: len(dst), sysFirst: true, lead: true}
	// An assistant run's items as inputKind read them, for
	// appendAssistantRun; a run's first eight stay on the stack.
	var runBuf [8]runItem
	run := runBuf[:0]
	w.dst = append(w.dst, sysOpen...)
	err := w.walk(c, run)
	return w.dst, inputItems{walked: true, end: len(w.dst), lead: !w.sysFirst, err: err}
}

// place writes the chat body's start, `{"model":…,"messages":[`, and the
// instructions' system message in front of the messages at dst[mark+1:end]
// and returns dst up to the last message.
func (in *inputItems) place(dst []byte, mark int, model, instructions string) []byte {
	msgs := in.end - (mark + 1)
	var instr, tail string
	skip := 0 // bytes at the start of the messages that the front replaces
	if isStr(instructions) {
		instr = inner(instructions)
	}
	switch {
	case instr == "":
	case in.lead: // the instructions, then the items' text
		skip, tail = len(sysOpen), `\n\n`
	case msgs > 0:
		tail = `"},`
	default:
		tail = `"}`
	}
	front := len(`{"model":`) + len(model) + len(`,"messages":[`)
	if instr != "" {
		front += len(sysOpen) + len(instr) + len(tail)
	}
	size := front + msgs - skip // the front is longer than what it replaces
	dst = slices.Grow(dst[:in.end], mark+size-in.end)[:mark+size]
	copy(dst[mark+front:], dst[mark+1+skip:in.end])
	// The front goes into the room the move left (no growth: the capacity
	// is there).
	f := append(dst[:mark], `{"model":`...)
	f = append(f, model...)
	f = append(f, `,"messages":[`...)
	if instr != "" {
		f = append(f, sysOpen...)
		f = append(f, instr...)
		f = append(f, tail...)
	}
	return dst[:mark+size]
}

// walk writes the input items at c, an array.
func (w *inputWriter) walk(c *cursor, run []runItem) *Error {
	c.arr()
	items := loc{name: "input"}
	for i := 0; c.more(); i++ {
		pos := c.i
		p := items.elem(i)
		kind, item, err := inputKind(c, &p)
		if err != nil {
			return err
		}
		content := item.content
		switch kind {
		case ikSystem:
			if w.lead {
				if w.dst, err = appendSystemText(w.dst, content, &p, &w.sysFirst); err != nil {
					return err
				}
				continue
			}
			if err = w.flush(run); err != nil {
				return err
			}
			mark := len(w.dst)
			w.dst = sep(w.dst)
			w.dst = append(w.dst, sysOpen...)
			first := true
			if w.dst, err = appendSystemText(w.dst, content, &p, &first); err != nil {
				return err
			}
			if first {
				w.dst = w.dst[:mark]
			} else {
				w.dst = append(w.dst, `"}`...)
			}
			w.h.note(w.dst, mark)
		case ikUser:
			w.endLead()
			if err = w.flush(run); err != nil {
				return err
			}
			mark := len(w.dst)
			if w.dst, err = appendUserChat(w.dst, content, &p); err != nil {
				return err
			}
			w.h.note(w.dst, mark)
		case ikAssistant, ikOutput:
			w.endLead()
			if w.run != kind {
				if err = w.flush(run); err != nil {
					return err
				}
				w.run, w.runPos, w.runN, w.runIndex = kind, pos, 0, i
				run = run[:0]
			}
			w.runN++
			if kind == ikAssistant {
				run = append(run, item)
			}
		}
	}
	w.endLead()
	return w.flush(run)
}

// endLead closes the system message (or removes it, when empty) at the
// first item that is not a system message.
func (w *inputWriter) endLead() {
	if !w.lead {
		return
	}
	w.lead = false
	if w.sysFirst {
		w.dst = w.dst[:w.sysMark]
		return
	}
	w.dst = append(w.dst, `"}`...)
}

// flush writes the run that has ended, if any; run holds an assistant
// run's items (kept by the caller: in the writer they would escape).
func (w *inputWriter) flush(run []runItem) *Error {
	if w.run == 0 {
		return nil
	}
	var err *Error
	if w.run == ikAssistant {
		w.dst, err = appendAssistantRun(w.dst, run, w.runIndex)
		w.h = held{}
		for k := range run {
			if strEq(run[k].typ, "function_call") {
				w.h.on = true
				break
			}
		}
	} else {
		mark := len(w.dst)
		w.dst, err = appendOutputRun(w.dst, iter{s: w.items, i: w.runPos, end: ']'}, w.runN, w.runIndex)
		if err == nil {
			w.h.results(w.dst, mark)
		}
	}
	w.run = 0
	return err
}

// inputKind classifies the input item at c, reads its members and leaves
// c past it. Walking the item where it stands, instead of finding its end
// first, scans it once; an assistant-side item is written from what this
// read (appendAssistantRun).
func inputKind(c *cursor, p *loc) (uint8, runItem, *Error) {
	var r runItem
	if !c.obj() {
		return 0, r, p.bad(": must be an object")
	}
	r.read(c)
	typ, role := r.typ, r.role
	switch {
	case isNull(typ) || strEq(typ, "message"):
		switch {
		case strEq(role, "user"):
			return ikUser, r, nil
		case strEq(role, "assistant"):
			return ikAssistant, r, nil
		case strEq(role, "system"), strEq(role, "developer"):
			return ikSystem, r, nil
		}
		return 0, r, p.bad(".role: must be user, assistant, system or developer")
	case strEq(typ, "reasoning"), strEq(typ, "function_call"):
		return ikAssistant, r, nil
	case strEq(typ, "function_call_output"):
		return ikOutput, r, nil
	case strEq(typ, "item_reference"):
		return 0, r, p.bad(": item references need stored items, which Timeblock does not keep; send the items themselves")
	case strEq(typ, "custom_tool_call"), strEq(typ, "custom_tool_call_output"):
		return 0, r, p.bad(".type: custom tools are not supported; use function tools")
	case isStr(typ):
		return 0, r, p.bad(".type: " + str(typ) + " items belong to hosted tools, which this model's upstream cannot run")
	}
	return 0, r, p.bad(".type: must be a string")
}

// appendSystemText appends a system or developer message's text (a string
// or text parts) to an open system message.
func appendSystemText(dst []byte, content string, p *loc, first *bool) ([]byte, *Error) {
	if isStr(content) {
		return appendJoinedInner(dst, content, `\n\n`, first), nil
	}
	it, ok := arrIter(content)
	if !ok {
		return dst, p.bad(".content: must be a string or an array of text parts")
	}
	cp := p.member("content")
	for j := 0; ; j++ {
		part, ok := it.elem()
		if !ok {
			return dst, nil
		}
		at := cp.elem(j)
		txt, err := partText(part, &at)
		if err != nil {
			return dst, err
		}
		if txt == "" {
			return dst, at.bad(": system and developer messages may only hold text parts")
		}
		dst = appendJoinedInner(dst, txt, `\n\n`, first)
	}
}

// partText returns the text literal of a text part (input_text, output_text,
// refusal), or "" for another part.
func partText(p string, at *loc) (string, *Error) {
	if !isObj(p) {
		return "", at.bad(": must be an object")
	}
	switch t := field(p, "type"); {
	case strEq(t, "input_text"), strEq(t, "output_text"), strEq(t, "text"):
		txt := field(p, "text")
		if !isStr(txt) {
			return "", at.bad(".text: must be a string")
		}
		return txt, nil
	case strEq(t, "refusal"):
		txt := field(p, "refusal")
		if !isStr(txt) {
			return "", at.bad(".refusal: must be a string")
		}
		return txt, nil
	case !isStr(t):
		return "", at.bad(".type: must be a string")
	}
	return "", nil
}

// appendUserChat writes a user message.
func appendUserChat(dst []byte, content string, p *loc) ([]byte, *Error) {
	if isStr(content) {
		dst = sep(dst)
		dst = append(dst, `{"role":"user","content":`...)
		dst = append(dst, content...)
		return append(dst, '}'), nil
	}
	it, ok := arrIter(content)
	if !ok {
		return dst, p.bad(".content: must be a string or an array of content parts")
	}
	dst = sep(dst)
	dst = append(dst, `{"role":"user","content":[`...)
	cp := p.member("content")
	for j := 0; ; j++ {
		part, ok := it.elem()
		if !ok {
			break
		}
		at := cp.elem(j)
		var err *Error
		if dst, err = appendPartChat(dst, part, &at); err != nil {
			return dst, err
		}
	}
	return append(dst, `]}`...), nil
}

// appendPartChat writes an input content part as a chat content part.
func appendPartChat(dst []byte, p string, at *loc) ([]byte, *Error) {
	txt, err := partText(p, at)
	if err != nil {
		return dst, err
	}
	if txt != "" {
		dst = sep(dst)
		dst = append(dst, `{"type":"text","text":`...)
		dst = append(dst, txt...)
		return append(dst, '}'), nil
	}
	switch t := field(p, "type"); {
	case strEq(t, "input_image"):
		u := field(p, "image_url")
		if !isStr(u) {
			if !isNull(field(p, "file_id")) {
				return dst, at.bad(".file_id: uploaded files are not supported; send image_url (a URL or a base64 data URL)")
			}
			return dst, at.bad(".image_url: must be a string (a URL or a base64 data URL)")
		}
		dst = sep(dst)
		dst = append(dst, `{"type":"image_url","image_url":{"url":`...)
		dst = append(dst, u...)
		if d := field(p, "detail"); isStr(d) {
			dst = appendRawMember(dst, "detail", d)
		}
		return append(dst, `}}`...), nil
	case strEq(t, "input_file"):
		fd := field(p, "file_data")
		if !isStr(fd) {
			return dst, at.bad(": only inline file_data (a base64 data URL) is supported, not file_id or file_url")
		}
		dst = sep(dst)
		dst = append(dst, `{"type":"file","file":{"file_data":`...)
		dst = append(dst, fd...)
		if n := field(p, "filename"); isStr(n) {
			dst = appendRawMember(dst, "filename", n)
		}
		return append(dst, `}}`...), nil
	case strEq(t, "input_audio"):
		return dst, at.bad(": audio input is not supported")
	}
	return dst, at.bad(".type: content part type " + str(field(p, "type")) + " is not supported")
}
