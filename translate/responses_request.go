package translate

// The Responses API (POST /v1/responses) as a client format. Upstreams speak
// chat or messages only, so chat completions is the pivot: a Responses
// request is written as a chat request (for a messages upstream the chat →
// messages translation then runs on it), and the upstream's answer, turned
// into chat first where it is not, becomes a response object or an event
// stream (responses_response.go, responses_stream.go).
//
// Decisions where the two APIs differ:
//   - namespace tools are flattened to "<namespace>__<name>"; a call of such
//     a name comes back as a function_call with name and namespace apart.
//   - Hosted tools (web_search, file_search, code_interpreter, mcp, …) are
//     withdrawn: the upstream cannot run them, so the model is not offered
//     them. A tool_choice that requires one is a 400 naming it.
//   - reasoning.effort none turns reasoning off; minimal, low, medium, high
//     and xhigh map onto the uniform control's low, low, medium, high and
//     max. A reasoning object asking only for a summary turns reasoning on
//     at medium; no reasoning object leaves it off.
//   - Reasoning comes back as a reasoning item whose summary text is the
//     upstream's reasoning; with include reasoning.encrypted_content it also
//     carries encrypted_content, "tb1:" + base64 of the reasoning, which a
//     later turn hands back to restore the reasoning on its assistant turn.
//   - store is accepted and ignored (nothing is stored; responses say
//     store: false); previous_response_id, conversation, background and
//     stored prompts need server state and are a 400 (the field rule,
//     fields.go, has the Responses rows).
//   - Messages between function calls and their outputs (Codex's approval
//     flow) are moved after the outputs: both upstream formats want a call's
//     result right after it (toolorder.go).
//   - text.format json_schema reaches a messages upstream as
//     output_config.format (through the chat translation); json_object,
//     "any object", cannot be enforced there and is a 400.
//   - The response object echoes the request's tools.

import (
	"encoding/base64"
	"slices"
	"strings"
	"unsafe"
)

// encPrefix starts the encrypted_content Timeblock writes: a version, then
// the reasoning text (as escaped JSON string content) in standard base64.
const encPrefix = "tb1:"

// nsSep joins a namespace and a tool name into one function name.
const nsSep = "__"

// respOptions is what answering a Responses request needs to know of it.
type respOptions struct {
	// namespaces lists the namespaces whose tools were flattened, each
	// followed by a NUL (raw, as written in the request).
	namespaces string
	// tools is the request's tools array (compacted), which the response
	// object echoes as the Responses API does; "" when none was sent.
	// Both strings share one allocation (keep).
	tools     string
	maxOutput int64
	// effort and summary echo reasoning.effort and reasoning.summary
	// (indexes into respEfforts and respSummaries; 0 is null).
	effort, summary uint8
	encrypted       bool // include has reasoning.encrypted_content
	noParallel      bool
}

var (
	respEfforts   = [...]string{"", "none", "minimal", "low", "medium", "high", "xhigh", "max"}
	respSummaries = [...]string{"", "auto", "concise", "detailed"}
)

func indexOf(list []string, s string) uint8 {
	for i := 1; i < len(list); i++ {
		if list[i] == s {
			return uint8(i)
		}
	}
	return 0
}

// responsesRequest translates a Responses request for cfg.Upstream.
func responsesRequest(dst []byte, s string, cfg *Config) ([]byte, Request, *Error) {
	if cfg.Upstream == Chat {
		return responsesToChat(dst, s, cfg, true)
	}
	// Chat first, then chat → messages; the messages body is then moved
	// down over the chat body, in the same buffer.
	mark := len(dst)
	mid, req, err := responsesToChat(dst, s, cfg, false)
	if err != nil {
		return mid, req, err
	}
	end := len(mid)
	out, _, err := chatToMessages(mid, b2s(mid[mark:end]), cfg)
	if err != nil {
		if err.Message == "messages: "+noTurnsMsg {
			err = badRequest("input: " + noTurnsMsg) // the client's member
		}
		return out, req, err
	}
	n := copy(out[mark:], out[end:])
	return out[:mark+n], req, nil
}

