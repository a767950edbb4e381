package translate

// Token counts estimated without a tokenizer. A messages client asks for
// them twice: POST /v1/messages/count_tokens, which a chat upstream cannot
// answer, and the input_tokens of a stream's message_start, which a chat
// upstream reports only at the end. Both get the same estimate:
//
//   - text (system prompt, text blocks, tool results): a token per four ASCII
//     bytes, plus one per non-ASCII character (CJK runs close to one token a
//     character; accented Latin text is overcounted a little);
//   - each message 4 tokens of role markers, the system prompt 4, the reply's
//     opening 3;
//   - tools: each definition's JSON at four bytes a token plus 8, and 100 once
//     for the instructions a chat template wraps them in;
//   - tool calls: name and input JSON at four bytes a token plus 4;
//   - images: width × height / 750 after scaling the image to at most 1568
//     pixels on its long edge, at most 1600 (the messages API's rule), with the size read from the header of a base64 PNG, GIF, JPEG or WebP;
//     1600 when the size cannot be read (a URL, another format);
//   - thinking blocks of earlier turns: nothing (upstreams drop them from the
//     context); any other block: its JSON at four bytes a token.
//
// Tokenizers differ by model, so the estimate is usually within 10-20 % of a
// real count for English text and code. The walk reads the body in place
// and does not allocate.

import "math/bits"

const (
	tokensPerMessage = 4
	tokensReply      = 3
	tokensPerTool    = 8
	tokensTools      = 100
	tokensPerCall    = 4
	tokensImage      = 1600 // the largest image the messages API takes, in tokens
)

// CountTokens estimates the input tokens of a messages request body (the
// body of POST /v1/messages or /v1/messages/count_tokens): system, messages
// and tools. The body must be a JSON object with a messages array; anything
// else is a 400 in the messages format's words.
func CountTokens(body []byte) (int64, *Error) {
	if err := ValidateCountTokens(body); err != nil {
		return 0, err
	}
	return estimateMessages(trimJSON(b2s(body))), nil
}

// ValidateCountTokens checks a count_tokens body as the messages endpoint
// checks a request (validate.go): what /v1/messages refuses is refused here
// too, whether the count is estimated or asked of a messages upstream.
func ValidateCountTokens(body []byte) *Error {
	s := trimJSON(b2s(body))
	if !isObj(s) {
		return badRequest("request body must be a JSON object")
	}
	if !isArr(field(s, "messages")) {
		return badRequest("messages: field required, an array of message objects")
	}
	it, _ := objIter(s)
	for {
		k, v, ok := it.next()
		if !ok {
			return nil
		}
		if err := validateMember(Messages, k, v); err != nil {
			return err
		}
	}
}

// estimateMessages is CountTokens for a body known to be a JSON object.
func estimateMessages(s string) int64 {
	c := counter{c: cursor{s: s}, n: tokensReply}
	c.root()
	return c.n
}

// counter walks a messages request once, on a cursor (walk.go), adding up
// its estimate in n: each byte is read once (and text a second time, to
// count it). A value a walk function does not take is left to the cursor,
// which skips it at the next member or element.
type counter struct {
	c     cursor
	n     int64
	depth int // tool results within tool results
}

// maxCountDepth bounds the nesting of tool results the counter follows (the
// body's nesting is not checked before it is counted); deeper ones are not
// counted.
const maxCountDepth = 4

func (c *counter) root() {
	if !c.c.obj() {
		return
	}
	for {
		k, ok := c.c.key()
		if !ok {
			return
		}
		switch k {
		case "system":
			before := c.n
			c.content()
			if c.n > before {
				c.n += tokensPerMessage
			}
		case "messages":
			c.messages()
		case "tools":
			c.tools()
		}
	}
}

func (c *counter) messages() {
	if !c.c.arr() {
		return
	}
	for c.c.more() {
		c.n += tokensPerMessage
		c.message()
	}
}

func (c *counter) message() {
	if !c.c.obj() {
		return
	}
	for {
		k, ok := c.c.key()
		if !ok {
			return
		}
		if k == "content" {
			c.content()
		}
	}
}

func (c *counter) tools() {
	if !c.c.arr() {
		return
	}
	defined := false
	for c.c.more() {
		defined = true
		c.n += tokensPerTool + jsonTokens(c.c.raw())
	}
	if defined {
		c.n += tokensTools
	}
}

// content counts a content value: a string, or an array of blocks.
func (c *counter) content() {
	switch c.c.peek() {
	case '"':
		c.n += textTokens(c.c.raw())
	case '[':
		c.c.arr()
		for c.c.more() {
			c.block()
		}
	}
}

// contentOf counts a content value read earlier, setting the walk aside.
func (c *counter) contentOf(raw string) {
	walk := c.c
	c.c = cursor{s: raw}
	c.content()
	c.c = walk
}

