// Package simulator is a simulated model server for the quick start, demos,
// tests and load benchmarks: a plain http.Handler that answers chat
// completions and messages requests deterministically, as a real upstream
// would. The Caddy module http.handlers.timeblock_simulator wraps it.
package simulator

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

const (
	// DefaultModel is the model answered when neither the request nor the
	// Config names one.
	DefaultModel = "timeblock-sim"
	// DefaultReasoningTokens is the length of the reasoning when the Config
	// leaves ReasoningTokens at 0.
	DefaultReasoningTokens = 16
)

const (
	// simMaxEchoWords caps how much of the last message the reply echoes, so
	// a long prompt does not make a long reply.
	simMaxEchoWords = 64
	// simArgFragment is how many bytes of tool-call arguments go in one
	// streamed fragment; each fragment counts as one generated token.
	simArgFragment = 8
	simMaxBody     = 32 << 20
	// simMaxSchemaDepth bounds the recursion over nested object schemas when
	// sample tool arguments are built.
	simMaxSchemaDepth = 8
)

// Config sets up a Server. The zero value is valid: instant generation,
// DefaultReasoningTokens of reasoning when asked for, the echo as the reply
// and DefaultModel.
type Config struct {
	// TokenRate is the generation speed in tokens per second; 0 generates
	// instantly. Streams send one token per chunk at this pace; a
	// non-streamed response is held back as long as its stream would take.
	TokenRate float64
	// FirstTokenLatency is the wait before the first token (the time a real
	// server spends on the prompt). Streams send their headers at once.
	FirstTokenLatency time.Duration
	// ReasoningTokens is how many reasoning tokens precede the answer when
	// reasoning is asked for (0: DefaultReasoningTokens). A smaller
	// thinking.budget_tokens in the request lowers it.
	ReasoningTokens int
	// ReplyTokens fixes the reply length in tokens, padding or cutting the
	// echo. 0 sends the echo as it is, at most 64 words of the last message
	// after a "Simulated reply <digest>:" prefix.
	ReplyTokens int
	// Model is the model id answered when the request names none, and the
	// one GET /v1/models lists ("": DefaultModel).
	Model string
}

// Validate reports the first setting out of range. Its messages name the
// settings as the Caddy module and its Caddyfile spell them.
func (c Config) Validate() error {
	if c.TokenRate < 0 || math.IsNaN(c.TokenRate) || math.IsInf(c.TokenRate, 0) {
		return fmt.Errorf("token_rate must be a finite number of tokens per second, at least 0; got %v", c.TokenRate)
	}
	if c.FirstTokenLatency < 0 {
		return fmt.Errorf("first_token_latency must not be negative, got %s", c.FirstTokenLatency)
	}
	if c.ReasoningTokens < 0 {
		return fmt.Errorf("reasoning_tokens must be at least 1, got %d", c.ReasoningTokens)
	}
	if c.ReplyTokens < 0 {
		return fmt.Errorf("reply_tokens must not be negative, got %d", c.ReplyTokens)
	}
	return nil
}

// Server is the simulated model server. It speaks chat completions
// (POST …/v1/chat/completions), the messages format (POST …/v1/messages,
// POST …/v1/messages/count_tokens) and GET …/v1/models, streaming and not,
// and answers deterministically from the request: the reply echoes the last
// message and a digest of the conversation, reasoning comes first when asked
// for (reasoning_effort other than none, chat_template_kwargs.enable_thinking,
// thinking.type enabled or adaptive), and an offered tool is called unless
// tool_choice is none or a tool result came back since the last assistant
// message: the one tool_choice names, else the one a user message names with
// "call tool <name> with <JSON arguments>", else the first. max_tokens cuts
// the output, reasoning included.
//
// It matches paths by suffix, so it can be mounted under any prefix, e.g.
// /compat/v1/messages. A Server is safe for concurrent use.
type Server struct {
	cfg       Config
	interval  time.Duration // between two tokens; 0 when TokenRate is 0
	modelJSON []byte        // cfg.Model as a JSON string
}

// New returns the Server for cfg, with defaults for the settings left at 0,
// or the error of cfg.Validate.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ReasoningTokens == 0 {
		cfg.ReasoningTokens = DefaultReasoningTokens
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	s := &Server{cfg: cfg, modelJSON: gjson.AppendJSONString(nil, cfg.Model)}
	if cfg.TokenRate > 0 {
		s.interval = time.Duration(float64(time.Second) / cfg.TokenRate)
	}
	return s, nil
}

// simFormat is the wire format of an inference endpoint.
type simFormat uint8

const (
	simChat simFormat = iota
	simMessages
)

// simFinish is why generation ended.
type simFinish uint8

const (
	simEndTurn simFinish = iota
	simMaxTokens
	simToolUse
	simStopSequence
)

func (f simFinish) chat() string {
	switch f {
	case simMaxTokens:
		return "length"
	case simToolUse:
		return "tool_calls"
	}
	return "stop"
}

func (f simFinish) messages() string {
	switch f {
	case simMaxTokens:
		return "max_tokens"
	case simToolUse:
		return "tool_use"
	case simStopSequence:
		return "stop_sequence"
	}
	return "end_turn"
}

// ServeHTTP answers as a model server would. Errors are written in the
// endpoint's own format, because a simulated upstream must look like a real
// one to the clients and translators under test.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = s.Serve(w, r)
}

