package translate

// A cursor reads JSON in one pass, value after value, as a pull parser does
// (jsoniter's Iterator, encoding/json's Decoder.Token). iter (json.go) finds
// the end of each value before handing it out, so a reader that walks into
// the values it is handed scans their text once per level: a message's text
// three or four times. A reader on a cursor walks into an object or array
// where it stands instead, and the enclosing walk goes on from where the
// inner one stopped: each byte is scanned once. A value the reader does not
// walk into is taken whole (raw) or skipped, one scan as with iter.
//
// A cursor reads requests, whole answers and token counts, whose text is
// valid JSON (checked before any walk); on anything else it stops (no more
// members, empty values) and never panics. A checked cursor
// (checkedCursor) reads upstream stream events, which have not been
// checked: it validates what it reads as it goes, exactly as validEvent
// would (separators strictly, keys as JSON strings, each value it hands out
// whole with scanValue, nesting within a limit), so that an event is
// scanned once, not once to validate and once to read. The reader learns
// at the end (whole) whether the event was JSON; when it was not, the
// stream fails with nothing more written, so what the reader did before it
// found out never reaches the client.
//
// A reader that enters a value walks it to its end (key or more returning
// false), or abandons the cursor: the cursor does not keep a stack.

type cursor struct {
	s string
	i int
	// pending: key or more stopped at a value that was not taken yet; the
	// next key or more skips it.
	pending bool

	check bool // validate as it reads (checkedCursor)
	// Checked only:
	fresh bool // just inside a '{' or '[', where no comma may come
	bad   bool // the text is not JSON; the cursor has stopped
	depth int  // containers entered and not yet left
	limit int  // how deep the text may nest
}

// checkedCursor returns a checked cursor inside the object s, which nests
// at most limit deep. Once the reader has walked it to its end (or called
// skipObj), whole tells whether s was JSON.
func checkedCursor(s string, limit int) cursor {
	c := cursor{s: s, check: true, limit: limit}
	if !c.obj() {
		c.fail()
	}
	return c
}

// whole reports whether a checked cursor, walked to the end of its object,
// read a whole JSON value and nothing after it.
func (c *cursor) whole() bool { return !c.bad && c.depth == 0 && c.i == len(c.s) }

// fail stops a checked cursor that met malformed text, and remembers it.
func (c *cursor) fail() bool {
	c.bad = true
	return c.stop()
}

// peek returns the first byte of the value at c, or 0 when there is none.
func (c *cursor) peek() byte {
	c.i = skipWS(c.s, c.i)
	if c.i >= len(c.s) {
		return 0
	}
	return c.s[c.i]
}

// raw takes the value at c whole.
func (c *cursor) raw() string {
	c.pending = false
	i := skipWS(c.s, c.i)
	if c.check {
		return c.checkedRaw(i)
	}
	e := valueEnd(c.s, i)
	if e < 0 {
		c.i = len(c.s)
		return ""
	}
	c.i = e
	return c.s[i:e]
}

// checkedRaw is raw for a checked cursor: the value is scanned, within the
// nesting left.
func (c *cursor) checkedRaw(i int) string {
	e := -1
	if !c.bad {
		e, _ = scanValue(c.s, i, c.limit-c.depth)
	}
	if e < 0 {
		c.fail()
		return ""
	}
	c.i = e
	return c.s[i:e]
}

// skip moves past the value at c.
func (c *cursor) skip() { c.raw() }

// obj enters the value at c if it is an object: c then stands before its
// first member, for key. Otherwise c stays where it is.
func (c *cursor) obj() bool { return c.enter('{') }

// arr enters the value at c if it is an array: c then stands before its
// first element, for more.
func (c *cursor) arr() bool { return c.enter('[') }

func (c *cursor) enter(open byte) bool {
	if c.peek() != open {
		return false
	}
	if c.check {
		if c.depth >= c.limit { // too deep: raw refuses it
			return false
		}
		c.depth++
		c.fresh = true
	}
	c.i++
	c.pending = false
	return true
}

// skipObj moves past the members of the object c is in that were not read.
func (c *cursor) skipObj() {
	for {
		if _, ok := c.key(); !ok {
			return
		}
	}
}

// since returns the text from at (from begin) to c, "" once a checked
// cursor has found the text is not JSON.
func (c *cursor) since(at int) string {
	if c.bad {
		return ""
	}
	return c.s[at:c.i]
}

