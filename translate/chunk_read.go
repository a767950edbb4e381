package translate

// Reading stream events in one pass, on a cursor (walk.go). An event read
// level by level with iter (top, choices, a choice, its delta) would scan
// the delta once per level; the readers below step into a member where the
// cursor stands and go on from where the inner read stopped, so each byte
// is scanned about once. Upstream events are read on a checked cursor, which
// validates them in the same pass.

// chunkRead is a chat chunk as the translators read it, in one walk: its
// top-level members and, of its choices, those they act on (index 0, or
// none given: a translated client asked for one choice), each with the
// members of its delta and message. It is chatTop, chunkChoice and
// chunkDelta (read_chat.go) read at once; Stream keeps one for reuse. The
// member-by-member readers it replaced are the reference in
// stream_old_test.go.
type chunkRead struct {
	top     chatTop
	choices []choiceRead
}

type choiceRead struct {
	chunkChoice
	delta, message deltaRead
	fromMessage    bool // deltaOrMessage is the message
}

// members returns the members of deltaOrMessage.
func (c *choiceRead) members() *chunkDelta {
	if c.fromMessage {
		return &c.message.chunkDelta
	}
	return &c.delta.chunkDelta
}

// deltaRead is a delta (or a message) read in the walk: its raw value and,
// when it is an object, its members.
type deltaRead struct {
	chunkDelta
	raw string
}

func (x *deltaRead) readValue(w *cursor) {
	x.chunkDelta = chunkDelta{}
	at := w.begin()
	if !w.obj() {
		x.raw = w.raw()
		return
	}
	for {
		k, ok := w.key()
		if !ok {
			break
		}
		x.chunkDelta.set(k, w.raw())
	}
	x.raw = w.since(at)
}

// read reads the chunk d, which is known to be JSON.
func (r *chunkRead) read(d string) {
	w := cursor{s: d}
	w.obj()
	r.walk(&w)
}

// readChecked reads the upstream's chunk d, which has not been validated,
// and reports whether it is a JSON event (validEvent).
func (r *chunkRead) readChecked(d string) bool {
	w := checkedCursor(d, eventDepthLimit(d))
	r.walk(&w)
	return w.whole()
}

// walk reads the members of the chunk the cursor is in.
func (r *chunkRead) walk(w *cursor) {
	r.top = chatTop{}
	r.choices = r.choices[:0]
	for {
		k, ok := w.key()
		if !ok {
			return
		}
		if k != "choices" {
			r.top.set(k, w.raw())
			continue
		}
		r.choices = r.choices[:0]
		at := w.begin()
		if !w.arr() {
			r.top.choices = w.raw()
			continue
		}
		for w.more() {
			c := r.add()
			if w.obj() {
				c.read(w)
			} else {
				w.skip() // not an object: a choice with nothing in it
			}
			r.dropUnlessFirst(c)
		}
		r.top.choices = w.since(at)
	}
}

// add appends an empty choice.
func (r *chunkRead) add() *choiceRead {
	var c *choiceRead
	r.choices, c = extend(r.choices)
	*c = choiceRead{}
	return c
}

// extend returns s one element longer and that element, reusing s's
// capacity: a reused element still holds what it held, so that the caller
// can keep its buffers.
func extend[T any](s []T) ([]T, *T) {
	n := len(s)
	if n < cap(s) {
		s = s[:n+1]
	} else {
		s = append(s, *new(T))
	}
	return s, &s[n]
}

// dropUnlessFirst drops the choice just added, c, unless its index is 0 or
// not a number: a translated client asked for one choice. r may be nil.
func (r *chunkRead) dropUnlessFirst(c *choiceRead) {
	if r == nil {
		return
	}
	if n, ok := toInt(c.index); ok && n != 0 {
		r.choices = r.choices[:len(r.choices)-1]
	}
}

// read reads the members of the choice the cursor is in.
func (c *choiceRead) read(e *cursor) {
	for {
		k, ok := e.key()
		if !ok {
			return
		}
		switch k {
		case "delta":
			c.delta.readValue(e)
			c.tookDelta()
		case "message":
			c.message.readValue(e)
			c.deltaOrMessage, c.fromMessage = c.message.raw, true
		default:
			c.set(k, e.raw())
		}
	}
}

// tookDelta records the delta just read into c.delta as the choice's.
func (c *choiceRead) tookDelta() {
	c.chunkChoice.delta = c.delta.raw
	c.deltaOrMessage, c.fromMessage = c.delta.raw, false
}

// set records a member of a choice other than its delta or message.
func (c *choiceRead) set(k, v string) {
	switch k {
	case "index":
		c.index = v
	case "finish_reason":
		c.finish = v
	case "stop_reason", "matched_stop":
		if isStr(v) {
			c.matched = v
		}
	}
}
