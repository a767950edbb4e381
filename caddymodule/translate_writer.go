package caddymodule

// The translator's response writer: it takes the upstream's response as
// reverse_proxy writes it and sends the client the same response in the
// client's format, event by event for a stream, whole for a body (held, then
// translated at the end). The module that sets it up is translate.go.

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/timeblock/timeblock/translate"
)

// bodyPool recycles the buffers responses are held and translated in: they
// live only until finish writes them, so they need none of the holds that
// request bodies, read by the transport, take (body_buffers.go).
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// pooledStream is a Stream with the buffer its events are written into,
// recycled together.
type pooledStream struct {
	translate.Stream
	out []byte
}

// streamPool recycles Streams and their buffers.
var streamPool = sync.Pool{New: func() any { return new(pooledStream) }}

// maxPooledBody keeps one huge request from pinning its buffer in the pool.
const maxPooledBody = 1 << 20

// putPooled gives buf, taken from bodyPool as bp and grown since, back to
// the pool, unless it grew too large to keep.
func putPooled(bp *[]byte, buf []byte) {
	if cap(buf) <= maxPooledBody {
		*bp = buf[:0]
		bodyPool.Put(bp)
	}
}

// writer returns the translateWriter kept in fb, or a new one when that one
// is taken.
func (fb *forwardedBody) writer() *translateWriter {
	if fb.twTaken {
		return new(translateWriter)
	}
	fb.twTaken = true
	return &fb.tw
}

// writer modes, settled when the upstream's status and headers arrive
const (
	modeUndecided uint8 = iota
	modeStream          // 2xx text/event-stream: translated event by event
	modeWhole           // 2xx body: held, translated at the end
	modeError           // non-2xx body: held, rewritten in the client's error format
	modeRaw             // compressed or otherwise unreadable: passed through
)

// maxHeldBody bounds a non-streaming response held for translation.
const maxHeldBody = 64 << 20

