package translate

import (
	"bytes"
	"math/rand/v2"
	"net/http"
	"time"
)

// A Stream rewrites one upstream SSE response for the client as it arrives.
// Write takes upstream bytes in pieces of any size (lines may be split
// across writes) and appends the client's events to dst; each complete
// upstream event is translated at once, nothing waits for the end. Close
// ends the client's stream: the closing events when the upstream finished
// its answer, an error event when it broke off. A Stream is not safe for
// concurrent use; Reset lets a pool reuse one.
type Stream struct {
	client, upstream Format
	req              Request
	cfg              *Config

	out []byte // the caller's dst while a call runs

	// SSE framing
	line    []byte // an incomplete line carried to the next Write
	data    []byte // data lines of the event being read
	event   []byte // its event name
	hasData bool

	began    bool // the upstream's first event was seen
	finished bool // the upstream ended its answer (finish_reason, stop_reason)
	done     bool // the client's stream is complete; nothing more is written

	id      []byte // decoded
	model   []byte // raw literal
	created int64

	think                      thinkParser
	rbuf, tbuf, scratch, enc   []byte
	lit                        []byte
	u                          usage
	reasonBytes, otherBytes    int64
	stop                       stopReason
	stopSeq                    []byte // raw literal
	refusal                    bool
	toolCount                  int
	dropped                    int // tool calls without a name, dropped (dropTool)
	tools                      []toolState
	live                       int // index in tools of the tool streamed live (messages client), -1 none
	m                          msgState
	c                          chatState
	choices                    []choiceState // chat pass-through, per choice index
	ub                         []upBlock     // messages upstream blocks
	chatPrefix                 []byte
	sawDone, sawChatUsageChunk bool

	cr  chunkRead   // the chat chunk being read (chatChunk, sinkChunk)
	kv  []rawMember // the members of the choice being passed (passChoice)
	dkv []rawMember // and of its delta

	// A chat pass-through that feeds a Responses writer (keepView) reads
	// each chunk for it instead of rewriting it: views are the chunks passed
	// since the last takeViews, in order, as a chat client would read them.
	// Their readings point into data before dataAt and into vals (the
	// values the pass-through made), both kept until takeViews; the event
	// being read is data[dataAt:].
	keepView bool
	views    []passedView
	dataAt   int
	vals     []byte

	// sink writes the events of a client without a direct writer from the
	// chat chunks of pv's inner stream (pivot.go); nil for chat and
	// messages clients. rx and gx are the Responses and Gemini sinks, kept
	// across Resets.
	sink chatSink
	pv   *pivot
	rx   *respStream
	gx   *geminiStream
}

// NewStream returns a Stream from upstream format to client format for a
// request that TranslateRequest described as req.
func NewStream(client, upstream Format, req Request, cfg *Config) *Stream {
	s := new(Stream)
	s.Reset(client, upstream, req, cfg)
	return s
}

// Reset readies s for another response, keeping its buffers.
func (s *Stream) Reset(client, upstream Format, req Request, cfg *Config) {
	*s = Stream{
		client: client, upstream: upstream, req: req, cfg: cfg,
		line: s.line[:0], data: s.data[:0], event: s.event[:0],
		id: s.id[:0], model: s.model[:0],
		rbuf: s.rbuf[:0], tbuf: s.tbuf[:0], scratch: s.scratch[:0], enc: s.enc[:0], lit: s.lit[:0],
		stopSeq: s.stopSeq[:0], tools: s.tools[:0], live: -1,
		choices: s.choices[:0], ub: s.ub[:0], chatPrefix: s.chatPrefix[:0],
		cr: chunkRead{choices: s.cr.choices[:0]}, kv: s.kv[:0], dkv: s.dkv[:0],
		views: s.views[:0], vals: s.vals[:0],
		pv: s.pv, rx: s.rx, gx: s.gx,
	}
	s.think.pend = s.think.pend[:0]
	s.think.reset(cfg.ThinkPrefilled && req.Reasoning)
	s.created = now().Unix()
	if c, ok := codecFor(client); ok && c.sink != nil {
		s.resetSink(c, upstream, req, cfg)
	}
}

// now is the clock behind chat's `created`; tests pin it.
var now = time.Now

// maxLine bounds one SSE line (and one event's data); a longer one means the
// upstream is not speaking SSE.
const maxLine = 16 << 20

// maxEventDepth bounds the nesting of a large upstream event, so that the
// walks that read it stay shallow; a small one cannot nest deep enough to
// matter.
const maxEventDepth = 64

// validEvent validates an event's JSON in one pass (checkJSON, which reads
// strings eight bytes at a time).
func validEvent(d string) bool {
	ok, _ := checkJSON(d, eventDepthLimit(d))
	return ok
}

