package main

// The instant upstream: an in-process chat-completions server that answers
// as fast as it can, so that what the benchmark measures is the proxy. It
// speaks the way vLLM does: a JSON completion, or an SSE stream of one chunk
// per token, each written and flushed on its own, then a finish chunk, a
// usage chunk and [DONE].

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

const benchModel = "bench-model"

// Request headers that pick the upstream's behaviour; the gate and
// reverse_proxy pass them through unchanged.
const (
	// modeHeader "paced" sends the stream's tokens pacedInterval apart and
	// records when each was flushed; "slow" sends a token a second until the
	// client leaves; "gap" pauses firstChunkGap after the first chunk.
	modeHeader = "X-Bench-Mode"
	// lengthHeader "long" makes a stream longFactor times as many token
	// chunks long: a stream's cost per chunk is what a long stream costs
	// beyond a short one, apart from what any stream costs once.
	lengthHeader = "X-Bench-Length"
)

// longFactor is how many times longer a "long" stream is.
const longFactor = 5

// firstChunkGap is how long a "gap" stream waits after its first chunk, as a
// model does between tokens. Without it, an instant upstream writes the whole
// stream while the first chunk is still on its way, and the time to the first
// byte measures how fast the rest is pumped through (even calling the
// upstream directly, the client's first read comes about when the upstream
// has written its last chunk).
const firstChunkGap = time.Millisecond

type upstream struct {
	chunks     int
	lean       bool     // a short non-streaming answer (leanWords tokens)
	completion []byte   // the non-streaming answer
	head       [][]byte // role chunk
	tokens     [][]byte // one chunk per token, enough for a long stream
	tail       [][]byte // finish, usage, [DONE]
	longTail   [][]byte // the same for a long stream

	srv *http.Server
	url string

	pacedMu   sync.Mutex
	pacedSent []time.Time // when each token of the current paced stream was sent

	bufs sync.Pool
}

func startUpstream(chunks int, lean bool) (*upstream, error) {
	u := &upstream{chunks: chunks, lean: lean}
	u.bufs.New = func() any { b := new(bytes.Buffer); b.Grow(4 << 10); return b }
	u.build()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	u.url = "http://" + ln.Addr().String()
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go u.srv.Serve(ln)
	return u, nil
}

func (u *upstream) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if u.srv.Shutdown(ctx) != nil {
		u.srv.Close()
	}
}

// leanWords is the length of a lean upstream's non-streaming answer: with
// it the completion is about 300 bytes, as a short answer from a model
// server is, so that the proxy's fixed cost per request is not hidden by
// the cost of relaying a long one.
const leanWords = 4

// words are the reply's tokens, repeated as needed.
var words = []string{" Packets", " drift", " through", " the", " night", ",", " one", " server", " breathes", " while",
	" another", " rests", ";", " the", " balancer", " hums", " its", " quiet", " round", "-robin", " song", "."}

func (u *upstream) build() {
	const id = `"id":"chatcmpl-5f0c1b7e9a2d4c3b8e6f","object":"chat.completion.chunk","created":1767225600,"model":"` + benchModel + `"`
	u.head = [][]byte{[]byte(`data: {` + id + `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n")}
	var text bytes.Buffer
	for i := range u.chunks * longFactor {
		w := words[i%len(words)]
		if i < u.chunks {
			text.WriteString(w)
		}
		u.tokens = append(u.tokens, []byte(`data: {`+id+`,"choices":[{"index":0,"delta":{"content":`+strconv.Quote(w)+`},"logprobs":null,"finish_reason":null}]}`+"\n\n"))
	}
	usage := func(n int) string {
		return `{"prompt_tokens":31,"total_tokens":` + strconv.Itoa(31+n) + `,"completion_tokens":` + strconv.Itoa(n) + `}`
	}
	tail := func(n int) [][]byte {
		return [][]byte{
			[]byte(`data: {` + id + `,"choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}` + "\n\n"),
			[]byte(`data: {` + id + `,"choices":[],"usage":` + usage(n) + `}` + "\n\n"),
			[]byte("data: [DONE]\n\n"),
		}
	}
	u.tail, u.longTail = tail(u.chunks), tail(u.chunks*longFactor)
	answer, n := text.String(), u.chunks
	if u.lean {
		answer, n = strings.Join(words[:leanWords], ""), leanWords
	}
	u.completion = []byte(`{"id":"chatcmpl-5f0c1b7e9a2d4c3b8e6f","object":"chat.completion","created":1767225600,"model":"` + benchModel +
		`","choices":[{"index":0,"message":{"role":"assistant","content":` + strconv.Quote(answer) +
		`,"tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":` + usage(n) + `,"prompt_logprobs":null}`)
}

// pacedToken is the content of token i of a paced stream, which the client
// finds again in whatever format it receives.
func pacedToken(i int) string { return " tok" + strconv.Itoa(i) + "." }

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	buf := u.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	_, err := io.Copy(buf, r.Body)
	stream := bytes.Contains(buf.Bytes(), []byte(`"stream":true`))
	u.bufs.Put(buf)
	if err != nil {
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if !stream {
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{strconv.Itoa(len(u.completion))}
		w.Write(u.completion)
		return
	}
	h := w.Header()
	h["Content-Type"] = []string{"text/event-stream; charset=utf-8"}
	h["Cache-Control"] = []string{"no-cache"}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for _, b := range u.head {
		if !send(b) {
			return
		}
	}
	tokens, tail := u.tokens[:u.chunks], u.tail
	if r.Header.Get(lengthHeader) == "long" {
		tokens, tail = u.tokens, u.longTail
	}
	switch r.Header.Get(modeHeader) {
	case "gap":
		time.Sleep(firstChunkGap)
		for _, b := range tokens {
			if !send(b) {
				return
			}
		}
	case "paced":
		u.paced(r.Context(), send)
	case "slow":
		u.slow(r.Context(), send)
	default:
		for _, b := range tokens {
			if !send(b) {
				return
			}
		}
	}
	for _, b := range tail {
		if !send(b) {
			return
		}
	}
}

// A paced stream: pacedTokens tokens, upstreamPace apart.
const (
	pacedTokens  = 10
	upstreamPace = 20 * time.Millisecond
)

// paced sends pacedTokens tokens upstreamPace apart and notes when each one
// was sent. One paced stream runs at a time.
func (u *upstream) paced(ctx context.Context, send func([]byte) bool) {
	u.pacedMu.Lock()
	defer u.pacedMu.Unlock()
	u.pacedSent = u.pacedSent[:0]
	for i := range pacedTokens {
		select {
		case <-ctx.Done():
			return
		case <-time.After(upstreamPace):
		}
		chunk := `data: {"id":"chatcmpl-paced","object":"chat.completion.chunk","created":1767225600,"model":"` + benchModel +
			`","choices":[{"index":0,"delta":{"content":"` + pacedToken(i) + `"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
		u.pacedSent = append(u.pacedSent, time.Now())
		if !send([]byte(chunk)) {
			return
		}
	}
}

// sentAt returns the send times of the last paced stream's tokens.
func (u *upstream) sentAt() []time.Time {
	u.pacedMu.Lock()
	defer u.pacedMu.Unlock()
	return append([]time.Time(nil), u.pacedSent...)
}

// slow sends one token a second until the client goes away (at most 10
// minutes), the way a long generation holds a connection open.
func (u *upstream) slow(ctx context.Context, send func([]byte) bool) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for i := 0; i < 600; i++ {
		if !send(u.tokens[i%len(u.tokens)]) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
