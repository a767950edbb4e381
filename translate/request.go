package translate

import (
	"net/http"
	"strconv"
	"strings"
)

// Request is what the response side needs to know about the request it
// answers; TranslateRequest returns it and NewStream takes it.
type Request struct {
	// Stream is true when the client asked for SSE.
	Stream bool
	// IncludeUsage is true when a chat client asked for the final usage chunk
	// (stream_options.include_usage). The upstream is always asked for it.
	IncludeUsage bool
	// Reasoning is true when the client asked for reasoning.
	Reasoning bool
	// InputTokens estimates the prompt's tokens (count.go) for a streamed
	// messages request to a chat upstream, which counts them only at the
	// end: message_start reports the estimate, message_delta the count. The
	// translation makes it on the way (CountTokens gives the same number).
	InputTokens int64
	// resp is what a Responses client's answer needs (responses_request.go).
	resp respOptions
	// call is what the request's path said (the Gemini model).
	call Call
	// showThoughts: a Gemini client asked to see the model's thoughts
	// (thinkingConfig.includeThoughts).
	showThoughts bool
}

// TranslateRequest turns a client body (in format client) into the body for
// cfg.Upstream, appending it to buf (which may be nil or a pooled buffer) and
// returning the extended slice. The body is validated on the way: malformed
// JSON, wrong types, out-of-range values, server-side tools and fields the
// upstream cannot honour are a 400 (a 413 past cfg.MaxBodyBytes) that the
// caller renders in the client's format with Error.Body(client).
func TranslateRequest(client Format, body []byte, cfg *Config, buf []byte) ([]byte, Request, *Error) {
	return translateRequest(client, Call{}, body, cfg, buf, false)
}

// TranslateValidRequest is TranslateRequest for a body the caller has
// already checked with CheckBody (the gate does): well-formed JSON nested at
// most DefaultMaxDepth deep. It skips that pass over the body, a third of the
// work for a long history; only a cfg.MaxDepth below the default is checked
// again. Everything else is still checked.
func TranslateValidRequest(client Format, body []byte, cfg *Config, buf []byte) ([]byte, Request, *Error) {
	return translateRequest(client, Call{}, body, cfg, buf, true)
}

// TranslateCallRequest is TranslateRequest (TranslateValidRequest when
// checked) with what is known of the request beside its body: call (a
// Gemini request's model and streaming, as CallFromPath read them, and the
// boost the gate decided).
func TranslateCallRequest(client Format, call Call, body []byte, cfg *Config, buf []byte, checked bool) ([]byte, Request, *Error) {
	return translateRequest(client, call, body, cfg, buf, checked)
}

func translateRequest(client Format, call Call, body []byte, cfg *Config, buf []byte, checked bool) ([]byte, Request, *Error) {
	c, ok := codecFor(client)
	if !ok {
		return buf, Request{}, NewError(http.StatusNotFound, NotFound,
			"unknown inference endpoint; use /v1/chat/completions, /v1/messages, /v1/responses or /v1beta/models/{model}:generateContent")
	}
	s, err := checkRequest(body, cfg, checked)
	if err != nil {
		return buf, Request{}, err
	}
	mark := len(buf)
	out, req, err := c.request(buf, s, cfg, call)
	if err != nil {
		return buf[:mark], Request{}, err
	}
	// The body ends with its closing brace; the translation dropped any
	// priority the client sent.
	if call.Boost > 0 && client != Chat && cfg.Upstream == Chat {
		out = append(out[:len(out)-1], `,"`+PriorityField+`":`...)
		out = appendInt(out, int64(-call.Boost))
		out = append(out, '}')
	}
	req.call = call
	return out, req, nil
}

// checkRequest makes the checks every translation starts with (size, a JSON
// object, well-formed and not too deep unless the caller checked) and
// returns the body as a string without surrounding space.
func checkRequest(body []byte, cfg *Config, checked bool) (string, *Error) {
	if len(body) > cfg.maxBody() {
		return "", NewError(http.StatusRequestEntityTooLarge, RequestTooLarge,
			"request body is larger than "+strconv.Itoa(cfg.maxBody())+" bytes")
	}
	s := trimJSON(b2s(body))
	if !isObj(s) {
		return "", badRequest("request body must be a JSON object")
	}
	switch limit := cfg.maxDepth(); {
	case !checked:
		if err := checkBody(s, limit); err != nil {
			return "", err
		}
	case limit < DefaultMaxDepth && maxDepth(s, limit) > limit:
		return "", badRequest(tooDeepMessage(limit))
	}
	return s, nil
}

// serverToolPrefixes are the type prefixes of vendor tools that run on the
// vendor's servers; no upstream here can run them.
var serverToolPrefixes = [...]string{"web_search_", "web_fetch_", "code_execution_", "computer_", "text_editor_", "bash_",
	"tool_search_tool_", "mcp_toolset"}

