package translate

// Reading stream events in one pass. iter (json.go) finds each value's end
// before handing it out, so a chunk read level by level (top, choices, a
// choice, its delta) scans the delta once per level. A walk instead steps
// into a container member and learns where it ends from that inner walk:
// the chunk readers below scan each byte about once.
//
// A checked walk (checkedWalk) also validates what it reads, exactly as
// validEvent would: separators strictly, keys as JSON strings, and each
// value it hands out whole with scanValue. Upstream events are read that
// way, so that they are not scanned a second time to be validated first;
// a reader learns at the end (whole) whether the event was JSON. When it
// was not, the stream fails with nothing more written, so what the reader
// did before it found out never reaches the client. An unchecked
// walk reads input already known to be valid (this package's own output);
// it is still bounds-checked, and a malformed input ends it early.

// walk reads the members of one object or array in place.
type walk struct {
	s     string
	i     int  // the next byte to read
	end   byte // '}' or ']'
	done  bool
	check bool // validate as it reads
	more  bool // a member was read, so the next needs a comma
	bad   bool // checked, and found not to be JSON
	limit int  // checked: how deep the values inside may nest
}

// walkAt starts a walk of the object or array at s[i] (after whitespace);
// ok is false when there is none.
func walkAt(s string, i int) (w walk, ok bool) {
	i = skipWS(s, i)
	if i >= len(s) || (s[i] != '{' && s[i] != '[') {
		return walk{done: true}, false
	}
	end := byte('}')
	if s[i] == '[' {
		end = ']'
	}
	return walk{s: s, i: i + 1, end: end}, true
}

// checkedWalk starts a checked walk of the object or array s, which nests
// at most limit deep. Once the walk is over, whole tells whether s was
// JSON; a walk that stops early must skipRest first.
func checkedWalk(s string, limit int) walk {
	w, ok := walkAt(s, 0)
	w.check, w.limit = true, limit-1
	if !ok || limit < 1 {
		w.fail()
	}
	return w
}

// whole reports whether a checked walk, now over, read a whole JSON value
// and nothing after it.
func (w *walk) whole() bool {
	return !w.bad && w.done && w.i == len(w.s)
}

// fail ends a walk that met malformed input, and remembers it.
func (w *walk) fail() {
	w.i, w.done, w.bad = len(w.s), true, true
}

// next moves to the next member and returns its key (raw, without quotes;
// "" in an array); the walk is left at the member's value, which the caller
// reads with value or enter. ok is false at the end, the walk then past its
// closing bracket.
func (w *walk) next() (key string, ok bool) {
	if w.done {
		return "", false
	}
	s := w.s
	i := skipWS(s, w.i)
	comma := i < len(s) && s[i] == ','
	if comma {
		i = skipWS(s, i+1)
	}
	if i >= len(s) || (w.check && comma != w.more && s[i] != w.end) {
		w.fail()
		return "", false
	}
	if s[i] == w.end {
		if w.check && comma { // a trailing comma
			w.fail()
			return "", false
		}
		w.i, w.done = i+1, true
		return "", false
	}
	w.more = true
	if w.end == '}' {
		e := -1
		switch {
		case s[i] != '"':
		case w.check:
			e = stringBodyEnd(s, i+1)
		default:
			e = stringEnd(s, i)
		}
		if e < 0 {
			w.fail()
			return "", false
		}
		key = s[i+1 : e-1]
		i = skipWS(s, e)
		if i >= len(s) || s[i] != ':' {
			w.fail()
			return "", false
		}
		i = skipWS(s, i+1)
	}
	w.i = i
	return key, true
}

// value returns the raw value the walk is at and moves past it.
func (w *walk) value() string {
	var e int
	if w.check {
		e, _ = scanValue(w.s, w.i, w.limit)
	} else {
		e = valueEnd(w.s, w.i)
	}
	if e < 0 {
		w.fail()
		return ""
	}
	v := w.s[w.i:e]
	w.i = e
	return v
}

// enter starts a walk of the value the walk is at when that value opens
// with open ('{' or '['); otherwise ok is false and the walk has not moved.
// The caller walks it to its end, then calls leave.
func (w *walk) enter(open byte) (in walk, ok bool) {
	if w.done || w.i >= len(w.s) || w.s[w.i] != open {
		return walk{done: true}, false
	}
	if !w.check {
		return walkAt(w.s, w.i)
	}
	if w.limit < 1 { // too deep: value refuses it
		return walk{done: true}, false
	}
	in, _ = walkAt(w.s, w.i)
	in.check, in.limit = true, w.limit-1
	return in, true
}

// leave moves past the value that the walk in (from enter) has read, and
// returns that value raw.
func (w *walk) leave(in *walk) string {
	in.skipRest()
	start := w.i
	w.i = in.i
	if in.bad || in.i <= start || w.s[in.i-1] != in.end {
		w.fail()
		return ""
	}
	return w.s[start:in.i]
}

// skipRest moves past the members the walk has not read.
func (w *walk) skipRest() {
	for {
		if _, ok := w.next(); !ok {
			return
		}
		w.value()
	}
}

// chunkRead is a chat chunk as the translators read it, in one walk: its
// top-level members and, of its choices, those they act on (index 0, or
// none given: a translated client asked for one choice), each with the
// members of its delta and message. It is chatTop, chunkChoices and
// chunkDelta (read_chat.go) read at once; Stream keeps one for reuse.
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

func (x *deltaRead) readValue(w *walk) {
	x.chunkDelta = chunkDelta{}
	o, ok := w.enter('{')
	if !ok {
		x.raw = w.value()
		return
	}
	for {
		k, ok := o.next()
		if !ok {
			break
		}
		x.chunkDelta.set(k, o.value())
	}
	x.raw = w.leave(&o)
}

// read reads the chunk d, which is known to be JSON.
func (r *chunkRead) read(d string) {
	w, _ := walkAt(d, 0)
	r.walk(&w)
}

// readChecked reads the upstream's chunk d, which has not been validated,
// and reports whether it is a JSON event (validEvent).
func (r *chunkRead) readChecked(d string) bool {
	w := checkedWalk(d, eventDepthLimit(d))
	r.walk(&w)
	return w.whole()
}

func (r *chunkRead) walk(w *walk) {
	r.top = chatTop{}
	r.choices = r.choices[:0]
	for {
		k, ok := w.next()
		if !ok {
			return
		}
		if k != "choices" {
			r.top.set(k, w.value())
			continue
		}
		r.choices = r.choices[:0]
		a, ok := w.enter('[')
		if !ok {
			r.top.choices = w.value()
			continue
		}
		for {
			if _, ok := a.next(); !ok {
				break
			}
			c := r.add()
			if e, ok := a.enter('{'); ok {
				c.read(&e)
				a.leave(&e)
			} else {
				a.value() // not an object: a choice with nothing in it
			}
			r.dropUnlessFirst(c)
		}
		r.top.choices = w.leave(&a)
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
// not a number (chunkChoices.next). r may be nil.
func (r *chunkRead) dropUnlessFirst(c *choiceRead) {
	if r == nil {
		return
	}
	if n, ok := toInt(c.index); ok && n != 0 {
		r.choices = r.choices[:len(r.choices)-1]
	}
}

func (c *choiceRead) read(e *walk) {
	for {
		k, ok := e.next()
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
			c.set(k, e.value())
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
