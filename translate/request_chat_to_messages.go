package translate

// Chat completions client → messages upstream.

func chatToMessages(dst []byte, s string, cfg *Config) ([]byte, Request, *Error) {
	var (
		messages, stop, topK, user, tools, toolChoice, schema string
		c                                                     commonMembers
		maxTokens                                             int64
		noParallel                                            bool
		req                                                   Request
		r                                                     reasoning
		err                                                   *Error
	)
	top := cursor{s: s}
	top.obj()
	for {
		k, ok := top.key()
		if !ok {
			break
		}
		var v string
		if v, err = takeMember(&top, Chat, k); err != nil {
			return dst, req, err
		}
		if handled, err := r.member(k, v, true); handled {
			if err != nil {
				return dst, req, err
			}
			continue
		}
		switch k {
		case "model", "stream", "temperature", "top_p":
			err = c.read(k, v)
		case "messages":
			messages = v
		case "max_tokens", "max_completion_tokens":
			if isNull(v) {
				continue
			}
			n, err := readMaxTokens(v, k)
			if err != nil {
				return dst, req, err
			}
			if maxTokens == 0 || k == "max_completion_tokens" {
				maxTokens = n
			}
		case "stream_options": // an object (validated)
			req.IncludeUsage = field(v, "include_usage") == "true"
		case "stop":
			err = stopList(v, "stop")
			stop = v
		case "top_k":
			err = checkTopK(v)
			topK = v
		case "user": // a string (validated)
			if !isNull(v) {
				user = v
			}
		case "tools":
			tools = v
		case "tool_choice":
			toolChoice = v
		case "parallel_tool_calls": // a boolean (validated)
			noParallel = v == "false"
		case "response_format": // an object with a type string (validated)
			schema, err = responseFormatMessages(v)
		default:
			err = uncarried(Chat, k, v)
		}
		if err != nil {
			return dst, req, err
		}
	}
	if err = c.finish(&req); err != nil {
		return dst, req, err
	}
	if !isArr(messages) {
		return dst, req, badRequest("messages: must be an array")
	}
	if err = r.resolve(); err != nil {
		return dst, req, err
	}
	req.Reasoning = r.on
	if maxTokens == 0 {
		maxTokens = cfg.defaultMaxTokens()
	}
	r.fix(cfg.Dialect(), &maxTokens)

	dst = append(dst, `{"model":`...)
	dst = append(dst, c.model...)
	dst = append(dst, `,"max_tokens":`...)
	dst = appendInt(dst, maxTokens)
	dst = append(dst, `,"messages":[`...)
	turnsAt := len(dst)
	var sysBuf [8]systemMessage
	sys := sysBuf[:0]
	if dst, sys, err = appendMessagesMessages(dst, messages, sys); err != nil {
		return dst, req, err
	}
	noTurns := len(dst) == turnsAt
	dst = append(dst, ']')
	if dst, err = appendSystemMessages(dst, sys); err != nil {
		return dst, req, err
	}
	if req.Stream {
		dst = append(dst, `,"stream":true`...)
	}
	if !isNull(stop) {
		dst = key(dst, "stop_sequences")
		if isStr(stop) {
			dst = append(dst, '[')
			dst = append(dst, stop...)
			dst = append(dst, ']')
		} else {
			dst = append(dst, stop...)
		}
	}
	if !isNull(c.temperature) {
		dst = appendRawMember(dst, "temperature", c.temperature)
	}
	if !isNull(c.topP) {
		dst = appendRawMember(dst, "top_p", c.topP)
	}
	if !isNull(topK) {
		dst = appendRawMember(dst, "top_k", topK)
	}
	if user != "" {
		dst = append(dst, `,"metadata":{"user_id":`...)
		dst = append(dst, user...)
		dst = append(dst, '}')
	}
	if dst, err = appendToolsMessages(dst, tools, toolChoice, noParallel); err != nil {
		return dst, req, err
	}
	if schema != "" {
		// Structured outputs: the messages API's output_config.format
		// (anthropic-sdk-go's JSONOutputFormatParam: type and schema; it has
		// no name, and is always strict).
		dst = append(dst, `,"output_config":{"format":{"type":"json_schema","schema":`...)
		dst = append(dst, schema...)
		dst = append(dst, `}}`...)
	}
	if noTurns {
		// messages: [] (no messages, or only system ones) is refused by a
		// messages upstream; say what is missing, after the members'
		// own errors.
		return dst, req, badRequest("messages: " + noTurnsMsg)
	}
	dst = r.appendReasoning(dst, cfg, false)
	return append(dst, '}'), req, nil
}