// eventDepthLimit is how deep the event d may nest.
func eventDepthLimit(d string) int {
	if len(d) > 1<<16 {
		return maxEventDepth
	}
	return len(d) // d cannot nest deeper than its length
}

// Write consumes upstream SSE bytes and appends the client's SSE bytes to dst.
func (s *Stream) Write(dst, p []byte) []byte {
	if s.done {
		return dst
	}
	if s.sink != nil {
		return s.sinkWrite(dst, p)
	}
	s.out = dst
	for len(p) > 0 && !s.done {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(s.line)+len(p) > maxLine {
				s.fail(NewError(http.StatusBadGateway, APIError, "upstream sent an SSE line longer than 16 MiB"))
				break
			}
			s.line = append(s.line, p...)
			break
		}
		line := p[:i]
		p = p[i+1:]
		if len(s.line) > 0 {
			s.line = append(s.line, line...)
			line = s.line
		}
		s.sseLine(line)
		s.line = s.line[:0]
	}
	dst = s.out
	s.out = nil
	return dst
}

// Close ends the client's stream, appending the closing events (or an error
// event when the upstream ended before finishing its answer) to dst.
func (s *Stream) Close(dst []byte) []byte {
	if s.done {
		return dst
	}
	if s.sink != nil {
		return s.sinkClose(dst)
	}
	s.out = dst
	if len(s.line) > 0 {
		s.sseLine(s.line)
		s.line = s.line[:0]
	}
	// An event without its closing blank line still counts when it is whole;
	// a torn one means the upstream broke off.
	if !s.done && s.hasData {
		if d := trimJSON(b2s(s.eventData())); d == "[DONE]" || validEvent(d) {
			s.dispatch()
		}
		s.data, s.hasData = s.data[:s.dataAt], false
	}
	if !s.done {
		if s.finished || s.sawDone {
			s.final()
		} else {
			s.fail(NewError(http.StatusBadGateway, APIError, "the upstream ended the stream before the response was complete"))
		}
	}
	dst = s.out
	s.out = nil
	return dst
}

// Abort ends the client's stream with an error event (say, the upstream
// connection failed), appending it to dst. It does nothing once the stream is
// complete.
func (s *Stream) Abort(dst []byte, e *Error) []byte {
	if s.done {
		return dst
	}
	if s.sink != nil {
		return s.sinkAbort(dst, e)
	}
	s.out = dst
	s.fail(e)
	dst = s.out
	s.out = nil
	return dst
}

// Done reports whether the client's stream is complete.
func (s *Stream) Done() bool { return s.done }

// Usage reports the tokens counted so far: input (all of it, cached
// included), output, and of those the cached input and reasoning tokens.
func (s *Stream) Usage() (input, output, cached, reasoning int64) {
	if s.sink != nil {
		return s.pv.inner.Usage()
	}
	return s.u.promptTotal(), s.u.output, s.u.cacheRead, s.u.reasoningTokens(s.reasonBytes, s.otherBytes)
}

// eventData is the data of the event being read.
func (s *Stream) eventData() []byte { return s.data[s.dataAt:] }

func (s *Stream) sseLine(line []byte) {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) == 0 {
		if s.hasData {
			s.dispatch()
		}
		s.event = s.event[:0]
		return
	}
	if line[0] == ':' {
		s.keepAlive()
		return
	}
	name, val := line, line[:0]
	if c := bytes.IndexByte(line, ':'); c >= 0 {
		name, val = line[:c], line[c+1:]
		if len(val) > 0 && val[0] == ' ' {
			val = val[1:]
		}
	}
	switch b2s(name) {
	case "data":
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		if len(s.eventData())+len(val) > maxLine {
			s.fail(NewError(http.StatusBadGateway, APIError, "upstream sent an SSE event larger than 16 MiB"))
			return
		}
		s.data = append(s.data, val...)
		s.hasData = true
	case "event":
		s.event = append(s.event[:0], val...)
	case "error": // llama.cpp reports a failure as an `error:` field
		s.event = append(s.event[:0], "error"...)
		s.data = append(s.data[:s.dataAt], val...)
		s.hasData = true
	}
}