// responsesToChat writes the chat request. final says it goes upstream as it
// is (the reasoning control is then written in the upstream's dialect);
// otherwise it is the input of the chat → messages translation and carries
// the client's reasoning_effort.
func responsesToChat(dst []byte, s string, cfg *Config, final bool) ([]byte, Request, *Error) {
	var (
		input, instructions, tools, toolChoice, text, reasoningV, include string
		c                                                                 commonMembers
		req                                                               Request
		o                                                                 respOptions
		r                                                                 reasoning
		err                                                               *Error
		items                                                             inputItems
	)
	mark := len(dst)
	top := cursor{s: s}
	top.obj()
	for {
		k, ok := top.key()
		if !ok {
			break
		}
		if k == "input" && top.peek() == '[' {
			// Written as chat messages where the walk stands (a long input
			// is then scanned once), past mark, before the members that
			// come first in the chat body are known: place moves them in.
			at := top.begin()
			dst, items = appendInputItems(dst[:mark], &top)
			input = top.finish(at, items.err)
			continue
		}
		v := top.raw()
		switch k {
		case "model", "stream", "temperature", "top_p":
			err = c.read(k, v)
		case "input":
			input, items = v, inputItems{}
		case "instructions":
			instructions = v
		case "tools":
			tools = v
		case "tool_choice":
			toolChoice = v
		case "parallel_tool_calls":
			err = checkBool(v, k)
			o.noParallel = v == "false"
		case "max_output_tokens":
			if !isNull(v) {
				o.maxOutput, err = readMaxTokens(v, k)
			}
		case "text":
			text = v
		case "reasoning":
			reasoningV = v
		case "include":
			include = v
		default:
			// previous_response_id, conversation, background and stored
			// prompts need server state: refused. store, metadata, user,
			// prompt_cache_key, service_tier, truncation and the other
			// hints are dropped (fields.go).
			if err = validateResponsesMember(k, v); err == nil {
				err = uncarried(Responses, k, v)
			}
		}
		if err != nil {
			return dst, req, err
		}
	}
	if err = c.finish(&req); err != nil {
		return dst, req, err
	}
	if !isStr(input) && !isArr(input) {
		return dst, req, badRequest("input: must be a string or an array of input items")
	}
	if !isNull(instructions) && !isStr(instructions) {
		return dst, req, badRequest("instructions: must be a string")
	}
	if err = o.readInclude(include); err != nil {
		return dst, req, err
	}
	if err = o.readReasoning(reasoningV, &r); err != nil {
		return dst, req, err
	}
	format, err := readTextFormat(text)
	if err != nil {
		return dst, req, err
	}
	if format == jsonObjectFormat && cfg.Upstream != Chat {
		// A messages upstream enforces a JSON schema (output_config.format,
		// which the chat → messages translation writes), not "any object".
		return dst, req, badRequest("text.format: this model's upstream can enforce only a JSON schema: send {type: json_schema, name, schema}, or describe the format in the prompt")
	}
	if err = r.resolve(); err != nil {
		return dst, req, err
	}
	req.Reasoning = r.on
	req.IncludeUsage = true // the stream writer needs the usage chunk
	maxTokens := o.maxOutput
	if final {
		r.fix(cfg.Dialect(), &maxTokens)
	}

	if items.walked {
		if items.err != nil {
			return dst, req, items.err
		}
		dst = items.place(dst, mark, c.model, instructions)
	} else {
		dst = append(dst[:mark], `{"model":`...)
		dst = append(dst, c.model...)
		dst = append(dst, `,"messages":[`...)
		dst = appendStringInput(dst, input, instructions)
	}
	dst = append(dst, ']')
	if maxTokens > 0 {
		dst = append(dst, `,"max_tokens":`...)
		dst = appendInt(dst, maxTokens)
	}
	if req.Stream {
		dst = append(dst, `,"stream":true`...)
		if final {
			dst = append(dst, `,"stream_options":{"include_usage":true}`...)
		}
	}
	if !isNull(c.temperature) {
		dst = appendRawMember(dst, "temperature", c.temperature)
	}
	if !isNull(c.topP) {
		dst = appendRawMember(dst, "top_p", c.topP)
	}
	if dst, err = o.appendTools(dst, tools, toolChoice); err != nil {
		return dst, req, err
	}
	if o.noParallel {
		dst = append(dst, `,"parallel_tool_calls":false`...)
	}
	if format != "" {
		dst = appendRawMember(dst, "response_format", format)
	}
	if final {
		dst = r.appendReasoning(dst, cfg, true)
	} else if r.set {
		dst = append(dst, `,"reasoning_effort":"`...)
		switch {
		case !r.on:
			dst = append(dst, "none"...)
		case r.effort == effUnset:
			dst = append(dst, "medium"...)
		default:
			dst = append(dst, [...]string{effLow: "low", effMedium: "medium", effHigh: "high", effMax: "max"}[r.effort]...)
		}
		dst = append(dst, '"')
	}
	req.resp = o
	return append(dst, '}'), req, nil
}

// readInclude notes reasoning.encrypted_content. The other values ask for
// outputs of hosted tools (which never run here) or for echoes: dropped,
// except log probabilities, which would change what the client gets.
func (o *respOptions) readInclude(v string) *Error {
	if isNull(v) {
		return nil
	}
	it, ok := arrIter(v)
	if !ok {
		return badRequest("include: must be an array of strings")
	}
	for i := 0; ; i++ {
		e, ok := it.elem()
		if !ok {
			return nil
		}
		switch {
		case !isStr(e):
			return badRequest(pathi("include", i) + ": must be a string")
		case strEq(e, "reasoning.encrypted_content"):
			o.encrypted = true
		case strEq(e, "message.output_text.logprobs"):
			return badRequest(pathi("include", i) + ": log probabilities are not returned; leave message.output_text.logprobs out")
		}
	}
}

// readReasoning reads reasoning {effort, summary} into the uniform control.
func (o *respOptions) readReasoning(v string, r *reasoning) *Error {
	if isNull(v) {
		return nil
	}
	if !isObj(v) {
		return badRequest("reasoning: must be an object {effort?, summary?}")
	}
	var effortV, summaryV string
	it, _ := objIter(v)
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		switch k {
		case "effort":
			effortV = val
		case "summary", "generate_summary":
			if !isNull(val) {
				summaryV = val
			}
		}
	}
	if !isNull(summaryV) {
		if o.summary = indexOf(respSummaries[:], inner(summaryV)); !isStr(summaryV) || o.summary == 0 {
			return badRequest("reasoning.summary: must be auto, concise or detailed")
		}
	}
	if !isNull(effortV) {
		on, e, err := parseEffort(effortV, "reasoning.effort")
		if err != nil {
			return badRequest("reasoning.effort: must be one of none, minimal, low, medium, high, xhigh")
		}
		r.effortSrc, r.effort = on, e
		o.effort = indexOf(respEfforts[:], inner(effortV))
	} else if o.summary != 0 {
		// A summary of the reasoning asks for reasoning.
		r.effortSrc, r.effort = 1, effMedium
	}
	return nil
}