// translateWriter rewrites the upstream's response for the client.
type translateWriter struct {
	caddyhttp.ResponseWriterWrapper
	client, upstream translate.Format
	hv               headerValues // the values of the response headers set here
	req              translate.Request
	cfg              *translate.Config

	mode        uint8
	status      int
	wroteHeader bool
	held        []byte // a body held for finish, in heldBuf from bodyPool
	heldBuf     *[]byte
	stream      *pooledStream
	// inTokens, outTokens: the upstream's usage, read by finish.
	inTokens, outTokens int64
	dropped             int // tool calls without a name the stream left out (finish)
	overflow            bool

	// A stream's headers wait up to headerHold for its first event; mu
	// keeps the timer's flush apart from that first write and from finish.
	mu        sync.Mutex
	sentEvent bool // the first event was written, or finish began
	holding   bool // the header timer was started
	hold      *time.Timer
	// unflushed: events were written since the last flush. Like any
	// ResponseWriter state it is not for concurrent use: reverse_proxy's
	// early flush takes the same lock as its writes.
	unflushed bool
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (tw *translateWriter) Unwrap() http.ResponseWriter {
	return tw.ResponseWriterWrapper.ResponseWriter
}

// WriteHeader settles how the body will be handled. Streams start at once;
// whole bodies wait for finish, which knows the translated length.
func (tw *translateWriter) WriteHeader(status int) {
	if tw.mode != modeUndecided {
		return
	}
	if status < 200 { // 1xx: informational, pass on
		tw.ResponseWriterWrapper.WriteHeader(status)
		return
	}
	tw.status = status
	h := tw.Header()
	if ce := headerValue(h, "Content-Encoding"); ce != "" && ce != "identity" {
		tw.mode = modeRaw
		tw.wroteHeader = true
		tw.ResponseWriterWrapper.WriteHeader(status)
		return
	}
	delete(h, "Content-Length") // a held body's is set by finish
	switch {
	case status >= 300:
		tw.mode = modeError
	case isEventStream(headerValue(h, "Content-Type")):
		tw.mode = modeStream
		tw.stream = streamPool.Get().(*pooledStream)
		tw.stream.Reset(tw.client, tw.upstream, tw.req, tw.cfg)
		tw.hv.set(h, "Content-Type", "text/event-stream; charset=utf-8")
		tw.hv.set(h, "Cache-Control", "no-cache")
		tw.hv.set(h, "X-Accel-Buffering", "no")
		tw.wroteHeader = true
		tw.ResponseWriterWrapper.WriteHeader(status)
	default:
		tw.mode = modeWhole
	}
}

// isEventStream tells whether a Content-Type is text/event-stream, with or
// without parameters, without the allocations of mime.ParseMediaType.
func isEventStream(ct string) bool {
	const sse = "text/event-stream"
	ct = strings.TrimLeft(ct, " \t")
	if len(ct) < len(sse) || !strings.EqualFold(ct[:len(sse)], sse) {
		return false
	}
	rest := strings.TrimLeft(ct[len(sse):], " \t")
	return rest == "" || rest[0] == ';'
}

// Write takes upstream body bytes.
func (tw *translateWriter) Write(p []byte) (int, error) {
	if tw.mode == modeUndecided {
		tw.WriteHeader(http.StatusOK)
	}
	switch tw.mode {
	case modeStream:
		return tw.writeStream(p)
	case modeWhole, modeError:
		if len(tw.held)+len(p) > maxHeldBody {
			tw.overflow = true
			return len(p), nil
		}
		if tw.heldBuf == nil {
			tw.heldBuf = bodyPool.Get().(*[]byte)
			tw.held = (*tw.heldBuf)[:0]
		}
		tw.held = append(tw.held, p...)
		return len(p), nil
	}
	return tw.ResponseWriterWrapper.Write(p)
}

// writeStream translates upstream event bytes and sends what they produce.
func (tw *translateWriter) writeStream(p []byte) (int, error) {
	st, n := tw.stream, len(p)
	for len(p) > 0 {
		part := p
		if !tw.sentEvent {
			// Until the client has its first event, translate a line at a
			// time: one read from a fast upstream can hold dozens of events,
			// and translating them all first would hold back the first byte.
			if i := bytes.IndexByte(p, '\n'); i >= 0 {
				part = p[:i+1]
			}
		}
		p = p[len(part):]
		st.out = st.Write(st.out[:0], part)
		if len(st.out) == 0 {
			continue
		}
		if !tw.sentEvent {
			// The header timer must not flush while this first write is under
			// way, and is not needed after it.
			tw.mu.Lock()
			tw.sentEvent = true
			if tw.hold != nil {
				tw.hold.Stop()
			}
			_, err := tw.ResponseWriterWrapper.Write(st.out)
			tw.mu.Unlock()
			if err != nil {
				return 0, err
			}
		} else if _, err := tw.ResponseWriterWrapper.Write(st.out); err != nil {
			return 0, err
		}
		tw.unflushed = true
		if err := tw.flush(); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// flush sends what was written to the client. Events are flushed as they
// are written, so the flush reverse_proxy asks for after each upstream
// read finds nothing left and costs nothing (a flush through Caddy's
// writers also resets the connection's write deadline).
func (tw *translateWriter) flush() error {
	tw.unflushed = false
	err := http.NewResponseController(tw.ResponseWriterWrapper.ResponseWriter).Flush()
	if errors.Is(err, http.ErrNotSupported) {
		return nil
	}
	return err
}

// headerHold is how long a stream's headers wait for its first event when
// reverse_proxy asks to flush them early. An upstream that sends its headers
// with its first chunk (an instant one, or one that buffers them) has the
// first event ready within microseconds: headers and event then leave in one
// packet, as they do through a bare proxy, instead of two that the client
// must wake up for one after the other. An upstream still computing its
// first token lets the headers go after headerHold. A variable only so that a
// test of the order of the first writes can hold longer than any scheduling
// delay of a loaded machine.
var headerHold = time.Millisecond

// releaseHeaders flushes held headers when no event came within headerHold.
func (tw *translateWriter) releaseHeaders() {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.sentEvent {
		return
	}
	_ = http.NewResponseController(tw.ResponseWriterWrapper.ResponseWriter).Flush() // a broken client shows in the next Write
}

// endHold stops the header timer for good: a timer already firing finds
// sentEvent set and leaves the writer alone.
func (tw *translateWriter) endHold() {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.hold != nil {
		tw.hold.Stop()
	}
	tw.sentEvent = true
}

// ReadFrom goes through Write, so that io.Copy cannot bypass translation.
func (tw *translateWriter) ReadFrom(r io.Reader) (int64, error) {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := r.Read(buf)
		if k > 0 {
			if _, werr := tw.Write(buf[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// FlushError flushes what has been written: the translated events of a
// stream. A held body is not flushed, since its headers are not final.
func (tw *translateWriter) FlushError() error {
	if tw.mode != modeStream && tw.mode != modeRaw {
		return nil
	}
	if tw.mode == modeStream {
		tw.mu.Lock()
		if !tw.sentEvent {
			// Only headers so far: hold them briefly for the first event.
			// The timer starts outside the lock, which the first event's
			// write takes; releaseHeaders checks again under it.
			arm := !tw.holding
			tw.holding = true
			tw.mu.Unlock()
			if arm {
				t := time.AfterFunc(headerHold, tw.releaseHeaders)
				tw.mu.Lock()
				tw.hold = t
				tw.mu.Unlock()
			}
			return nil
		}
		tw.mu.Unlock()
		if !tw.unflushed {
			return nil
		}
	}
	return tw.flush()
}

// finish ends the response: the closing events of a stream (an error event
// when the upstream broke off or next failed), or the translated body.
func (tw *translateWriter) finish(nextErr error) error {
	rw := &tw.ResponseWriterWrapper
	switch tw.mode {
	case modeStream:
		// The timer leaves the writer alone from here on, and FlushError
		// flushes whatever is held.
		tw.endHold()
		st := tw.stream
		defer func() {
			tw.inTokens, tw.outTokens, _, _ = st.Usage()
			tw.dropped = st.DroppedCalls()
			if cap(st.out) > maxPooledBody {
				st.out = nil
			}
			streamPool.Put(st)
			tw.stream = nil
		}()
		if nextErr != nil {
			st.out = st.Abort(st.out[:0], translate.NewError(http.StatusBadGateway, translate.APIError,
				"the upstream connection failed during the response"))
		} else {
			st.out = st.Close(st.out[:0])
		}
		if len(st.out) == 0 {
			return nil
		}
		if _, err := rw.Write(st.out); err != nil {
			return err
		}
		return tw.flush()
	case modeWhole, modeError:
		if tw.heldBuf != nil {
			defer putPooled(tw.heldBuf, tw.held)
		}
		if nextErr != nil {
			return nil // nothing was sent: Caddy's error handling answers
		}
		h := rw.Header()
		status := tw.status
		if len(tw.held) == 0 && (status == http.StatusNoContent || status == http.StatusNotModified) {
			tw.wroteHeader = true
			rw.WriteHeader(status)
			return nil
		}
		bp := bodyPool.Get().(*[]byte)
		body := (*bp)[:0]
		switch {
		case tw.overflow:
			e := translate.NewError(http.StatusBadGateway, translate.APIError, "the upstream response is too large to translate")
			status, body = e.Status, e.Body(tw.client)
		case tw.mode == modeError:
			body = translate.TranslateErrorBody(tw.client, tw.upstream, status, tw.held, body)
		default:
			tw.inTokens, tw.outTokens = translate.ResponseUsage(tw.upstream, tw.held)
			var terr *translate.Error
			body, terr = translate.TranslateResponse(tw.client, tw.upstream, tw.held, tw.req, tw.cfg, body)
			if terr != nil {
				status, body = terr.Status, terr.Body(tw.client)
			}
		}
		tw.hv.set(h, "Content-Type", "application/json")
		tw.hv.setLength(h, len(body))
		tw.wroteHeader = true
		rw.WriteHeader(status)
		_, err := rw.Write(body)
		putPooled(bp, body)
		return err
	}
	return nil
}

// noteUsage leaves the tokens the upstream reported in fb for the gate. A
// stream that finish did not close (reverse_proxy panicked when the client
// left) reports what it counted so far.
func (tw *translateWriter) noteUsage(fb *forwardedBody) {
	if tw.stream != nil {
		tw.inTokens, tw.outTokens, _, _ = tw.stream.Usage()
	}
	fb.inputTokens, fb.outputTokens = tw.inTokens, tw.outTokens
}

// Interface guards
var (
	_ http.ResponseWriter = (*translateWriter)(nil)
	_ io.ReaderFrom       = (*translateWriter)(nil)
)
