package translate

// One validation per client format, applied on every path whatever the
// upstream: what the format itself does not allow — roles, message and
// content shapes, tool shapes, server-side tools, ranges and the types of
// every known member — is a 400 naming the member and what to send, the
// same on a pass-through (chat → chat, messages → messages) as on a
// translation. Each request reader (passRequest, messagesToChat,
// chatToMessages) calls validateMember for every top-level member in the
// one loop it already runs over the body, so a body is walked once for
// validation; the translators then refuse only what their upstream cannot
// carry (the field rule, fields.go).
//
// What the validator leaves alone:
//   - members nobody classified (upstreams have extensions, clients add
//     members with every release): they pass on a pass-through and follow
//     the field rule on a translation;
//   - content part and block types it does not know (vLLM's video_url, a
//     new block type): a pass-through passes them, a translation refuses
//     what it cannot carry;
//   - hints inside blocks (cache_control, citations, signatures).
//
// A Responses client is always translated; its reader (responses_request.go)
// checks its items as it goes.
//
// Paths in messages are built only when a check fails: a valid body costs
// no allocation here.

// validateMember checks the top-level member k (raw value v) of a Chat or
// Messages client's request. Members read by commonMembers, reasoning,
// stop lists, max_tokens and top_k are checked where they are read.
func validateMember(client Format, k, v string) *Error {
	if isNull(v) {
		return nil
	}
	if client == Messages {
		return validateMessagesMember(k, v)
	}
	return validateChatMember(k, v)
}

// takeMember takes the value of the top-level member k at c and validates
// it (validateMember). The messages are validated as they are walked, and
// that walk is the only pass over them before a translation reads them.
func takeMember(c *cursor, client Format, k string) (string, *Error) {
	if k != "messages" || c.peek() != '[' {
		v := c.raw()
		return v, validateMember(client, k, v)
	}
	if client == Messages {
		v, _, err := takeMessages(c, nil)
		return v, err
	}
	at := c.begin()
	err := validateChatMessages(c)
	return c.finish(at, err), err
}

// msgView is a message of a messages request as its check read it, raw: a
// translation writes the messages from their views instead of walking them
// again.
type msgView struct{ role, content string }

// takeMessages is takeMember for a messages client's messages array at c,
// appending the view of each message to views when views is not nil.
func takeMessages(c *cursor, views []msgView) (string, []msgView, *Error) {
	at := c.begin()
	views, err := readMessagesMessages(c, views)
	return c.finish(at, err), views, err
}

// Chat completions.

const chatRoles = "system, developer, user, assistant, tool or function (legacy)"

func validateChatMember(k, v string) *Error {
	switch k {
	case "messages":
		return validateChatMessages(cursorOn(v))
	case "tools":
		return validateChatTools(v)
	case "tool_choice":
		return validateChatToolChoice(v)
	case "parallel_tool_calls", "logprobs", "store":
		return checkBool(v, k)
	case "n":
		if n, ok := toInt(v); !ok || n < 1 {
			return badRequest("n: must be a positive integer (the number of choices; send 1 or leave it out)")
		}
	case "top_logprobs":
		if n, ok := toInt(v); !ok || n < 0 || n > 20 {
			return badRequest("top_logprobs: must be an integer between 0 and 20")
		}
	case "seed":
		if _, ok := toInt(v); !ok {
			return badRequest("seed: must be an integer")
		}
	case "frequency_penalty", "presence_penalty":
		return checkRange(v, k, -2, 2)
	case "user", "service_tier", "prompt_cache_key", "prompt_cache_retention", "safety_identifier", "verbosity":
		return needString(v, k)
	case "metadata", "logit_bias", "audio", "prediction", "stream_options":
		if !isObj(v) {
			return badRequest(k + ": must be an object")
		}
	case "response_format":
		if !isObj(v) {
			return badRequest("response_format: must be an object such as {\"type\": \"json_object\"}")
		}
		t := field(v, "type")
		if !isStr(t) {
			return badRequest("response_format.type: must be a string: text, json_object or json_schema")
		}
		if strEq(t, "json_schema") && !isObj(field(v, "json_schema")) {
			return badRequest("response_format.json_schema: must be an object {name, schema}")
		}
	case "modalities":
		return stringArray(v, k)
	case "functions":
		if !isArr(v) {
			return badRequest("functions: must be an array (legacy; send tools instead)")
		}
	case "function_call":
		if !isStr(v) && !isObj(v) {
			return badRequest("function_call: must be a string or an object (legacy; send tool_choice instead)")
		}
	}
	return nil
}