// jsonObjectFormat is the response_format of text.format {type: json_object}.
const jsonObjectFormat = `{"type":"json_object"}`

// readTextFormat reads text.format into a chat response_format ("" for plain
// text). text.verbosity is a hint: dropped.
func readTextFormat(v string) (string, *Error) {
	if isNull(v) {
		return "", nil
	}
	if !isObj(v) {
		return "", badRequest("text: must be an object {format?, verbosity?}")
	}
	f := field(v, "format")
	if isNull(f) {
		return "", nil
	}
	if !isObj(f) {
		return "", badRequest("text.format: must be an object {type: text|json_schema|json_object, ...}")
	}
	switch t := field(f, "type"); {
	case strEq(t, "text"):
		return "", nil
	case strEq(t, "json_object"):
		return jsonObjectFormat, nil
	case strEq(t, "json_schema"):
		if n := field(f, "name"); !isStr(n) || emptyStr(n) {
			return "", badRequest("text.format.name: must be a non-empty string")
		}
		if !isObj(field(f, "schema")) {
			return "", badRequest("text.format.schema: must be an object (a JSON schema)")
		}
		// The json_schema object of chat holds the same members.
		var b []byte
		b = append(b, `{"type":"json_schema","json_schema":{`...)
		it, _ := objIter(f)
		for {
			k, val, ok := it.next()
			if !ok {
				break
			}
			switch k {
			case "name", "schema", "strict", "description":
				b = appendRawMember(b, k, val)
			}
		}
		return string(append(b, "}}"...)), nil
	}
	return "", badRequest("text.format.type: must be text, json_schema or json_object")
}

// appendTools writes the function tools, namespaces flattened and hosted
// tools withdrawn, and the tool choice.
func (o *respOptions) appendTools(dst []byte, tools, choice string) ([]byte, *Error) {
	c, err := readToolChoice(choice)
	if err != nil {
		return dst, err
	}
	if isNull(tools) {
		if c.kind == tcRequired || c.kind == tcFunction {
			return dst, badRequest("tool_choice: requires a tool, but no function tools are offered")
		}
		return dst, nil
	}
	it, ok := arrIter(tools)
	if !ok {
		return dst, badRequest("tools: must be an array")
	}
	var (
		nsBuf     [64]byte
		ns        = nsBuf[:0]
		withdrawn string // the first hosted tool type withdrawn
		n         int
		chosen    bool
	)
	mark := len(dst)
	dst = append(dst, `,"tools":[`...)
	tl := loc{name: "tools"}
	for i := 0; ; i++ {
		t, ok := it.elem()
		if !ok {
			break
		}
		p := tl.elem(i)
		if !isObj(t) {
			return dst, p.bad(": must be an object")
		}
		typ := field(t, "type")
		switch {
		case strEq(typ, "function"):
			var hit bool
			if dst, hit, err = appendFunctionTool(dst, t, "", &p, &c); err != nil {
				return dst, err
			}
			if hit {
				chosen = true
			}
			n++
		case strEq(typ, "namespace"):
			name := field(t, "name")
			if !isStr(name) || emptyStr(name) {
				return dst, p.bad(".name: must be a non-empty string")
			}
			ti, ok := arrIter(field(t, "tools"))
			if !ok {
				return dst, p.bad(".tools: must be an array of function tools")
			}
			ns = append(ns, inner(name)...)
			ns = append(ns, 0)
			nt := p.member("tools")
			for j := 0; ; j++ {
				ft, ok := ti.elem()
				if !ok {
					break
				}
				fp := nt.elem(j)
				if !isObj(ft) || !strEq(field(ft, "type"), "function") {
					return dst, fp.bad(": namespaces may only hold function tools here")
				}
				var hit bool
				if dst, hit, err = appendFunctionTool(dst, ft, inner(name), &fp, &c); err != nil {
					return dst, err
				}
				if hit {
					chosen = true
				}
				n++
			}
		case strEq(typ, "custom"):
			return dst, p.bad(": custom tools (free-form input) are not supported; define a function tool with a JSON schema instead")
		case isStr(typ):
			// A hosted tool: the upstream cannot run it, so the model is
			// not offered it (Codex offers web_search on every request).
			if withdrawn == "" {
				withdrawn = str(typ)
			}
		default:
			return dst, p.bad(".type: must be a string")
		}
	}
	o.keep(ns, tools)
	if n == 0 {
		dst = dst[:mark]
		if c.kind == tcRequired || c.kind == tcFunction {
			msg := "tool_choice: requires a tool, but no function tools are offered"
			if withdrawn != "" {
				msg += "; hosted tools such as " + withdrawn + " cannot run on this model's upstream"
			}
			return dst, badRequest(msg)
		}
		return dst, nil
	}
	if dst[len(dst)-1] == '[' { // every tool was outside allowed_tools
		dst = dst[:mark]
		if c.kind == tcRequired {
			return dst, badRequest("tool_choice.tools: none of the allowed tools is offered")
		}
		return append(dst, `,"tool_choice":"none"`...), nil
	}
	dst = append(dst, ']')
	switch c.kind {
	case tcNone:
		dst = append(dst, `,"tool_choice":"none"`...)
	case tcRequired:
		dst = append(dst, `,"tool_choice":"required"`...)
	case tcFunction:
		if !chosen {
			return dst, badRequest("tool_choice.name: no function tool named " + str(c.name) + " is offered")
		}
		dst = append(dst, `,"tool_choice":{"type":"function","function":{"name":"`...)
		dst = appendFlatName(dst, inner(c.ns), inner(c.name))
		dst = append(dst, `"}}`...)
	}
	return dst, nil
}

