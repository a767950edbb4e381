package translate

// The token counter as it was before it walked on a cursor (walk.go): kept
// as the reference FuzzCountTokensOldNew compares the cursor walk with,
// until the next change to the counter deletes it.

import (
	"testing"

	"github.com/tidwall/gjson"
)

func oldEstimateMessages(s string) int64 {
	c := oldCounter{s: s, n: tokensReply}
	c.root(skipWS(s, 0))
	return c.n
}

// FuzzCountTokensOldNew: on every JSON object, the cursor walk counts what
// the index walk counted.
func FuzzCountTokensOldNew(f *testing.F) {
	f.Add(history(Messages, 4<<10))
	f.Add([]byte(`{"system":[{"type":"text","text":"be terse"}],"tools":[{"name":"t","input_schema":{}}],"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"tool_result","content":"x"}]},"bare",{"content":"early","type":"tool_result"},{"type":"document","source":{"type":"text","data":"d"}},{"type":"other","x":[1,{"a":"}"}]}]}]}`))
	f.Add([]byte(`{"messages":[{"content":[{"type":"image","source":{"type":"base64","data":"/9j/4AAQSkZJRg"}}]}]}`))
	f.Add([]byte(`{"messages":{"a":1},"tools":3,"system":7}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		s := trimJSON(string(body))
		if !isObj(s) || !gjson.Valid(s) {
			return
		}
		if got, want := estimateMessages(s), oldEstimateMessages(s); got != want {
			t.Fatalf("estimate %d, the index walk's %d, for %s", got, want, s)
		}
	})
}

// counter walks a messages request once, adding up its estimate in n. The
// package's iterators find a value's end before they hand it out, so a walk
// through them would read the messages three or four times over; the
// counter reads each byte once (and text a second time, to count it). Each
// walk function takes the index of a value's first byte and returns the
// index past its end, -1 on malformed input.
type oldCounter struct {
	s     string
	n     int64
	depth int // tool results within tool results
}

func (c *oldCounter) root(i int) int {
	if i >= len(c.s) || c.s[i] != '{' {
		return -1
	}
	i++
	for {
		k, v, ok := oldObjNext(c.s, i)
		if !ok {
			return v
		}
		switch k {
		case "system":
			before := c.n
			i = c.content(v)
			if c.n > before {
				c.n += tokensPerMessage
			}
		case "messages":
			i = c.messages(v)
		case "tools":
			i = c.tools(v)
		default:
			i = valueEnd(c.s, v)
		}
		if i < 0 {
			return -1
		}
	}
}

func (c *oldCounter) messages(i int) int {
	if i >= len(c.s) || c.s[i] != '[' {
		return valueEnd(c.s, i)
	}
	i++
	for {
		v, ok := oldArrNext(c.s, i)
		if !ok {
			return v
		}
		c.n += tokensPerMessage
		if i = c.message(v); i < 0 {
			return -1
		}
	}
}

func (c *oldCounter) message(i int) int {
	if i >= len(c.s) || c.s[i] != '{' {
		return valueEnd(c.s, i)
	}
	i++
	for {
		k, v, ok := oldObjNext(c.s, i)
		if !ok {
			return v
		}
		if k == "content" {
			i = c.content(v)
		} else {
			i = valueEnd(c.s, v)
		}
		if i < 0 {
			return -1
		}
	}
}

func (c *oldCounter) tools(i int) int {
	if i >= len(c.s) || c.s[i] != '[' {
		return valueEnd(c.s, i)
	}
	i++
	defined := false
	for {
		v, ok := oldArrNext(c.s, i)
		if !ok {
			if defined {
				c.n += tokensTools
			}
			return v
		}
		if i = valueEnd(c.s, v); i < 0 {
			return -1
		}
		defined = true
		c.n += tokensPerTool + jsonTokens(c.s[v:i])
	}
}

// content counts a content value: a string, or an array of blocks.
func (c *oldCounter) content(i int) int {
	if i >= len(c.s) {
		return -1
	}
	switch c.s[i] {
	case '"':
		e := stringEnd(c.s, i)
		if e > 0 {
			c.n += textTokens(c.s[i:e])
		}
		return e
	case '[':
		i++
		for {
			v, ok := oldArrNext(c.s, i)
			if !ok {
				return v
			}
			if i = c.block(v); i < 0 {
				return -1
			}
		}
	}
	return valueEnd(c.s, i)
}

// block counts one content block. Its type usually comes first; the values
// that count are kept until the end of the block, when the type is known,
// and a tool result's content is counted on the way when it can be.
func (c *oldCounter) block(i int) int {
	if i >= len(c.s) || c.s[i] != '{' {
		if i < len(c.s) && c.s[i] == '"' { // a bare string where a block was expected
			return c.content(i)
		}
		return valueEnd(c.s, i)
	}
	start := i
	var typ, text, source, name, input string
	content := -1 // start of a tool result's content not yet counted
	i++
	for {
		k, v, ok := oldObjNext(c.s, i)
		if !ok {
			i = v
			break
		}
		if k == "content" && strEq(typ, "tool_result") && c.depth < maxCountDepth {
			c.depth++
			i = c.content(v)
			c.depth--
		} else {
			i = valueEnd(c.s, v)
		}
		if i < 0 {
			return -1
		}
		switch k {
		case "type":
			typ = c.s[v:i]
		case "text":
			text = c.s[v:i]
		case "source":
			source = c.s[v:i]
		case "name":
			name = c.s[v:i]
		case "input":
			input = c.s[v:i]
		case "content":
			if !strEq(typ, "tool_result") {
				content = v
			}
		}
	}
	if i < 0 {
		return -1
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
		if content >= 0 && c.depth < maxCountDepth {
			c.depth++
			c.content(content)
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
		c.n += jsonTokens(c.s[start:i])
	}
	return i
}

// objNext reads the next member of the object being walked: i is just past
// its '{' or past the previous member's value. It returns the member's key
// and the index of its value; at the object's end, ok is false and v is the
// index past the '}' (-1 on malformed input).
func oldObjNext(s string, i int) (key string, v int, ok bool) {
	i = skipWS(s, i)
	if i < len(s) && s[i] == ',' {
		i = skipWS(s, i+1)
	}
	switch {
	case i >= len(s):
		return "", -1, false
	case s[i] == '}':
		return "", i + 1, false
	case s[i] != '"':
		return "", -1, false
	}
	e := stringEnd(s, i)
	if e < 0 {
		return "", -1, false
	}
	key = s[i+1 : e-1]
	i = skipWS(s, e)
	if i >= len(s) || s[i] != ':' {
		return "", -1, false
	}
	return key, skipWS(s, i+1), true
}

// arrNext is objNext for the elements of an array.
func oldArrNext(s string, i int) (v int, ok bool) {
	i = skipWS(s, i)
	if i < len(s) && s[i] == ',' {
		i = skipWS(s, i+1)
	}
	switch {
	case i >= len(s):
		return -1, false
	case s[i] == ']':
		return i + 1, false
	}
	return i, true
}
