package main

// The load generator: a fixed number of client goroutines sending one
// variant's request as fast as they get answers, for a time slice; the
// benchmark runs every variant's slice in turn, round after round.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// variant is one way of sending an inference request.
type variant struct {
	name   string
	url    string
	body   []byte
	header http.Header
	stream bool
	// long: a stream longFactor times as long (lengthHeader), run only for
	// its cost per chunk.
	long bool
	// gapHeader, for streams, asks the upstream to pause after the first
	// chunk: the concurrency-1 pass uses it to time the first byte alone.
	gapHeader http.Header
	// base names the variant this one is compared with: the upstream called
	// directly for the bare proxy, the bare proxy for the gate ("" for the
	// upstream itself).
	base string
	// caddy is false for the upstream called directly.
	caddy bool
	// target marks the variants issue 6 sets targets for.
	target bool
	check  func(body []byte) error
}

// Request bodies: small and ordinary, what an SDK sends for a short chat.
const (
	chatBody = `{"model":"` + benchModel + `","messages":[{"role":"system","content":"You are a concise assistant."},` +
		`{"role":"user","content":"Write a haiku about load balancers."}],"max_tokens":256,"temperature":0.7}`
	chatStreamBody = `{"model":"` + benchModel + `","messages":[{"role":"system","content":"You are a concise assistant."},` +
		`{"role":"user","content":"Write a haiku about load balancers."}],"max_tokens":256,"temperature":0.7,` +
		`"stream":true,"stream_options":{"include_usage":true}}`
	messagesBody = `{"model":"` + benchModel + `","max_tokens":256,"system":"You are a concise assistant.",` +
		`"messages":[{"role":"user","content":"Write a haiku about load balancers."}],"temperature":0.7}`
	messagesStreamBody = `{"model":"` + benchModel + `","max_tokens":256,"system":"You are a concise assistant.",` +
		`"messages":[{"role":"user","content":"Write a haiku about load balancers."}],"temperature":0.7,"stream":true}`
	responsesBody = `{"model":"` + benchModel + `","instructions":"You are a concise assistant.",` +
		`"input":[{"role":"user","content":"Write a haiku about load balancers."}],"max_output_tokens":256,"temperature":0.7}`
	responsesStreamBody = `{"model":"` + benchModel + `","instructions":"You are a concise assistant.",` +
		`"input":[{"role":"user","content":"Write a haiku about load balancers."}],"max_output_tokens":256,"temperature":0.7,"stream":true}`
	// The Gemini API names the model and streaming in the path: one body.
	geminiBody = `{"systemInstruction":{"parts":[{"text":"You are a concise assistant."}]},` +
		`"contents":[{"role":"user","parts":[{"text":"Write a haiku about load balancers."}]}],` +
		`"generationConfig":{"maxOutputTokens":256,"temperature":0.7}}`
)

// bodies are the request bodies of a run.
type bodies struct {
	chat, chatStream, messages, messagesStream, responses, responsesStream, gemini []byte
}

// makeBodies returns the small bodies, or with history > 0 the same requests
// after a conversation of about that many bytes (alternating user and
// assistant turns), as an agent sends them.
func makeBodies(history int) bodies {
	if history <= 0 {
		return bodies{[]byte(chatBody), []byte(chatStreamBody), []byte(messagesBody), []byte(messagesStreamBody),
			[]byte(responsesBody), []byte(responsesStreamBody), []byte(geminiBody)}
	}
	const para = "The build failed because the linker could not find the symbol init_module; " +
		"check the Makefile and the include paths, then run make again with V=1 to see the full command line. "
	var turns, geminiTurns strings.Builder
	for i := 0; turns.Len() < history; i++ {
		role, geminiRole := "user", "user"
		if i%2 == 1 {
			role, geminiRole = "assistant", "model"
		}
		fmt.Fprintf(&turns, `{"role":%q,"content":%q},`, role, strings.Repeat(para, 3))
		fmt.Fprintf(&geminiTurns, `{"role":%q,"parts":[{"text":%q}]},`, geminiRole, strings.Repeat(para, 3))
	}
	// Each body's messages array opens with the system turn (chat) or the
	// first user turn (messages); the history goes right after "messages":[.
	with := func(body string, after string) []byte {
		i := strings.Index(body, after) + len(after)
		return []byte(body[:i] + turns.String() + body[i:])
	}
	chatAfter := `"messages":[{"role":"system","content":"You are a concise assistant."},`
	return bodies{
		with(chatBody, chatAfter), with(chatStreamBody, chatAfter),
		with(messagesBody, `"messages":[`), with(messagesStreamBody, `"messages":[`),
		with(responsesBody, `"input":[`), with(responsesStreamBody, `"input":[`),
		[]byte(strings.Replace(geminiBody, `"contents":[`, `"contents":[`+geminiTurns.String(), 1)),
	}
}

