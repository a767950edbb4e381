// Code generated from the request readers at f786ef7 (before the single-pass walk); DO NOT EDIT.

package translate

func oldValidateMember(client Format, k, v string) *Error {
	if isNull(v) {
		return nil
	}
	if client == Messages {
		return oldValidateMessagesMember(k, v)
	}
	return oldValidateChatMember(k, v)
}

const oldChatRoles = "system, developer, user, assistant, tool or function (legacy)"

func oldValidateChatMember(k, v string) *Error {
	switch k {
	case "messages":
		return oldValidateChatMessages(v)
	case "tools":
		return oldValidateChatTools(v)
	case "tool_choice":
		return oldValidateChatToolChoice(v)
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
		return oldStringArray(v, k)
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

func oldValidateChatMessages(v string) *Error {
	it, ok := arrIter(v)
	if !ok {
		return badRequest("messages: must be an array")
	}
	for i := 0; ; i++ {
		m, ok := it.elem()
		if !ok {
			return nil
		}
		if err := oldValidateChatMessage(m, i); err != nil {
			return err
		}
	}
}

func oldValidateChatMessage(m string, i int) *Error {
	mi, ok := objIter(m)
	if !ok {
		return badRequest(pathi("messages", i) + ": must be an object {role, content}")
	}
	var role, content, toolCalls, toolCallID, name, refusal, functionCall string
	for {
		k, v, ok := mi.next()
		if !ok {
			break
		}
		switch k {
		case "role":
			role = v
		case "content":
			content = v
		case "tool_calls":
			toolCalls = v
		case "tool_call_id":
			toolCallID = v
		case "name":
			name = v
		case "refusal":
			refusal = v
		case "function_call":
			functionCall = v
		}
	}
	if !isStr(role) {
		return badRequest(pathi("messages", i) + ".role: must be " + oldChatRoles)
	}
	if !isNull(name) && !isStr(name) {
		return badRequest(pathi("messages", i) + ".name: must be a string")
	}
	switch r := inner(role); r {
	case "user", "system", "developer":
		return oldChatContent(content, i, r, false)
	case "assistant":
		if !isNull(refusal) && !isStr(refusal) {
			return badRequest(pathi("messages", i) + ".refusal: must be a string")
		}
		if !isNull(functionCall) && !isObj(functionCall) {
			return badRequest(pathi("messages", i) + ".function_call: must be an object {name, arguments}")
		}
		if err := oldChatToolCalls(toolCalls, i); err != nil {
			return err
		}
		return oldChatContent(content, i, "assistant", true)
	case "tool":
		if !isStr(toolCallID) {
			return badRequest(pathi("messages", i) + ".tool_call_id: must be a string (the id of the tool call answered)")
		}
		return oldChatContent(content, i, "tool", false)
	case "function":
		if !isStr(name) {
			return badRequest(pathi("messages", i) + ".name: must be a string (the function's name)")
		}
		if !isNull(content) && !isStr(content) {
			return badRequest(pathi("messages", i) + ".content: must be a string or null")
		}
		return nil
	default:
		return badRequest(pathi("messages", i) + ".role: must be " + oldChatRoles)
	}
}

func oldChatContent(v string, i int, role string, assistant bool) *Error {
	if isStr(v) || (assistant && isNull(v)) {
		return nil
	}
	it, ok := arrIter(v)
	if !ok {
		if assistant {
			return badRequest(pathi("messages", i) + ".content: must be a string, an array of content parts or null")
		}
		return badRequest(pathi("messages", i) + ".content: must be a string or an array of content parts")
	}
	for j := 0; ; j++ {
		p, ok := it.elem()
		if !ok {
			return nil
		}
		if err := oldChatPart(p, i, j, role); err != nil {
			return err
		}
	}
}

func oldChatPart(p string, i, j int, role string) *Error {
	pi, ok := objIter(p)
	if !ok {
		return badRequest(pathi(pathi("messages", i)+".content", j) + ": must be an object {type, ...}")
	}
	var typ, text, image, audio, file, refusal string
	for {
		k, v, ok := pi.next()
		if !ok {
			break
		}
		switch k {
		case "type":
			typ = v
		case "text":
			text = v
		case "image_url":
			image = v
		case "input_audio":
			audio = v
		case "file":
			file = v
		case "refusal":
			refusal = v
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
			return nil
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

func oldChatToolCalls(v string, i int) *Error {
	if isNull(v) {
		return nil
	}
	it, ok := arrIter(v)
	if !ok {
		return badRequest(pathi("messages", i) + ".tool_calls: must be an array")
	}
	for j := 0; ; j++ {
		c, ok := it.elem()
		if !ok {
			return nil
		}
		ci, ok := objIter(c)
		if !ok {
			return badRequest(pathi(pathi("messages", i)+".tool_calls", j) + ": must be an object {id, type, function}")
		}
		var id, typ, fn, custom string
		for {
			k, v, ok := ci.next()
			if !ok {
				break
			}
			switch k {
			case "id":
				id = v
			case "type":
				typ = v
			case "function":
				fn = v
			case "custom":
				custom = v
			}
		}
		bad := func(what string) *Error {
			return badRequest(pathi(pathi("messages", i)+".tool_calls", j) + what)
		}
		if !isStr(id) {
			return bad(".id: must be a string")
		}
		switch {
		case isNull(typ) || strEq(typ, "function"):
			if !isObj(fn) || !isStr(field(fn, "name")) {
				return bad(".function: must be an object {name, arguments}")
			}
			if a := field(fn, "arguments"); !isNull(a) && !isStr(a) {
				return bad(".function.arguments: must be a string (JSON-encoded arguments)")
			}
		case strEq(typ, "custom"):
			if !isObj(custom) || !isStr(field(custom, "name")) {
				return bad(".custom: must be an object {name, input}")
			}
		default:
			return bad(".type: must be function or custom")
		}
	}
}

func oldValidateChatTools(v string) *Error {
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

func oldValidateChatToolChoice(v string) *Error {
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

func oldValidateMessagesMember(k, v string) *Error {
	switch k {
	case "messages":
		return oldValidateMessagesMessages(v)
	case "system":
		return oldValidateSystem(v)
	case "tools":
		return oldValidateMessagesTools(v)
	case "tool_choice":
		return oldValidateMessagesToolChoice(v)
	case "metadata":
		if !isObj(v) {
			return badRequest("metadata: must be an object")
		}
		if u := field(v, "user_id"); !isNull(u) && !isStr(u) {
			return badRequest("metadata.user_id: must be a string")
		}
	case "stop_sequences":
		return oldStringArray(v, k)
	case "service_tier", "inference_geo", "speed":
		return needString(v, k)
	case "context_management", "output_config", "output_format":
		if !isObj(v) {
			return badRequest(k + ": must be an object")
		}
	}
	return nil
}

func oldValidateMessagesMessages(v string) *Error {
	it, ok := arrIter(v)
	if !ok {
		return badRequest("messages: must be an array")
	}
	for i := 0; ; i++ {
		m, ok := it.elem()
		if !ok {
			return nil
		}
		mi, ok := objIter(m)
		if !ok {
			return badRequest(pathi("messages", i) + ": must be an object {role, content}")
		}
		var role, content string
		for {
			k, v, ok := mi.next()
			if !ok {
				break
			}
			switch k {
			case "role":
				role = v
			case "content":
				content = v
			}
		}
		switch {
		case strEq(role, "user"), strEq(role, "assistant"):
		case strEq(role, "system"):
			if err := oldValidateSystemIn(content, pathi("messages", i)+".content"); err != nil {
				return err
			}
			continue
		default:
			return badRequest(pathi("messages", i) + ".role: must be user, assistant or system")
		}
		if isStr(content) {
			continue
		}
		ci, ok := arrIter(content)
		if !ok {
			return badRequest(pathi("messages", i) + ".content: must be a string or an array of content blocks")
		}
		for j := 0; ; j++ {
			b, ok := ci.elem()
			if !ok {
				break
			}
			if err := oldValidateBlock(b, i, j, -1); err != nil {
				return err
			}
		}
	}
}

func oldValidateBlock(b string, i, j, k int) *Error {
	bi, ok := objIter(b)
	bad := func(what string) *Error {
		p := pathi(pathi("messages", i)+".content", j)
		if k >= 0 {
			p = pathi(p+".content", k)
		}
		return badRequest(p + what)
	}
	if !ok {
		return bad(": must be a content block object {type, ...}")
	}
	var typ, text, thinking, data, id, name, input, toolUseID, content, isError, source, title string
	for {
		key, v, ok := bi.next()
		if !ok {
			break
		}
		switch key {
		case "type":
			typ = v
		case "text":
			text = v
		case "thinking":
			thinking = v
		case "data":
			data = v
		case "id":
			id = v
		case "name":
			name = v
		case "input":
			input = v
		case "tool_use_id":
			toolUseID = v
		case "content":
			content = v
		case "is_error":
			isError = v
		case "source":
			source = v
		case "title":
			title = v
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
		if isNull(content) || isStr(content) {
			return nil
		}
		ci, ok := arrIter(content)
		if !ok {
			return bad(".content: must be a string or an array of content blocks")
		}
		for n := 0; ; n++ {
			cb, ok := ci.elem()
			if !ok {
				return nil
			}
			if err := oldValidateBlock(cb, i, j, n); err != nil {
				return err
			}
		}
	default:
		if oldIsServerBlock(t) {
			return bad(": " + t + " blocks belong to server-side tools, which are not supported; leave them out of the history")
		}
	}
	return nil
}

func oldValidateSystem(v string) *Error { return oldValidateSystemIn(v, "system") }

func oldValidateSystemIn(v, path string) *Error {
	if isStr(v) {
		return nil
	}
	it, ok := arrIter(v)
	if !ok {
		return badRequest(path + ": must be a string or an array of text blocks")
	}
	for i := 0; ; i++ {
		b, ok := it.elem()
		if !ok {
			return nil
		}
		if !isObj(b) || !strEq(field(b, "type"), "text") {
			return badRequest(pathi(path, i) + ": only text blocks are allowed in system")
		}
		if !isStr(field(b, "text")) {
			return badRequest(pathi(path, i) + ".text: must be a string")
		}
	}
}

func oldValidateMessagesTools(v string) *Error {
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

func oldValidateMessagesToolChoice(v string) *Error {
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

func oldStringArray(v, path string) *Error {
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

func oldValidateResponsesMember(k, v string) *Error {
	if isNull(v) {
		return nil
	}
	switch k {
	case "store", "background":
		return checkBool(v, k)
	case "metadata", "client_metadata", "stream_options", "context_management", "conversation", "prompt":
		if k == "conversation" && isStr(v) {
			return nil
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

func oldMessagesToChat(dst []byte, s string, cfg *Config) ([]byte, Request, *Error) {
	var (
		messages, system, stop, topK, user, tools, toolChoice, schema string
		c                                                             commonMembers
		maxTokens                                                     int64
		req                                                           Request
		r                                                             reasoning
		err                                                           *Error
	)
	it, _ := objIter(s)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		if err = oldValidateMember(Messages, k, v); err != nil {
			return dst, req, err
		}
		if handled, err := r.member(k, v, false); handled {
			if err != nil {
				return dst, req, err
			}
			continue
		}
		switch k {
		case "model", "stream", "temperature", "top_p":
			err = c.read(k, v)
		case "max_tokens":
			if maxTokens, err = readMaxTokens(v, "max_tokens"); err != nil {
				return dst, req, err
			}
		case "messages":
			messages = v
		case "system":
			system = v
		case "stop_sequences":
			err = stopList(v, "stop_sequences")
			stop = v
		case "top_k":
			err = checkTopK(v)
			topK = v
		case "metadata":
			if u := field(v, "user_id"); isStr(u) {
				user = u
			}
		case "tools":
			tools = v
		case "tool_choice":
			toolChoice = v
		case "output_config":
			schema, err = oldOutputConfigChat(&r, v, schema)
		case "output_format":
			if !isNull(v) {
				schema, err = oldOutputFormatChat(v, "", "output_format")
			}
		default:
			err = uncarried(Messages, k, v)
		}
		if err != nil {
			return dst, req, err
		}
	}
	if err = c.finish(&req); err != nil {
		return dst, req, err
	}
	if maxTokens == 0 {
		return dst, req, badRequest("max_tokens: required")
	}
	if !isArr(messages) {
		return dst, req, badRequest("messages: must be an array")
	}
	if err = r.resolve(); err != nil {
		return dst, req, err
	}
	req.Reasoning = r.on
	r.fix(cfg.Dialect(), &maxTokens)

	est := tally{on: req.Stream, n: tokensReply}

	dst = append(dst, `{"model":`...)
	dst = append(dst, c.model...)
	dst = append(dst, `,"messages":[`...)
	if dst, err = oldAppendSystemChat(dst, system, "system", &est); err != nil {
		return dst, req, err
	}
	if est.n > tokensReply {
		est.n += tokensPerMessage
	}
	msgsAt := len(dst)
	if dst, err = oldAppendMessagesChat(dst, messages, &est); err != nil {
		return dst, req, err
	}
	refChatToolOrder(dst, msgsAt) // since issue 31
	dst = append(dst, `],"max_tokens":`...)
	dst = appendInt(dst, maxTokens)
	if req.Stream {
		dst = append(dst, `,"stream":true,"stream_options":{"include_usage":true}`...)
	} else {
		dst = append(dst, `,"stream":false`...)
	}
	if !isNull(stop) {
		dst = key(dst, "stop")
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
	if !isNull(topK) && !cfg.OmitTopK {
		dst = appendRawMember(dst, "top_k", topK)
	}
	if user != "" {
		dst = appendRawMember(dst, "user", user)
	}
	if dst, err = oldAppendToolsChat(dst, tools, toolChoice, &est); err != nil {
		return dst, req, err
	}
	if req.Stream {
		req.InputTokens = est.n
	}
	if schema != "" {
		dst = append(dst, `,"response_format":{"type":"json_schema","json_schema":{"name":"output","strict":true,"schema":`...)
		dst = append(dst, schema...)
		dst = append(dst, `}}`...)
	}
	dst = r.appendReasoning(dst, cfg, true)
	return append(dst, '}'), req, nil
}

func oldOutputConfigChat(r *reasoning, v, schema string) (string, *Error) {
	if isNull(v) {
		return schema, nil
	}
	it, ok := objIter(v)
	if !ok {
		return schema, badRequest("output_config: must be an object")
	}
	var err *Error
	for {
		k, val, ok := it.next()
		if !ok {
			return schema, nil
		}
		switch k {
		case "effort":
			err = r.outputEffort(val)
		case "format":
			if !isNull(val) {
				schema, err = oldOutputFormatChat(val, "output_config", "format")
			}
		default:
			err = uncarriedIn(Messages, "output_config", -1, k, val)
		}
		if err != nil {
			return schema, err
		}
	}
}

func oldOutputFormatChat(v, parent, name string) (string, *Error) {
	path := name
	if parent != "" {
		path = parent + "." + name
	}
	if !isObj(v) {
		return "", badRequest(path + ": must be an object {type: json_schema, schema}")
	}
	if !strEq(field(v, "type"), "json_schema") {
		return "", uncarriedIn(Messages, parent, -1, name, v)
	}
	sc := field(v, "schema")
	if !isObj(sc) {
		return "", badRequest(path + ".schema: must be a JSON schema object")
	}
	return sc, nil
}

func oldAppendSystemChat(dst []byte, v, path string, est *tally) ([]byte, *Error) {
	if isNull(v) || emptyStr(v) {
		return dst, nil
	}
	if isStr(v) {
		est.text(v)
		dst = sep(dst)
		dst = append(dst, `{"role":"system","content":`...)
		dst = append(dst, v...)
		return append(dst, '}'), nil
	}

	it, ok := arrIter(v)
	if !ok {
		return dst, nil
	}
	mark := len(dst)
	dst = sep(dst)
	dst = append(dst, `{"role":"system","content":"`...)
	body := len(dst)
	first := true
	for {
		b, ok := it.elem()
		if !ok {
			break
		}
		t := field(b, "text")
		est.text(t)
		if isBillingHeader(t) { // since issue 31
			continue
		}
		dst = appendJoinedInner(dst, t, `\n\n`, &first)
	}
	if len(dst) == body {
		return dst[:mark], nil
	}
	return append(dst, `"}`...), nil
}

func oldAppendMessagesChat(dst []byte, v string, est *tally) ([]byte, *Error) {
	it, _ := arrIter(v)
	var err *Error
	for i := 0; ; i++ {
		m, ok := it.elem()
		if !ok {
			return dst, nil
		}
		path := pathi("messages", i)
		est.n += tokensPerMessage
		var role, content string
		mi, _ := objIter(m)
		for {
			k, v, ok := mi.next()
			if !ok {
				break
			}
			switch k {
			case "role":
				role = v
			case "content":
				content = v
			}
		}

		switch {
		case strEq(role, "user"):
			dst, err = oldUserToChat(dst, content, path, est)
		case strEq(role, "assistant"):
			dst, err = oldAssistantToChat(dst, content, path, est)
		default:

			dst, err = oldAppendSystemChat(dst, content, path+".content", est)
		}
		if err != nil {
			return dst, err
		}
	}
}

func oldBlockType(b, path string) (string, *Error) {
	if !isObj(b) {
		return "", badRequest(path + ": must be a content block object")
	}
	t := field(b, "type")
	if !isStr(t) {
		return "", badRequest(path + ".type: must be a string")
	}
	return inner(t), nil
}

type oldBlock struct {
	raw, typ                            string
	text, thinking, id, name, input     string
	toolUseID, content, isError, source string
}

func oldReadBlock(b, path string) (oldBlock, *Error) {
	bl := oldBlock{raw: b}
	it, ok := objIter(b)
	if !ok {
		return bl, badRequest(path + ": must be a content block object")
	}
	var typ string
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		var dst *string
		switch k {
		case "type":
			dst = &typ
		case "text":
			dst = &bl.text
		case "thinking":
			dst = &bl.thinking
		case "id":
			dst = &bl.id
		case "name":
			dst = &bl.name
		case "input":
			dst = &bl.input
		case "tool_use_id":
			dst = &bl.toolUseID
		case "content":
			dst = &bl.content
		case "is_error":
			dst = &bl.isError
		case "source":
			dst = &bl.source
		default:
			continue
		}
		if *dst == "" {
			*dst = v
		}
	}
	if !isStr(typ) {
		return bl, badRequest(path + ".type: must be a string")
	}
	bl.typ = inner(typ)
	return bl, nil
}

func oldIsServerBlock(t string) bool {
	switch t {
	case "server_tool_use", "mcp_tool_use", "mcp_tool_result", "container_upload":
		return true
	}
	return len(t) > len("_tool_result") && t[len(t)-len("_tool_result"):] == "_tool_result"
}

func oldUnsupportedBlock(path, t string) *Error {
	if oldIsServerBlock(t) {
		return badRequest(path + ": " + t + " blocks belong to server-side tools, which are not supported")
	}
	return badRequest(path + ": content block type " + t + " is not supported here")
}

func oldUserToChat(dst []byte, content, path string, est *tally) ([]byte, *Error) {
	if isStr(content) {
		est.text(content)
		dst = sep(dst)
		dst = append(dst, `{"role":"user","content":`...)
		dst = append(dst, content...)
		return append(dst, '}'), nil
	}

	var buf [8]oldBlock
	blocks := buf[:0]
	var (
		parts    int
		soleText string
	)
	it, _ := arrIter(content)
	for i := 0; ; i++ {
		raw, ok := it.elem()
		if !ok {
			break
		}
		bp := pathi(path+".content", i)
		b, err := oldReadBlock(raw, bp)
		if err != nil {
			return dst, err
		}
		switch b.typ {
		case "tool_result":
			var imgs int
			if dst, imgs, err = oldToolResultToChat(dst, &b, bp, est); err != nil {
				return dst, err
			}
			parts += imgs
		case "text":
			if !isStr(b.text) {
				return dst, badRequest(bp + ".text: must be a string")
			}
			est.text(b.text)
			if !emptyStr(b.text) {
				parts++
				soleText = b.text
			}
		case "image", "document":
			parts++
			soleText = ""
		default:
			return dst, oldUnsupportedBlock(bp, b.typ)
		}
		blocks = append(blocks, b)
	}
	if parts == 0 {
		return dst, nil
	}
	dst = sep(dst)
	dst = append(dst, `{"role":"user","content":`...)
	if parts == 1 && soleText != "" {
		dst = append(dst, soleText...)
		return append(dst, '}'), nil
	}
	dst = append(dst, '[')
	var err *Error

	for i := range blocks {
		if blocks[i].typ != "tool_result" {
			continue
		}
		ci, ok := arrIter(blocks[i].content)
		if !ok {
			continue
		}
		for j := 0; ; j++ {
			cb, ok := ci.elem()
			if !ok {
				break
			}
			switch t := field(cb, "type"); {
			case strEq(t, "image"):
				dst, err = oldAppendImagePart(dst, cb, pathi(pathi(path+".content", i)+".content", j), est)
			case strEq(t, "document") && !strEq(field(field(cb, "source"), "type"), "text"): // since issue 31
				dst, err = oldAppendDocumentPart(dst, cb, pathi(pathi(path+".content", i)+".content", j), est)
			}
			if err != nil {
				return dst, err
			}
		}
	}
	for i := range blocks {
		b := &blocks[i]
		switch b.typ {
		case "text":
			if !emptyStr(b.text) {
				dst = sep(dst)
				dst = append(dst, `{"type":"text","text":`...)
				dst = append(dst, b.text...)
				dst = append(dst, '}')
			}
		case "image":
			dst, err = oldAppendImagePart(dst, b.raw, pathi(path+".content", i), est)
		case "document":
			dst, err = oldAppendDocumentPart(dst, b.raw, pathi(path+".content", i), est)
		}
		if err != nil {
			return dst, err
		}
	}
	return append(dst, `]}`...), nil
}

func oldToolResultToChat(dst []byte, b *oldBlock, path string, est *tally) ([]byte, int, *Error) {
	id := b.toolUseID
	if !isStr(id) {
		return dst, 0, badRequest(path + ".tool_use_id: must be a string")
	}
	est.n += tokensPerCall
	c := b.content
	dst = sep(dst)
	dst = append(dst, `{"role":"tool","tool_call_id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"content":`...)
	isErr := b.isError == "true"
	switch {
	case isNull(c) || emptyStr(c):
		if isErr {
			dst = append(dst, `"error"`...)
		} else {
			dst = append(dst, `""`...)
		}
		return append(dst, '}'), 0, nil
	case isStr(c) && isErr: // since issue 31
		est.text(c)
		dst = append(dst, `"`+errorPrefix...)
		dst = append(dst, inner(c)...)
		return append(dst, `"}`...), 0, nil
	case isStr(c):
		est.text(c)
		dst = append(dst, c...)
		return append(dst, '}'), 0, nil
	}
	it, ok := arrIter(c)
	if !ok {
		return dst, 0, badRequest(path + ".content: must be a string or an array of content blocks")
	}
	images, docs := 0, 0
	first := true
	dst = append(dst, '"')
	if isErr {
		dst = append(dst, errorPrefix...)
	}
	for j := 0; ; j++ {
		raw, ok := it.elem()
		if !ok {
			break
		}
		cp := pathi(path+".content", j)
		cb, err := oldReadBlock(raw, cp)
		if err != nil {
			return dst, 0, err
		}
		switch cb.typ {
		case "text":
			if !isStr(cb.text) {
				return dst, 0, badRequest(cp + ".text: must be a string")
			}
			est.text(cb.text)
			dst = appendJoinedInner(dst, cb.text, `\n`, &first)
		case "image":
			images++
		case "document":
			if !strEq(field(cb.source, "type"), "text") { // since issue 31: a file part after the tool messages
				docs++
				break
			}
			data := field(cb.source, "data")
			if !isStr(data) {
				return dst, 0, badRequest(cp + ".source.data: must be a string")
			}
			est.text(data)
			dst = appendJoinedInner(dst, data, `\n`, &first)
		case "tool_reference": // since issue 31
			name := field(cb.raw, "tool_name")
			if !isStr(name) {
				return dst, 0, badRequest(cp + ".tool_name: must be a string")
			}
			est.n += jsonTokens(cb.raw)
			if !first {
				dst = append(dst, `\n`...)
			}
			first = false
			dst = append(dst, "Tool loaded: "...)
			dst = append(dst, inner(name)...)
		default:
			return dst, 0, oldUnsupportedBlock(cp, cb.typ)
		}
	}
	switch {
	case !first:
	case images > 0:
		dst = append(dst, "(see the attached image)"...)
	case docs > 0: // since issue 31
		dst = append(dst, "(see the attached document)"...)
	}
	return append(dst, `"}`...), images + docs, nil
}

func oldAppendImagePart(dst []byte, b, path string, est *tally) ([]byte, *Error) {
	src := field(b, "source")
	if !isObj(src) {
		return dst, badRequest(path + ".source: must be an object")
	}
	dst = sep(dst)
	switch t := field(src, "type"); {
	case strEq(t, "base64"):
		mt, data := field(src, "media_type"), field(src, "data")
		if !isStr(mt) || !isStr(data) {
			return dst, badRequest(path + ".source: base64 images need media_type and data strings")
		}
		est.image(data)
		dst = append(dst, `{"type":"image_url","image_url":{"url":"data:`...)
		dst = append(dst, inner(mt)...)
		dst = append(dst, ";base64,"...)
		dst = append(dst, inner(data)...)
		return append(dst, `"}}`...), nil
	case strEq(t, "url"):
		u := field(src, "url")
		if !isStr(u) {
			return dst, badRequest(path + ".source.url: must be a string")
		}
		est.n += tokensImage
		dst = append(dst, `{"type":"image_url","image_url":{"url":`...)
		dst = append(dst, u...)
		return append(dst, `}}`...), nil
	default:
		return dst, badRequest(path + ".source.type: images must be base64 or url")
	}
}

func oldAppendDocumentPart(dst []byte, b, path string, est *tally) ([]byte, *Error) {
	src := field(b, "source")
	if !isObj(src) {
		return dst, badRequest(path + ".source: must be an object")
	}
	t := field(src, "type")
	if !strEq(t, "text") {
		est.n += jsonTokens(b)
	}
	switch {
	case strEq(t, "text"):
		data := field(src, "data")
		if !isStr(data) {
			return dst, badRequest(path + ".source.data: must be a string")
		}
		est.text(data)
		dst = sep(dst)
		dst = append(dst, `{"type":"text","text":`...)
		dst = append(dst, data...)
		return append(dst, '}'), nil
	case strEq(t, "base64"):
		mt, data := field(src, "media_type"), field(src, "data")
		if !isStr(mt) || !isStr(data) {
			return dst, badRequest(path + ".source: base64 documents need media_type and data strings")
		}
		dst = sep(dst)
		dst = append(dst, `{"type":"file","file":{"filename":"document.pdf","file_data":"data:`...)
		dst = append(dst, inner(mt)...)
		dst = append(dst, ";base64,"...)
		dst = append(dst, inner(data)...)
		return append(dst, `"}}`...), nil
	case strEq(t, "content"):
		c := field(src, "content")
		if isStr(c) {
			dst = sep(dst)
			dst = append(dst, `{"type":"text","text":`...)
			dst = append(dst, c...)
			return append(dst, '}'), nil
		}
		it, ok := arrIter(c)
		if !ok {
			return dst, badRequest(path + ".source.content: must be a string or text blocks")
		}
		for {
			cb, ok := it.elem()
			if !ok {
				return dst, nil
			}
			if txt := field(cb, "text"); strEq(field(cb, "type"), "text") && isStr(txt) {
				dst = sep(dst)
				dst = append(dst, `{"type":"text","text":`...)
				dst = append(dst, txt...)
				dst = append(dst, '}')
			}
		}
	}
	return dst, badRequest(path + ".source.type: documents must be text, base64 or content here")
}

func oldAssistantToChat(dst []byte, content, path string, est *tally) ([]byte, *Error) {
	if isStr(content) {
		est.text(content)
		dst = sep(dst)
		dst = append(dst, `{"role":"assistant","content":`...)
		dst = append(dst, content...)
		return append(dst, '}'), nil
	}

	var buf [8]oldBlock
	blocks := buf[:0]
	var texts, tools, thinks int
	it, _ := arrIter(content)
	for i := 0; ; i++ {
		raw, ok := it.elem()
		if !ok {
			break
		}
		bp := pathi(path+".content", i)
		b, err := oldReadBlock(raw, bp)
		if err != nil {
			return dst, err
		}
		switch b.typ {
		case "text":
			if !isStr(b.text) {
				return dst, badRequest(bp + ".text: must be a string")
			}
			est.text(b.text)
			if !emptyStr(b.text) {
				texts++
			}
		case "thinking":
			if isStr(b.thinking) && !emptyStr(b.thinking) {
				thinks++
			}
		case "redacted_thinking":
		case "tool_use":
			if !isStr(b.id) || !isStr(b.name) {
				return dst, badRequest(bp + ": tool_use needs id and name strings")
			}
			if !isObj(b.input) && !isNull(b.input) {
				return dst, badRequest(bp + ".input: must be an object")
			}
			est.n += tokensPerCall + jsonTokens(b.input)
			est.text(b.name)
			tools++
		default:
			return dst, oldUnsupportedBlock(bp, b.typ)
		}
		blocks = append(blocks, b)
	}
	if texts == 0 && tools == 0 {
		return dst, nil
	}
	dst = sep(dst)
	dst = append(dst, `{"role":"assistant","content":"`...)
	first := true
	for i := range blocks {
		if blocks[i].typ == "text" {
			dst = appendJoinedInner(dst, blocks[i].text, `\n`, &first)
		}
	}
	dst = append(dst, '"')
	if tools == 0 {
		return append(dst, '}'), nil
	}
	if thinks > 0 {
		dst = append(dst, `,"reasoning_content":"`...)
		first = true
		for i := range blocks {
			if b := &blocks[i]; b.typ == "thinking" && isStr(b.thinking) {
				dst = appendJoinedInner(dst, b.thinking, `\n\n`, &first)
			}
		}
		dst = append(dst, '"')
	}
	dst = append(dst, `,"tool_calls":[`...)
	for i := range blocks {
		b := &blocks[i]
		if b.typ != "tool_use" {
			continue
		}
		dst = sep(dst)
		dst = append(dst, `{"id":`...)
		dst = append(dst, b.id...)
		dst = append(dst, `,"type":"function","function":{"name":`...)
		dst = append(dst, b.name...)
		dst = append(dst, `,"arguments":`...)
		if isNull(b.input) {
			dst = append(dst, `"{}"`...)
		} else {
			dst = appendStr(dst, b.input)
		}
		dst = append(dst, `}}`...)
	}
	return append(dst, `]}`...), nil
}

func oldAppendToolsChat(dst []byte, tools, choice string, est *tally) ([]byte, *Error) {
	it, ok := arrIter(tools)
	if !ok {
		return dst, nil
	}
	mark := len(dst)
	dst = key(dst, "tools")
	dst = append(dst, '[')
	n := 0
	var err *Error
	for i := 0; ; i++ {
		t, ok := it.elem()
		if !ok {
			break
		}
		if dst, err = oldAppendToolChat(dst, t, i); err != nil {
			return dst, err
		}
		est.n += tokensPerTool + jsonTokens(t)
		n++
	}
	if n == 0 {
		return dst[:mark], nil
	}
	est.n += tokensTools
	dst = append(dst, ']')
	if !isObj(choice) {
		return dst, nil
	}
	dst = key(dst, "tool_choice")
	switch t := field(choice, "type"); {
	case strEq(t, "any"):
		dst = append(dst, `"required"`...)
	case strEq(t, "none"):
		dst = append(dst, `"none"`...)
	case strEq(t, "tool"):
		dst = append(dst, `{"type":"function","function":{"name":`...)
		dst = append(dst, field(choice, "name")...)
		dst = append(dst, `}}`...)
	default:
		dst = append(dst, `"auto"`...)
	}
	if field(choice, "disable_parallel_tool_use") == "true" {
		dst = append(dst, `,"parallel_tool_calls":false`...)
	}
	return dst, nil
}

func oldAppendToolChat(dst []byte, t string, i int) ([]byte, *Error) {
	path := pathi("tools", i)
	it, _ := objIter(t)
	var typ, name, desc, schema, strict string
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch k {
		case "type":
			typ = v
		case "name":
			name = v
		case "description":
			desc = v
		case "input_schema":
			schema = v
		case "strict":
			if err := checkBool(v, path+".strict"); err != nil {
				return dst, err
			}
			strict = v
		default:
			if err := uncarriedIn(Messages, "tools", i, k, v); err != nil {
				return dst, err
			}
		}
	}
	if !isNull(typ) && !strEq(typ, "custom") {
		return dst, badRequest(path + ": tool type " + str(typ) + " is not supported; only client tools are")
	}
	dst = sep(dst)
	dst = append(dst, `{"type":"function","function":{"name":`...)
	dst = append(dst, name...)
	if isStr(desc) {
		dst = append(dst, `,"description":`...)
		dst = append(dst, desc...)
	}
	dst = append(dst, `,"parameters":`...)
	if isObj(schema) {
		dst = append(dst, schema...)
	} else {
		dst = append(dst, `{"type":"object","properties":{}}`...)
	}
	if strict == "true" {
		dst = append(dst, `,"strict":true`...)
	}
	return append(dst, `}}`...), nil
}

func oldChatToMessages(dst []byte, s string, cfg *Config) ([]byte, Request, *Error) {
	var (
		messages, stop, topK, user, tools, toolChoice, schema string
		c                                                     commonMembers
		maxTokens                                             int64
		noParallel                                            bool
		req                                                   Request
		r                                                     reasoning
		err                                                   *Error
	)
	it, _ := objIter(s)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		if err = oldValidateMember(Chat, k, v); err != nil {
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
		case "stream_options":
			req.IncludeUsage = field(v, "include_usage") == "true"
		case "stop":
			err = stopList(v, "stop")
			stop = v
		case "top_k":
			err = checkTopK(v)
			topK = v
		case "user":
			if !isNull(v) {
				user = v
			}
		case "tools":
			tools = v
		case "tool_choice":
			toolChoice = v
		case "parallel_tool_calls":
			noParallel = v == "false"
		case "response_format": // since issue 31
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
	var sysBuf [8]oldSystemMessage
	sys := sysBuf[:0]
	if dst, sys, err = oldAppendMessagesMessages(dst, messages, sys); err != nil {
		return dst, req, err
	}
	noTurns := len(dst) == turnsAt
	refMessagesToolOrder(dst, turnsAt) // since issue 31
	dst = append(dst, ']')
	if dst, err = oldAppendSystemMessages(dst, sys); err != nil {
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
	if dst, err = oldAppendToolsMessages(dst, tools, toolChoice, noParallel); err != nil {
		return dst, req, err
	}
	if schema != "" { // since issue 31
		dst = append(dst, `,"output_config":{"format":{"type":"json_schema","schema":`...)
		dst = append(dst, schema...)
		dst = append(dst, `}}`...)
	}
	if noTurns { // since issue 31
		return dst, req, badRequest("messages: at least one user message is required; a system prompt alone cannot be answered")
	}
	dst = r.appendReasoning(dst, cfg, false)
	return append(dst, '}'), req, nil
}

func oldMsgRole(m, path string) (role, content string, err *Error) {
	if !isObj(m) {
		return "", "", badRequest(path + ": must be an object")
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
		return "", "", badRequest(path + ".role: must be a string")
	}
	return inner(r), content, nil
}

type oldSystemMessage struct {
	content string
	index   int
}

func oldAppendSystemMessages(dst []byte, sys []oldSystemMessage) ([]byte, *Error) {
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

type oldTurns struct {
	dst  []byte
	role string
}

func (t *oldTurns) block(role string) {
	if t.role != role {
		if t.role != "" {
			t.dst = append(t.dst, `]}`...)
		}
		t.dst = sep(t.dst)
		t.dst = append(t.dst, `{"role":"`...)
		t.dst = append(t.dst, role...)
		t.dst = append(t.dst, `","content":[`...)
		t.role = role
	}
	t.dst = sep(t.dst)
}

func (t *oldTurns) close() []byte {
	if t.role != "" {
		t.dst = append(t.dst, `]}`...)
	}
	return t.dst
}

func oldAppendMessagesMessages(dst []byte, messages string, sys []oldSystemMessage) ([]byte, []oldSystemMessage, *Error) {
	t := oldTurns{dst: dst}
	it, _ := arrIter(messages)
	for i := 0; ; i++ {
		m, ok := it.elem()
		if !ok {
			break
		}
		path := pathi("messages", i)
		role, content, err := oldMsgRole(m, path)
		if err != nil {
			return t.dst, sys, err
		}
		switch role {
		case "system", "developer":
			if !isStr(content) && !isArr(content) {
				err = badRequest(path + ".content: must be a string or an array of text parts")
			}
			sys = append(sys, oldSystemMessage{content, i})
		case "user":
			err = oldUserToMessages(&t, content, path)
		case "assistant":
			err = oldAssistantToMessages(&t, m, content, path)
		case "tool":
			err = oldToolToMessages(&t, m, content, path)
		case "function":
			err = badRequest(path + ".role: function messages are not supported; use tool messages")
		default:
			err = badRequest(path + ".role: must be system, developer, user, assistant or tool")
		}
		if err != nil {
			return t.dst, sys, err
		}
	}
	return t.close(), sys, nil
}

func oldUserToMessages(t *oldTurns, content, path string) *Error {
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
		return badRequest(path + ".content: must be a string or an array of content parts")
	}
	for j := 0; ; j++ {
		p, ok := it.elem()
		if !ok {
			return nil
		}
		if err := oldPartToMessages(t, "user", p, pathi(path+".content", j)); err != nil {
			return err
		}
	}
}

func oldPartToMessages(t *oldTurns, role, p, path string) *Error {
	typ, err := oldBlockType(p, path)
	if err != nil {
		return err
	}
	switch typ {
	case "text", "refusal":
		txt := field(p, typ)
		if !isStr(txt) {
			return badRequest(path + "." + typ + ": must be a string")
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
			return badRequest(path + ".image_url.url: must be a string")
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
			return badRequest(path + ".file: only inline file_data (a base64 data URL) is supported")
		}
		t.block(role)
		t.dst = append(t.dst, `{"type":"document","source":{"type":"base64","media_type":`...)
		t.dst = appendStr(t.dst, mt)
		t.dst = append(t.dst, `,"data":`...)
		t.dst = appendStr(t.dst, data)
		t.dst = append(t.dst, `}}`...)
	case "input_audio":
		return badRequest(path + ": audio input is not supported by this model's upstream")
	default:
		return badRequest(path + ".type: content part type " + typ + " is not supported")
	}
	return nil
}

func oldAssistantToMessages(t *oldTurns, m, content, path string) *Error {
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
			return badRequest(path + ".content: must be a string, an array of parts or null")
		}
		for j := 0; ; j++ {
			p, ok := ci.elem()
			if !ok {
				break
			}
			if err := oldPartToMessages(t, "assistant", p, pathi(path+".content", j)); err != nil {
				return err
			}
		}
	}
	if isNull(calls) {
		return nil
	}
	ci, ok := arrIter(calls)
	if !ok {
		return badRequest(path + ".tool_calls: must be an array")
	}
	for j := 0; ; j++ {
		c, ok := ci.elem()
		if !ok {
			return nil
		}
		cp := pathi(path+".tool_calls", j)
		fn := field(c, "function")
		id, name := field(c, "id"), field(fn, "name")
		if !isStr(id) || !isStr(name) {
			return badRequest(cp + ": tool calls need id and function.name strings")
		}
		t.block("assistant")
		t.dst = append(t.dst, `{"type":"tool_use","id":`...)
		t.dst = appendCleanID(t.dst, id)
		t.dst = append(t.dst, `,"name":`...)
		t.dst = append(t.dst, name...)
		t.dst = append(t.dst, `,"input":`...)
		t.dst = oldAppendArgsObject(t.dst, field(fn, "arguments"))
		t.dst = append(t.dst, '}')
	}
}

func oldAppendArgsObject(dst []byte, args string) []byte {
	if isObj(args) {
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

func oldToolToMessages(t *oldTurns, m, content, path string) *Error {
	id := field(m, "tool_call_id")
	if !isStr(id) {
		return badRequest(path + ".tool_call_id: must be a string")
	}
	t.block("user")
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
			return badRequest(path + ".content: must be a string or an array of text parts")
		}
		t.dst = append(t.dst, '"')
		first := true
		for j := 0; ; j++ {
			p, ok := ci.elem()
			if !ok {
				break
			}
			txt := field(p, "text")
			if !strEq(field(p, "type"), "text") || !isStr(txt) {
				return badRequest(pathi(path+".content", j) + ": tool messages may only hold text parts")
			}
			t.dst = appendJoinedInner(t.dst, txt, `\n`, &first)
		}
		t.dst = append(t.dst, '"')
	}
	t.dst = append(t.dst, '}')
	return nil
}

func oldAppendToolsMessages(dst []byte, tools, choice string, noParallel bool) ([]byte, *Error) {
	n := 0

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

func oldPassRequest(client Format, dst []byte, s string, cfg *Config) ([]byte, Request, *Error) {
	var (
		req            Request
		r              reasoning
		c              commonMembers
		messages, opts string
		maxTokens      int64
		err            *Error
	)
	chat := client == Chat
	dst = append(dst, '{')
	it, _ := objIter(s)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		if err = oldValidateMember(client, k, v); err != nil {
			return dst, req, err
		}
		if handled, err := r.member(k, v, chat); handled {
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
		case "top_k":
			err = checkTopK(v)
		case "stop", "stop_sequences":
			err = stopList(v, k)
		case "max_tokens", "max_completion_tokens":
			if isNull(v) {
				continue
			}
			if maxTokens, err = readMaxTokens(v, k); err != nil {
				return dst, req, err
			}
			if !chat {
				continue
			}
		case "stream_options":
			if !chat {
				break
			}
			opts = v
			continue
		case "output_config":
			if !chat {
				err = r.outputEffort(field(v, "effort"))
			}
		default:
			err = passField(client, k, v)
		}
		if err != nil {
			return dst, req, err
		}
		dst = appendRawMember(dst, k, v)
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
	if chat {
		req.IncludeUsage = field(opts, "include_usage") == "true"
		if req.Stream {
			dst = key(dst, "stream_options")
			dst = append(dst, '{')
			if oi, ok := objIter(opts); ok {
				for {
					k, v, ok := oi.next()
					if !ok {
						break
					}
					if k != "include_usage" {
						dst = appendRawMember(dst, k, v)
					}
				}
			}
			dst = key(dst, "include_usage")
			dst = append(dst, "true}"...)
		}
	} else {
		if maxTokens == 0 {
			return dst, req, badRequest("max_tokens: required")
		}
	}
	if !chat && r.passThinking(cfg) {
		dst = key(dst, "max_tokens")
		dst = appendInt(dst, maxTokens)
		dst = key(dst, "thinking")
		dst = append(dst, r.thinkingRaw...)
		return append(dst, '}'), req, nil
	}
	r.fix(cfg.Dialect(), &maxTokens)
	if !chat {
		dst = key(dst, "max_tokens")
		dst = appendInt(dst, maxTokens)
	}
	dst = r.appendReasoning(dst, cfg, chat)
	return append(dst, '}'), req, nil
}