// Serve is ServeHTTP returning the error of writing the response, for
// callers that report it, such as a Caddy handler.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request) error {
	var f simFormat
	switch p := r.URL.Path; {
	case strings.HasSuffix(p, "/v1/chat/completions"):
		f = simChat
	case strings.HasSuffix(p, "/v1/messages"):
		f = simMessages
	case strings.HasSuffix(p, "/v1/messages/count_tokens"):
		return s.serveCountTokens(w, r) // simulator_count.go
	case strings.HasSuffix(p, "/v1/models"):
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			return simError(w, simChat, http.StatusMethodNotAllowed, "use GET to list models")
		}
		return s.serveModels(w)
	default:
		return simError(w, simChat, http.StatusNotFound,
			"the simulator serves POST /v1/chat/completions, POST /v1/messages, POST /v1/messages/count_tokens and GET /v1/models, not "+p)
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		return simError(w, f, http.StatusMethodNotAllowed, "use POST for "+r.URL.Path)
	}

	sc := simScratchPool.Get().(*simScratch)
	defer sc.release()

	if r.ContentLength > 0 && r.ContentLength <= simMaxBody {
		sc.body.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	if _, err := sc.body.ReadFrom(http.MaxBytesReader(w, r.Body, simMaxBody)); err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			return simError(w, f, http.StatusRequestEntityTooLarge, "the request body is larger than 32 MiB")
		}
		return simError(w, f, http.StatusBadRequest, "reading the request body: "+err.Error())
	}
	// One copy into a string: every gjson result below is a substring of it.
	req, msg := parseSimRequest(f, sc.body.String())
	if msg != "" {
		return simError(w, f, http.StatusBadRequest, msg)
	}
	p := s.plan(&req, sc)
	if req.stream {
		s.stream(r.Context(), w, &req, &p, sc)
		return nil
	}
	return s.respond(r.Context(), w, &req, &p, sc)
}

// simRequest holds what the simulator reads from a request body.
type simRequest struct {
	format       simFormat
	model        string // the request's model as raw JSON, or ""
	stream       bool
	includeUsage bool
	maxTokens    int // 0: no limit
	messages     gjson.Result
	system       gjson.Result
	tools        gjson.Result
	toolChoice   gjson.Result
	stop         gjson.Result
	reasoning    bool
	budget       int // thinking.budget_tokens, 0 when absent
}

// parseSimRequest reads the request in one pass over its top-level keys. It
// returns a message for the client when the request is malformed.
func parseSimRequest(f simFormat, doc string) (simRequest, string) {
	req := simRequest{format: f}
	if !gjson.Valid(doc) {
		return req, "the request body is not valid JSON"
	}
	root := gjson.Parse(doc)
	if !root.IsObject() {
		return req, "the request body must be a JSON object"
	}
	var maxTokens, maxCompletionTokens gjson.Result
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model":
			if v.Type == gjson.String && v.Str != "" {
				req.model = v.Raw
			}
		case "stream":
			req.stream = v.Type == gjson.True
		case "stream_options":
			req.includeUsage = v.Get("include_usage").Type == gjson.True
		case "max_tokens":
			maxTokens = v
		case "max_completion_tokens":
			maxCompletionTokens = v
		case "messages":
			req.messages = v
		case "system":
			req.system = v
		case "tools":
			req.tools = v
		case "tool_choice":
			req.toolChoice = v
		case "stop", "stop_sequences":
			req.stop = v
		case "reasoning_effort":
			if v.Type == gjson.String && v.Str != "" && v.Str != "none" {
				req.reasoning = true
			}
		case "chat_template_kwargs":
			if v.Get("enable_thinking").Type == gjson.True || v.Get("thinking").Type == gjson.True {
				req.reasoning = true
			}
		case "thinking":
			if t := v.Get("type").Str; t == "enabled" || t == "adaptive" {
				req.reasoning = true
				if b := v.Get("budget_tokens"); b.Type == gjson.Number && b.Num >= 1 {
					req.budget = int(min(b.Num, math.MaxInt32))
				}
			}
		}
		return true
	})

	if maxCompletionTokens.Exists() && maxCompletionTokens.Type != gjson.Null {
		maxTokens = maxCompletionTokens
	}
	if maxTokens.Exists() && maxTokens.Type != gjson.Null {
		n := maxTokens.Num
		if maxTokens.Type != gjson.Number || n < 1 || n != math.Trunc(n) {
			return req, "max_tokens must be a whole number of at least 1, got " + maxTokens.Raw
		}
		req.maxTokens = int(min(n, math.MaxInt32))
	} else if f == simMessages {
		return req, "max_tokens: field required"
	}
	if !req.messages.IsArray() {
		return req, "messages: field required, an array of message objects"
	}
	if !req.messages.Get("0").Exists() {
		return req, "messages must not be empty"
	}
	return req, ""
}

// simPlan is the whole generation, decided before the first byte is sent.
// Its byte slices point into the request's simScratch.
type simPlan struct {
	digest       uint64
	promptTokens int
	reasoning    []byte
	reasoningN   int
	reply        []byte
	replyN       int
	toolName     string // "" when there is no tool call
	toolArgs     []byte // may be cut short by max_tokens
	toolN        int    // argument fragments
	finish       simFinish
	stopSequence string
}

func (p *simPlan) completionTokens() int { return p.reasoningN + p.replyN + p.toolN }

