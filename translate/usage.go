package translate

import (
	"unsafe"

	"github.com/tidwall/gjson"
)

// usage is token usage as the upstream reported it, merged across events:
// a field the last event lacks keeps the value an earlier event gave (a
// messages stream reports input in message_start and output in message_delta).
type usage struct {
	fromChat bool
	// chat: prompt is the whole input; messages: input excludes cache reads
	// and writes.
	prompt, input, cacheRead, cacheWrite, output, reasoning int64
	seen                                                    bool
}

func (u *usage) readChat(v string) {
	it, ok := objIter(v)
	if !ok {
		return
	}
	u.fromChat, u.seen = true, true
	for {
		k, val, ok := it.next()
		if !ok {
			return
		}
		switch k {
		case "prompt_tokens":
			setCount(&u.prompt, val)
		case "completion_tokens":
			setCount(&u.output, val)
		case "prompt_tokens_details":
			setCount(&u.cacheRead, field(val, "cached_tokens"))
		case "completion_tokens_details":
			setCount(&u.reasoning, field(val, "reasoning_tokens"))
		}
	}
}

func (u *usage) readMessages(v string) { u.readMessagesEvent(v, false) }

// readMessagesDelta reads a stream's message_delta usage. Its output count
// is the final one; its input and cache counts replace message_start's only
// when non-zero: some servers send zeros there for counts they reported at
// the start.
func (u *usage) readMessagesDelta(v string) { u.readMessagesEvent(v, true) }

func (u *usage) readMessagesEvent(v string, delta bool) {
	set := setCount
	if delta {
		set = setNonZero
	}
	it, ok := objIter(v)
	if !ok {
		return
	}
	u.seen = true
	for {
		k, val, ok := it.next()
		if !ok {
			return
		}
		switch k {
		case "input_tokens":
			set(&u.input, val)
		case "output_tokens":
			setCount(&u.output, val)
		case "cache_read_input_tokens":
			set(&u.cacheRead, val)
		case "cache_creation_input_tokens":
			set(&u.cacheWrite, val)
		}
	}
}

// setCount keeps a present, non-negative integer (null or absent leaves it).
func setCount(dst *int64, v string) {
	if n, ok := toInt(v); ok && n >= 0 {
		*dst = n
	}
}

// setNonZero keeps a present, positive integer.
func setNonZero(dst *int64, v string) {
	if n, ok := toInt(v); ok && n > 0 {
		*dst = n
	}
}

func (u *usage) promptTotal() int64 {
	if u.fromChat {
		return u.prompt
	}
	return u.input + u.cacheRead + u.cacheWrite
}

func (u *usage) inputUncached() int64 {
	if !u.fromChat {
		return u.input
	}
	return max(u.prompt-u.cacheRead-u.cacheWrite, 0)
}

// reasoningTokens is the upstream's count, or else an estimate: the output
// tokens split in proportion to the bytes of reasoning and of everything
// else the model wrote (most servers that separate reasoning do not count it).
func (u *usage) reasoningTokens(reasonBytes, otherBytes int64) int64 {
	if u.reasoning > 0 || reasonBytes == 0 || u.output == 0 {
		return u.reasoning
	}
	n := (u.output*reasonBytes + (reasonBytes+otherBytes)/2) / (reasonBytes + otherBytes)
	return min(max(n, 1), u.output)
}

func (u *usage) appendChat(dst []byte, reasoning int64) []byte {
	p := u.promptTotal()
	dst = append(dst, `{"prompt_tokens":`...)
	dst = appendInt(dst, p)
	dst = append(dst, `,"completion_tokens":`...)
	dst = appendInt(dst, u.output)
	dst = append(dst, `,"total_tokens":`...)
	dst = appendInt(dst, p+u.output)
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = appendInt(dst, u.cacheRead)
	dst = append(dst, `},"completion_tokens_details":{"reasoning_tokens":`...)
	dst = appendInt(dst, reasoning)
	return append(dst, `}}`...)
}

func (u *usage) appendMessages(dst []byte) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = appendInt(dst, u.inputUncached())
	dst = append(dst, `,"cache_creation_input_tokens":`...)
	dst = appendInt(dst, u.cacheWrite)
	dst = append(dst, `,"cache_read_input_tokens":`...)
	dst = appendInt(dst, u.cacheRead)
	dst = append(dst, `,"output_tokens":`...)
	dst = appendInt(dst, u.output)
	return append(dst, '}')
}

// The reasoning-token estimate splits output tokens by bytes, so every path
// must count the same bytes for the same output, streamed or not: text and
// reasoning by their escaped string content (additive across chunks), tool
// calls by their arguments' JSON text.

// argBytes counts the argument bytes of a chat tool_calls array (whole, or a
// stream delta's fragments): the escaped content of each function.arguments.
func argBytes(calls string) int64 {
	it, ok := arrIter(calls)
	if !ok {
		return 0
	}
	var n int64
	for {
		c, ok := it.elem()
		if !ok {
			return n
		}
		if a := field(field(c, "function"), "arguments"); isStr(a) {
			n += int64(len(a) - 2)
		}
	}
}

// decodedLen is the length of a JSON string literal's value once unescaped,
// so a streamed partial_json fragment counts like the input object it builds.
func decodedLen(lit string) int64 {
	if !isStr(lit) {
		return 0
	}
	s := lit[1 : len(lit)-1]
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			if s[i+1] == 'u' && i+5 < len(s) {
				n += int64(utf8RuneLenHex(s[i+2 : i+6]))
				i += 5
			} else {
				n++
				i++
			}
			continue
		}
		n++
	}
	return n
}

// utf8RuneLenHex is the UTF-8 length of the \u escape with hex digits h (a
// surrogate half counts 2, so a pair counts the 4 bytes of its rune).
func utf8RuneLenHex(h string) int {
	var r rune
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		}
	}
	switch {
	case r < 0x80:
		return 1
	case r < 0x800:
		return 2
	case r >= 0xD800 && r <= 0xDFFF:
		return 2
	}
	return 3
}

// ResponseUsage reads the usage of a whole upstream response in format
// upstream: input tokens (cached ones included, as a stream's count) and
// output tokens. gjson skips over the rest of the body without decoding it;
// the string view of body lives only for this call, and nothing of it is
// kept.
func ResponseUsage(upstream Format, body []byte) (input, output int64) {
	u := gjson.Get(unsafe.String(unsafe.SliceData(body), len(body)), "usage")
	if !u.IsObject() {
		return 0, 0
	}
	if upstream == Chat {
		return u.Get("prompt_tokens").Int(), u.Get("completion_tokens").Int()
	}
	// Messages (input_tokens leaves out the cache) and Responses (its
	// input_tokens includes it, and it has no cache fields).
	return u.Get("input_tokens").Int() + u.Get("cache_read_input_tokens").Int() + u.Get("cache_creation_input_tokens").Int(),
		u.Get("output_tokens").Int()
}
