package translate

// One pass over a body that checks it is JSON and how deep it nests. It
// accepts exactly what gjson.Valid accepts (RFC 8259 JSON, except that
// strings are not checked for valid UTF-8) but keeps its open objects and
// arrays on a bit stack instead of recursing, so a deep body costs no stack
// and is refused as soon as it passes the limit. Strings, most of a body's
// bytes, are scanned eight bytes at a time, and long runs of text in them
// with IndexByte.

import (
	"math/bits"
	"strconv"
	"strings"
)

// CheckBody checks that body is JSON nested at most DefaultMaxDepth deep: the
// two checks a request's translation starts with, so that a caller (the gate)
// can make them in one pass and hand the body to TranslateValidRequest. The
// error is the one TranslateRequest gives for the same body.
func CheckBody(body []byte) *Error {
	return checkBody(trimJSON(b2s(body)), DefaultMaxDepth)
}

// checkBody is CheckBody with a limit; the too-deep error comes first, as it
// always has.
func checkBody(s string, limit int) *Error {
	ok, tooDeep := checkJSON(s, limit)
	if tooDeep {
		return badRequest(tooDeepMessage(limit))
	}
	if !ok {
		return badRequest("request body is not valid JSON")
	}
	return nil
}

func tooDeepMessage(limit int) string {
	return "request body is nested more than " + strconv.Itoa(limit) + " levels deep"
}

// validJSONAny reports whether s is JSON at any depth, as gjson.Valid does.
func validJSONAny(s string) bool {
	ok, _ := checkJSON(s, len(s)) // s cannot nest deeper than its length
	return ok
}

// checkJSON reports whether s is JSON (ok) and whether objects and arrays
// nest in it more than limit deep. tooDeep is maxDepth(s, limit) > limit for
// any s, broken or not, so that callers keep their errors' order; ok is
// false when tooDeep.
func checkJSON(s string, limit int) (ok, tooDeep bool) {
	ok, tooDeep = scanJSON(s, limit)
	if !ok && !tooDeep {
		// Broken before it got too deep: the rest may still be deep, and a
		// depth error comes before a syntax one. Rare, so counted apart.
		tooDeep = maxDepth(s, limit) > limit
	}
	return ok, tooDeep
}

// scanJSON is checkJSON's pass; it stops at the first fault, so tooDeep is
// true only when s is well formed up to the bracket that goes too deep.
func scanJSON(s string, limit int) (ok, tooDeep bool) {
	end, tooDeep := scanValue(s, 0, limit)
	return end >= 0 && skipWS(s, end) == len(s), tooDeep
}

// scanValue checks the one JSON value that starts at s[i], after optional
// whitespace, nested at most limit deep, and returns the index just past it
// (or -1, and whether it went too deep). Most values are scalars, which
// need no stack.
func scanValue(s string, i, limit int) (end int, tooDeep bool) {
	i = skipWS(s, i)
	if i < len(s) && s[i] != '{' && s[i] != '[' {
		return scalarEnd(s, i), false
	}
	return scanNested(s, i, limit)
}

// scanNested is scanValue for a value that may be an object or an array.
func scanNested(s string, i, limit int) (end int, tooDeep bool) {
	var open nesting
	for {
		// A value starts at s[i], after whitespace.
		i = skipWS(s, i)
		if i >= len(s) {
			return -1, false
		}
		switch c := s[i]; c {
		case '{', '[':
			if open.depth >= limit {
				return -1, true
			}
			i = skipWS(s, i+1)
			if i < len(s) && s[i] == closer(c) {
				i++ // empty: it counts as a level, but stays open for no value
				break
			}
			open.push(c == '{')
			if c == '{' {
				if i = memberValue(s, i); i < 0 {
					return -1, false
				}
			}
			continue
		default:
			i = scalarEnd(s, i)
		}
		if i < 0 || open.depth == 0 {
			return i, false
		}
		if i = open.next(s, i); i < 0 || open.depth == 0 {
			return i, false
		}
	}
}

// scalarEnd returns the index just past the string, literal or number at
// s[i], or -1.
func scalarEnd(s string, i int) int {
	switch s[i] {
	case '"':
		return stringBodyEnd(s, i+1)
	case 't':
		return literalEnd(s, i, "true")
	case 'f':
		return literalEnd(s, i, "false")
	case 'n':
		return literalEnd(s, i, "null")
	}
	return numberEnd(s, i)
}

// CheckBodyMembers is CheckBody for a body that is a JSON object, made in
// the same pass as a reading of its top level: member gets each top-level
// member's key (the raw literal, quotes included) and raw value, in order,
// so that a caller (the gate) finds the fields it acts on without a second
// pass. On an error, member may have been called for members before it. A
// body that is not an object is only checked.
func CheckBodyMembers(body []byte, member func(key, value string)) *Error {
	s := trimJSON(b2s(body))
	if !isObj(s) || !scanMembers(s, DefaultMaxDepth, member) {
		return checkBody(s, DefaultMaxDepth)
	}
	return nil
}