// plan decides the output: reasoning, then a tool call or a text reply,
// within the max_tokens budget.
func (s *Server) plan(req *simRequest, sc *simScratch) simPlan {
	var p simPlan
	p.digest = simDigest(req.system.Raw, req.messages.Raw)
	p.promptTokens = simPromptTokens(req.system.Raw, req.messages.Raw, req.tools.Raw)

	turn := simReadTurn(req.messages)
	sc.echo = simAppendWords(sc.echo[:0], turn.echo.Get("content"), simMaxEchoWords, 0)

	budget := math.MaxInt
	if req.maxTokens > 0 {
		budget = req.maxTokens
	}
	if req.reasoning {
		n := s.cfg.ReasoningTokens
		if req.budget > 0 {
			n = min(n, req.budget)
		}
		n = min(n, budget)
		sc.reasoning = simAppendReasoning(sc.reasoning[:0], p.digest, n)
		p.reasoning, p.reasoningN = sc.reasoning, n
		budget -= n
		if budget == 0 {
			p.finish = simMaxTokens
			return p
		}
	}

	if name, schema, ok := simPickTool(req, &turn); ok {
		if name == turn.call && turn.callArgs != "" {
			sc.args = append(sc.args[:0], turn.callArgs...)
		} else {
			sc.args = simAppendArgs(sc.args[:0], schema, sc.echo, 0)
		}
		p.toolName, p.toolArgs, p.finish = name, sc.args, simToolUse
		for i := 0; i < len(p.toolArgs); i = simFragmentEnd(p.toolArgs, i) {
			if p.toolN == budget {
				p.toolArgs, p.finish = p.toolArgs[:i], simMaxTokens
				break
			}
			p.toolN++
		}
		return p
	}

	sc.reply = s.appendReply(sc.reply[:0], p.digest, sc.echo)
	p.reply, p.finish = sc.reply, simEndTurn
	if i, seq := simFindStop(p.reply, req.stop); i >= 0 {
		p.reply, p.finish, p.stopSequence = p.reply[:i], simStopSequence, seq
	}
	p.replyN = simCountTokens(p.reply)
	if p.replyN > budget {
		p.reply = p.reply[:simTokensEnd(p.reply, budget)]
		p.replyN, p.finish, p.stopSequence = budget, simMaxTokens, ""
	}
	return p
}

// Tokens are words: the first has no leading space, each next one starts
// with the single space before it. Generated text never has other spacing.

func simCountTokens(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	return 1 + bytes.Count(b[1:], []byte{' '})
}

// simTokenEnd returns the end of the token starting at i.
func simTokenEnd(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	j := bytes.IndexByte(b[i+1:], ' ')
	if j < 0 {
		return len(b)
	}
	return i + 1 + j
}

// simTokensEnd returns the end of the first n tokens.
func simTokensEnd(b []byte, n int) int {
	end := 0
	for ; n > 0 && end < len(b); n-- {
		end = simTokenEnd(b, end)
	}
	return end
}

// simFragmentEnd returns the end of the argument fragment starting at i,
// never splitting a UTF-8 sequence.
func simFragmentEnd(b []byte, i int) int {
	end := i + simArgFragment
	if end >= len(b) {
		return len(b)
	}
	for end > i+1 && !utf8.RuneStart(b[end]) {
		end--
	}
	return end
}

var simFiller = strings.Fields("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua")

// appendReply appends "Simulated reply <digest>: <echo>", padded with filler
// or cut to ReplyTokens when that is set.
func (s *Server) appendReply(dst []byte, digest uint64, echo []byte) []byte {
	start := len(dst)
	dst = append(dst, "Simulated reply "...)
	dst = simAppendHex32(dst, uint32(digest>>32))
	dst = append(dst, ':')
	if len(echo) > 0 {
		dst = append(dst, ' ')
		dst = append(dst, echo...)
	}
	if s.cfg.ReplyTokens == 0 {
		return dst
	}
	n := simCountTokens(dst[start:])
	if n >= s.cfg.ReplyTokens {
		return dst[:start+simTokensEnd(dst[start:], s.cfg.ReplyTokens)]
	}
	for i := 0; n < s.cfg.ReplyTokens; i, n = i+1, n+1 {
		dst = append(dst, ' ')
		dst = append(dst, simFiller[i%len(simFiller)]...)
	}
	return dst
}

// simAppendReasoning appends exactly n tokens of reasoning.
func simAppendReasoning(dst []byte, digest uint64, n int) []byte {
	if n <= 0 {
		return dst
	}
	start := len(dst)
	dst = append(dst, "Considering request "...)
	dst = simAppendHex32(dst, uint32(digest>>32))
	dst = append(dst, ": I will echo the last message."...)
	have := simCountTokens(dst[start:])
	if have >= n {
		return dst[:start+simTokensEnd(dst[start:], n)]
	}
	for i := 0; have < n; i, have = i+1, have+1 {
		dst = append(dst, ' ')
		dst = append(dst, simFiller[i%len(simFiller)]...)
	}
	return dst
}

// simAppendWords appends the words of a message's content, single-spaced,
// up to max words: a string, or the text of text parts and tool results.
func simAppendWords(dst []byte, content gjson.Result, maxWords, depth int) []byte {
	if content.Type == gjson.String {
		return simAppendFields(dst, content.Str, maxWords)
	}
	if !content.IsArray() || depth > 1 {
		return dst
	}
	content.ForEach(func(_, part gjson.Result) bool {
		switch part.Get("type").Str {
		case "text":
			dst = simAppendFields(dst, part.Get("text").Str, maxWords)
		case "tool_result":
			dst = simAppendWords(dst, part.Get("content"), maxWords, depth+1)
		}
		return simCountTokens(dst) < maxWords
	})
	return dst
}