func (s *Stream) dispatch() {
	d := trimJSON(b2s(s.eventData()))
	defer func() {
		s.data = s.data[:s.dataAt]
		s.hasData = false
	}()
	if s.done {
		return
	}
	if d == "[DONE]" {
		s.sawDone = true
		if s.upstream == Chat {
			if s.client == Chat {
				s.passDone()
			} else {
				s.final()
			}
		}
		return
	}
	if d == "" {
		return
	}
	// An event is validated as it is read (checkedCursor), so it is not
	// scanned twice. Raw pieces of it are copied into the client's events,
	// so line breaks (whitespace, in valid JSON) must go: they would end the
	// SSE line. An event with any is validated before they go, since a raw
	// line break inside a string is not JSON.
	data := s.eventData()
	breaks := bytes.IndexByte(data, '\n') >= 0 || bytes.IndexByte(data, '\r') >= 0
	if !isObj(d) || (breaks && !validEvent(d)) {
		s.badEvent()
		return
	}
	if breaks {
		for i, c := range data {
			if c == '\n' || c == '\r' {
				data[i] = ' '
			}
		}
	}
	switch {
	case s.upstream == Chat && s.client == Chat:
		if !s.keepView || !directViews || !s.viewChunk(d) {
			s.passChunk(d)
		}
	case s.upstream == Chat:
		s.chatChunk(d)
	default:
		s.messagesEvent(d)
	}
}

// badEvent fails the stream on an upstream event that is not a JSON object.
func (s *Stream) badEvent() {
	if b2s(s.event) == "error" {
		s.fail(UpstreamError(http.StatusBadGateway, s.eventData()))
		return
	}
	s.fail(NewError(http.StatusBadGateway, APIError, "the upstream sent an event that is not a JSON object"))
}

// streamError turns an upstream error event's payload into an Error.
func streamError(d string) *Error {
	status := http.StatusBadGateway
	errv := field(d, "error")
	if n, ok := toInt(field(errv, "code")); ok && n >= 400 && n < 600 {
		status = int(n)
	}
	e := UpstreamError(status, []byte(d))
	if t := field(errv, "type"); isStr(t) && knownKind(inner(t)) {
		e.Kind = ErrorKind(inner(t))
	} else if status == http.StatusBadGateway {
		e.Kind = APIError
	}
	return e
}

// keepAlive passes an upstream keep-alive (a ping event, an SSE comment) on
// in the client's grammar, so that idle timeouts on the way do not cut a long
// reasoning phase: a ping event for messages clients (only after
// message_start, which must come first), a comment line for chat clients.
func (s *Stream) keepAlive() {
	if s.done {
		return
	}
	if s.client == Messages {
		if s.m.started {
			s.out = append(s.out, "event: ping\ndata: {\"type\":\"ping\"}\n\n"...)
		}
		return
	}
	s.out = append(s.out, ": keep-alive\n\n"...)
}

// fail ends the client's stream with an error event in its format.
func (s *Stream) fail(e *Error) {
	if s.done {
		return
	}
	s.done = true
	if s.client == Messages {
		s.out = append(s.out, "event: error\ndata: "...)
		s.out = e.AppendBody(s.out, Messages)
		s.out = append(s.out, "\n\n"...)
		return
	}
	s.out = append(s.out, "data: "...)
	s.out = e.AppendBody(s.out, Chat)
	s.out = append(s.out, "\n\ndata: [DONE]\n\n"...)
}

// stopReason is why the model stopped, in neither format's words.
type stopReason uint8

const (
	stopNone stopReason = iota
	stopEnd
	stopMax
	stopTool
	stopSeq
	stopRefusal
	stopPause
)

var (
	messagesStop = [...]string{stopNone: "end_turn", stopEnd: "end_turn", stopMax: "max_tokens", stopTool: "tool_use", stopSeq: "stop_sequence", stopRefusal: "refusal", stopPause: "pause_turn"}
	chatStop     = [...]string{stopNone: "stop", stopEnd: "stop", stopMax: "length", stopTool: "tool_calls", stopSeq: "stop", stopRefusal: "content_filter", stopPause: "stop"}
)

func chatFinish(lit string) stopReason {
	switch inner(lit) {
	case "length":
		return stopMax
	case "tool_calls", "function_call":
		return stopTool
	case "content_filter":
		return stopRefusal
	}
	return stopEnd
}

func messagesFinish(lit string) stopReason {
	switch inner(lit) {
	case "max_tokens", "model_context_window_exceeded":
		return stopMax
	case "tool_use":
		return stopTool
	case "stop_sequence":
		return stopSeq
	case "refusal":
		return stopRefusal
	case "pause_turn":
		return stopPause
	}
	return stopEnd
}