const (
	vDirect       = "upstream direct"
	vDirectStream = "upstream direct stream"
	vProxy        = "reverse_proxy"
	vProxyStream  = "reverse_proxy stream"
	vDirectLong   = "upstream direct long stream"
	vProxyLong    = "reverse_proxy long stream"
	// vProxyBuffered reads the whole body before forwarding it, as the gate
	// must: the first byte of a long body is compared with it too.
	vProxyBuffered = "reverse_proxy buffered stream"
)

// longName is the name of the long-stream variant of the stream variant
// name: its added CPU beyond name's, over the extra chunks, is the cost of
// a chunk without what a stream costs once.
func longName(name string) string { return strings.Replace(name, " stream", " long stream", 1) }

// long returns v as a long stream (lengthHeader), compared with base.
func long(v *variant, base string, check func([]byte) error) *variant {
	l := *v
	l.name, l.base, l.target, l.long, l.check = longName(v.name), base, false, true, check
	l.header = v.header.Clone()
	l.header.Set(lengthHeader, "long")
	return &l
}

func chatHeader(key string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	return h
}

func geminiHeader(key string) http.Header {
	return http.Header{"Content-Type": {"application/json"}, "X-Goog-Api-Key": {key}}
}

func messagesHeader(key string) http.Header {
	return http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {key}, "Anthropic-Version": {"2023-06-01"}}
}

