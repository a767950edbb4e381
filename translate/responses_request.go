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
//   - The reader is in files by concern: this one (the top level, include,
//     reasoning, text.format), responses_tools.go, responses_input.go and
//     responses_runs.go.
//   - text.format json_schema reaches a messages upstream as
//     output_config.format (through the chat translation); json_object,
//     "any object", cannot be enforced there and is a 400.
//   - The response object echoes the request's tools.

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
	dst = appendChatLimits(dst, maxTokens, req.Stream, final)
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
	dst = r.appendPivot(dst, cfg, final)
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
