package translate

// A small JSON scanner and writer. gjson's Result.Str unescapes (and so
// allocates) every string it lands on, and ForEach re-parses; the translators
// visit every member of every message once, so they walk objects with the
// iterators below, which hand out raw value slices of the input and never
// allocate. Inputs are validated (gjson.Valid) before they are walked; the
// scanner is still bounds-checked so that a malformed input cannot panic.

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// b2s views b as a string without copying. The string must not be used after
// b's contents change.
func b2s(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func isSpace(c byte) bool { return c <= ' ' && (c == ' ' || c == '\t' || c == '\n' || c == '\r') }

func skipWS(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

func trimJSON(s string) string {
	i := skipWS(s, 0)
	j := len(s)
	for j > i && isSpace(s[j-1]) {
		j--
	}
	return s[i:j]
}

// stringEnd returns the index just past the string literal starting at s[i]
// (which is '"'), or -1.
func stringEnd(s string, i int) int {
	for j := i + 1; ; j++ {
		j = nextQuote(s, j)
		if j < 0 {
			return -1
		}
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for b := j - 1; b > i && s[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
	}
}

// nextQuote returns the index of the first '"' at or after s[j], or -1.
// Most strings in these bodies (keys, short values, stream deltas) are
// short: eight bytes at a time beats a call; long ones go to IndexByte.
func nextQuote(s string, j int) int {
	for end := min(len(s), j+32); j+8 <= end; j += 8 {
		if m := quotes(load8(s, j)); m != 0 {
			return j + firstFlag(m)
		}
	}
	if k := strings.IndexByte(s[j:], '"'); k >= 0 {
		return j + k
	}
	return -1
}

// valueEnd returns the index just past the JSON value starting at s[i], or -1.
func valueEnd(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	switch s[i] {
	case '"':
		return stringEnd(s, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				e := stringEnd(s, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(s) {
		c := s[j]
		if c == ',' || c == '}' || c == ']' || isSpace(c) {
			break
		}
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// iter walks the members of an object or the elements of an array.
type iter struct {
	s   string
	i   int
	end byte
}

// objIter starts walking the object raw. ok is false when raw is not an object.
func objIter(raw string) (iter, bool) {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return iter{}, false
	}
	return iter{s: raw, i: i + 1, end: '}'}, true
}

// arrIter starts walking the array raw. ok is false when raw is not an array.
func arrIter(raw string) (iter, bool) {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return iter{}, false
	}
	return iter{s: raw, i: i + 1, end: ']'}, true
}

// next returns the next member: key is the raw key without its quotes (escapes
// left as they are) and val the raw value. ok is false at the end.
func (it *iter) next() (key, val string, ok bool) {
	s := it.s
	i := skipWS(s, it.i)
	if i < len(s) && s[i] == ',' {
		i = skipWS(s, i+1)
	}
	if i >= len(s) || s[i] == it.end {
		it.i = len(s)
		return "", "", false
	}
	if it.end == '}' {
		if s[i] != '"' {
			it.i = len(s)
			return "", "", false
		}
		e := stringEnd(s, i)
		if e < 0 {
			it.i = len(s)
			return "", "", false
		}
		key = s[i+1 : e-1]
		i = skipWS(s, e)
		if i >= len(s) || s[i] != ':' {
			it.i = len(s)
			return "", "", false
		}
		i = skipWS(s, i+1)
	}
	e := valueEnd(s, i)
	if e < 0 {
		it.i = len(s)
		return "", "", false
	}
	it.i = e
	return key, s[i:e], true
}

// elem returns the next array element.
func (it *iter) elem() (string, bool) {
	_, v, ok := it.next()
	return v, ok
}

// field returns the raw value of key in the object raw, or "".
func field(raw, key string) string {
	it, ok := objIter(raw)
	if !ok {
		return ""
	}
	for {
		k, v, ok := it.next()
		if !ok {
			return ""
		}
		if k == key {
			return v
		}
	}
}

func isStr(v string) bool    { return len(v) >= 2 && v[0] == '"' }
func isObj(v string) bool    { return len(v) >= 2 && v[0] == '{' }
func isArr(v string) bool    { return len(v) >= 2 && v[0] == '[' }
func isNull(v string) bool   { return v == "" || v == "null" }
func isBool(v string) bool   { return v == "true" || v == "false" }
func isNumber(v string) bool { return v != "" && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) }

// inner is a string literal without its quotes (escapes intact).
func inner(lit string) string {
	if len(lit) < 2 {
		return ""
	}
	return lit[1 : len(lit)-1]
}

// emptyStr reports whether v is the empty string literal.
func emptyStr(v string) bool { return v == `""` }

// strEq compares a string literal with a plain ASCII string without decoding.
func strEq(lit, s string) bool {
	return len(lit) == len(s)+2 && lit[0] == '"' && lit[1:len(lit)-1] == s
}

// str decodes a string literal; it allocates only when the literal has escapes.
func str(lit string) string {
	in := inner(lit)
	if strings.IndexByte(in, '\\') < 0 {
		return in
	}
	return string(appendUnescaped(nil, in))
}

// smallInt reads an integer of at most 17 digits, too short to overflow:
// the indexes and counts a stream reads on every event, without ParseInt's
// generality.
func smallInt(v string) (int64, bool) {
	digits := strings.TrimPrefix(v, "-")
	if digits == "" || len(digits) > 17 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(digits); i++ {
		c := digits[i] - '0'
		if c > 9 {
			return 0, false
		}
		n = n*10 + int64(c)
	}
	if len(digits) < len(v) {
		n = -n
	}
	return n, true
}

// toInt reads an integer (also written as 3.0 or 3e2). ok is false for
// non-numbers and fractions.
func toInt(v string) (int64, bool) {
	if !isNumber(v) {
		return 0, false
	}
	if n, ok := smallInt(v); ok {
		return n, true
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f != float64(int64(f)) {
		return 0, false
	}
	return int64(f), true
}

func toFloat(v string) (float64, bool) {
	if !isNumber(v) {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	return f, err == nil
}

// appendUnescaped decodes the inside of a string literal.
func appendUnescaped(dst []byte, in string) []byte {
	for {
		k := strings.IndexByte(in, '\\')
		if k < 0 {
			return append(dst, in...)
		}
		dst = append(dst, in[:k]...)
		in = in[k:]
		if len(in) < 2 {
			return dst
		}
		switch in[1] {
		case 'n':
			dst = append(dst, '\n')
		case 't':
			dst = append(dst, '\t')
		case 'r':
			dst = append(dst, '\r')
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'u':
			r, n := decodeU(in)
			dst = utf8.AppendRune(dst, r)
			in = in[n:]
			continue
		default: // '"', '\\', '/'
			dst = append(dst, in[1])
		}
		in = in[2:]
	}
}

// decodeU decodes \uXXXX (with a following low surrogate when there is one)
// at the start of in, returning the rune and the bytes consumed.
func decodeU(in string) (rune, int) {
	r, ok := hex4(in[2:])
	if !ok {
		return utf8.RuneError, 2
	}
	if utf16.IsSurrogate(r) {
		if len(in) >= 12 && in[6] == '\\' && in[7] == 'u' {
			if r2, ok := hex4(in[8:]); ok {
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					return d, 12
				}
			}
		}
		return utf8.RuneError, 6
	}
	return r, 6
}

func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for i := 0; i < 4; i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

const hexDigits = "0123456789abcdef"

// appendStr appends s as a JSON string literal. It does not escape HTML
// characters: the output is an API body, not a page.
func appendStr(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

// appendEscaped appends the inside of a string literal for s.
func appendEscaped(dst []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	return append(dst, s[start:]...)
}

// sep appends a comma unless dst ends where a value or key may start.
func sep(dst []byte) []byte {
	if n := len(dst); n > 0 {
		switch dst[n-1] {
		case '{', '[', ':', ',':
			return dst
		}
	}
	return append(dst, ',')
}

// key appends `,"k":` (the comma only when needed). k must need no escaping.
func key(dst []byte, k string) []byte {
	dst = sep(dst)
	dst = append(dst, '"')
	dst = append(dst, k...)
	return append(dst, '"', ':')
}

func appendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

// appendRawMember copies one member of an object as it came.
func appendRawMember(dst []byte, k, v string) []byte {
	dst = sep(dst)
	dst = append(dst, '"')
	dst = append(dst, k...)
	dst = append(dst, '"', ':')
	return append(dst, v...)
}

// maxDepth returns the deepest nesting of objects and arrays in s (strings
// skipped), stopping early once limit is passed.
func maxDepth(s string, limit int) int {
	depth, deepest := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			e := stringEnd(s, i)
			if e < 0 {
				return deepest
			}
			i = e - 1
		case '{', '[':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > limit {
					return deepest
				}
			}
		case '}', ']':
			depth--
		}
	}
	return deepest
}