// responseFormatMessages reads response_format for a messages upstream and
// returns the JSON schema it asks for ("" for plain text). A json_schema
// format is carried as output_config.format; json_object, which asks for
// any JSON object, has no counterpart there (a schema must be given) and
// is refused by the field rule, as are other types.
func responseFormatMessages(v string) (string, *Error) {
	if isNull(v) || isTextFormat(v) {
		return "", nil
	}
	if !strEq(field(v, "type"), "json_schema") {
		return "", uncarried(Chat, "response_format", v)
	}
	sc := field(field(v, "json_schema"), "schema")
	if !isObj(sc) {
		return "", badRequest("response_format.json_schema.schema: must be a JSON schema object; this model's upstream needs the schema to enforce it")
	}
	return sc, nil
}

// noTurnsMsg says what a conversation without a user or assistant turn lacks.
const noTurnsMsg = "at least one user message is required; a system prompt alone cannot be answered"

// msgRole reads a chat message's role and content.
func msgRole(m string, p *loc) (role, content string, err *Error) {
	if !isObj(m) {
		return "", "", p.bad(": must be an object")
	}
	var r string
	it, _ := objIter(m)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch k {
		case "role":
			r = v
		case "content":
			content = v
		}
	}
	if !isStr(r) {
		return "", "", p.bad(".role: must be a string")
	}
	return inner(r), content, nil
}

// systemMessage is a system or developer message, the index-th of the
// conversation: the messages are gone over once, and these are written
// after them as the top-level system prompt (JSON members have no order).
type systemMessage struct {
	content string
	index   int
}

// appendSystemMessages writes the system prompt gathered from sys, if any.
func appendSystemMessages(dst []byte, sys []systemMessage) ([]byte, *Error) {
	mark := len(dst)
	dst = append(dst, `,"system":"`...)
	body := len(dst)
	first := true
	for _, m := range sys {
		if isStr(m.content) {
			dst = appendJoinedInner(dst, m.content, `\n\n`, &first)
			continue
		}
		ci, _ := arrIter(m.content)
		for j := 0; ; j++ {
			p, ok := ci.elem()
			if !ok {
				break
			}
			txt := field(p, "text")
			if !strEq(field(p, "type"), "text") || !isStr(txt) {
				return dst, badRequest(pathi(pathi("messages", m.index)+".content", j) + ": system messages may only hold text parts")
			}
			dst = appendJoinedInner(dst, txt, `\n\n`, &first)
		}
	}
	if len(dst) == body {
		return dst[:mark], nil
	}
	return append(dst, '"'), nil
}

// turns merges consecutive blocks of one role into one turn, since tool
// messages and a following user message make one user turn. In a user turn
// the tool_result blocks come first, as the messages API requires: a user
// message between the calls and their tool messages (Codex's approval flow,
// through the Responses translation or a chat client) is held after them
// (toolorder.go).
type turns struct {
	dst  []byte
	role string
	h    held // a user turn's blocks other than tool results
}

// open readies dst for a block of role: a new turn when the role changes,
// else a separator.
func (t *turns) open(role string) {
	if t.role != role {
		if t.role != "" {
			t.dst = append(t.dst, `]}`...)
		}
		t.dst = sep(t.dst)
		t.dst = append(t.dst, `{"role":"`...)
		t.dst = append(t.dst, role...)
		t.dst = append(t.dst, `","content":[`...)
		t.role = role
		t.h = held{on: role == "user"}
	}
	t.dst = sep(t.dst)
}

// block readies dst for a block of role that is not a tool result; the
// caller appends it.
func (t *turns) block(role string) {
	t.open(role)
	if t.h.on && t.h.at == 0 {
		t.h.at = len(t.dst)
	}
}

func (t *turns) close() []byte {
	if t.role != "" {
		t.dst = append(t.dst, `]}`...)
	}
	return t.dst
}

// appendMessagesMessages writes the conversation's turns and appends its
// system and developer messages to sys, for appendSystemMessages.
func appendMessagesMessages(dst []byte, messages string, sys []systemMessage) ([]byte, []systemMessage, *Error) {
	t := turns{dst: dst}
	it, _ := arrIter(messages)
	msgs := loc{name: "messages"}
	for i := 0; ; i++ {
		m, ok := it.elem()
		if !ok {
			break
		}
		p := msgs.elem(i)
		role, content, err := msgRole(m, &p)
		if err != nil {
			return t.dst, sys, err
		}
		switch role {
		case "system", "developer":
			if !isStr(content) && !isArr(content) {
				err = p.bad(".content: must be a string or an array of text parts")
			}
			sys = append(sys, systemMessage{content, i})
		case "user":
			err = userToMessages(&t, content, &p)
		case "assistant":
			err = assistantToMessages(&t, m, content, &p)
		case "tool":
			err = toolToMessages(&t, m, content, &p)
		case "function":
			err = p.bad(".role: function messages are not supported; use tool messages")
		default:
			err = p.bad(".role: must be system, developer, user, assistant or tool")
		}
		if err != nil {
			return t.dst, sys, err
		}
	}
	return t.close(), sys, nil
}