// variants lists what one run compares. The bare reverse_proxy gets the
// same key header as the gate, so both parse the same request.
func variants(up *upstream, c *caddyProc, k *keys, b bodies) []*variant {
	chatPath, messagesPath, responsesPath := "/v1/chat/completions", "/compat/v1/messages", "/v1/responses"
	vs := []*variant{
		{name: vDirect, url: up.url + chatPath, body: b.chat, header: chatHeader(k.single), check: checkChat},
		{name: vDirectStream, url: up.url + chatPath, body: b.chatStream, header: chatHeader(k.single), stream: true, check: checkChatStream(up.chunks)},
		{name: vProxy, url: c.proxyURL + chatPath, body: b.chat, header: chatHeader(k.single), base: vDirect, caddy: true, check: checkChat},
		{name: vProxyStream, url: c.proxyURL + chatPath, body: b.chatStream, header: chatHeader(k.single), stream: true, base: vDirectStream, caddy: true, check: checkChatStream(up.chunks)},
	}
	for _, key := range []struct{ label, key string }{{"(key)", k.single}, {"(combined key)", k.combined}} {
		vs = append(vs,
			&variant{name: "gate chat→chat " + key.label, url: c.gateURL + chatPath, body: b.chat,
				header: chatHeader(key.key), base: vProxy, caddy: true, target: true, check: checkChat},
			&variant{name: "gate messages→chat " + key.label, url: c.gateURL + messagesPath, body: b.messages,
				header: messagesHeader(key.key), base: vProxy, caddy: true, target: true, check: checkMessages},
			&variant{name: "gate messages→chat stream " + key.label, url: c.gateURL + messagesPath, body: b.messagesStream,
				header: messagesHeader(key.key), stream: true, base: vProxyStream, caddy: true, target: true, check: checkMessagesStream(up.chunks)},
			&variant{name: "gate responses→chat " + key.label, url: c.gateURL + responsesPath, body: b.responses,
				header: chatHeader(key.key), base: vProxy, caddy: true, target: true, check: checkResponses},
			&variant{name: "gate responses→chat stream " + key.label, url: c.gateURL + responsesPath, body: b.responsesStream,
				header: chatHeader(key.key), stream: true, base: vProxyStream, caddy: true, target: true, check: checkResponsesStream(up.chunks)},
		)
	}
	// The Gemini API, with one key: its answers are written by the same
	// pivot as the Responses API's. Its stream is not held to issue 6's
	// first byte: a Gemini stream has no event before the first content
	// (the role chunk writes none, as Google's stream has none), so its
	// first byte waits for the model's first token, after the upstream's
	// 1 ms pause here.
	geminiPath := "/gemini/v1beta/models/" + benchModel
	vs = append(vs,
		&variant{name: "gate gemini→chat (key)", url: c.gateURL + geminiPath + ":generateContent", body: b.gemini,
			header: geminiHeader(k.single), base: vProxy, caddy: true, target: true, check: checkGemini},
		&variant{name: "gate gemini→chat stream (key)", url: c.gateURL + geminiPath + ":streamGenerateContent?alt=sse", body: b.gemini,
			header: geminiHeader(k.single), stream: true, base: vProxyStream, caddy: true, check: checkGeminiStream(up.chunks)},
	)
	// Long streams, for the cost of a chunk alone. One key is enough: the
	// key is handled once per request, not per chunk.
	longChunks := up.chunks * longFactor
	directLong := long(vs[1], "", checkChatStream(longChunks))
	vs = append(vs, directLong, long(vs[3], vDirectLong, checkChatStream(longChunks)))
	for _, v := range vs {
		switch v.name {
		case "gate messages→chat stream (key)":
			vs = append(vs, long(v, vProxyLong, checkMessagesStream(longChunks)))
		case "gate responses→chat stream (key)":
			vs = append(vs, long(v, vProxyLong, checkResponsesStream(longChunks)))
		case "gate gemini→chat stream (key)":
			vs = append(vs, long(v, vProxyLong, checkGeminiStream(longChunks)))
		}
	}
	// The gate alone, for telling its cost from the translator's.
	vs = append(vs,
		&variant{name: "gate only chat (key)", url: c.gateOnlyURL + chatPath, body: b.chat,
			header: chatHeader(k.single), base: vProxy, caddy: true, check: checkChat},
		&variant{name: "gate only chat stream (key)", url: c.gateOnlyURL + chatPath, body: b.chatStream,
			header: chatHeader(k.single), stream: true, base: vProxyStream, caddy: true, check: checkChatStream(up.chunks)},
		// A second bare proxy site: how far it lands from the first is how
		// far apart two identical variants land in this run.
		&variant{name: "reverse_proxy twin", url: c.twinURL + chatPath, body: b.chat,
			header: chatHeader(k.single), base: vProxy, caddy: true, check: checkChat},
		&variant{name: "reverse_proxy stream twin", url: c.twinURL + chatPath, body: b.chatStream,
			header: chatHeader(k.single), stream: true, base: vProxyStream, caddy: true, check: checkChatStream(up.chunks)},
		&variant{name: vProxyBuffered, url: c.bufferedURL + chatPath, body: b.chatStream,
			header: chatHeader(k.single), stream: true, base: vProxyStream, caddy: true, check: checkChatStream(up.chunks)},
	)
	for _, v := range vs {
		if v.stream {
			v.gapHeader = v.header.Clone()
			v.gapHeader.Set(modeHeader, "gap")
		}
	}
	return vs
}

func checkChat(b []byte) error {
	if gjson.GetBytes(b, "object").Str != "chat.completion" || gjson.GetBytes(b, "choices.0.message.content").Str == "" {
		return fmt.Errorf("not a chat completion: %.300s", b)
	}
	return nil
}

func checkMessages(b []byte) error {
	if gjson.GetBytes(b, "type").Str != "message" || gjson.GetBytes(b, "content.0.text").Str == "" ||
		gjson.GetBytes(b, "stop_reason").Str != "end_turn" {
		return fmt.Errorf("not a messages response: %.300s", b)
	}
	return nil
}

func checkResponses(b []byte) error {
	if gjson.GetBytes(b, "object").Str != "response" || gjson.GetBytes(b, "status").Str != "completed" ||
		gjson.GetBytes(b, `output.#(type=="message").content.0.text`).Str == "" {
		return fmt.Errorf("not a completed Responses response: %.300s", b)
	}
	return nil
}

func checkResponsesStream(chunks int) func([]byte) error {
	return func(b []byte) error {
		if n := bytes.Count(b, []byte("event: response.output_text.delta\n")); n != chunks || !bytes.Contains(b, []byte("event: response.completed\n")) {
			return fmt.Errorf("Responses stream with %d text deltas (want %d) or no response.completed: %.300s", n, chunks, b)
		}
		return nil
	}
}

