package translate

// Sinks. A client format without a direct writer (Responses, Gemini) is
// written from chat chunks: an inner Stream, a chat client's, turns the
// upstream's events into normalised chat chunks (reasoning split out, tool
// calls numbered, nameless calls dropped, usage asked for), and the
// format's chatSink writes its own events from the readings of them. A
// chunk the inner chat pass-through read for the sink (its view,
// stream_view.go) is not read again; the rest (a messages upstream's,
// rewritten as chat) are read once here.

import "bytes"

// A chatSink writes a client's stream from chat chunks; it appends to the
// outer Stream's out, and sets its done when the client's stream ends.
type chatSink interface {
	// reset readies the sink for another response.
	reset(upstream Format, req Request, cfg *Config)
	// chunk takes the chat chunk d, read into r.
	chunk(s *Stream, r *chunkRead, d string)
	// final takes the end of the chat stream ([DONE]).
	final(s *Stream)
	// fail ends the client's stream with e.
	fail(s *Stream, e *Error)
	// droppedCalls counts the tool calls without a name it dropped.
	droppedCalls() int
}

// pivot is the inner chat stream of a sink's client.
type pivot struct {
	inner Stream
	buf   []byte // the inner stream's chat events, one call's worth
	// comments: the client takes SSE comments (keep-alives) (codec.comments).
	comments bool
}

// resetSink readies the sink of a client that has one (codec.sink).
func (s *Stream) resetSink(c *codec, upstream Format, req Request, cfg *Config) {
	if s.pv == nil {
		s.pv = new(pivot)
	}
	in := req
	in.IncludeUsage = true // the sinks report usage at the end
	s.pv.inner.Reset(Chat, upstream, in, cfg)
	s.pv.inner.keepView = true
	s.pv.buf = s.pv.buf[:0]
	s.pv.comments = c.comments
	s.sink = c.sink(s)
	s.sink.reset(upstream, req, cfg)
}

func (s *Stream) sinkWrite(dst, p []byte) []byte {
	pv := s.pv
	pv.inner.takeViews() // offsets in the last call's output
	pv.buf = pv.inner.Write(pv.buf[:0], p)
	return s.sinkDrain(dst)
}

func (s *Stream) sinkClose(dst []byte) []byte {
	pv := s.pv
	pv.inner.takeViews()
	pv.buf = pv.inner.Close(pv.buf[:0])
	dst = s.sinkDrain(dst)
	if !s.done { // the inner stream always ends; this is a safety net
		s.out = dst
		s.sink.fail(s, NewError(502, APIError, "the upstream ended the stream before the response was complete"))
		dst, s.out = s.out, nil
	}
	return dst
}

func (s *Stream) sinkAbort(dst []byte, e *Error) []byte {
	pv := s.pv
	pv.inner.takeViews()
	pv.buf = pv.inner.Abort(pv.buf[:0], e)
	return s.sinkDrain(dst)
}

// sinkDrain gives the sink the chat events in pv.buf.
func (s *Stream) sinkDrain(dst []byte) []byte {
	s.out = dst
	pv := s.pv
	b := pv.buf
	views := pv.inner.views
	for len(b) > 0 && !s.done {
		at := len(pv.buf) - len(b)
		if len(views) > 0 && at+6 == views[0].at { // "data: " and the chunk
			v := &views[0]
			s.sink.chunk(s, &v.r, b2s(pv.buf[v.at:v.end]))
			b, views = pv.buf[v.end+2:], views[1:]
			continue
		}
		i := bytes.Index(b, sseEnd)
		if i < 0 {
			break // the chat writer writes whole events only
		}
		ev := b[:i]
		b = b[i+2:]
		switch {
		case len(ev) > 0 && ev[0] == ':': // keep-alive
			if s.pv.comments {
				s.out = append(s.out, ev...)
				s.out = append(s.out, sseEnd...)
			}
		case len(ev) > 6 && b2s(ev[:6]) == "data: ":
			switch d := b2s(ev[6:]); {
			case d == "[DONE]":
				s.sink.final(s)
			default:
				s.sinkChunk(d)
			}
		}
	}
	dst = s.out
	s.out = nil
	return dst
}

// sinkChunk reads the chat chunk d and gives it to the sink.
func (s *Stream) sinkChunk(d string) {
	s.cr.read(d)
	s.sink.chunk(s, &s.cr, d)
}