// finalStop settles the stop reason: a turn cut by max_tokens stays cut even
// when it holds tool calls; a turn with tool calls that the upstream called
// "stop" (Ollama, some llama.cpp builds) is a tool turn.
func (s *Stream) finalStop() stopReason {
	r := s.stop
	if r == stopNone {
		r = stopEnd
	}
	if r == stopEnd && s.toolCount > 0 {
		r = stopTool
	}
	if r == stopTool && s.toolCount == 0 && s.dropped > 0 {
		r = stopEnd // its only calls were dropped: nothing to run
	}
	if r == stopEnd && s.refusal {
		r = stopRefusal
	}
	return r
}

// onText takes answer text (a string literal) through the think parser.
func (s *Stream) onText(lit string) {
	if emptyStr(lit) || !isStr(lit) {
		return
	}
	if s.think.passes(lit) {
		s.emitText(lit)
		return
	}
	s.scratch = appendUnescaped(s.scratch[:0], inner(lit))
	s.rbuf, s.tbuf = s.rbuf[:0], s.tbuf[:0]
	s.think.feed(s.scratch, &s.rbuf, &s.tbuf)
	s.emitSplit()
}

// onReasoning takes reasoning the upstream separated itself.
func (s *Stream) onReasoning(lit string) {
	if emptyStr(lit) || !isStr(lit) {
		return
	}
	s.tbuf = s.tbuf[:0]
	s.think.off(&s.tbuf)
	if len(s.tbuf) > 0 {
		s.rbuf = s.rbuf[:0]
		s.emitSplit()
	}
	s.emitReasoning(lit)
}

// flushThink releases what the think parser holds.
func (s *Stream) flushThink() {
	s.rbuf, s.tbuf = s.rbuf[:0], s.tbuf[:0]
	s.think.flush(&s.rbuf, &s.tbuf)
	s.emitSplit()
}

func (s *Stream) emitSplit() {
	if len(s.rbuf) > 0 {
		s.enc = appendStr(s.enc[:0], b2s(s.rbuf))
		s.emitReasoning(b2s(s.enc))
	}
	if len(s.tbuf) > 0 {
		s.enc = appendStr(s.enc[:0], b2s(s.tbuf))
		s.emitText(b2s(s.enc))
	}
}

func (s *Stream) emitText(lit string) {
	s.otherBytes += int64(len(lit) - 2)
	if s.client == Messages {
		s.mText(lit)
	} else {
		s.cDelta(`{"content":`, lit)
	}
}

func (s *Stream) emitReasoning(lit string) {
	s.reasonBytes += int64(len(lit) - 2)
	if s.client == Messages {
		s.mThinking(lit)
	} else {
		s.cDelta(`{"reasoning_content":`, lit)
	}
}

func (s *Stream) final() {
	if s.done {
		return
	}
	s.flushThink()
	if s.client == Messages {
		s.mFinal()
	} else {
		s.cFinal()
	}
	s.done = true
}

// setID keeps the upstream's response id (decoded).
func (s *Stream) setID(lit string) {
	s.id = s.id[:0]
	if isStr(lit) {
		s.id = appendUnescaped(s.id, inner(lit))
	}
}

func (s *Stream) setModel(lit string) {
	if isStr(lit) {
		s.model = append(s.model[:0], lit...)
	} else if len(s.model) == 0 {
		s.model = append(s.model, `""`...)
	}
}

// appendID writes the response id in the client's style: msg_… for
// messages, chatcmpl-… for chat, derived from the upstream's id.
func appendID(dst []byte, f Format, id []byte) []byte {
	dst = append(dst, '"')
	var prefix string
	var rest []byte
	switch f {
	case Messages:
		prefix = "msg_"
		rest = bytes.TrimPrefix(id, []byte("chatcmpl-"))
		rest = bytes.TrimPrefix(rest, []byte(prefix))
	default:
		prefix = "chatcmpl-"
		rest = bytes.TrimPrefix(id, []byte("msg_"))
		rest = bytes.TrimPrefix(rest, []byte(prefix))
	}
	dst = append(dst, prefix...)
	if len(rest) == 0 {
		dst = appendRandom(dst, 24)
	} else {
		dst = appendEscaped(dst, b2s(rest))
	}
	return append(dst, '"')
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func appendRandom(dst []byte, n int) []byte {
	for n > 0 {
		r := rand.Uint64()
		for i := 0; i < 10 && n > 0; i++ {
			dst = append(dst, idAlphabet[r%62])
			r /= 62
			n--
		}
	}
	return dst
}

// appendToolID writes a tool call id, or a fresh one when the upstream gave none.
func appendToolID(dst []byte, lit []byte, f Format) []byte {
	if len(lit) > 2 {
		return append(dst, lit...)
	}
	if f == Messages {
		dst = append(dst, `"toolu_`...)
	} else {
		dst = append(dst, `"call_`...)
	}
	dst = appendRandom(dst, 24)
	return append(dst, '"')
}