func checkGemini(b []byte) error {
	if gjson.GetBytes(b, "candidates.0.finishReason").Str != "STOP" || gjson.GetBytes(b, "candidates.0.content.parts.0.text").Str == "" {
		return fmt.Errorf("not a finished Gemini answer: %.300s", b)
	}
	return nil
}

func checkGeminiStream(chunks int) func([]byte) error {
	return func(b []byte) error {
		if n := bytes.Count(b, []byte(`"parts":[{"text":"`)); n < chunks || !bytes.Contains(b, []byte(`"finishReason":"STOP"`)) {
			return fmt.Errorf("Gemini stream with %d text events (want %d) or no finishReason: %.300s", n, chunks, b)
		}
		return nil
	}
}

func checkChatStream(chunks int) func([]byte) error {
	return func(b []byte) error {
		if n := bytes.Count(b, []byte(`"delta":{"content":"`)); n < chunks || !bytes.HasSuffix(b, []byte("data: [DONE]\n\n")) {
			return fmt.Errorf("chat stream with %d content chunks (want %d) or no [DONE]: %.300s", n, chunks, b)
		}
		return nil
	}
}

func checkMessagesStream(chunks int) func([]byte) error {
	return func(b []byte) error {
		if n := bytes.Count(b, []byte("event: content_block_delta\n")); n != chunks || !bytes.Contains(b, []byte("event: message_stop\n")) {
			return fmt.Errorf("messages stream with %d text deltas (want %d) or no message_stop: %.300s", n, chunks, b)
		}
		return nil
	}
}

// sliceResult is what one time slice of one variant measured.
type sliceResult struct {
	requests, errors int
	firstErr         error
	elapsed          time.Duration
	latency, ttfb    []time.Duration // per request
	caddyCPU         float64         // seconds
	benchCPU         float64         // seconds, the load generator and upstream
	otherCPU         float64         // seconds, every other process on the machine
	stealCPU         float64         // seconds the hypervisor ran someone else
	mallocs, bytes   float64
	reads, writes    float64 // Caddy's read and write system calls
}

func (r sliceResult) rps() float64 { return float64(r.requests) / r.elapsed.Seconds() }

type loader struct {
	client *http.Client
	caddy  *caddyProc
}

func newLoader(c *caddyProc, conns int) *loader {
	tr := &http.Transport{
		MaxIdleConns:        4 * conns,
		MaxIdleConnsPerHost: 2 * conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	return &loader{client: &http.Client{Transport: tr}, caddy: c}
}

// do sends one request and reads the whole answer; ttfb is when the first
// byte of the body arrived. With keep non-nil, the body is appended to it.
func (l *loader) do(ctx context.Context, v *variant, h http.Header, buf []byte, keep *[]byte) (total, ttfb time.Duration, err error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.url, bytes.NewReader(v.body))
	if err != nil {
		return 0, 0, err
	}
	req.Header = h
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return 0, 0, fmt.Errorf("%s: %s %s", v.name, resp.Status, b)
	}
	first := true
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if first {
				ttfb, first = time.Since(start), false
			}
			if keep != nil {
				*keep = append(*keep, buf[:n]...)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, 0, rerr
		}
	}
	return time.Since(start), ttfb, nil
}

// verify sends one request of the variant (and, for a stream, one with a
// pause after the first chunk) and checks the answers.
func (l *loader) verify(v *variant) error {
	for _, h := range []http.Header{v.header, v.gapHeader} {
		if h == nil {
			continue
		}
		var body []byte
		if _, _, err := l.do(context.Background(), v, h, make([]byte, 32<<10), &body); err != nil {
			return err
		}
		if err := v.check(body); err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
	}
	return nil
}