// scanMembers checks the object s (from '{' to its end) as checkJSON does,
// calling member for each of its members.
func scanMembers(s string, limit int, member func(key, value string)) bool {
	if limit < 1 {
		return false
	}
	i := skipWS(s, 1)
	if i < len(s) && s[i] == '}' {
		return skipWS(s, i+1) == len(s)
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return false
		}
		k := stringBodyEnd(s, i+1)
		if k < 0 {
			return false
		}
		key := s[i:k]
		if k = skipWS(s, k); k >= len(s) || s[k] != ':' {
			return false
		}
		start := skipWS(s, k+1)
		end, _ := scanValue(s, start, limit-1)
		if end < 0 {
			return false
		}
		member(key, s[start:end])
		switch i = skipWS(s, end); {
		case i >= len(s):
			return false
		case s[i] == ',':
			i = skipWS(s, i+1)
		case s[i] == '}':
			return skipWS(s, i+1) == len(s)
		default:
			return false
		}
	}
}

func closer(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}

// nesting is the stack of open containers, one bit each (set for an
// object). The first 256 levels need no allocation.
type nesting struct {
	depth int
	low   [4]uint64
	high  []uint64 // levels 256 and deeper
}

func (n *nesting) word(d int) *uint64 {
	if d < 256 {
		return &n.low[d>>6]
	}
	w := d>>6 - len(n.low)
	for w >= len(n.high) {
		n.high = append(n.high, 0)
	}
	return &n.high[w]
}

func (n *nesting) push(obj bool) {
	w, bit := n.word(n.depth), uint64(1)<<(n.depth&63)
	if obj {
		*w |= bit
	} else {
		*w &^= bit
	}
	n.depth++
}

// inObject reports whether the innermost open container is an object.
func (n *nesting) inObject() bool {
	d := n.depth - 1
	return *n.word(d)&(1<<(d&63)) != 0
}

// next moves on from a value that ended just before s[i] (-1 when it was
// not one): past the containers it closes and the comma after it, with the
// next member's key. It returns where the next value starts, just past the
// outermost container when that closes (depth 0), or -1.
func (n *nesting) next(s string, i int) int {
	for i >= 0 {
		if n.depth == 0 { // the outermost value ended at s[i]
			return i
		}
		i = skipWS(s, i)
		switch {
		case i >= len(s):
			return -1
		case s[i] == ',':
			if n.inObject() {
				return memberValue(s, skipWS(s, i+1))
			}
			return i + 1
		case s[i] == '}' || s[i] == ']':
			if (s[i] == '}') != n.inObject() {
				return -1
			}
			n.depth--
			i++
		default:
			return -1
		}
	}
	return -1
}

// memberValue reads `"key":` at s[i] and returns where the member's value
// may start, or -1.
func memberValue(s string, i int) int {
	if i >= len(s) || s[i] != '"' {
		return -1
	}
	i = stringBodyEnd(s, i+1)
	if i < 0 {
		return -1
	}
	i = skipWS(s, i)
	if i >= len(s) || s[i] != ':' {
		return -1
	}
	return i + 1
}