// validateChatMessages checks the messages at c and moves c past them.
func validateChatMessages(c *cursor) *Error {
	if !c.arr() {
		return badRequest("messages: must be an array")
	}
	for i := 0; c.more(); i++ {
		if err := validateChatMessage(c, i); err != nil {
			return err
		}
	}
	return nil
}

// validateChatMessage checks messages[i], the value at c. Its content and
// tool calls are checked as they are walked (the content under the role
// read by then) and the verdicts given in the order below; a message whose
// role comes after its content has its content checked again.
func validateChatMessage(c *cursor, i int) *Error {
	if !c.obj() {
		return badRequest(pathi("messages", i) + ": must be an object {role, content}")
	}
	var role, content, contentRole, toolCallID, name, refusal, functionCall string
	var contentErr, callsErr *Error
	for {
		k, ok := c.key()
		if !ok {
			break
		}
		switch k {
		case "role":
			role = c.raw()
		case "content":
			at := c.begin()
			contentErr = chatContent(c, i, inner(role))
			content, contentRole = c.finish(at, contentErr), role
		case "tool_calls":
			at := c.begin()
			callsErr = chatToolCalls(c, i)
			c.finish(at, callsErr)
		case "tool_call_id":
			toolCallID = c.raw()
		case "name":
			name = c.raw()
		case "refusal":
			refusal = c.raw()
		case "function_call":
			functionCall = c.raw()
		}
	}
	if !isStr(role) {
		return badRequest(pathi("messages", i) + ".role: must be " + chatRoles)
	}
	if !isNull(name) && !isStr(name) {
		return badRequest(pathi("messages", i) + ".name: must be a string")
	}
	r := inner(role)
	if contentRole != role { // no content, or the role came after it
		contentErr = chatContent(cursorOn(content), i, r)
	}
	switch r {
	case "user", "system", "developer", "tool":
		if r == "tool" && !isStr(toolCallID) {
			return badRequest(pathi("messages", i) + ".tool_call_id: must be a string (the id of the tool call answered)")
		}
		return contentErr
	case "assistant":
		if !isNull(refusal) && !isStr(refusal) {
			return badRequest(pathi("messages", i) + ".refusal: must be a string")
		}
		if !isNull(functionCall) && !isObj(functionCall) {
			return badRequest(pathi("messages", i) + ".function_call: must be an object {name, arguments}")
		}
		if callsErr != nil {
			return callsErr
		}
		return contentErr
	case "function":
		if !isStr(name) {
			return badRequest(pathi("messages", i) + ".name: must be a string (the function's name)")
		}
		if !isNull(content) && !isStr(content) {
			return badRequest(pathi("messages", i) + ".content: must be a string or null")
		}
		return nil
	default:
		return badRequest(pathi("messages", i) + ".role: must be " + chatRoles)
	}
}

// chatContent checks the content at c of messages[i], whose role is role:
// a string or an array of parts (user messages may hold images, audio and
// files, the others text; assistant content may be null or absent, as when
// it calls tools).
func chatContent(c *cursor, i int, role string) *Error {
	if role == "function" {
		return nil // a string or null, checked by validateChatMessage
	}
	assistant := role == "assistant"
	switch c.peek() {
	case '"':
		return nil
	case 'n', 0:
		if assistant {
			return nil
		}
	}
	if !c.arr() {
		if assistant {
			return badRequest(pathi("messages", i) + ".content: must be a string, an array of content parts or null")
		}
		return badRequest(pathi("messages", i) + ".content: must be a string or an array of content parts")
	}
	for j := 0; c.more(); j++ {
		if err := chatPart(c, i, j, role); err != nil {
			return err
		}
	}
	return nil
}