// block counts one content block. Its type usually comes first; the values
// that count are kept until the end of the block, when the type is known,
// and a tool result's content is counted on the way when it can be.
func (c *counter) block() {
	switch c.c.peek() {
	case '"': // a bare string where a block was expected
		c.content()
		return
	case '{':
	default:
		return
	}
	start := c.c.begin()
	c.c.obj()
	var typ, text, source, name, input, content string
	for {
		k, ok := c.c.key()
		if !ok {
			break
		}
		if k == "content" && strEq(typ, "tool_result") && c.depth < maxCountDepth {
			c.depth++
			c.content()
			c.depth--
			continue
		}
		switch k {
		case "type":
			typ = c.c.raw()
		case "text":
			text = c.c.raw()
		case "source":
			source = c.c.raw()
		case "name":
			name = c.c.raw()
		case "input":
			input = c.c.raw()
		case "content":
			if !strEq(typ, "tool_result") {
				content = c.c.raw()
			}
		}
	}
	switch inner(typ) {
	case "text":
		c.n += textTokens(text)
	case "image":
		c.n += imageTokens(source)
	case "tool_use", "server_tool_use":
		c.n += tokensPerCall + textTokens(name) + jsonTokens(input)
	case "tool_result":
		c.n += tokensPerCall
		if content != "" && c.depth < maxCountDepth {
			c.depth++
			c.contentOf(content)
			c.depth--
		}
	case "thinking", "redacted_thinking":
	case "document":
		if strEq(field(source, "type"), "text") {
			c.n += textTokens(field(source, "data"))
			break
		}
		fallthrough
	default:
		c.n += jsonTokens(c.c.s[start:c.c.i])
	}
}

// jsonTokens estimates JSON text (a schema, tool arguments) at four bytes a
// token.
func jsonTokens(raw string) int64 { return int64(len(raw)+3) / 4 }

const highBits = 0x8080808080808080

