package translate

// geminiStream writes a Gemini client's stream (SSE with ?alt=sse: each
// event a GenerateContentResponse) from chat chunks. (Being written.)
type geminiStream struct{}

func (s *Stream) geminiSink() chatSink {
	if s.gx == nil {
		s.gx = new(geminiStream)
	}
	return s.gx
}

func (x *geminiStream) reset(Format, Request, *Config)          {}
func (x *geminiStream) chunk(s *Stream, r *chunkRead, d string) {}
func (x *geminiStream) final(s *Stream)                         { s.done = true }
func (x *geminiStream) fail(s *Stream, e *Error)                { s.done = true }
func (x *geminiStream) droppedCalls() int                       { return 0 }