func userToMessages(t *turns, content string, p *loc) *Error {
	if isStr(content) {
		if !emptyStr(content) {
			t.block("user")
			t.dst = append(t.dst, `{"type":"text","text":`...)
			t.dst = append(t.dst, content...)
			t.dst = append(t.dst, '}')
		}
		return nil
	}
	it, ok := arrIter(content)
	if !ok {
		return p.bad(".content: must be a string or an array of content parts")
	}
	cp := p.member("content")
	for j := 0; ; j++ {
		part, ok := it.elem()
		if !ok {
			return nil
		}
		at := cp.elem(j)
		if err := partToMessages(t, "user", part, &at); err != nil {
			return err
		}
	}
}

// partToMessages writes one chat content part as a messages block.
func partToMessages(t *turns, role, p string, at *loc) *Error {
	typ, err := blockType(p, at)
	if err != nil {
		return err
	}
	switch typ {
	case "text", "refusal":
		txt := field(p, typ)
		if !isStr(txt) {
			return at.bad("." + typ + ": must be a string")
		}
		if !emptyStr(txt) {
			t.block(role)
			t.dst = append(t.dst, `{"type":"text","text":`...)
			t.dst = append(t.dst, txt...)
			t.dst = append(t.dst, '}')
		}
	case "image_url":
		iu := field(p, "image_url")
		u := iu
		if isObj(iu) {
			u = field(iu, "url")
		}
		if !isStr(u) {
			return at.bad(".image_url.url: must be a string")
		}
		t.block(role)
		if mt, data, ok := dataURL(str(u)); ok {
			t.dst = append(t.dst, `{"type":"image","source":{"type":"base64","media_type":`...)
			t.dst = appendStr(t.dst, mt)
			t.dst = append(t.dst, `,"data":`...)
			t.dst = appendStr(t.dst, data)
			t.dst = append(t.dst, `}}`...)
		} else {
			t.dst = append(t.dst, `{"type":"image","source":{"type":"url","url":`...)
			t.dst = append(t.dst, u...)
			t.dst = append(t.dst, `}}`...)
		}
	case "file":
		fd := field(field(p, "file"), "file_data")
		mt, data, ok := dataURL(str(fd))
		if !isStr(fd) || !ok {
			return at.bad(".file: only inline file_data (a base64 data URL) is supported")
		}
		t.block(role)
		t.dst = append(t.dst, `{"type":"document","source":{"type":"base64","media_type":`...)
		t.dst = appendStr(t.dst, mt)
		t.dst = append(t.dst, `,"data":`...)
		t.dst = appendStr(t.dst, data)
		t.dst = append(t.dst, `}}`...)
	case "input_audio":
		return at.bad(": audio input is not supported by this model's upstream")
	default:
		return at.bad(".type: content part type " + typ + " is not supported")
	}
	return nil
}

func assistantToMessages(t *turns, m, content string, p *loc) *Error {
	var reasoningLit, calls string
	it, _ := objIter(m)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch k {
		case "reasoning_content":
			if isStr(v) {
				reasoningLit = v
			}
		case "reasoning":
			if isStr(v) && reasoningLit == "" {
				reasoningLit = v
			}
		case "tool_calls":
			calls = v
		}
	}
	hasCalls := isArr(calls) && trimJSON(calls) != "[]"
	if hasCalls && reasoningLit != "" && !emptyStr(reasoningLit) {
		t.block("assistant")
		t.dst = append(t.dst, `{"type":"thinking","thinking":`...)
		t.dst = append(t.dst, reasoningLit...)
		t.dst = append(t.dst, '}')
	}
	switch {
	case isNull(content):
	case isStr(content):
		if !emptyStr(content) {
			t.block("assistant")
			t.dst = append(t.dst, `{"type":"text","text":`...)
			t.dst = append(t.dst, content...)
			t.dst = append(t.dst, '}')
		}
	default:
		ci, ok := arrIter(content)
		if !ok {
			return p.bad(".content: must be a string, an array of parts or null")
		}
		cp := p.member("content")
		for j := 0; ; j++ {
			part, ok := ci.elem()
			if !ok {
				break
			}
			at := cp.elem(j)
			if err := partToMessages(t, "assistant", part, &at); err != nil {
				return err
			}
		}
	}
	if isNull(calls) {
		return nil
	}
	ci, ok := arrIter(calls)
	if !ok {
		return p.bad(".tool_calls: must be an array")
	}
	tcs := p.member("tool_calls")
	for j := 0; ; j++ {
		c, ok := ci.elem()
		if !ok {
			return nil
		}
		fn := field(c, "function")
		id, name := field(c, "id"), field(fn, "name")
		if !isStr(id) || !isStr(name) {
			cp := tcs.elem(j)
			return cp.bad(": tool calls need id and function.name strings")
		}
		t.block("assistant")
		t.dst = append(t.dst, `{"type":"tool_use","id":`...)
		t.dst = appendCleanID(t.dst, id)
		t.dst = append(t.dst, `,"name":`...)
		t.dst = append(t.dst, name...)
		t.dst = append(t.dst, `,"input":`...)
		t.dst = appendArgsObject(t.dst, field(fn, "arguments"))
		t.dst = append(t.dst, '}')
	}
}