// simAppendFields appends the whitespace-separated words of s to dst, which
// holds whole words already, until dst has max words.
func simAppendFields(dst []byte, s string, maxWords int) []byte {
	n := simCountTokens(dst)
	inWord := false
	for i := 0; i < len(s); {
		c := rune(s[i])
		size := 1
		if c >= utf8.RuneSelf {
			c, size = utf8.DecodeRuneInString(s[i:])
		}
		if unicode.IsSpace(c) {
			inWord = false
		} else {
			if !inWord {
				if n == maxWords {
					break
				}
				if len(dst) > 0 {
					dst = append(dst, ' ')
				}
				inWord = true
				n++
			}
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return dst
}

// simPickTool returns the tool to call, if any: the one tool_choice names,
// else the one a "call tool" instruction names (none when it is not offered),
// else the first client tool; none when tool_choice is none or a tool result
// came back since the last assistant message.
func simPickTool(req *simRequest, turn *simTurn) (name string, schema gjson.Result, ok bool) {
	if !req.tools.IsArray() || turn.toolResult {
		return "", schema, false
	}
	want := turn.call
	switch tc := req.toolChoice; {
	case tc.Type == gjson.String && tc.Str == "none":
		return "", schema, false
	case tc.IsObject():
		switch tc.Get("type").Str {
		case "none":
			return "", schema, false
		case "tool":
			want = tc.Get("name").Str
		case "function":
			want = tc.Get("function.name").Str
		}
	}
	req.tools.ForEach(func(_, t gjson.Result) bool {
		var n, sch gjson.Result
		switch {
		case t.Get("type").Str == "function":
			n, sch = t.Get("function.name"), t.Get("function.parameters")
		case t.Get("input_schema").Exists():
			n, sch = t.Get("name"), t.Get("input_schema")
		default:
			return true // a server-side tool: not ours to call
		}
		if n.Str == "" || (want != "" && n.Str != want) {
			return true
		}
		name, schema, ok = n.Str, sch, true
		return false
	})
	return name, schema, ok
}

func simIsToolResult(msg gjson.Result) bool {
	switch msg.Get("role").Str {
	case "tool", "function":
		return true
	}
	found := false
	if c := msg.Get("content"); c.IsArray() {
		c.ForEach(func(_, part gjson.Result) bool {
			found = part.Get("type").Str == "tool_result"
			return !found
		})
	}
	return found
}

// simCallInstruction starts the instruction with which a prompt makes the
// simulator call a given tool: "call tool <name>", optionally followed by
// " with <JSON object>" for the arguments (else sample arguments are made
// from the tool's schema). Agents such as Claude Code and Codex offer a dozen
// tools, so tests and demos need a way to pick one and give it valid input.
const simCallInstruction = "call tool "

// simTurn is what the simulator reads from the conversation.
type simTurn struct {
	// echo is the message the reply echoes: the last one carrying a tool
	// result after the last assistant message, else the last one that is not
	// a system or developer message (clients such as Claude Code append
	// those after the user's prompt).
	echo gjson.Result
	// toolResult is set when a tool result came back after the last
	// assistant message; the model then answers instead of calling again.
	toolResult bool
	// call and callArgs are the last "call tool" instruction in a user
	// message after the last assistant message; callArgs is "" without a
	// valid " with {...}".
	call, callArgs string
}

func simReadTurn(messages gjson.Result) simTurn {
	var t simTurn
	messages.ForEach(func(_, m gjson.Result) bool {
		switch m.Get("role").Str {
		case "system", "developer":
			return true
		case "assistant":
			t.toolResult, t.call, t.callArgs = false, "", ""
		case "user":
			if name, args, ok := simFindCall(m.Get("content")); ok {
				t.call, t.callArgs = name, args
			}
		}
		if r := simIsToolResult(m); r || !t.toolResult {
			t.echo, t.toolResult = m, t.toolResult || r
		}
		return true
	})
	return t
}

// simFindCall finds the last "call tool" instruction in a message's text: a
// string, or text parts.
func simFindCall(content gjson.Result) (name, args string, ok bool) {
	if content.Type == gjson.String {
		return simParseCall(content.Str)
	}
	content.ForEach(func(_, part gjson.Result) bool {
		switch part.Get("type").Str {
		case "text", "input_text":
			if n, a, found := simParseCall(part.Get("text").Str); found {
				name, args, ok = n, a, true
			}
		}
		return true
	})
	return name, args, ok
}

func simParseCall(text string) (name, args string, ok bool) {
	i := strings.LastIndex(text, simCallInstruction)
	if i < 0 {
		return "", "", false
	}
	rest := text[i+len(simCallInstruction):]
	end := strings.IndexFunc(rest, unicode.IsSpace)
	if end < 0 {
		end = len(rest)
	}
	name = strings.TrimRight(rest[:end], ".,;:")
	if name == "" {
		return "", "", false
	}
	rest = strings.TrimLeftFunc(rest[end:], unicode.IsSpace)
	if after, found := strings.CutPrefix(rest, "with"); found {
		after = strings.TrimLeftFunc(after, unicode.IsSpace)
		if n := simObjectEnd(after); n > 0 && gjson.Valid(after[:n]) {
			args = after[:n]
		}
	}
	return name, args, true
}

// simObjectEnd returns the length of the JSON object at the start of s, by
// its braces outside strings, or 0 when s does not start with a whole one.
func simObjectEnd(s string) int {
	if !strings.HasPrefix(s, "{") {
		return 0
	}
	depth, inString := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return 0
}

// simAppendArgs appends a JSON object with a sample value for every property
// of an object schema: the echo for strings, the first enum value, 1, true,
// empty arrays, nested objects.
func simAppendArgs(dst []byte, schema gjson.Result, echo []byte, depth int) []byte {
	dst = append(dst, '{')
	first := true
	schema.Get("properties").ForEach(func(k, prop gjson.Result) bool {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, k.Raw...)
		dst = append(dst, ':')
		dst = simAppendSample(dst, prop, echo, depth)
		return true
	})
	return append(dst, '}')
}

func simAppendSample(dst []byte, prop gjson.Result, echo []byte, depth int) []byte {
	if v := prop.Get("const"); v.Exists() {
		return append(dst, v.Raw...)
	}
	if v := prop.Get("enum.0"); v.Exists() {
		return append(dst, v.Raw...)
	}
	typ := prop.Get("type")
	if typ.IsArray() {
		typ = typ.Get("0")
	}
	switch typ.Str {
	case "string":
		return gjson.AppendJSONString(dst, string(echo))
	case "integer", "number":
		return append(dst, '1')
	case "boolean":
		return append(dst, "true"...)
	case "array":
		return append(dst, "[]"...)
	case "object":
		if depth < simMaxSchemaDepth {
			return simAppendArgs(dst, prop, echo, depth+1)
		}
		return append(dst, "{}"...)
	}
	return append(dst, "null"...)
}

// simFindStop returns where the first stop sequence starts in text, and
// which one it is, or -1.
func simFindStop(text []byte, stop gjson.Result) (int, string) {
	at, seq := -1, ""
	check := func(s string) {
		if s == "" {
			return
		}
		if i := bytes.Index(text, []byte(s)); i >= 0 && (at < 0 || i < at) {
			at, seq = i, s
		}
	}
	switch {
	case stop.Type == gjson.String:
		check(stop.Str)
	case stop.IsArray():
		stop.ForEach(func(_, v gjson.Result) bool { check(v.Str); return true })
	}
	return at, seq
}

// simDigest is FNV-1a over the conversation, so the same conversation gets
// the same answer whether streamed or not.
func simDigest(parts ...string) uint64 {
	h := uint64(14695981039346656037)
	for _, p := range parts {
		for i := 0; i < len(p); i++ {
			h ^= uint64(p[i])
			h *= 1099511628211
		}
	}
	return h
}

const simHex = "0123456789abcdef"

func simAppendHex32(dst []byte, v uint32) []byte {
	for shift := 28; shift >= 0; shift -= 4 {
		dst = append(dst, simHex[v>>uint(shift)&0xf])
	}
	return dst
}

func simAppendHex64(dst []byte, v uint64) []byte {
	return simAppendHex32(simAppendHex32(dst, uint32(v>>32)), uint32(v))
}

// simAppendSignature appends an opaque signature for the thinking block, as
// real servers send so that clients can pass the block back.
func simAppendSignature(dst []byte, digest uint64, reasoning []byte) []byte {
	var raw [24]byte
	copy(raw[:8], "tb-sim\x00\x01")
	binary.BigEndian.PutUint64(raw[8:], digest)
	binary.BigEndian.PutUint64(raw[16:], simDigest(string(reasoning)))
	return base64.StdEncoding.AppendEncode(dst, raw[:])
}

// appendModel appends the request's model, or the default one.
func (s *Server) appendModel(dst []byte, req *simRequest) []byte {
	if req.model != "" {
		return append(dst, req.model...)
	}
	return append(dst, s.modelJSON...)
}

func simAppendID(dst []byte, prefix string, digest uint64) []byte {
	return simAppendHex64(append(dst, prefix...), digest)
}

// respond writes the non-streamed response once its generation time is over.
func (s *Server) respond(ctx context.Context, w http.ResponseWriter, req *simRequest, p *simPlan, sc *simScratch) error {
	if n := p.completionTokens(); n > 0 {
		wait := s.cfg.FirstTokenLatency + time.Duration(n-1)*s.interval
		if simSleep(ctx, wait) != nil {
			return nil // the client is gone
		}
	}
	out := sc.out[:0]
	if req.format == simChat {
		out = s.appendChatCompletion(out, req, p)
	} else {
		out = s.appendMessage(out, req, p)
	}
	sc.out = out
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(out)
	return err
}

func (s *Server) appendChatCompletion(dst []byte, req *simRequest, p *simPlan) []byte {
	dst = simAppendID(append(dst, `{"id":"`...), "chatcmpl-sim", p.digest)
	dst = append(dst, `","object":"chat.completion","created":`...)
	dst = strconv.AppendInt(dst, time.Now().Unix(), 10)
	dst = append(dst, `,"model":`...)
	dst = s.appendModel(dst, req)
	dst = append(dst, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	if len(p.reply) > 0 {
		dst = gjson.AppendJSONString(dst, string(p.reply))
	} else {
		dst = append(dst, "null"...)
	}
	if p.reasoningN > 0 {
		dst = append(dst, `,"reasoning_content":`...)
		dst = gjson.AppendJSONString(dst, string(p.reasoning))
	}
	if p.toolName != "" {
		dst = simAppendID(append(dst, `,"tool_calls":[{"id":"`...), "call_sim", p.digest)
		dst = append(dst, `","type":"function","function":{"name":`...)
		dst = gjson.AppendJSONString(dst, p.toolName)
		dst = append(dst, `,"arguments":`...)
		dst = gjson.AppendJSONString(dst, string(p.toolArgs))
		dst = append(dst, `}}]`...)
	}
	dst = append(dst, `,"refusal":null},"logprobs":null,"finish_reason":"`...)
	dst = append(dst, p.finish.chat()...)
	dst = append(dst, `"}],"usage":`...)
	dst = simAppendChatUsage(dst, p)
	return append(dst, '}')
}

func simAppendChatUsage(dst []byte, p *simPlan) []byte {
	c := p.completionTokens()
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(p.promptTokens), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(c), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(p.promptTokens+c), 10)
	dst = append(dst, `,"completion_tokens_details":{"reasoning_tokens":`...)
	dst = strconv.AppendInt(dst, int64(p.reasoningN), 10)
	return append(dst, `}}`...)
}

func (s *Server) appendMessage(dst []byte, req *simRequest, p *simPlan) []byte {
	dst = simAppendID(append(dst, `{"id":"`...), "msg_sim", p.digest)
	dst = append(dst, `","type":"message","role":"assistant","model":`...)
	dst = s.appendModel(dst, req)
	dst = append(dst, `,"content":[`...)
	sep := false
	if p.reasoningN > 0 {
		dst = append(dst, `{"type":"thinking","thinking":`...)
		dst = gjson.AppendJSONString(dst, string(p.reasoning))
		dst = append(dst, `,"signature":"`...)
		dst = simAppendSignature(dst, p.digest, p.reasoning)
		dst = append(dst, `"}`...)
		sep = true
	}
	if len(p.reply) > 0 {
		if sep {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":"text","text":`...)
		dst = gjson.AppendJSONString(dst, string(p.reply))
		dst = append(dst, '}')
		sep = true
	}
	if p.toolName != "" {
		if sep {
			dst = append(dst, ',')
		}
		dst = simAppendID(append(dst, `{"type":"tool_use","id":"`...), "toolu_sim", p.digest)
		dst = append(dst, `","name":`...)
		dst = gjson.AppendJSONString(dst, p.toolName)
		dst = append(dst, `,"input":`...)
		if p.finish == simToolUse {
			dst = append(dst, p.toolArgs...)
		} else {
			dst = append(dst, "{}"...) // cut short: what was generated is not an object
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `],"stop_reason":"`...)
	dst = append(dst, p.finish.messages()...)
	dst = append(dst, `","stop_sequence":`...)
	dst = simAppendStopSequence(dst, p)
	dst = append(dst, `,"usage":`...)
	dst = simAppendMessagesUsage(dst, p)
	return append(dst, '}')
}

func simAppendStopSequence(dst []byte, p *simPlan) []byte {
	if p.stopSequence == "" {
		return append(dst, "null"...)
	}
	return gjson.AppendJSONString(dst, p.stopSequence)
}

func simAppendMessagesUsage(dst []byte, p *simPlan) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = strconv.AppendInt(dst, int64(p.promptTokens), 10)
	dst = append(dst, `,"output_tokens":`...)
	dst = strconv.AppendInt(dst, int64(p.completionTokens()), 10)
	return append(dst, '}')
}

// simStream writes server-sent events, flushing each one.
type simStream struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	ctx   context.Context
	buf   []byte
	err   error
	next  time.Time     // when the next token is due
	every time.Duration // between tokens
	timer *time.Timer
}

// send writes and flushes the buffered event.
func (st *simStream) send() {
	if st.err != nil {
		return
	}
	if _, st.err = st.w.Write(st.buf); st.err == nil {
		if err := st.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			st.err = err
		}
	}
	st.buf = st.buf[:0]
}