// keep copies the namespace list and the tools array into o, in one
// allocation: the answer is written after the request's bytes are gone.
// The tools are compacted, since a stream's events are one line each.
func (o *respOptions) keep(ns []byte, tools string) {
	var b strings.Builder
	b.Grow(len(ns) + len(tools))
	b.Write(ns)
	for i := 0; i < len(tools); {
		switch c := tools[i]; {
		case c == '"':
			end := stringEnd(tools, i)
			if end < 0 { // cannot happen in a validated body
				end = len(tools)
			}
			b.WriteString(tools[i:end])
			i = end
		case isSpace(c):
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	k := b.String()
	o.namespaces, o.tools = k[:len(ns)], k[len(ns):]
}

const (
	tcAuto uint8 = iota
	tcNone
	tcRequired
	tcFunction
)

// toolChoice is a Responses tool_choice: a mode, a named function, or a set
// of allowed tools (with a mode).
type toolChoice struct {
	kind     uint8
	name, ns string // raw literals of a named function
	allowed  string // raw array of allowed_tools, or ""
}

func readToolChoice(v string) (toolChoice, *Error) {
	var c toolChoice
	switch {
	case isNull(v) || strEq(v, "auto"):
	case strEq(v, "none"):
		c.kind = tcNone
	case strEq(v, "required"):
		c.kind = tcRequired
	case isObj(v):
		t := field(v, "type")
		switch {
		case strEq(t, "function"):
			c.kind, c.name, c.ns = tcFunction, field(v, "name"), field(v, "namespace")
			if !isStr(c.name) || emptyStr(c.name) {
				return c, badRequest("tool_choice.name: must be a non-empty string")
			}
			if !isNull(c.ns) && !isStr(c.ns) {
				return c, badRequest("tool_choice.namespace: must be a string")
			}
			if !isStr(c.ns) {
				c.ns = ""
			}
		case strEq(t, "allowed_tools"):
			c.allowed = field(v, "tools")
			if !isArr(c.allowed) {
				return c, badRequest("tool_choice.tools: must be an array of tools")
			}
			switch m := field(v, "mode"); {
			case isNull(m) || strEq(m, "auto"):
			case strEq(m, "required"):
				c.kind = tcRequired
			default:
				return c, badRequest("tool_choice.mode: must be auto or required")
			}
		case strEq(t, "custom"):
			return c, badRequest("tool_choice: custom tools are not supported; offer and choose a function tool")
		case isStr(t):
			return c, badRequest("tool_choice: " + str(t) + " is a hosted tool, which this model's upstream cannot run; " +
				"Timeblock offers only function tools to the model (hosted tools are withdrawn)")
		default:
			return c, badRequest("tool_choice.type: must be a string")
		}
	default:
		return c, badRequest("tool_choice: must be auto, none, required, {type: function, name} or {type: allowed_tools, mode, tools}")
	}
	return c, nil
}

// allows reports whether the function ns/name (raw, without quotes) is among
// the allowed tools, when there is such a list.
func (c *toolChoice) allows(ns, name string) bool {
	if c.allowed == "" {
		return true
	}
	it, _ := arrIter(c.allowed)
	for {
		t, ok := it.elem()
		if !ok {
			return false
		}
		if inner(field(t, "name")) == name && inner(field(t, "namespace")) == ns {
			return true
		}
		// A namespace allowed as a whole allows its tools.
		if ns != "" && strEq(field(t, "type"), "namespace") && inner(field(t, "name")) == ns {
			return true
		}
	}
}

// appendFunctionTool writes one function tool as a chat tool, its name
// prefixed with its namespace (raw; "" for none). hit reports that it is
// the function tool_choice names.
func appendFunctionTool(dst []byte, t, ns string, p *loc, c *toolChoice) ([]byte, bool, *Error) {
	var name, desc, params, strict string
	it, _ := objIter(t)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch k {
		case "name":
			name = v
		case "description":
			desc = v
		case "parameters":
			params = v
		case "strict":
			strict = v
		}
	}
	if !isStr(name) || emptyStr(name) {
		return dst, false, p.bad(".name: must be a non-empty string")
	}
	if !isNull(params) && !isObj(params) {
		return dst, false, p.bad(".parameters: must be an object (a JSON schema)")
	}
	if !c.allows(ns, inner(name)) {
		return dst, false, nil
	}
	dst = sep(dst)
	dst = append(dst, `{"type":"function","function":{"name":"`...)
	dst = appendFlatName(dst, ns, inner(name))
	dst = append(dst, '"')
	if isStr(desc) {
		dst = appendRawMember(dst, "description", desc)
	}
	dst = append(dst, `,"parameters":`...)
	if isNull(params) {
		dst = append(dst, `{"type":"object","properties":{}}`...)
	} else {
		dst = append(dst, params...)
	}
	if strict == "true" {
		dst = append(dst, `,"strict":true`...)
	}
	hit := c.kind == tcFunction && inner(c.name) == inner(name) && inner(c.ns) == ns
	return append(dst, `}}`...), hit, nil
}

// appendFlatName writes the inside of the string literal of a function name:
// ns__name, or name alone.
func appendFlatName(dst []byte, ns, name string) []byte {
	if ns != "" {
		dst = append(dst, ns...)
		dst = append(dst, nsSep...)
	}
	return append(dst, name...)
}

// splitFlatName undoes appendFlatName for a called function name (raw, no
// quotes): the longest namespace of list that prefixes it wins.
func splitFlatName(list, name string) (ns, rest string) {
	for list != "" {
		i := strings.IndexByte(list, 0)
		if i < 0 {
			break
		}
		cand := list[:i]
		list = list[i+1:]
		if len(cand) > len(ns) && len(name) > len(cand)+len(nsSep) &&
			strings.HasPrefix(name, cand) && name[len(cand):len(cand)+len(nsSep)] == nsSep {
			ns = cand
		}
	}
	if ns == "" {
		return "", name
	}
	return ns, name[len(ns)+len(nsSep):]
}

// ---- input items → chat messages ----

// item kinds of the input
const (
	ikSystem uint8 = iota + 1
	ikUser
	ikAssistant // an assistant message, a reasoning item or a function call
	ikOutput    // a function call's output
)

// inputWriter writes the input items as chat messages. Consecutive
// assistant-side items (reasoning, assistant messages, function calls) make
// one assistant message, and consecutive function call outputs one run of
// tool messages: each such run is written when it ends, from its items.
type inputWriter struct {
	dst      []byte
	items    string // the text the walk reads (offsets of runs are into it)
	sysMark  int    // where the system message starts
	sysFirst bool   // nothing is in the system message yet
	lead     bool   // only system items so far: they join the system message
	run      uint8  // ikAssistant, ikOutput or 0
	runPos   int    // the offset in items of the run's first item
	runN     int    // items in the run
	runIndex int    // index of the run's first item
	// h holds the messages after an assistant turn that calls tools, so
	// that the outputs that come after them still follow the calls
	// (Codex's approval flow: function_call, a user message, its output).
	h held
}

// appendStringInput writes the chat messages for instructions and an input
// that is a string.
func appendStringInput(dst []byte, input, instructions string) []byte {
	w := inputWriter{dst: append(dst, sysOpen...), sysMark: len(dst), sysFirst: true, lead: true}
	if isStr(instructions) {
		w.dst = appendJoinedInner(w.dst, instructions, `\n\n`, &w.sysFirst)
	}
	w.endLead()
	if !emptyStr(input) {
		w.dst = sep(w.dst)
		w.dst = append(w.dst, `{"role":"user","content":`...)
		w.dst = append(w.dst, input...)
		w.dst = append(w.dst, '}')
	}
	return w.dst
}

// sysOpen opens a system message; its text follows.
const sysOpen = `{"role":"system","content":"`

// inputItems is an input array written as chat messages where the walk of
// the request met it: dst[mark+1:end], after a '[' that makes the first
// message need no comma. The instructions, which lead the system message,
// and the members the chat body starts with may come later in the request;
// place writes them in front.
type inputItems struct {
	walked bool
	end    int
	// lead: the messages begin with the system message of the leading
	// system items, open for the instructions to be put before its text.
	lead bool
	err  *Error // the input's error, given where the chat body needs it
}

// appendInputItems writes the input array at c as chat messages (its
// leading system items as one system message) and leaves c past it, or
// where it found an error.
func appendInputItems(dst []byte, c *cursor) ([]byte, inputItems) {
	dst = append(dst, '[')
	w := inputWriter{dst: dst, items: c.s, sysMark: len(dst), sysFirst: true, lead: true}
	// An assistant run's items as inputKind read them, for
	// appendAssistantRun; a run's first eight stay on the stack.
	var runBuf [8]runItem
	run := runBuf[:0]
	w.dst = append(w.dst, sysOpen...)
	err := w.walk(c, run)
	return w.dst, inputItems{walked: true, end: len(w.dst), lead: !w.sysFirst, err: err}
}

// place writes the chat body's start, `{"model":…,"messages":[`, and the
// instructions' system message in front of the messages at dst[mark+1:end]
// and returns dst up to the last message.
func (in *inputItems) place(dst []byte, mark int, model, instructions string) []byte {
	msgs := in.end - (mark + 1)
	var instr, tail string
	skip := 0 // bytes at the start of the messages that the front replaces
	if isStr(instructions) {
		instr = inner(instructions)
	}
	switch {
	case instr == "":
	case in.lead: // the instructions, then the items' text
		skip, tail = len(sysOpen), `\n\n`
	case msgs > 0:
		tail = `"},`
	default:
		tail = `"}`
	}
	front := len(`{"model":`) + len(model) + len(`,"messages":[`)
	if instr != "" {
		front += len(sysOpen) + len(instr) + len(tail)
	}
	size := front + msgs - skip // the front is longer than what it replaces
	dst = slices.Grow(dst[:in.end], mark+size-in.end)[:mark+size]
	copy(dst[mark+front:], dst[mark+1+skip:in.end])
	// The front goes into the room the move left (no growth: the capacity
	// is there).
	f := append(dst[:mark], `{"model":`...)
	f = append(f, model...)
	f = append(f, `,"messages":[`...)
	if instr != "" {
		f = append(f, sysOpen...)
		f = append(f, instr...)
		f = append(f, tail...)
	}
	return dst[:mark+size]
}

// walk writes the input items at c, an array.
func (w *inputWriter) walk(c *cursor, run []runItem) *Error {
	c.arr()
	items := loc{name: "input"}
	for i := 0; c.more(); i++ {
		pos := c.i
		p := items.elem(i)
		kind, item, err := inputKind(c, &p)
		if err != nil {
			return err
		}
		content := item.content
		switch kind {
		case ikSystem:
			if w.lead {
				if w.dst, err = appendSystemText(w.dst, content, &p, &w.sysFirst); err != nil {
					return err
				}
				continue
			}
			if err = w.flush(run); err != nil {
				return err
			}
			mark := len(w.dst)
			w.dst = sep(w.dst)
			w.dst = append(w.dst, sysOpen...)
			first := true
			if w.dst, err = appendSystemText(w.dst, content, &p, &first); err != nil {
				return err
			}
			if first {
				w.dst = w.dst[:mark]
			} else {
				w.dst = append(w.dst, `"}`...)
			}
			w.h.note(w.dst, mark)
		case ikUser:
			w.endLead()
			if err = w.flush(run); err != nil {
				return err
			}
			mark := len(w.dst)
			if w.dst, err = appendUserChat(w.dst, content, &p); err != nil {
				return err
			}
			w.h.note(w.dst, mark)
		case ikAssistant, ikOutput:
			w.endLead()
			if w.run != kind {
				if err = w.flush(run); err != nil {
					return err
				}
				w.run, w.runPos, w.runN, w.runIndex = kind, pos, 0, i
				run = run[:0]
			}
			w.runN++
			if kind == ikAssistant {
				run = append(run, item)
			}
		}
	}
	w.endLead()
	return w.flush(run)
}

// endLead closes the system message (or removes it, when empty) at the
// first item that is not a system message.
func (w *inputWriter) endLead() {
	if !w.lead {
		return
	}
	w.lead = false
	if w.sysFirst {
		w.dst = w.dst[:w.sysMark]
		return
	}
	w.dst = append(w.dst, `"}`...)
}

// flush writes the run that has ended, if any; run holds an assistant
// run's items (kept by the caller: in the writer they would escape).
func (w *inputWriter) flush(run []runItem) *Error {
	if w.run == 0 {
		return nil
	}
	var err *Error
	if w.run == ikAssistant {
		w.dst, err = appendAssistantRun(w.dst, run, w.runIndex)
		w.h = held{}
		for k := range run {
			if strEq(run[k].typ, "function_call") {
				w.h.on = true
				break
			}
		}
	} else {
		mark := len(w.dst)
		w.dst, err = appendOutputRun(w.dst, iter{s: w.items, i: w.runPos, end: ']'}, w.runN, w.runIndex)
		if err == nil {
			w.h.results(w.dst, mark)
		}
	}
	w.run = 0
	return err
}

// inputKind classifies the input item at c, reads its members and leaves
// c past it. Walking the item where it stands, instead of finding its end
// first, scans it once; an assistant-side item is written from what this
// read (appendAssistantRun).
func inputKind(c *cursor, p *loc) (uint8, runItem, *Error) {
	var r runItem
	if !c.obj() {
		return 0, r, p.bad(": must be an object")
	}
	r.read(c)
	typ, role := r.typ, r.role
	switch {
	case isNull(typ) || strEq(typ, "message"):
		switch {
		case strEq(role, "user"):
			return ikUser, r, nil
		case strEq(role, "assistant"):
			return ikAssistant, r, nil
		case strEq(role, "system"), strEq(role, "developer"):
			return ikSystem, r, nil
		}
		return 0, r, p.bad(".role: must be user, assistant, system or developer")
	case strEq(typ, "reasoning"), strEq(typ, "function_call"):
		return ikAssistant, r, nil
	case strEq(typ, "function_call_output"):
		return ikOutput, r, nil
	case strEq(typ, "item_reference"):
		return 0, r, p.bad(": item references need stored items, which Timeblock does not keep; send the items themselves")
	case strEq(typ, "custom_tool_call"), strEq(typ, "custom_tool_call_output"):
		return 0, r, p.bad(".type: custom tools are not supported; use function tools")
	case isStr(typ):
		return 0, r, p.bad(".type: " + str(typ) + " items belong to hosted tools, which this model's upstream cannot run")
	}
	return 0, r, p.bad(".type: must be a string")
}

// appendSystemText appends a system or developer message's text (a string
// or text parts) to an open system message.
func appendSystemText(dst []byte, content string, p *loc, first *bool) ([]byte, *Error) {
	if isStr(content) {
		return appendJoinedInner(dst, content, `\n\n`, first), nil
	}
	it, ok := arrIter(content)
	if !ok {
		return dst, p.bad(".content: must be a string or an array of text parts")
	}
	cp := p.member("content")
	for j := 0; ; j++ {
		part, ok := it.elem()
		if !ok {
			return dst, nil
		}
		at := cp.elem(j)
		txt, err := partText(part, &at)
		if err != nil {
			return dst, err
		}
		if txt == "" {
			return dst, at.bad(": system and developer messages may only hold text parts")
		}
		dst = appendJoinedInner(dst, txt, `\n\n`, first)
	}
}

// partText returns the text literal of a text part (input_text, output_text,
// refusal), or "" for another part.
func partText(p string, at *loc) (string, *Error) {
	if !isObj(p) {
		return "", at.bad(": must be an object")
	}
	switch t := field(p, "type"); {
	case strEq(t, "input_text"), strEq(t, "output_text"), strEq(t, "text"):
		txt := field(p, "text")
		if !isStr(txt) {
			return "", at.bad(".text: must be a string")
		}
		return txt, nil
	case strEq(t, "refusal"):
		txt := field(p, "refusal")
		if !isStr(txt) {
			return "", at.bad(".refusal: must be a string")
		}
		return txt, nil
	case !isStr(t):
		return "", at.bad(".type: must be a string")
	}
	return "", nil
}

// appendUserChat writes a user message.
func appendUserChat(dst []byte, content string, p *loc) ([]byte, *Error) {
	if isStr(content) {
		dst = sep(dst)
		dst = append(dst, `{"role":"user","content":`...)
		dst = append(dst, content...)
		return append(dst, '}'), nil
	}
	it, ok := arrIter(content)
	if !ok {
		return dst, p.bad(".content: must be a string or an array of content parts")
	}
	dst = sep(dst)
	dst = append(dst, `{"role":"user","content":[`...)
	cp := p.member("content")
	for j := 0; ; j++ {
		part, ok := it.elem()
		if !ok {
			break
		}
		at := cp.elem(j)
		var err *Error
		if dst, err = appendPartChat(dst, part, &at); err != nil {
			return dst, err
		}
	}
	return append(dst, `]}`...), nil
}

// appendPartChat writes an input content part as a chat content part.
func appendPartChat(dst []byte, p string, at *loc) ([]byte, *Error) {
	txt, err := partText(p, at)
	if err != nil {
		return dst, err
	}
	if txt != "" {
		dst = sep(dst)
		dst = append(dst, `{"type":"text","text":`...)
		dst = append(dst, txt...)
		return append(dst, '}'), nil
	}
	switch t := field(p, "type"); {
	case strEq(t, "input_image"):
		u := field(p, "image_url")
		if !isStr(u) {
			if !isNull(field(p, "file_id")) {
				return dst, at.bad(".file_id: uploaded files are not supported; send image_url (a URL or a base64 data URL)")
			}
			return dst, at.bad(".image_url: must be a string (a URL or a base64 data URL)")
		}
		dst = sep(dst)
		dst = append(dst, `{"type":"image_url","image_url":{"url":`...)
		dst = append(dst, u...)
		if d := field(p, "detail"); isStr(d) {
			dst = appendRawMember(dst, "detail", d)
		}
		return append(dst, `}}`...), nil
	case strEq(t, "input_file"):
		fd := field(p, "file_data")
		if !isStr(fd) {
			return dst, at.bad(": only inline file_data (a base64 data URL) is supported, not file_id or file_url")
		}
		dst = sep(dst)
		dst = append(dst, `{"type":"file","file":{"file_data":`...)
		dst = append(dst, fd...)
		if n := field(p, "filename"); isStr(n) {
			dst = appendRawMember(dst, "filename", n)
		}
		return append(dst, `}}`...), nil
	case strEq(t, "input_audio"):
		return dst, at.bad(": audio input is not supported")
	}
	return dst, at.bad(".type: content part type " + str(field(p, "type")) + " is not supported")
}

// runItem is an assistant-side input item, its members read once.
type runItem struct {
	typ, role, content            string
	callID, name, namespace, args string
	encrypted, reasoning, summary string
}

// read reads the members of the object c has entered (the last of
// duplicates counts) and leaves c past it.
func (r *runItem) read(c *cursor) {
	for {
		k, ok := c.key()
		if !ok {
			return
		}
		var v *string
		switch k {
		case "type":
			v = &r.typ
		case "role":
			v = &r.role
		case "content":
			v = &r.content
		case "call_id":
			v = &r.callID
		case "name":
			v = &r.name
		case "namespace":
			v = &r.namespace
		case "arguments":
			v = &r.args
		case "encrypted_content":
			v = &r.encrypted
		case "summary":
			v = &r.summary
		default:
			continue
		}
		*v = c.raw()
	}
}

// appendAssistantRun writes the assistant-side items of a run, the first
// of them input[index], as one assistant message: the messages' text as
// content, and on a turn that calls tools the reasoning as
// reasoning_content (reasoning templates need it to continue after the
// results come back) and the calls as tool_calls. The items are written in
// three passes.
func appendAssistantRun(dst []byte, items []runItem, index int) ([]byte, *Error) {
	calls := 0
	for k := range items {
		switch r := &items[k]; {
		case strEq(r.typ, "function_call"):
			calls++
		case strEq(r.typ, "reasoning"):
			r.reasoning, r.content = r.content, "" // a reasoning item's content is reasoning_text parts
		}
	}
	input := loc{name: "input"}
	mark := len(dst)
	dst = sep(dst)
	dst = append(dst, `{"role":"assistant","content":"`...)
	first := true
	for k := range items {
		r := &items[k]
		if !strEq(r.role, "assistant") {
			continue
		}
		if isStr(r.content) {
			dst = appendJoinedInner(dst, r.content, "", &first)
			continue
		}
		p := input.elem(index + k)
		ci, ok := arrIter(r.content)
		if !ok {
			return dst, p.bad(".content: must be a string or an array of output_text parts")
		}
		cp := p.member("content")
		for j := 0; ; j++ {
			part, ok := ci.elem()
			if !ok {
				break
			}
			at := cp.elem(j)
			txt, err := partText(part, &at)
			if err != nil {
				return dst, err
			}
			if txt == "" {
				return dst, at.bad(": assistant messages may only hold output_text and refusal parts")
			}
			dst = appendJoinedInner(dst, txt, "", &first)
		}
	}
	switch {
	case first && calls == 0: // reasoning alone: nothing to write
		return dst[:mark], nil
	case first:
		dst = append(dst[:len(dst)-1], "null"...)
	default:
		dst = append(dst, '"')
	}
	if calls == 0 {
		return append(dst, '}'), nil
	}
	mark = len(dst)
	dst = append(dst, `,"reasoning_content":"`...)
	first = true
	for k := range items {
		if r := &items[k]; strEq(r.typ, "reasoning") {
			var err *Error
			p := input.elem(index + k)
			if dst, err = appendReasoningText(dst, r, &p, &first); err != nil {
				return dst, err
			}
		}
	}
	if first {
		dst = dst[:mark]
	} else {
		dst = append(dst, '"')
	}
	dst = append(dst, `,"tool_calls":[`...)
	for k := range items {
		r := &items[k]
		if !strEq(r.typ, "function_call") {
			continue
		}
		switch {
		case !isStr(r.callID) || emptyStr(r.callID):
			return dst, badRequest(pathi("input", index+k) + ".call_id: must be a non-empty string")
		case !isStr(r.name) || emptyStr(r.name):
			return dst, badRequest(pathi("input", index+k) + ".name: must be a non-empty string")
		case !isNull(r.namespace) && !isStr(r.namespace):
			return dst, badRequest(pathi("input", index+k) + ".namespace: must be a string")
		}
		dst = sep(dst)
		dst = append(dst, `{"id":`...)
		dst = append(dst, r.callID...)
		dst = append(dst, `,"type":"function","function":{"name":"`...)
		dst = appendFlatName(dst, inner(r.namespace), inner(r.name))
		dst = append(dst, `","arguments":`...)
		switch {
		case isStr(r.args):
			dst = append(dst, r.args...)
		case isObj(r.args):
			dst = appendStr(dst, r.args)
		case isNull(r.args):
			dst = append(dst, `"{}"`...)
		default:
			return dst, badRequest(pathi("input", index+k) + ".arguments: must be a string (JSON text)")
		}
		dst = append(dst, `}}`...)
	}
	return append(dst, `]}`...), nil
}

// appendReasoningText appends a reasoning item's text to an open string:
// the reasoning restored from Timeblock's encrypted_content, else its
// reasoning_text content, else its summary.
func appendReasoningText(dst []byte, r *runItem, p *loc, first *bool) ([]byte, *Error) {
	if enc := r.encrypted; isStr(enc) && strings.HasPrefix(inner(enc), encPrefix) {
		mark := len(dst)
		if !*first {
			dst = append(dst, `\n\n`...)
		}
		body := len(dst)
		out, err := base64.StdEncoding.AppendDecode(dst, s2b(inner(enc)[len(encPrefix):]))
		if err == nil && validInner(out[body:]) {
			if len(out) > body {
				*first = false
				return out, nil
			}
			return out[:mark], nil
		}
		dst = out[:mark] // not ours after all: fall back on the text
	}
	for _, v := range [...]string{r.reasoning, r.summary} {
		pi, ok := arrIter(v)
		if !ok {
			if !isNull(v) {
				return dst, p.bad(": summary and content must be arrays of text parts")
			}
			continue
		}
		found := false
		for j := 0; ; j++ {
			part, ok := pi.elem()
			if !ok {
				break
			}
			txt := field(part, "text")
			if !isStr(txt) {
				e := p.elem(j)
				return dst, e.bad(".text: must be a string")
			}
			dst = appendJoinedInner(dst, txt, `\n\n`, first)
			found = true
		}
		if found {
			break
		}
	}
	return dst, nil
}

// s2b views s as bytes without copying; they must not be written to.
func s2b(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// validInner reports whether b is the inside of a JSON string literal.
func validInner(b []byte) bool {
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"' || c < 0x20:
			return false
		case c == '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 >= len(b) {
					return false
				}
				if _, ok := hex4(b2s(b[i+2 : i+6])); !ok {
					return false
				}
				i += 5
			default:
				return false
			}
		}
	}
	return true
}

