package translate

// Runs of assistant-side Responses input items (messages, reasoning,
// function calls and their outputs) as chat assistant and tool messages,
// with the reasoning a later turn hands back in encrypted_content.

import (
	"encoding/base64"
	"strings"
	"unsafe"
)

// runItem is an assistant-side input item, its members read once.
type runItem struct {
	typ, role, content            string
	callID, name, namespace, args string
	encrypted, reasoning, summary string
}

// read reads the members of the object c has entered (the last of
// duplicates counts) and leaves c past it.
func (r *runItem) read(c *cursor) {
	for {
		k, ok := c.key()
		if !ok {
			return
		}
		var v *string
		switch k {
		case "type":
			v = &r.typ
		case "role":
			v = &r.role
		case "content":
			v = &r.content
		case "call_id":
			v = &r.callID
		case "name":
			v = &r.name
		case "namespace":
			v = &r.namespace
		case "arguments":
			v = &r.args
		case "encrypted_content":
			v = &r.encrypted
		case "summary":
			v = &r.summary
		default:
			continue
		}
		*v = c.raw()
	}
}

// appendAssistantRun writes the assistant-side items of a run, the first
// of them input[index], as one assistant message: the messages' text as
// content, and on a turn that calls tools the reasoning as
// reasoning_content (reasoning templates need it to continue after the
// results come back) and the calls as tool_calls. The items are written in
// three passes.
func appendAssistantRun(dst []byte, items []runItem, index int) ([]byte, *Error) {
	calls := 0
	for k := range items {
		switch r := &items[k]; {
		case strEq(r.typ, "function_call"):
			calls++
		case strEq(r.typ, "reasoning"):
			r.reasoning, r.content = r.content, "" // a reasoning item's content is reasoning_text parts
		}
	}
	input := loc{name: "input"}
	mark := len(dst)
	dst = sep(dst)
	dst = append(dst, `{"role":"assistant","content":"`...)
	first := true
	for k := range items {
		r := &items[k]
		if !strEq(r.role, "assistant") {
			continue
		}
		if isStr(r.content) {
			dst = appendJoinedInner(dst, r.content, "", &first)
			continue
		}
		p := input.elem(index + k)
		ci, ok := arrIter(r.content)
		if !ok {
			return dst, p.bad(".content: must be a string or an array of output_text parts")
		}
		cp := p.member("content")
		for j := 0; ; j++ {
			part, ok := ci.elem()
			if !ok {
				break
			}
			at := cp.elem(j)
			txt, err := partText(part, &at)
			if err != nil {
				return dst, err
			}
			if txt == "" {
				return dst, at.bad(": assistant messages may only hold output_text and refusal parts")
			}
			dst = appendJoinedInner(dst, txt, "", &first)
		}
	}
	switch {
	case first && calls == 0: // reasoning alone: nothing to write
		return dst[:mark], nil
	case first:
		dst = append(dst[:len(dst)-1], "null"...)
	default:
		dst = append(dst, '"')
	}
	if calls == 0 {
		return append(dst, '}'), nil
	}
	mark = len(dst)
	dst = append(dst, `,"reasoning_content":"`...)
	first = true
	for k := range items {
		if r := &items[k]; strEq(r.typ, "reasoning") {
			var err *Error
			p := input.elem(index + k)
			if dst, err = appendReasoningText(dst, r, &p, &first); err != nil {
				return dst, err
			}
		}
	}
	if first {
		dst = dst[:mark]
	} else {
		dst = append(dst, '"')
	}
	dst = append(dst, `,"tool_calls":[`...)
	for k := range items {
		r := &items[k]
		if !strEq(r.typ, "function_call") {
			continue
		}
		switch {
		case !isStr(r.callID) || emptyStr(r.callID):
			return dst, badRequest(pathi("input", index+k) + ".call_id: must be a non-empty string")
		case !isStr(r.name) || emptyStr(r.name):
			return dst, badRequest(pathi("input", index+k) + ".name: must be a non-empty string")
		case !isNull(r.namespace) && !isStr(r.namespace):
			return dst, badRequest(pathi("input", index+k) + ".namespace: must be a string")
		}
		dst = sep(dst)
		dst = append(dst, `{"id":`...)
		dst = append(dst, r.callID...)
		dst = append(dst, `,"type":"function","function":{"name":"`...)
		dst = appendFlatName(dst, inner(r.namespace), inner(r.name))
		dst = append(dst, `","arguments":`...)
		switch {
		case isStr(r.args):
			dst = append(dst, r.args...)
		case isObj(r.args):
			dst = appendStr(dst, r.args)
		case isNull(r.args):
			dst = append(dst, `"{}"`...)
		default:
			return dst, badRequest(pathi("input", index+k) + ".arguments: must be a string (JSON text)")
		}
		dst = append(dst, `}}`...)
	}
	return append(dst, `]}`...), nil
}