// key moves to the next member of the object c is in and returns its raw
// key (without quotes, escapes as they are); c stands at the member's value.
// At the end it returns false, with c past the closing brace. (It is next
// and the key's read in one, as it runs once per member of everything.)
func (c *cursor) key() (string, bool) {
	if c.check {
		return c.checkedKey()
	}
	if c.pending {
		c.skip()
	}
	s := c.s
	i := skipWS(s, c.i)
	if i < len(s) && s[i] == ',' {
		i = skipWS(s, i+1)
	}
	if i >= len(s) {
		return "", c.stop()
	}
	if s[i] == '}' {
		c.i = i + 1
		return "", false
	}
	if s[i] != '"' {
		return "", c.stop()
	}
	e := stringEnd(s, i)
	if e < 0 {
		return "", c.stop()
	}
	k := s[i+1 : e-1]
	i = skipWS(s, e)
	if i >= len(s) || s[i] != ':' {
		return "", c.stop()
	}
	c.i = skipWS(s, i+1)
	c.pending = true
	return k, true
}

// more moves to the next element of the array c is in; c stands at it. At
// the end it returns false, with c past the closing bracket.
func (c *cursor) more() bool { return c.next(']') }

// next skips a value not taken and the comma after it, and reports whether
// a member or element follows before close.
func (c *cursor) next(close byte) bool {
	if c.check {
		return c.checkedNext(close)
	}
	if c.pending {
		c.skip()
	}
	s := c.s
	i := skipWS(s, c.i)
	if i < len(s) && s[i] == ',' {
		i = skipWS(s, i+1)
	}
	if i >= len(s) {
		return c.stop()
	}
	if s[i] == close {
		c.i = i + 1
		return false
	}
	c.i = i
	c.pending = true
	return true
}

// checkedNext is next for a checked cursor: a comma between members and
// elements, none before the first or after the last.
func (c *cursor) checkedNext(close byte) bool {
	if c.pending {
		c.skip()
	}
	if c.bad {
		return false
	}
	s := c.s
	i := skipWS(s, c.i)
	comma := i < len(s) && s[i] == ','
	if comma {
		i = skipWS(s, i+1)
	}
	switch {
	case i >= len(s):
		return c.fail()
	case s[i] == close:
		if comma {
			return c.fail()
		}
		c.i = i + 1
		c.depth--
		c.fresh = false
		return false
	case comma == c.fresh:
		return c.fail()
	}
	c.fresh = false
	c.i = i
	c.pending = true
	return true
}

// checkedKey is key for a checked cursor: checkedNext and a key that is a
// JSON string, in one call (it runs once per member of every event).
func (c *cursor) checkedKey() (string, bool) {
	if c.pending {
		c.skip()
	}
	if c.bad {
		return "", false
	}
	s := c.s
	i := skipWS(s, c.i)
	comma := i < len(s) && s[i] == ','
	if comma {
		i = skipWS(s, i+1)
	}
	switch {
	case i >= len(s):
		return "", c.fail()
	case s[i] == '}':
		if comma {
			return "", c.fail()
		}
		c.i = i + 1
		c.depth--
		c.fresh = false
		return "", false
	case comma == c.fresh, s[i] != '"':
		return "", c.fail()
	}
	e := stringBodyEnd(s, i+1)
	if e < 0 {
		return "", c.fail()
	}
	k := s[i+1 : e-1]
	i = skipWS(s, e)
	if i >= len(s) || s[i] != ':' {
		return "", c.fail()
	}
	c.fresh = false
	c.i = skipWS(s, i+1)
	c.pending = true
	return k, true
}

// stop ends the walk of malformed text.
func (c *cursor) stop() bool {
	c.i = len(c.s)
	c.pending = false
	return false
}

// begin returns where the value at c starts, for finish. A reader that
// checks a value as it walks into it (so that its walk is the only one)
// brackets the walk with the two:
//
//	at := c.begin()
//	err := check(c)
//	raw := c.finish(at, err)
func (c *cursor) begin() int {
	c.i = skipWS(c.s, c.i)
	return c.i
}

// finish leaves c past the value that starts at at and returns its text.
// The walk into it has returned err; one that stopped at an error, or left
// the value untouched, is finished by skipping the value from its start.
func (c *cursor) finish(at int, err *Error) string {
	if err != nil || c.i == at {
		c.i = at
		c.skip()
	}
	return c.s[at:c.i]
}

// cursorOn returns a cursor at the value v (a raw value, "" when absent).
func cursorOn(v string) *cursor { return &cursor{s: v} }