// textTokens estimates a string literal: a token per four ASCII bytes and
// one per non-ASCII character. It reads eight bytes at a time: a byte with
// its top bit set is not ASCII, and one with its top two bits set starts a
// multi-byte character.
func textTokens(lit string) int64 {
	s := inner(lit)
	high, lead := 0, 0
	i := 0
	for ; i+32 <= len(s); i += 32 {
		// Four words at a time: ASCII text, the usual case, costs one test.
		a, b, c, d := word(s[i:i+8]), word(s[i+8:i+16]), word(s[i+16:i+24]), word(s[i+24:i+32])
		if (a|b|c|d)&highBits == 0 {
			continue
		}
		for _, w := range [4]uint64{a, b, c, d} {
			h := w & highBits
			high += bits.OnesCount64(h)
			lead += bits.OnesCount64(h & (w << 1))
		}
	}
	for ; i+8 <= len(s); i += 8 {
		if w := word(s[i : i+8]); w&highBits != 0 {
			h := w & highBits
			high += bits.OnesCount64(h)
			lead += bits.OnesCount64(h & (w << 1))
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c >= 0x80 {
			high++
			if c >= 0xC0 {
				lead++
			}
		}
	}
	return int64(len(s)-high+3)/4 + int64(lead)
}

// word reads eight bytes, little-endian (one load: the slice's length is
// known).
func word(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// imageTokens estimates an image block from its source.
func imageTokens(source string) int64 {
	if !strEq(field(source, "type"), "base64") {
		return tokensImage
	}
	return base64ImageTokens(field(source, "data"))
}

// base64ImageTokens estimates an image from the data of a base64 source (a
// string literal).
func base64ImageTokens(data string) int64 {
	if !isStr(data) {
		return tokensImage
	}
	w, h, ok := imageSize(inner(data))
	if !ok {
		return tokensImage
	}
	return pixelTokens(w, h)
}

// tally is the estimate made on the way by the messages → chat translation
// (request_messages_to_chat.go), which visits every value the counter counts: it adds
// the same terms as the counter, at the same places, without a second walk
// of the body. Text is counted only when on (a streamed request); the other
// terms cost nothing. The translation reads the last of duplicate members
// (the first of a content block's), where the counter counts every copy;
// that is the only way the two can differ (count_test.go).
type tally struct {
	on bool
	n  int64
}

// text adds a string literal.
func (t *tally) text(lit string) {
	if t.on {
		t.n += textTokens(lit)
	}
}

// image adds a base64 image from its data literal.
func (t *tally) image(data string) {
	if t.on {
		t.n += base64ImageTokens(data)
	}
}

// pixelTokens is the messages API's image cost: w×h/750 after the image is
// scaled to fit 1568 pixels on its long edge, at most 1600 (its larger
// images are scaled down to about 1.2 megapixels, which cost that).
func pixelTokens(w, h int64) int64 {
	if w <= 0 || h <= 0 {
		return tokensImage
	}
	const maxEdge = 1568
	if long := max(w, h); long > maxEdge {
		w, h = max(w*maxEdge/long, 1), max(h*maxEdge/long, 1)
	}
	return min((w*h+749)/750, tokensImage)
}

// imageSize reads the pixel size from the header of base64 image data (PNG,
// GIF, JPEG, WebP), decoding only the bytes it looks at.
func imageSize(b64 string) (w, h int64, ok bool) {
	d := b64Bytes{s: b64}
	switch {
	case d.match(0, "\x89PNG\r\n\x1a\n"):
		return d.be32(16), d.be32(20), d.ok()
	case d.match(0, "GIF8"):
		return d.le16(6), d.le16(8), d.ok()
	case d.match(0, "RIFF") && d.match(8, "WEBP"):
		switch {
		case d.match(12, "VP8X"):
			return d.le24(24) + 1, d.le24(27) + 1, d.ok()
		case d.match(12, "VP8L"):
			b := d.le32(21)
			return int64(b&0x3FFF) + 1, int64(b>>14&0x3FFF) + 1, d.ok()
		case d.match(12, "VP8 "):
			return d.le16(26) & 0x3FFF, d.le16(28) & 0x3FFF, d.ok()
		}
	case d.match(0, "\xff\xd8"):
		return jpegSize(&d)
	}
	return 0, 0, false
}

// jpegSize walks the JPEG segments to the frame header, which holds the
// size. It gives up after 64 segments.
func jpegSize(d *b64Bytes) (w, h int64, ok bool) {
	p := 2
	for range 64 {
		if d.at(p) != 0xFF {
			return 0, 0, false
		}
		m := d.at(p + 1)
		switch {
		case m == 0xFF: // fill byte
			p++
			continue
		case m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC: // SOFn
			return d.be16(p + 7), d.be16(p + 5), d.ok()
		case m == 0xD8 || m >= 0xD0 && m <= 0xD7 || m == 0x01: // no length
			p += 2
			continue
		}
		n := int(d.be16(p + 2))
		if !d.ok() || n < 2 {
			return 0, 0, false
		}
		p += 2 + n
	}
	return 0, 0, false
}

// b64Bytes reads bytes at offsets of standard base64 data (padded or not)
// by decoding the four characters that hold each one. A character outside
// the alphabet (an escape, whitespace) or an offset past the end makes ok
// false.
type b64Bytes struct {
	s   string
	bad bool
}

func (d *b64Bytes) ok() bool { return !d.bad }

func (d *b64Bytes) at(p int) byte {
	// Byte p is in the group of four characters at g; it needs the
	// characters r and r+1 of the group (padding may be left out).
	g, r := p/3*4, p%3
	if p < 0 || g+r+2 > len(d.s) {
		d.bad = true
		return 0
	}
	var v uint32
	for i := range 4 {
		c := byte('A')
		if g+i < len(d.s) {
			c = d.s[g+i]
		}
		x, ok := b64Value(c)
		if !ok {
			d.bad = true
			return 0
		}
		v = v<<6 | x
	}
	return byte(v >> (16 - 8*r))
}

func b64Value(c byte) (uint32, bool) {
	switch {
	case c >= 'A' && c <= 'Z':
		return uint32(c - 'A'), true
	case c >= 'a' && c <= 'z':
		return uint32(c-'a') + 26, true
	case c >= '0' && c <= '9':
		return uint32(c-'0') + 52, true
	case c == '+' || c == '-':
		return 62, true
	case c == '/' || c == '_':
		return 63, true
	case c == '=':
		return 0, true
	}
	return 0, false
}

func (d *b64Bytes) match(p int, want string) bool {
	for i := 0; i < len(want); i++ {
		if d.at(p+i) != want[i] || d.bad {
			d.bad = false
			return false
		}
	}
	return true
}

func (d *b64Bytes) be16(p int) int64 { return int64(d.at(p))<<8 | int64(d.at(p+1)) }
func (d *b64Bytes) be32(p int) int64 { return d.be16(p)<<16 | d.be16(p+2) }
func (d *b64Bytes) le16(p int) int64 { return int64(d.at(p)) | int64(d.at(p+1))<<8 }
func (d *b64Bytes) le24(p int) int64 { return d.le16(p) | int64(d.at(p+2))<<16 }
func (d *b64Bytes) le32(p int) uint32 {
	return uint32(d.le16(p)) | uint32(d.le16(p+2))<<16
}

// AppendCountTokens appends the body of a count_tokens answer,
// {"input_tokens":n}, to dst.
func AppendCountTokens(dst []byte, n int64) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = appendInt(dst, n)
	return append(dst, '}')
}