// run keeps conc clients busy with v for d. With measure, it also reads
// the CPU time of this process and of Caddy, and Caddy's allocations,
// before and after.
func (l *loader) run(v *variant, conc int, d time.Duration, measure bool) (sliceResult, error) {
	var res sliceResult
	var before reading
	var benchBefore, busyBefore, stealBefore float64
	if measure {
		var err error
		if v.caddy {
			if before, err = l.caddy.read(); err != nil {
				return res, err
			}
		}
		benchBefore, _ = procCPU(os.Getpid(), l.caddy.clockTick)
		busyBefore, stealBefore, _ = machineCPU(l.caddy.clockTick)
	}
	h := v.header
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range conc {
		wg.Go(func() {
			buf := make([]byte, 32<<10)
			lat := make([]time.Duration, 0, 1024)
			var ttfb []time.Duration
			if v.stream {
				ttfb = make([]time.Duration, 0, 1024)
			}
			errs := 0
			var firstErr error
			for time.Now().Before(deadline) {
				total, first, err := l.do(context.Background(), v, h, buf, nil)
				if err != nil {
					errs++
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				lat = append(lat, total)
				if v.stream {
					ttfb = append(ttfb, first)
				}
			}
			mu.Lock()
			res.requests += len(lat)
			res.errors += errs
			if res.firstErr == nil {
				res.firstErr = firstErr
			}
			res.latency = append(res.latency, lat...)
			res.ttfb = append(res.ttfb, ttfb...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	if measure {
		benchAfter, _ := procCPU(os.Getpid(), l.caddy.clockTick)
		busyAfter, stealAfter, _ := machineCPU(l.caddy.clockTick)
		res.benchCPU = benchAfter - benchBefore
		res.stealCPU = stealAfter - stealBefore
		res.otherCPU = busyAfter - busyBefore - res.benchCPU // less Caddy's, below
	}
	if measure && v.caddy {
		after, err := l.caddy.read()
		if err != nil {
			return res, err
		}
		res.caddyCPU = after.cpu - before.cpu
		res.otherCPU -= res.caddyCPU
		// One scrape (the "after" one) happened inside the window.
		res.mallocs = max(after.mallocs-before.mallocs-l.caddy.scrapeMallocs, 0)
		res.bytes = max(after.bytes-before.bytes-l.caddy.scrapeBytes, 0)
		res.reads, res.writes = after.reads-before.reads, after.writes-before.writes
	}
	return res, nil
}

// alternate sends one request at a time for d, taking the variants in turn,
// in a new random order each time round, so that at concurrency 1 every
// variant is timed under the same conditions: a latency that drifts over a
// second (the machine's other work, where the scheduler put Caddy's threads)
// moves all of them alike, which a slice per variant does not. A stream asks
// the upstream to pause after its first chunk (gapHeader). It returns each
// variant's requests; an error fails the pass.
func (l *loader) alternate(vs []*variant, d time.Duration) (map[string]sliceResult, error) {
	res := make(map[string]sliceResult, len(vs))
	buf := make([]byte, 32<<10)
	order := slices.Clone(vs)
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, v := range order {
			h := v.header
			if v.stream {
				h = v.gapHeader
			}
			total, ttfb, err := l.do(context.Background(), v, h, buf, nil)
			if err != nil {
				return nil, fmt.Errorf("at concurrency 1: %w", err)
			}
			r := res[v.name]
			r.requests++
			r.latency = append(r.latency, total)
			if v.stream {
				r.ttfb = append(r.ttfb, ttfb)
			}
			res[v.name] = r
		}
	}
	return res, nil
}

// flushDelays streams a paced response through v several times and returns,
// for every token, how long after the upstream sent it the client had it.
func (l *loader) flushDelays(v *variant, up *upstream, streams int) ([]time.Duration, error) {
	pv := *v
	pv.header = v.header.Clone()
	pv.header.Set(modeHeader, "paced")
	var delays []time.Duration
	for range streams {
		req, err := http.NewRequest(http.MethodPost, pv.url, bytes.NewReader(pv.body))
		if err != nil {
			return nil, err
		}
		req.Header = pv.header
		resp, err := l.client.Do(req)
		if err != nil {
			return nil, err
		}
		got := make([]time.Time, pacedTokens)
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		for {
			line, err := br.ReadSlice('\n')
			now := time.Now()
			if i := bytes.Index(line, []byte(" tok")); i >= 0 {
				rest := line[i+4:]
				j := bytes.IndexByte(rest, '.')
				if n, perr := strconv.Atoi(string(rest[:max(j, 0)])); perr == nil && n >= 0 && n < pacedTokens && got[n].IsZero() {
					got[n] = now
				}
			}
			if err != nil {
				break
			}
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s paced: %s", v.name, resp.Status)
		}
		sent := up.sentAt()
		if len(sent) != pacedTokens {
			return nil, fmt.Errorf("%s paced: upstream sent %d tokens, want %d", v.name, len(sent), pacedTokens)
		}
		for i, t := range got {
			if t.IsZero() {
				return nil, fmt.Errorf("%s paced: token %d never reached the client", v.name, i)
			}
			delays = append(delays, t.Sub(sent[i]))
		}
	}
	return delays, nil
}

// quantile returns the q-quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

func sortedCopy(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}