// appendOutputRun writes n function call outputs read from it as tool
// messages. Images and files in outputs cannot ride in a chat tool message:
// they follow the run in one user message.
func appendOutputRun(dst []byte, it iter, n, index int) ([]byte, *Error) {
	start := it
	attachments := false
	input := loc{name: "input"}
	for k := 0; k < n; k++ {
		item, _ := it.elem()
		p := input.elem(index + k)
		id, out := field(item, "call_id"), field(item, "output")
		if !isStr(id) || emptyStr(id) {
			return dst, p.bad(".call_id: must be a non-empty string")
		}
		dst = sep(dst)
		dst = append(dst, `{"role":"tool","tool_call_id":`...)
		dst = append(dst, id...)
		dst = append(dst, `,"content":`...)
		switch {
		case isStr(out):
			dst = append(dst, out...)
		case isNull(out):
			dst = append(dst, `""`...)
		default:
			pi, ok := arrIter(out)
			if !ok {
				return dst, p.bad(".output: must be a string or an array of content parts")
			}
			dst = append(dst, '"')
			first := true
			op := p.member("output")
			for j := 0; ; j++ {
				part, ok := pi.elem()
				if !ok {
					break
				}
				at := op.elem(j)
				txt, err := partText(part, &at)
				if err != nil {
					return dst, err
				}
				if txt == "" {
					attachments = true
					continue
				}
				dst = appendJoinedInner(dst, txt, `\n`, &first)
			}
			if first && attachments {
				dst = append(dst, `(attached below)`...)
			}
			dst = append(dst, '"')
		}
		dst = append(dst, '}')
	}
	if !attachments {
		return dst, nil
	}
	dst = append(dst, `,{"role":"user","content":[`...)
	it = start
	for k := 0; k < n; k++ {
		item, _ := it.elem()
		p := input.elem(index + k)
		op := p.member("output")
		pi, ok := arrIter(field(item, "output"))
		if !ok {
			continue
		}
		wrote := false
		for j := 0; ; j++ {
			part, ok := pi.elem()
			if !ok {
				break
			}
			at := op.elem(j)
			if txt, _ := partText(part, &at); txt != "" {
				continue
			}
			if !wrote {
				dst = sep(dst)
				dst = append(dst, `{"type":"text","text":"Attached to the output of tool call `...)
				dst = append(dst, inner(field(item, "call_id"))...)
				dst = append(dst, `:"}`...)
				wrote = true
			}
			var err *Error
			if dst, err = appendPartChat(dst, part, &at); err != nil {
				return dst, err
			}
		}
	}
	return append(dst, `]}`...), nil
}
