package translate

// Reading stream events in one pass. iter (json.go) finds each value's end
// before handing it out, so a chunk read level by level (top, choices, a
// choice, its delta) scans the delta once per level. A walk instead steps
// into a container member and learns where it ends from that inner walk:
// the chunk readers below scan each byte about once. Events are validated
// before they are walked; the walk is still bounds-checked, and a malformed
// input ends it early.

// walk reads the members of one object or array in place.
type walk struct {
	s    string
	i    int  // the next byte to read
	end  byte // '}' or ']'
	done bool
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

// stop ends a walk that met malformed input.
func (w *walk) stop() {
	w.i, w.done = len(w.s), true
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
	if i < len(s) && s[i] == ',' {
		i = skipWS(s, i+1)
	}
	if i >= len(s) {
		w.stop()
		return "", false
	}
	if s[i] == w.end {
		w.i, w.done = i+1, true
		return "", false
	}
	if w.end == '}' {
		e := -1
		if s[i] == '"' {
			e = stringEnd(s, i)
		}
		if e < 0 {
			w.stop()
			return "", false
		}
		key = s[i+1 : e-1]
		i = skipWS(s, e)
		if i >= len(s) || s[i] != ':' {
			w.stop()
			return "", false
		}
		i = skipWS(s, i+1)
	}
	w.i = i
	return key, true
}

// value returns the raw value the walk is at and moves past it.
func (w *walk) value() string {
	e := valueEnd(w.s, w.i)
	if e < 0 {
		w.stop()
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
	return walkAt(w.s, w.i)
}

// leave moves past the value that the walk in (from enter) has read, and
// returns that value raw.
func (w *walk) leave(in *walk) string {
	in.skipRest()
	start := w.i
	w.i = in.i
	if in.i <= start || w.s[in.i-1] != in.end {
		w.stop()
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

func (r *chunkRead) read(d string) {
	r.top = chatTop{}
	r.choices = r.choices[:0]
	w, _ := walkAt(d, 0)
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
			c.chunkChoice.delta = c.delta.raw
			c.deltaOrMessage, c.fromMessage = c.delta.raw, false
		case "message":
			c.message.readValue(e)
			c.deltaOrMessage, c.fromMessage = c.message.raw, true
		default:
			c.set(k, e.value())
		}
	}
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