// chatPart checks messages[i].content[j], the value at c, in a message of
// role role.
func chatPart(c *cursor, i, j int, role string) *Error {
	if !c.obj() {
		return badRequest(pathi(pathi("messages", i)+".content", j) + ": must be an object {type, ...}")
	}
	var typ, text, image, audio, file, refusal string
	for {
		k, ok := c.key()
		if !ok {
			break
		}
		switch k {
		case "type":
			typ = c.raw()
		case "text":
			text = c.raw()
		case "image_url":
			image = c.raw()
		case "input_audio":
			audio = c.raw()
		case "file":
			file = c.raw()
		case "refusal":
			refusal = c.raw()
		}
	}
	bad := func(what string) *Error {
		return badRequest(pathi(pathi("messages", i)+".content", j) + what)
	}
	if !isStr(typ) {
		return bad(".type: must be a string such as \"text\"")
	}
	switch inner(typ) {
	case "text":
		if !isStr(text) {
			return bad(".text: must be a string")
		}
	case "refusal":
		if !isStr(refusal) {
			return bad(".refusal: must be a string")
		}
	case "image_url":
		if role != "user" {
			return bad(": " + role + " messages may only hold text parts")
		}
		if isStr(image) {
			return nil // a bare URL string: accepted by vLLM and others
		}
		if !isObj(image) || !isStr(field(image, "url")) {
			return bad(".image_url: must be an object {url} holding an URL or a data URL")
		}
	case "input_audio":
		if role != "user" {
			return bad(": " + role + " messages may only hold text parts")
		}
		if !isObj(audio) || !isStr(field(audio, "data")) || !isStr(field(audio, "format")) {
			return bad(".input_audio: must be an object {data, format} with base64 data")
		}
	case "file":
		if role != "user" {
			return bad(": " + role + " messages may only hold text parts")
		}
		if !isObj(file) {
			return bad(".file: must be an object {file_data, filename} or {file_id}")
		}
	}
	return nil
}

// chatToolCalls checks the tool_calls at c of messages[i].
func chatToolCalls(c *cursor, i int) *Error {
	switch c.peek() {
	case 'n', 0:
		return nil
	}
	if !c.arr() {
		return badRequest(pathi("messages", i) + ".tool_calls: must be an array")
	}
	for j := 0; c.more(); j++ {
		if err := chatToolCall(c, i, j); err != nil {
			return err
		}
	}
	return nil
}

// chatToolCall checks messages[i].tool_calls[j], the value at c.
func chatToolCall(c *cursor, i, j int) *Error {
	bad := func(what string) *Error {
		return badRequest(pathi(pathi("messages", i)+".tool_calls", j) + what)
	}
	if !c.obj() {
		return bad(": must be an object {id, type, function}")
	}
	var id, typ, custom string
	var fnErr *Error
	sawFn := false
	for {
		k, ok := c.key()
		if !ok {
			break
		}
		switch k {
		case "id":
			id = c.raw()
		case "type":
			typ = c.raw()
		case "function":
			at := c.begin()
			fnErr, sawFn = chatCallFunction(c, i, j), true
			c.finish(at, fnErr)
		case "custom":
			custom = c.raw()
		}
	}
	if !isStr(id) {
		return bad(".id: must be a string")
	}
	switch {
	case isNull(typ) || strEq(typ, "function"):
		if !sawFn { // checked as an empty function
			return chatCallFunction(&cursor{}, i, j)
		}
		return fnErr
	case strEq(typ, "custom"):
		if !isObj(custom) || !isStr(field(custom, "name")) {
			return bad(".custom: must be an object {name, input}")
		}
		return nil
	default:
		return bad(".type: must be function or custom")
	}
}

// chatCallFunction checks a tool call's function, the value at c (absent
// when c is empty): an object with a name and, if any, string arguments.
// Of duplicate members the first counts, as with field.
func chatCallFunction(c *cursor, i, j int) *Error {
	bad := func(what string) *Error {
		return badRequest(pathi(pathi("messages", i)+".tool_calls", j) + what)
	}
	if !c.obj() {
		return bad(".function: must be an object {name, arguments}")
	}
	var name, args string
	for {
		k, ok := c.key()
		if !ok {
			break
		}
		switch {
		case k == "name" && name == "":
			name = c.raw()
		case k == "arguments" && args == "":
			args = c.raw()
		}
	}
	if !isStr(name) {
		return bad(".function: must be an object {name, arguments}")
	}
	if !isNull(args) && !isStr(args) {
		return bad(".function.arguments: must be a string (JSON-encoded arguments)")
	}
	return nil
}