func isServerTool(typ string) bool {
	for _, p := range serverToolPrefixes {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}

// serverToolErrorFor says, in the client's terms, what to send instead.
func serverToolErrorFor(client Format, path, typ string) *Error {
	fix := "define client tools (name, description, input_schema) instead"
	if client == Chat {
		fix = "define function tools ({type: function, function: {name, parameters}}) instead"
	}
	return badRequest(path + ": server-side tool type " + strconv.Quote(typ) + " is not supported; " + fix)
}

// pathf joins a path prefix and an index.
func pathi(prefix string, i int) string { return prefix + "." + strconv.Itoa(i) }

func needString(v, path string) *Error {
	if !isStr(v) {
		return badRequest(path + ": must be a string")
	}
	return nil
}

// commonMembers are the request members every client format spells and
// checks alike; each reader takes them with one case:
//
//	case "model", "stream", "temperature", "top_p":
//		err = c.read(k, v)
type commonMembers struct {
	model, temperature, topP string // raw
	stream                   bool
}

// read takes one of the common members. temperature and top_p are held to
// 0-1 on every endpoint (what a messages upstream accepts), so a request
// means the same whichever upstream serves it.
func (c *commonMembers) read(k, v string) *Error {
	switch k {
	case "model":
		c.model = v
	case "stream":
		c.stream = v == "true"
		return checkBool(v, k)
	case "temperature":
		c.temperature = v
		return checkRange(v, k, 0, 1)
	case "top_p":
		c.topP = v
		return checkRange(v, k, 0, 1)
	}
	return nil
}

// finish ends the reading: it sets req.Stream and checks the model, the
// first thing every reader checks once it has seen all members.
func (c *commonMembers) finish(req *Request) *Error {
	req.Stream = c.stream
	return checkModel(c.model)
}

func checkModel(v string) *Error {
	if !isStr(v) || emptyStr(v) {
		return badRequest("model: must be a non-empty string")
	}
	return nil
}

// checkRange reads a number in [lo, hi].
func checkRange(v, path string, lo, hi float64) *Error {
	if isNull(v) {
		return nil
	}
	f, ok := toFloat(v)
	if !ok {
		return badRequest(path + ": must be a number")
	}
	if f < lo || f > hi {
		return badRequest(path + ": must be between " + strconv.FormatFloat(lo, 'g', -1, 64) +
			" and " + strconv.FormatFloat(hi, 'g', -1, 64) + ", got " + v)
	}
	return nil
}

func readMaxTokens(v, path string) (int64, *Error) {
	n, ok := toInt(v)
	if !ok || n < 1 {
		return 0, badRequest(path + ": must be a positive integer")
	}
	return n, nil
}

func checkTopK(v string) *Error {
	if isNull(v) {
		return nil
	}
	if n, ok := toInt(v); !ok || n < -1 {
		return badRequest("top_k: must be a non-negative integer")
	}
	return nil
}

func checkBool(v, path string) *Error {
	if !isBool(v) && !isNull(v) {
		return badRequest(path + ": must be a boolean")
	}
	return nil
}

// stopList validates stop (string or array of strings).
func stopList(v, path string) *Error {
	if isNull(v) || isStr(v) {
		return nil
	}
	it, ok := arrIter(v)
	if !ok {
		return badRequest(path + ": must be a string or an array of strings")
	}
	for i := 0; ; i++ {
		e, ok := it.elem()
		if !ok {
			return nil
		}
		if !isStr(e) {
			return badRequest(pathi(path, i) + ": must be a string")
		}
	}
}

// appendJoined appends the insides of string literals joined by sepEsc (an
// escaped separator), so that joining needs no decoding.
func appendJoinedInner(dst []byte, lit, sepEsc string, first *bool) []byte {
	in := inner(lit)
	if in == "" {
		return dst
	}
	if !*first {
		dst = append(dst, sepEsc...)
	}
	*first = false
	return append(dst, in...)
}

// cleanID keeps a tool call id within [A-Za-z0-9_-], the messages format's
// id alphabet; other characters become '_'. The same mapping is applied to
// tool calls and results, so they still match.
func appendCleanID(dst []byte, lit string) []byte {
	in := inner(lit)
	clean := true
	for i := 0; i < len(in); i++ {
		if !idChar(in[i]) {
			clean = false
			break
		}
	}
	if clean {
		return append(dst, lit...)
	}
	s := str(lit)
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !idChar(c) {
			c = '_'
		}
		dst = append(dst, c)
	}
	return append(dst, '"')
}

func idChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// dataURL splits data:<media type>;base64,<data>.
func dataURL(u string) (mediaType, data string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	meta, data, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	mediaType, b64 := strings.CutSuffix(meta, ";base64")
	if !b64 {
		return "", "", false
	}
	return mediaType, data, true
}