// appendReasoningText appends a reasoning item's text to an open string:
// the reasoning restored from Timeblock's encrypted_content, else its
// reasoning_text content, else its summary.
func appendReasoningText(dst []byte, r *runItem, p *loc, first *bool) ([]byte, *Error) {
	if enc := r.encrypted; isStr(enc) && strings.HasPrefix(inner(enc), encPrefix) {
		mark := len(dst)
		if !*first {
			dst = append(dst, `\n\n`...)
		}
		body := len(dst)
		out, err := base64.StdEncoding.AppendDecode(dst, s2b(inner(enc)[len(encPrefix):]))
		if err == nil && validInner(out[body:]) {
			if len(out) > body {
				*first = false
				return out, nil
			}
			return out[:mark], nil
		}
		dst = out[:mark] // not ours after all: fall back on the text
	}
	for _, v := range [...]string{r.reasoning, r.summary} {
		pi, ok := arrIter(v)
		if !ok {
			if !isNull(v) {
				return dst, p.bad(": summary and content must be arrays of text parts")
			}
			continue
		}
		found := false
		for j := 0; ; j++ {
			part, ok := pi.elem()
			if !ok {
				break
			}
			txt := field(part, "text")
			if !isStr(txt) {
				e := p.elem(j)
				return dst, e.bad(".text: must be a string")
			}
			dst = appendJoinedInner(dst, txt, `\n\n`, first)
			found = true
		}
		if found {
			break
		}
	}
	return dst, nil
}

// s2b views s as bytes without copying; they must not be written to.
func s2b(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// validInner reports whether b is the inside of a JSON string literal.
func validInner(b []byte) bool {
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"' || c < 0x20:
			return false
		case c == '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 >= len(b) {
					return false
				}
				if _, ok := hex4(b2s(b[i+2 : i+6])); !ok {
					return false
				}
				i += 5
			default:
				return false
			}
		}
	}
	return true
}

// appendOutputRun writes n function call outputs read from it as tool
// messages. Images and files in outputs cannot ride in a chat tool message:
// they follow the run in one user message.
func appendOutputRun(dst []byte, it iter, n, index int) ([]byte, *Error) {
	start := it
	attachments := false
	input := loc{name: "input"}
	for k := 0; k < n; k++ {
		item, _ := it.elem()
		p := input.elem(index + k)
		id, out := field(item, "call_id"), field(item, "output")
		if !isStr(id) || emptyStr(id) {
			return dst, p.bad(".call_id: must be a non-empty string")
		}
		dst = sep(dst)
		dst = append(dst, `{"role":"tool","tool_call_id":`...)
		dst = append(dst, id...)
		dst = append(dst, `,"content":`...)
		switch {
		case isStr(out):
			dst = append(dst, out...)
		case isNull(out):
			dst = append(dst, `""`...)
		default:
			pi, ok := arrIter(out)
			if !ok {
				return dst, p.bad(".output: must be a string or an array of content parts")
			}
			dst = append(dst, '"')
			first := true
			op := p.member("output")
			for j := 0; ; j++ {
				part, ok := pi.elem()
				if !ok {
					break
				}
				at := op.elem(j)
				txt, err := partText(part, &at)
				if err != nil {
					return dst, err
				}
				if txt == "" {
					attachments = true
					continue
				}
				dst = appendJoinedInner(dst, txt, `\n`, &first)
			}
			if first && attachments {
				dst = append(dst, `(attached below)`...)
			}
			dst = append(dst, '"')
		}
		dst = append(dst, '}')
	}
	if !attachments {
		return dst, nil
	}
	dst = append(dst, `,{"role":"user","content":[`...)
	it = start
	for k := 0; k < n; k++ {
		item, _ := it.elem()
		p := input.elem(index + k)
		op := p.member("output")
		pi, ok := arrIter(field(item, "output"))
		if !ok {
			continue
		}
		wrote := false
		for j := 0; ; j++ {
			part, ok := pi.elem()
			if !ok {
				break
			}
			at := op.elem(j)
			if txt, _ := partText(part, &at); txt != "" {
				continue
			}
			if !wrote {
				dst = sep(dst)
				dst = append(dst, `{"type":"text","text":"Attached to the output of tool call `...)
				dst = append(dst, inner(field(item, "call_id"))...)
				dst = append(dst, `:"}`...)
				wrote = true
			}
			var err *Error
			if dst, err = appendPartChat(dst, part, &at); err != nil {
				return dst, err
			}
		}
	}
	return append(dst, `]}`...), nil
}
