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
// Inputs are valid JSON (gjson.Valid, before any walk); on anything else a
// cursor stops (no more members, empty values) and never panics.

type cursor struct {
	s string
	i int
	// pending: key or more stopped at a value that was not taken yet; the
	// next key or more skips it.
	pending bool
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
	e := valueEnd(c.s, i)
	if e < 0 {
		c.i = len(c.s)
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
	c.i++
	c.pending = false
	return true
}

// key moves to the next member of the object c is in and returns its raw
// key (without quotes, escapes as they are); c stands at the member's value.
// At the end it returns false, with c past the closing brace. (It is next
// and the key's read in one, as it runs once per member of everything.)
func (c *cursor) key() (string, bool) {
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