// Word-at-a-time byte tests (the "haszero" family). Each sets the high bit of
// the bytes of w that match; only the lowest set one is sure to (a borrow may
// set false ones above it), which is the one a scan wants.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// load8 reads s[i:i+8] as a little-endian word; the compiler makes it one load.
func load8(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// stringStops flags the bytes of w that stop a scan of a string's body: a
// quote, a backslash or a control byte (below 0x20). x^0x02 keeps the control
// bytes below 0x20 and turns '"' into 0x20, so one test for bytes below 0x21
// finds both.
func stringStops(w uint64) uint64 {
	q := w ^ ones*0x02
	b := w ^ ones*'\\'
	return ((q - ones*0x21) | (b - ones)) &^ w & highs
}

// quotes flags the bytes of w that are '"'.
func quotes(w uint64) uint64 {
	q := w ^ ones*'"'
	return (q - ones) &^ w & highs
}

// firstFlag is the index of w's lowest flagged byte; w != 0.
func firstFlag(w uint64) int { return bits.TrailingZeros64(w) >> 3 }

// stringBodyEnd returns the index just past the string whose body starts at
// s[i] (just past its opening quote), or -1 when it is not closed, holds a
// byte below 0x20, or has an escape JSON does not define.
//
// Keys, short values and most runs between escapes end within their first
// words, read here eight bytes at a time. A run still going after 32 bytes
// (128 after an escape, past the lines of text and code that end sooner) is
// likely a message's text: longRunEnd reads the rest of it in about two
// thirds of the time, but costs a few calls to start.
func stringBodyEnd(s string, i int) int {
	run := 32 // bytes of this run left before longRunEnd
	for {
		if i+32 <= len(s) {
			w := s[i : i+32] // bounds checked once for the four words
			if m := stringStops(load8(w, 0)); m != 0 {
				i += firstFlag(m)
				goto stop
			}
			if m := stringStops(load8(w, 8)); m != 0 {
				i += 8 + firstFlag(m)
				goto stop
			}
			if m := stringStops(load8(w, 16)); m != 0 {
				i += 16 + firstFlag(m)
				goto stop
			}
			if m := stringStops(load8(w, 24)); m != 0 {
				i += 24 + firstFlag(m)
				goto stop
			}
			i += 32
			if run -= 32; run > 0 {
				continue
			}
			if i = longRunEnd(s, i); i < 0 {
				return -1
			}
			goto stop
		}
		// Fewer than 32 bytes of s are left.
		for ; i+8 <= len(s); i += 8 {
			if m := stringStops(load8(s, i)); m != 0 {
				i += firstFlag(m)
				goto stop
			}
		}
		for ; i < len(s); i++ {
			switch c := s[i]; {
			case c == '"':
				return i + 1
			case c < 0x20:
				return -1
			case c == '\\':
				goto escape
			}
		}
		return -1
	stop:
		switch c := s[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		}
	escape:
		if i = escapeEnd(s, i); i < 0 {
			return -1
		}
		run = 128
	}
}

// longRunEnd returns the index of the first quote or backslash at or after
// s[i], or -1 when a byte below 0x20 comes first or there is none. IndexByte
// finds quotes and backslashes many bytes a cycle, which leaves a word loop
// only the control bytes to look for, without a branch per word. It looks at
// a window of s at a time, 256 bytes and then four times the last, so that a
// run that ends soon does not pay for a search to a closing quote far off,
// nor a long run for many windows.
func longRunEnd(s string, i int) int {
	for n := 256; ; n *= 4 {
		end := min(len(s), i+n)
		t := s[i:end]
		if k := strings.IndexByte(t, '"'); k >= 0 {
			t = t[:k]
		}
		if k := strings.IndexByte(t, '\\'); k >= 0 {
			t = t[:k]
		}
		if hasControlByte(t) {
			return -1
		}
		if i += len(t); i < end {
			return i // at the quote or backslash
		}
		if end == len(s) {
			return -1
		}
	}
}

// hasControlByte reports whether t holds a byte below 0x20. Each word's
// flags are or'ed together and tested once at the end: a flag can be false
// only above a true one (a borrow comes from a byte below 0x20).
func hasControlByte(t string) bool {
	if len(t) < 8 {
		for i := 0; i < len(t); i++ {
			if t[i] < 0x20 {
				return true
			}
		}
		return false
	}
	last := load8(t, len(t)-8) // overlaps the words the loops read, if it must
	acc := (last - ones*0x20) &^ last
	for ; len(t) >= 64; t = t[64:] {
		w0, w1, w2, w3 := load8(t, 0), load8(t, 8), load8(t, 16), load8(t, 24)
		w4, w5, w6, w7 := load8(t, 32), load8(t, 40), load8(t, 48), load8(t, 56)
		acc |= (w0-ones*0x20)&^w0 | (w1-ones*0x20)&^w1 | (w2-ones*0x20)&^w2 | (w3-ones*0x20)&^w3 |
			(w4-ones*0x20)&^w4 | (w5-ones*0x20)&^w5 | (w6-ones*0x20)&^w6 | (w7-ones*0x20)&^w7
	}
	for ; len(t) >= 8; t = t[8:] {
		w := load8(t, 0)
		acc |= (w - ones*0x20) &^ w
	}
	return acc&highs != 0
}

// escapeEnd returns the index just past the escape at s[i] ('\\'), or -1.
func escapeEnd(s string, i int) int {
	if i+1 >= len(s) {
		return -1
	}
	switch s[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2
	case 'u':
		if i+6 <= len(s) && isHex(s[i+2]) && isHex(s[i+3]) && isHex(s[i+4]) && isHex(s[i+5]) {
			return i + 6
		}
	}
	return -1
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// literalEnd returns the index just past lit at s[i], or -1.
func literalEnd(s string, i int, lit string) int {
	if len(s)-i >= len(lit) && s[i:i+len(lit)] == lit {
		return i + len(lit)
	}
	return -1
}

// numberEnd returns the index just past the number at s[i], or -1:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func numberEnd(s string, i int) int {
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i >= len(s) || !isDigit(s[i]):
		return -1
	case s[i] == '0':
		i++
	default:
		i = digitsEnd(s, i)
	}
	if i < len(s) && s[i] == '.' {
		if i+1 >= len(s) || !isDigit(s[i+1]) {
			return -1
		}
		i = digitsEnd(s, i+1)
	}
	if i < len(s) && s[i]|0x20 == 'e' {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || !isDigit(s[i]) {
			return -1
		}
		i = digitsEnd(s, i)
	}
	return i
}

func digitsEnd(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}