// tick waits until the next token is due and schedules the one after.
func (st *simStream) tick() {
	st.until()
	st.next = st.next.Add(st.every)
}

// until waits until the next token is due.
func (st *simStream) until() {
	if st.err != nil {
		return
	}
	d := time.Until(st.next)
	if d <= 0 {
		st.err = st.ctx.Err()
		return
	}
	if st.timer == nil {
		st.timer = time.NewTimer(d)
	} else {
		st.timer.Reset(d)
	}
	select {
	case <-st.timer.C:
	case <-st.ctx.Done():
		st.err = st.ctx.Err()
	}
}

func (s *Server) stream(ctx context.Context, w http.ResponseWriter, req *simRequest, p *simPlan, sc *simScratch) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	st := &simStream{
		w:     w,
		rc:    http.NewResponseController(w),
		ctx:   ctx,
		buf:   sc.out[:0],
		next:  time.Now().Add(s.cfg.FirstTokenLatency),
		every: s.interval,
	}
	st.send() // headers now: the client knows it was accepted
	if req.format == simChat {
		s.streamChat(st, req, p, sc)
	} else {
		s.streamMessages(st, req, p)
	}
	if st.timer != nil {
		st.timer.Stop()
	}
	sc.out = st.buf
}

// streamChat sends chat.completion.chunk events: role, reasoning_content
// deltas, content deltas or tool-call fragments, the finish reason, the
// usage chunk when stream_options.include_usage asks for it, and [DONE].
func (s *Server) streamChat(st *simStream, req *simRequest, p *simPlan, sc *simScratch) {
	pre := simAppendID(append(sc.pre[:0], `data: {"id":"`...), "chatcmpl-sim", p.digest)
	pre = append(pre, `","object":"chat.completion.chunk","created":`...)
	pre = strconv.AppendInt(pre, time.Now().Unix(), 10)
	pre = append(pre, `,"model":`...)
	pre = s.appendModel(pre, req)
	head := len(pre) // the chunk up to here is shared by the usage chunk
	pre = append(pre, `,"choices":[{"index":0,"delta":`...)
	sc.pre = pre
	post := `,"logprobs":null,"finish_reason":null}]}` + "\n\n"
	if req.includeUsage {
		post = `,"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"
	}
	textChunks := func(key string, text []byte) {
		for i := 0; i < len(text) && st.err == nil; {
			end := simTokenEnd(text, i)
			st.tick()
			st.buf = append(st.buf, pre...)
			st.buf = append(st.buf, `{"`...)
			st.buf = append(st.buf, key...)
			st.buf = append(st.buf, `":`...)
			st.buf = gjson.AppendJSONString(st.buf, string(text[i:end]))
			st.buf = append(st.buf, '}')
			st.buf = append(st.buf, post...)
			st.send()
			i = end
		}
	}

	st.until() // the role chunk goes out with the first token, as vLLM does
	st.buf = append(st.buf, pre...)
	st.buf = append(st.buf, `{"role":"assistant"}`...)
	st.buf = append(st.buf, post...)
	st.send()
	textChunks("reasoning_content", p.reasoning)
	textChunks("content", p.reply)
	if p.toolName != "" && st.err == nil {
		st.buf = append(st.buf, pre...)
		st.buf = simAppendID(append(st.buf, `{"tool_calls":[{"index":0,"id":"`...), "call_sim", p.digest)
		st.buf = append(st.buf, `","type":"function","function":{"name":`...)
		st.buf = gjson.AppendJSONString(st.buf, p.toolName)
		st.buf = append(st.buf, `,"arguments":""}}]}`...)
		st.buf = append(st.buf, post...)
		st.send()
		for i := 0; i < len(p.toolArgs) && st.err == nil; {
			end := simFragmentEnd(p.toolArgs, i)
			st.tick()
			st.buf = append(st.buf, pre...)
			st.buf = append(st.buf, `{"tool_calls":[{"index":0,"function":{"arguments":`...)
			st.buf = gjson.AppendJSONString(st.buf, string(p.toolArgs[i:end]))
			st.buf = append(st.buf, `}}]}`...)
			st.buf = append(st.buf, post...)
			st.send()
			i = end
		}
	}
	if st.err != nil {
		return
	}
	st.buf = append(st.buf, pre...)
	st.buf = append(st.buf, `{},"logprobs":null,"finish_reason":"`...)
	st.buf = append(st.buf, p.finish.chat()...)
	st.buf = append(st.buf, `"}]`...)
	if req.includeUsage {
		st.buf = append(st.buf, `,"usage":null`...)
	}
	st.buf = append(st.buf, "}\n\n"...)
	st.send()
	if req.includeUsage {
		st.buf = append(st.buf, pre[:head]...)
		st.buf = append(st.buf, `,"choices":[],"usage":`...)
		st.buf = simAppendChatUsage(st.buf, p)
		st.buf = append(st.buf, "}\n\n"...)
		st.send()
	}
	st.buf = append(st.buf, "data: [DONE]\n\n"...)
	st.send()
}

