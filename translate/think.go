package translate

import (
	"bytes"
	"strings"
)

// Reasoning written inline as <think>…</think> (llama.cpp without a reasoning
// format, SGLang or vLLM without a reasoning parser, older Ollama) is split
// out of the answer. The parser is fed decoded text in whatever pieces the
// stream delivers, so tags may be split across chunks; it holds back only
// the bytes that could still be the start of a tag.

const (
	openTag  = "<think>"
	closeTag = "</think>"
	// maxLead bounds the whitespace held while waiting to see whether the
	// answer opens with <think>.
	maxLead = 256
)

type thinkState uint8

const (
	tsStart thinkState = iota // only whitespace so far: an opening tag may come
	tsThink                   // inside the reasoning, until </think>
	tsAfter                   // just past </think>: the answer's leading whitespace is dropped
	tsText                    // the answer
	tsOff                     // the upstream separates reasoning: no parsing
)

type thinkParser struct {
	state thinkState
	// prefilled: the template opened <think> itself, so the output starts
	// inside the reasoning.
	prefilled bool
	// closed: a </think> was consumed; a later one is answer text.
	closed bool
	// trim drops whitespace at the start of the reasoning.
	trim bool
	pend []byte
}

func (p *thinkParser) reset(prefilled bool) {
	*p = thinkParser{prefilled: prefilled, pend: p.pend[:0]}
}

// off stops parsing once the upstream shows it separates reasoning itself
// (a reasoning_content field, a thinking block). Held bytes are returned as text.
func (p *thinkParser) off(text *[]byte) {
	if p.state == tsStart {
		*text = append(*text, p.pend...)
		p.pend = p.pend[:0]
		p.state = tsOff
	}
}

// passes reports whether a text literal can go out untouched: the parser is
// settled in the answer and the literal cannot hold a tag.
func (p *thinkParser) passes(lit string) bool {
	switch p.state {
	case tsOff:
		return true
	case tsText:
		return p.closed || (len(p.pend) == 0 && strings.IndexByte(lit, '<') < 0 && !strings.Contains(lit, `\u003`))
	}
	return false
}

// feed splits in into reasoning and answer text, appended to r and t.
// Reasoning always precedes text within one call.
func (p *thinkParser) feed(in []byte, r, t *[]byte) {
	buf := in
	if len(p.pend) > 0 {
		p.pend = append(p.pend, in...)
		buf = p.pend
	}
	for len(buf) > 0 {
		switch p.state {
		case tsOff:
			*t = append(*t, buf...)
			buf = nil
		case tsStart:
			j := 0
			for j < len(buf) && isSpace(buf[j]) {
				j++
			}
			if j == len(buf) {
				if len(buf) > maxLead {
					p.state = tsText
					continue
				}
				p.hold(buf)
				return
			}
			rest := buf[j:]
			if bytes.HasPrefix(rest, []byte(openTag)) {
				buf = rest[len(openTag):]
				p.state, p.trim = tsThink, true
				continue
			}
			if len(rest) < len(openTag) && strings.HasPrefix(openTag, b2s(rest)) {
				p.hold(buf)
				return
			}
			if p.prefilled {
				buf = rest
				p.state, p.trim = tsThink, true
			} else {
				p.state = tsText
			}
		case tsThink:
			if p.trim {
				j := 0
				for j < len(buf) && isSpace(buf[j]) {
					j++
				}
				buf = buf[j:]
				if len(buf) == 0 {
					break
				}
				p.trim = false
			}
			if k := bytes.Index(buf, []byte(closeTag)); k >= 0 {
				*r = append(*r, buf[:k]...)
				buf = buf[k+len(closeTag):]
				p.state, p.closed = tsAfter, true
				continue
			}
			h := partialSuffix(buf, closeTag)
			*r = append(*r, buf[:len(buf)-h]...)
			p.hold(buf[len(buf)-h:])
			return
		case tsAfter:
			j := 0
			for j < len(buf) && isSpace(buf[j]) {
				j++
			}
			buf = buf[j:]
			if len(buf) > 0 {
				p.state = tsText
			}
		case tsText:
			if p.closed {
				*t = append(*t, buf...)
				buf = nil
				break
			}
			// A lone </think>: the template opened the reasoning. What went
			// before was already sent as text; the tag itself is dropped.
			if k := bytes.Index(buf, []byte(closeTag)); k >= 0 {
				*t = append(*t, buf[:k]...)
				buf = buf[k+len(closeTag):]
				p.state, p.closed = tsAfter, true
				continue
			}
			h := partialSuffix(buf, closeTag)
			*t = append(*t, buf[:len(buf)-h]...)
			p.hold(buf[len(buf)-h:])
			return
		}
	}
	p.pend = p.pend[:0]
}

// hold keeps b for the next feed; b may alias p.pend (append moves with memmove).
func (p *thinkParser) hold(b []byte) { p.pend = append(p.pend[:0], b...) }

// flush releases held bytes at the end of the output.
func (p *thinkParser) flush(r, t *[]byte) {
	if len(p.pend) == 0 {
		return
	}
	if p.state == tsThink {
		*r = append(*r, p.pend...)
	} else if p.state != tsAfter {
		*t = append(*t, p.pend...)
	}
	p.pend = p.pend[:0]
}

// partialSuffix is the length of the longest suffix of b that is a proper
// prefix of tag.
func partialSuffix(b []byte, tag string) int {
	n := min(len(tag)-1, len(b))
	for ; n > 0; n-- {
		if b2s(b[len(b)-n:]) == tag[:n] {
			return n
		}
	}
	return 0
}

// splitThink splits a whole answer (non-streaming): an opening <think> at
// the start, or a lone </think> (the template opened it), or — when the
// template opens it and reasoning was asked for — all of it, is reasoning.
func splitThink(s string, prefilled bool) (reasoning, text string, found bool) {
	lead := strings.TrimLeft(s, " \t\r\n")
	if rest, ok := strings.CutPrefix(lead, openTag); ok {
		r, t, closed := strings.Cut(rest, closeTag)
		if !closed {
			return strings.TrimLeft(r, " \t\r\n"), "", true
		}
		return strings.TrimLeft(r, " \t\r\n"), strings.TrimLeft(t, " \t\r\n"), true
	}
	if r, t, ok := strings.Cut(s, closeTag); ok {
		return strings.TrimLeft(r, " \t\r\n"), strings.TrimLeft(t, " \t\r\n"), true
	}
	if prefilled && lead != "" {
		return lead, "", true
	}
	return "", s, false
}
