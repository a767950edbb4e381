package translate

import "slices"

// Tool results go right after the calls they answer. The chat API wants
// the tool messages directly after the assistant message that called, and
// the messages API wants a user turn's tool_result blocks before anything
// else in it. Clients do not always send them so: Codex's approval flow
// puts a user message between a function_call and its output. The writers
// keep what comes after the calls and is not a result "held", and move the
// results written later in front of it, in place.

// held tracks the held part of the output: at is where the first held
// message (or block) starts in the buffer, past its separator; 0 while
// nothing is held. on says that the calls came, so what follows is held.
type held struct {
	on bool
	at int
}

// note records that dst[mark:] holds a message (or block), with or without
// a comma before it, that is not a tool result.
func (h *held) note(dst []byte, mark int) {
	if !h.on || h.at != 0 || len(dst) <= mark {
		return
	}
	if dst[mark] == ',' {
		mark++
	}
	h.at = mark
}

// results moves the tool results at dst[mark:], a comma and the results,
// in front of the held part, which then starts after them.
func (h *held) results(dst []byte, mark int) {
	if h.at == 0 || len(dst) <= mark {
		return
	}
	swapAround(dst[h.at:], mark-h.at)
	h.at += len(dst) - mark
}

// swapAround turns b, which is x, one separator byte and y with x n bytes
// long, into y, the separator and x, without a copy.
func swapAround(b []byte, n int) {
	slices.Reverse(b)
	y := len(b) - n - 1
	slices.Reverse(b[:y])
	slices.Reverse(b[y+1:])
}