func validateChatTools(v string) *Error {
	it, ok := arrIter(v)
	if !ok {
		return badRequest("tools: must be an array of {type: function, function: {name, parameters}}")
	}
	for i := 0; ; i++ {
		t, ok := it.elem()
		if !ok {
			return nil
		}
		ti, ok := objIter(t)
		if !ok {
			return badRequest(pathi("tools", i) + ": must be an object {type: function, function: {name, parameters}}")
		}
		var typ, fn, custom string
		for {
			k, v, ok := ti.next()
			if !ok {
				break
			}
			switch k {
			case "type":
				typ = v
			case "function":
				fn = v
			case "custom":
				custom = v
			}
		}
		switch {
		case isNull(typ) || strEq(typ, "function"):
			if !isObj(fn) {
				return badRequest(pathi("tools", i) + ".function: must be an object {name, description, parameters}")
			}
			if n := field(fn, "name"); !isStr(n) || emptyStr(n) {
				return badRequest(pathi("tools", i) + ".function.name: must be a non-empty string")
			}
			if p := field(fn, "parameters"); !isNull(p) && !isObj(p) {
				return badRequest(pathi("tools", i) + ".function.parameters: must be a JSON schema object")
			}
		case strEq(typ, "custom"):
			if !isObj(custom) || !isStr(field(custom, "name")) {
				return badRequest(pathi("tools", i) + ".custom: must be an object {name, description, format}")
			}
		case !isStr(typ):
			return badRequest(pathi("tools", i) + ".type: must be a string: function or custom")
		case isServerTool(str(typ)):
			return serverToolErrorFor(Chat, pathi("tools", i), str(typ))
		default:
			return badRequest(pathi("tools", i) + ".type: tool type " + typ +
				" is not supported; server-side and hosted tools cannot run here, define function tools instead")
		}
	}
}

func validateChatToolChoice(v string) *Error {
	if isStr(v) {
		switch inner(v) {
		case "none", "auto", "required":
			return nil
		}
	}
	const fix = "tool_choice: must be none, auto, required or {type: function, function: {name}}"
	if !isObj(v) {
		return badRequest(fix)
	}
	switch t := field(v, "type"); {
	case strEq(t, "function"):
		if !isStr(field(field(v, "function"), "name")) {
			return badRequest("tool_choice.function.name: must be a string")
		}
	case strEq(t, "custom"):
		if !isStr(field(field(v, "custom"), "name")) {
			return badRequest("tool_choice.custom.name: must be a string")
		}
	case strEq(t, "allowed_tools"):
		if !isObj(field(v, "allowed_tools")) {
			return badRequest("tool_choice.allowed_tools: must be an object {mode, tools}")
		}
	default:
		return badRequest(fix)
	}
	return nil
}

// Messages.

func validateMessagesMember(k, v string) *Error {
	switch k {
	case "messages":
		return validateMessagesMessages(cursorOn(v))
	case "system":
		return validateSystem(v)
	case "tools":
		return validateMessagesTools(v)
	case "tool_choice":
		return validateMessagesToolChoice(v)
	case "metadata":
		if !isObj(v) {
			return badRequest("metadata: must be an object")
		}
		if u := field(v, "user_id"); !isNull(u) && !isStr(u) {
			return badRequest("metadata.user_id: must be a string")
		}
	case "stop_sequences":
		return stringArray(v, k)
	case "service_tier", "inference_geo", "speed":
		return needString(v, k)
	case "context_management", "output_config", "output_format":
		if !isObj(v) {
			return badRequest(k + ": must be an object")
		}
	}
	return nil
}

// validateMessagesMessages checks the messages at c and moves c past them.
func validateMessagesMessages(c *cursor) *Error {
	_, err := readMessagesMessages(c, nil)
	return err
}

// readMessagesMessages is validateMessagesMessages, appending the view of
// each message to views when views is not nil.
func readMessagesMessages(c *cursor, views []msgView) ([]msgView, *Error) {
	if !c.arr() {
		return views, badRequest("messages: must be an array")
	}
	for i := 0; c.more(); i++ {
		role, content, err := validateMessagesMessage(c, i)
		if err != nil {
			return views, err
		}
		if views != nil {
			views = append(views, msgView{role, content})
		}
	}
	return views, nil
}

// validateMessagesMessage checks messages[i], the value at c, and returns
// its role and content (raw; the last of duplicates, "" when absent). Its
// content is checked as it is walked, under the role read by then; a
// message whose role comes after its content has its content checked again.
func validateMessagesMessage(c *cursor, i int) (role, content string, err *Error) {
	if !c.obj() {
		return "", "", badRequest(pathi("messages", i) + ": must be an object {role, content}")
	}
	var contentRole string
	var contentErr *Error
	for {
		k, ok := c.key()
		if !ok {
			break
		}
		switch k {
		case "role":
			role = c.raw()
		case "content":
			at := c.begin()
			contentErr = messagesContent(c, i, role)
			content, contentRole = c.finish(at, contentErr), role
		}
	}
	switch {
	case strEq(role, "user"), strEq(role, "assistant"):
	case strEq(role, "system"): // accepted inside messages: a system prompt at that position
	default:
		return "", "", badRequest(pathi("messages", i) + ".role: must be user, assistant or system")
	}
	if contentRole != role { // no content, or the role came after it
		contentErr = messagesContent(cursorOn(content), i, role)
	}
	return role, content, contentErr
}