// appendArgsObject writes tool call arguments (a JSON text in a string) as an
// object; arguments that are empty or not an object become {}.
func appendArgsObject(dst []byte, args string) []byte {
	if isObj(args) { // some clients send the object itself
		return append(dst, args...)
	}
	if !isStr(args) {
		return append(dst, "{}"...)
	}
	mark := len(dst)
	dst = appendUnescaped(dst, inner(args))
	a := trimJSON(b2s(dst[mark:]))
	if isObj(a) && validJSON(a) {
		n := copy(dst[mark:], a)
		return dst[:mark+n]
	}
	return append(dst[:mark], "{}"...)
}

func toolToMessages(t *turns, m, content string, p *loc) *Error {
	id := field(m, "tool_call_id")
	if !isStr(id) {
		return p.bad(".tool_call_id: must be a string")
	}
	mark := len(t.dst)
	t.open("user")
	t.dst = append(t.dst, `{"type":"tool_result","tool_use_id":`...)
	t.dst = appendCleanID(t.dst, id)
	t.dst = append(t.dst, `,"content":`...)
	switch {
	case isNull(content):
		t.dst = append(t.dst, `""`...)
	case isStr(content):
		t.dst = append(t.dst, content...)
	default:
		ci, ok := arrIter(content)
		if !ok {
			return p.bad(".content: must be a string or an array of text parts")
		}
		t.dst = append(t.dst, '"')
		first := true
		for j := 0; ; j++ {
			part, ok := ci.elem()
			if !ok {
				break
			}
			txt := field(part, "text")
			if !strEq(field(part, "type"), "text") || !isStr(txt) {
				return badRequest(pathi(p.String()+".content", j) + ": tool messages may only hold text parts")
			}
			t.dst = appendJoinedInner(t.dst, txt, `\n`, &first)
		}
		t.dst = append(t.dst, '"')
	}
	t.dst = append(t.dst, '}')
	t.h.results(t.dst, mark)
	return nil
}

func appendToolsMessages(dst []byte, tools, choice string, noParallel bool) ([]byte, *Error) {
	n := 0
	// Shapes are validated (validate.go): an array of objects, function
	// tools with a name and object parameters.
	if it, ok := arrIter(tools); ok {
		mark := len(dst)
		dst = append(dst, `,"tools":[`...)
		for i := 0; ; i++ {
			t, ok := it.elem()
			if !ok {
				break
			}
			if typ := field(t, "type"); !isNull(typ) && !strEq(typ, "function") {
				return dst, badRequest(pathi("tools", i) + ".type: only function tools are supported")
			}
			fn := field(t, "function")
			name := field(fn, "name")
			dst = sep(dst)
			dst = append(dst, `{"name":`...)
			dst = append(dst, name...)
			if d := field(fn, "description"); isStr(d) {
				dst = append(dst, `,"description":`...)
				dst = append(dst, d...)
			}
			dst = append(dst, `,"input_schema":`...)
			if p := field(fn, "parameters"); isObj(p) {
				dst = append(dst, p...)
			} else {
				dst = append(dst, `{"type":"object","properties":{}}`...)
			}
			dst = append(dst, '}')
			n++
		}
		if n == 0 {
			dst = dst[:mark]
		} else {
			dst = append(dst, ']')
		}
	}
	if n == 0 {
		return dst, nil
	}
	par := `}`
	if noParallel {
		par = `,"disable_parallel_tool_use":true}`
	}
	switch {
	case isNull(choice) || strEq(choice, "auto"):
		if noParallel {
			dst = append(dst, `,"tool_choice":{"type":"auto"`...)
			dst = append(dst, par...)
		}
	case strEq(choice, "required"):
		dst = append(dst, `,"tool_choice":{"type":"any"`...)
		dst = append(dst, par...)
	case strEq(choice, "none"):
		dst = append(dst, `,"tool_choice":{"type":"none"}`...)
	case isObj(choice):
		name := field(field(choice, "function"), "name")
		if !isStr(name) {
			return dst, badRequest("tool_choice.function.name: must be a string")
		}
		dst = append(dst, `,"tool_choice":{"type":"tool","name":`...)
		dst = append(dst, name...)
		dst = append(dst, par...)
	default:
		return dst, badRequest("tool_choice: must be auto, required, none or {type: function, function: {name}}")
	}
	return dst, nil
}