// streamMessages sends the messages event grammar: message_start, ping, per
// block content_block_start, its deltas and content_block_stop, then
// message_delta with the stop reason and usage, and message_stop.
func (s *Server) streamMessages(st *simStream, req *simRequest, p *simPlan) {
	event := func(name string) {
		st.buf = append(st.buf, "event: "...)
		st.buf = append(st.buf, name...)
		st.buf = append(st.buf, "\ndata: "...)
	}
	end := func() {
		st.buf = append(st.buf, "}\n\n"...)
		st.send()
	}
	index := 0
	blockStart := func(block string) {
		event("content_block_start")
		st.buf = append(st.buf, `{"type":"content_block_start","index":`...)
		st.buf = strconv.AppendInt(st.buf, int64(index), 10)
		st.buf = append(st.buf, `,"content_block":`...)
		st.buf = append(st.buf, block...)
	}
	deltaStart := func(typ string) {
		event("content_block_delta")
		st.buf = append(st.buf, `{"type":"content_block_delta","index":`...)
		st.buf = strconv.AppendInt(st.buf, int64(index), 10)
		st.buf = append(st.buf, `,"delta":{"type":"`...)
		st.buf = append(st.buf, typ...)
		st.buf = append(st.buf, `",`...)
	}
	blockStop := func() {
		event("content_block_stop")
		st.buf = append(st.buf, `{"type":"content_block_stop","index":`...)
		st.buf = strconv.AppendInt(st.buf, int64(index), 10)
		end()
		index++
	}
	textDeltas := func(typ, key string, text []byte) {
		for i := 0; i < len(text) && st.err == nil; {
			e := simTokenEnd(text, i)
			st.tick()
			deltaStart(typ)
			st.buf = append(st.buf, key...)
			st.buf = gjson.AppendJSONString(st.buf, string(text[i:e]))
			st.buf = append(st.buf, '}')
			end()
			i = e
		}
	}

	event("message_start")
	st.buf = simAppendID(append(st.buf, `{"type":"message_start","message":{"id":"`...), "msg_sim", p.digest)
	st.buf = append(st.buf, `","type":"message","role":"assistant","model":`...)
	st.buf = s.appendModel(st.buf, req)
	st.buf = append(st.buf, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	st.buf = strconv.AppendInt(st.buf, int64(p.promptTokens), 10)
	st.buf = append(st.buf, `,"output_tokens":0}}`...)
	end()
	event("ping")
	st.buf = append(st.buf, `{"type":"ping"`...)
	end()

	if p.reasoningN > 0 {
		blockStart(`{"type":"thinking","thinking":"","signature":""}`)
		end()
		textDeltas("thinking_delta", `"thinking":`, p.reasoning)
		deltaStart("signature_delta")
		st.buf = append(st.buf, `"signature":"`...)
		st.buf = simAppendSignature(st.buf, p.digest, p.reasoning)
		st.buf = append(st.buf, `"}`...)
		end()
		blockStop()
	}
	if len(p.reply) > 0 {
		blockStart(`{"type":"text","text":""}`)
		end()
		textDeltas("text_delta", `"text":`, p.reply)
		blockStop()
	}
	if p.toolName != "" {
		blockStart("")
		st.buf = simAppendID(append(st.buf, `{"type":"tool_use","id":"`...), "toolu_sim", p.digest)
		st.buf = append(st.buf, `","name":`...)
		st.buf = gjson.AppendJSONString(st.buf, p.toolName)
		st.buf = append(st.buf, `,"input":{}}`...)
		end()
		for i := 0; i < len(p.toolArgs) && st.err == nil; {
			e := simFragmentEnd(p.toolArgs, i)
			st.tick()
			deltaStart("input_json_delta")
			st.buf = append(st.buf, `"partial_json":`...)
			st.buf = gjson.AppendJSONString(st.buf, string(p.toolArgs[i:e]))
			st.buf = append(st.buf, '}')
			end()
			i = e
		}
		blockStop()
	}

	event("message_delta")
	st.buf = append(st.buf, `{"type":"message_delta","delta":{"stop_reason":"`...)
	st.buf = append(st.buf, p.finish.messages()...)
	st.buf = append(st.buf, `","stop_sequence":`...)
	st.buf = simAppendStopSequence(st.buf, p)
	st.buf = append(st.buf, `},"usage":`...)
	st.buf = simAppendMessagesUsage(st.buf, p)
	end()
	event("message_stop")
	st.buf = append(st.buf, `{"type":"message_stop"`...)
	end()
}

// serveModels lists the default model in a shape both SDKs read: the OpenAI
// list fields and the messages-API ones side by side.
func (s *Server) serveModels(w http.ResponseWriter) error {
	m := s.modelJSON
	b := make([]byte, 0, 256+4*len(m))
	b = append(b, `{"object":"list","data":[{"id":`...)
	b = append(b, m...)
	b = append(b, `,"object":"model","created":1735689600,"owned_by":"timeblock","type":"model","display_name":`...)
	b = append(b, m...)
	b = append(b, `,"created_at":"2025-01-01T00:00:00Z"}],"has_more":false,"first_id":`...)
	b = append(b, m...)
	b = append(b, `,"last_id":`...)
	b = append(b, m...)
	b = append(b, '}')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(b)
	return err
}

// simError writes an error in the endpoint's format.
func simError(w http.ResponseWriter, f simFormat, status int, msg string) error {
	typ := "invalid_request_error"
	if f == simMessages {
		switch status {
		case http.StatusNotFound:
			typ = "not_found_error"
		case http.StatusRequestEntityTooLarge:
			typ = "request_too_large"
		}
	}
	b := make([]byte, 0, 96+len(msg))
	if f == simMessages {
		b = append(b, `{"type":"error","error":{"type":"`...)
		b = append(b, typ...)
		b = append(b, `","message":`...)
		b = gjson.AppendJSONString(b, msg)
		b = append(b, "}}"...)
	} else {
		b = append(b, `{"error":{"message":`...)
		b = gjson.AppendJSONString(b, msg)
		b = append(b, `,"type":"`...)
		b = append(b, typ...)
		b = append(b, `","param":null,"code":null}}`...)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, err := w.Write(b)
	return err
}

// simSleep waits for d or until ctx is done.
func simSleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// simScratch holds one request's buffers; pooled because the simulator is
// the upstream of load benchmarks.
type simScratch struct {
	body      bytes.Buffer
	echo      []byte
	reasoning []byte
	reply     []byte
	args      []byte
	pre       []byte
	out       []byte
}

var simScratchPool = sync.Pool{New: func() any { return new(simScratch) }}

// release returns the scratch to the pool unless a large request grew it.
func (sc *simScratch) release() {
	const keep = 1 << 20
	if sc.body.Cap() > keep || cap(sc.out) > keep {
		return
	}
	sc.body.Reset()
	simScratchPool.Put(sc)
}

// Interface guard
var _ http.Handler = (*Server)(nil)