// messagesContent checks the content at c of messages[i], whose role is
// role (raw): a system prompt's text blocks, or a string or content blocks.
func messagesContent(c *cursor, i int, role string) *Error {
	if strEq(role, "system") {
		return validateSystemIn(c, pathi("messages", i)+".content")
	}
	if c.peek() == '"' {
		return nil
	}
	if !c.arr() {
		return badRequest(pathi("messages", i) + ".content: must be a string or an array of content blocks")
	}
	for j := 0; c.more(); j++ {
		if err := validateBlock(c, i, j, -1); err != nil {
			return err
		}
	}
	return nil
}

// validateBlock checks the content block at c: messages[i].content[j], or
// element k of the content of that tool_result when k >= 0. A tool
// result's content is checked as it is walked.
func validateBlock(c *cursor, i, j, k int) *Error {
	bad := func(what string) *Error {
		p := pathi(pathi("messages", i)+".content", j)
		if k >= 0 {
			p = pathi(p+".content", k)
		}
		return badRequest(p + what)
	}
	if !c.obj() {
		return bad(": must be a content block object {type, ...}")
	}
	var typ, text, thinking, data, id, name, input, toolUseID, content, isError, source, title string
	var contentErr *Error
	for {
		key, ok := c.key()
		if !ok {
			break
		}
		switch key {
		case "type":
			typ = c.raw()
		case "text":
			text = c.raw()
		case "thinking":
			thinking = c.raw()
		case "data":
			data = c.raw()
		case "id":
			id = c.raw()
		case "name":
			name = c.raw()
		case "input":
			input = c.raw()
		case "tool_use_id":
			toolUseID = c.raw()
		case "content":
			if k >= 0 { // what a tool result's block holds is not checked
				content = c.raw()
				break
			}
			at := c.begin()
			contentErr = toolResultContent(c, i, j, bad)
			content = c.finish(at, contentErr)
		case "is_error":
			isError = c.raw()
		case "source":
			source = c.raw()
		case "title":
			title = c.raw()
		}
	}
	if !isStr(typ) {
		return bad(".type: must be a string such as \"text\"")
	}
	t := inner(typ)
	switch t {
	case "text":
		if !isStr(text) {
			return bad(".text: must be a string")
		}
	case "image", "document":
		if !isObj(source) || !isStr(field(source, "type")) {
			return bad(".source: must be an object {type, ...}")
		}
	case "search_result":
		if !isStr(source) || !isStr(title) || !isArr(content) {
			return bad(": search results need source and title strings and an array of text blocks as content")
		}
	case "thinking":
		if !isStr(thinking) {
			return bad(".thinking: must be a string")
		}
	case "redacted_thinking":
		if !isStr(data) {
			return bad(".data: must be a string")
		}
	case "tool_use":
		if !isStr(id) || !isStr(name) {
			return bad(": tool_use needs id and name strings")
		}
		if !isNull(input) && !isObj(input) {
			return bad(".input: must be an object")
		}
	case "tool_result":
		if k >= 0 {
			return bad(": a tool_result cannot hold another")
		}
		if !isStr(toolUseID) {
			return bad(".tool_use_id: must be a string")
		}
		if err := checkBool(isError, ""); err != nil {
			return bad(".is_error: must be a boolean")
		}
		return contentErr
	default:
		if isServerBlock(t) {
			return bad(": " + t + " blocks belong to server-side tools, which are not supported; leave them out of the history")
		}
	}
	return nil
}

// toolResultContent checks the content at c of the block
// messages[i].content[j] as a tool result's: a string, null or blocks.
func toolResultContent(c *cursor, i, j int, bad func(string) *Error) *Error {
	switch c.peek() {
	case '"', 'n':
		return nil
	}
	if !c.arr() {
		return bad(".content: must be a string or an array of content blocks")
	}
	for n := 0; c.more(); n++ {
		if err := validateBlock(c, i, j, n); err != nil {
			return err
		}
	}
	return nil
}

// validateSystem checks system: a string or an array of text blocks.
func validateSystem(v string) *Error { return validateSystemIn(cursorOn(v), "system") }

// validateSystemIn checks the system prompt at c, the value at path. Of a
// block's duplicate members the first counts, as with field.
func validateSystemIn(c *cursor, path string) *Error {
	if c.peek() == '"' {
		return nil
	}
	if !c.arr() {
		return badRequest(path + ": must be a string or an array of text blocks")
	}
	for i := 0; c.more(); i++ {
		if !c.obj() {
			return badRequest(pathi(path, i) + ": only text blocks are allowed in system")
		}
		var typ, text string
		for {
			k, ok := c.key()
			if !ok {
				break
			}
			switch {
			case k == "type" && typ == "":
				typ = c.raw()
			case k == "text" && text == "":
				text = c.raw()
			}
		}
		if !strEq(typ, "text") {
			return badRequest(pathi(path, i) + ": only text blocks are allowed in system")
		}
		if !isStr(text) {
			return badRequest(pathi(path, i) + ".text: must be a string")
		}
	}
	return nil
}

// validateMessagesTools checks tools: client tools need a name and an
// input_schema object; server-side tools are refused; other typed tools
// (memory, ...) are left to the upstream on a pass-through.
func validateMessagesTools(v string) *Error {
	it, ok := arrIter(v)
	if !ok {
		return badRequest("tools: must be an array of {name, description, input_schema}")
	}
	for i := 0; ; i++ {
		t, ok := it.elem()
		if !ok {
			return nil
		}
		ti, ok := objIter(t)
		if !ok {
			return badRequest(pathi("tools", i) + ": must be an object {name, description, input_schema}")
		}
		var typ, name, schema string
		for {
			k, v, ok := ti.next()
			if !ok {
				break
			}
			switch k {
			case "type":
				typ = v
			case "name":
				name = v
			case "input_schema":
				schema = v
			}
		}
		switch {
		case isNull(typ) || strEq(typ, "custom"):
			if !isStr(name) || emptyStr(name) {
				return badRequest(pathi("tools", i) + ".name: must be a non-empty string")
			}
			if !isNull(schema) && !isObj(schema) {
				return badRequest(pathi("tools", i) + ".input_schema: must be an object")
			}
		case !isStr(typ):
			return badRequest(pathi("tools", i) + ".type: must be a string")
		case isServerTool(str(typ)):
			return serverToolErrorFor(Messages, pathi("tools", i), str(typ))
		}
	}
}

func validateMessagesToolChoice(v string) *Error {
	if !isObj(v) {
		return badRequest("tool_choice: must be an object such as {\"type\": \"auto\"}")
	}
	switch t := field(v, "type"); {
	case strEq(t, "auto"), strEq(t, "any"), strEq(t, "none"):
	case strEq(t, "tool"):
		if !isStr(field(v, "name")) {
			return badRequest("tool_choice.name: must be a string")
		}
	default:
		return badRequest("tool_choice.type: must be auto, any, tool or none")
	}
	if d := field(v, "disable_parallel_tool_use"); !isNull(d) && !isBool(d) {
		return badRequest("tool_choice.disable_parallel_tool_use: must be a boolean")
	}
	return nil
}

// stringArray checks an array of strings.
func stringArray(v, path string) *Error {
	it, ok := arrIter(v)
	if !ok {
		return badRequest(path + ": must be an array of strings")
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

// Responses.

// validateResponsesMember checks the type of a Responses request member
// that its reader does not read itself (hints and refused members): a hint
// of the wrong type is a 400, as on the other endpoints, not silently
// dropped.
func validateResponsesMember(k, v string) *Error {
	if isNull(v) {
		return nil
	}
	switch k {
	case "store", "background":
		return checkBool(v, k)
	case "metadata", "client_metadata", "stream_options", "context_management", "conversation", "prompt":
		if k == "conversation" && isStr(v) {
			return nil // a conversation id
		}
		if !isObj(v) {
			return badRequest(k + ": must be an object")
		}
	case "user", "service_tier", "prompt_cache_key", "prompt_cache_retention", "safety_identifier",
		"truncation", "previous_response_id":
		return needString(v, k)
	case "top_logprobs":
		if n, ok := toInt(v); !ok || n < 0 || n > 20 {
			return badRequest("top_logprobs: must be an integer between 0 and 20")
		}
	case "max_tool_calls":
		if n, ok := toInt(v); !ok || n < 1 {
			return badRequest("max_tool_calls: must be a positive integer")
		}
	}
	return nil
}
