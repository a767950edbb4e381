package translate

// Messages client → chat completions upstream.
//
// What a chat upstream cannot carry follows the field rule (fields.go):
// caching, context management, metadata but the user id, deferred tool
// loading and thinking display are dropped; server-side tools and output
// formats other than a JSON schema are refused.

func messagesToChat(dst []byte, s string, cfg *Config) ([]byte, Request, *Error) {
	var (
		messages, system, stop, topK, user, tools, toolChoice, schema string
		c                                                             commonMembers
		maxTokens                                                     int64
		req                                                           Request
		r                                                             reasoning
		err                                                           *Error
	)
	// The messages as their check read them, for appendMessagesChat; a
	// conversation's first 64 stay on the stack.
	var viewBuf [64]msgView
	views := viewBuf[:0]
	top := cursor{s: s}
	top.obj()
	for {
		k, ok := top.key()
		if !ok {
			break
		}
		var v string
		if k == "messages" && top.peek() == '[' {
			v, views, err = takeMessages(&top, views[:0])
		} else {
			v, err = takeMember(&top, Messages, k)
		}
		if err != nil {
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
		case "metadata": // an object, its user_id a string (validated)
			if u := field(v, "user_id"); isStr(u) {
				user = u
			}
		case "tools":
			tools = v
		case "tool_choice":
			toolChoice = v
		case "output_config":
			schema, err = outputConfigChat(&r, v, schema)
		case "output_format": // the structured-outputs beta's spelling of output_config.format
			if !isNull(v) {
				schema, err = outputFormatChat(v, "", "output_format")
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
	// A streamed request's input tokens are estimated on the way (count.go):
	// message_start reports them before the upstream has counted.
	est := tally{on: req.Stream, n: tokensReply}

	dst = append(dst, `{"model":`...)
	dst = append(dst, c.model...)
	dst = append(dst, `,"messages":[`...)
	if dst, err = appendSystemChat(dst, system, &est); err != nil {
		return dst, req, err
	}
	if est.n > tokensReply {
		est.n += tokensPerMessage
	}
	if dst, err = appendMessagesChat(dst, views, &est); err != nil {
		return dst, req, err
	}
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
	if dst, err = appendToolsChat(dst, tools, toolChoice, &est); err != nil {
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

// outputConfigChat reads output_config: effort goes to the reasoning
// control, a JSON schema format becomes the chat response_format (its
// schema is returned), the rest follows the field rule.
func outputConfigChat(r *reasoning, v, schema string) (string, *Error) {
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
				schema, err = outputFormatChat(val, "output_config", "format")
			}
		default:
			err = uncarriedIn(Messages, "output_config", -1, k, val)
		}
		if err != nil {
			return schema, err
		}
	}
}

// outputFormatChat reads a structured output format, {type: json_schema,
// schema}, and returns its schema; other types are refused.
func outputFormatChat(v, parent, name string) (string, *Error) {
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

// appendSystemChat writes a system prompt (string or text blocks, validated)
// as one system message; the blocks' cache_control is a hint, dropped. Its
// text is added to est.
func appendSystemChat(dst []byte, v string, est *tally) ([]byte, *Error) {
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
	// Otherwise an array of text blocks (validated: validateSystemIn).
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
		est.text(t) // counted still, as count_tokens counts it
		if isBillingHeader(t) {
			continue
		}
		dst = appendJoinedInner(dst, t, `\n\n`, &first)
	}
	if len(dst) == body {
		return dst[:mark], nil
	}
	return append(dst, `"}`...), nil
}

// isBillingHeader reports whether a system block's text (a literal) is the
// "x-anthropic-billing-header: …" line Claude Code puts first in system. It
// differs per request (cch=…), so kept it would spoil a model server's prefix
// cache; only Anthropic reads it, and a messages upstream still gets it.
func isBillingHeader(lit string) bool {
	const h = "x-anthropic-billing-header:"
	return isStr(lit) && len(lit) > len(h) && lit[1:1+len(h)] == h
}

// appendMessagesChat writes the messages from their views (takeMessages):
// each an object with a valid role and content. Tool messages follow the
// assistant message that called: a message the client put between the
// calls and their results is held after the results (toolorder.go).
func appendMessagesChat(dst []byte, views []msgView, est *tally) ([]byte, *Error) {
	var (
		err   *Error
		h     held
		calls bool
		split int
	)
	msgs := loc{name: "messages"}
	for i, m := range views {
		p := msgs.elem(i)
		est.n += tokensPerMessage
		role, content := m.role, m.content
		mark := len(dst)
		switch {
		case strEq(role, "user"):
			// Its tool messages are dst[mark:split], then its user message.
			if dst, split, err = userToChat(dst, content, &p, est); err == nil {
				h.results(dst[:split], mark)
				h.note(dst, split)
			}
		case strEq(role, "assistant"):
			dst, calls, err = assistantToChat(dst, content, &p, est)
			h = held{on: calls}
		default:
			// system: instructions between turns (Claude Code sends them)
			// stay where they are: a system message at that position.
			dst, err = appendSystemChat(dst, content, est)
			h.note(dst, mark)
		}
		if err != nil {
			return dst, err
		}
	}
	return dst, nil
}

func blockType(b string, p *loc) (string, *Error) {
	if !isObj(b) {
		return "", p.bad(": must be a content block object")
	}
	t := field(b, "type")
	if !isStr(t) {
		return "", p.bad(".type: must be a string")
	}
	return inner(t), nil
}

// block holds the members of a content block that the translation reads,
// found in one scan: looking each up with field would scan a long text once
// per member and again in every pass over a turn's blocks. As with field,
// the first of duplicate keys counts, and an absent member is "".
type block struct {
	raw, typ                            string // typ: the type, unquoted
	text, thinking, id, name, input     string
	toolUseID, content, isError, source string
	toolName                            string // a tool_reference's
}

// readBlock reads the content block at c, the element at p, and moves c
// past it.
func readBlock(c *cursor, p *loc) (block, *Error) {
	var bl block
	at := c.begin()
	if !c.obj() {
		return bl, p.bad(": must be a content block object")
	}
	var typ string
	for {
		k, ok := c.key()
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
		case "tool_name":
			dst = &bl.toolName
		default:
			continue
		}
		if *dst == "" { // the first of duplicates counts, as with field
			*dst = c.raw()
		}
	}
	bl.raw = c.finish(at, nil)
	if !isStr(typ) {
		return bl, p.bad(".type: must be a string")
	}
	bl.typ = inner(typ)
	return bl, nil
}

// isServerBlock tells the result and call blocks of server-side tools.
func isServerBlock(t string) bool {
	switch t {
	case "server_tool_use", "mcp_tool_use", "mcp_tool_result", "container_upload":
		return true
	}
	return len(t) > len("_tool_result") && t[len(t)-len("_tool_result"):] == "_tool_result"
}

func unsupportedBlock(p *loc, t string) *Error {
	if isServerBlock(t) {
		return p.bad(": " + t + " blocks belong to server-side tools, which are not supported")
	}
	return p.bad(": content block type " + t + " is not supported here")
}

// userToChat writes a user turn: its tool_result blocks become tool messages
// (which must directly follow the assistant's tool calls), then the rest —
// with any images the tool results carried, which tool messages cannot hold —
// becomes one user message.
//
// split is where the tool messages end and the user message starts.
func userToChat(dst []byte, content string, p *loc, est *tally) (out []byte, split int, err *Error) {
	if isStr(content) {
		est.text(content)
		split = len(dst)
		dst = sep(dst)
		dst = append(dst, `{"role":"user","content":`...)
		dst = append(dst, content...)
		return append(dst, '}'), split, nil
	}
	// The blocks are read once: tool results are written as they come, the
	// rest after them (a turn's first eight blocks stay on the stack).
	var buf [8]block
	blocks := buf[:0]
	var (
		parts    int
		soleText string
	)
	cp := p.member("content")
	c := cursor{s: content}
	c.arr()
	for i := 0; c.more(); i++ {
		bp := cp.elem(i)
		b, err := readBlock(&c, &bp)
		if err != nil {
			return dst, 0, err
		}
		switch b.typ {
		case "tool_result":
			var imgs int
			if dst, imgs, err = toolResultToChat(dst, &b, &bp, est); err != nil {
				return dst, 0, err
			}
			parts += imgs
		case "text":
			if !isStr(b.text) {
				return dst, 0, bp.bad(".text: must be a string")
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
			return dst, 0, unsupportedBlock(&bp, b.typ)
		}
		blocks = append(blocks, b)
	}
	split = len(dst)
	if parts == 0 {
		return dst, split, nil
	}
	dst = sep(dst)
	dst = append(dst, `{"role":"user","content":`...)
	if parts == 1 && soleText != "" {
		dst = append(dst, soleText...)
		return append(dst, '}'), split, nil
	}
	dst = append(dst, '[')
	// Images and files from tool results first: they belong to the calls
	// just answered.
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
				bp := cp.elem(i)
				bcp := bp.member("content")
				ip := bcp.elem(j)
				dst, err = appendImagePart(dst, cb, &ip, est)
			case strEq(t, "document") && isAttachedDocument(cb):
				bp := cp.elem(i)
				bcp := bp.member("content")
				ip := bcp.elem(j)
				dst, err = appendDocumentPart(dst, cb, &ip, est)
			}
			if err != nil {
				return dst, 0, err
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
			bp := cp.elem(i)
			dst, err = appendImagePart(dst, b.raw, &bp, est)
		case "document":
			bp := cp.elem(i)
			dst, err = appendDocumentPart(dst, b.raw, &bp, est)
		}
		if err != nil {
			return dst, 0, err
		}
	}
	return append(dst, `]}`...), split, nil
}

// errorPrefix starts the tool message of a tool_result with is_error: true.
const errorPrefix = "Error: "

// isAttachedDocument reports whether a document block in a tool result
// (validated: a source object with a type) goes to the user message that
// follows the tool messages, as a file part (a PDF from Claude Code's Read);
// a text document's text stays in the tool message.
func isAttachedDocument(b string) bool {
	return !strEq(field(field(b, "source"), "type"), "text")
}

// toolLoadedPrefix starts the line a tool_reference block (Claude Code's
// ToolSearch result) becomes in a tool message.
const toolLoadedPrefix = "Tool loaded: "

// toolResultToChat writes one tool message and counts the images and files
// it leaves for the following user message (their tokens are added to est
// when they are written there).
func toolResultToChat(dst []byte, b *block, p *loc, est *tally) ([]byte, int, *Error) {
	id := b.toolUseID
	if !isStr(id) {
		return dst, 0, p.bad(".tool_use_id: must be a string")
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
	case isStr(c) && isErr:
		// A chat tool message has no error flag: the text says it.
		est.text(c)
		dst = append(dst, `"`+errorPrefix...)
		dst = append(dst, inner(c)...)
		return append(dst, `"}`...), 0, nil
	case isStr(c):
		est.text(c)
		dst = append(dst, c...)
		return append(dst, '}'), 0, nil
	}
	it := cursor{s: c}
	if !it.arr() {
		return dst, 0, p.bad(".content: must be a string or an array of content blocks")
	}
	images, docs := 0, 0
	first := true
	dst = append(dst, '"')
	if isErr {
		dst = append(dst, errorPrefix...)
	}
	pc := p.member("content")
	for j := 0; it.more(); j++ {
		cp := pc.elem(j)
		cb, err := readBlock(&it, &cp)
		if err != nil {
			return dst, 0, err
		}
		switch cb.typ {
		case "text":
			if !isStr(cb.text) {
				return dst, 0, cp.bad(".text: must be a string")
			}
			est.text(cb.text)
			dst = appendJoinedInner(dst, cb.text, `\n`, &first)
		case "image":
			images++
		case "document":
			if isAttachedDocument(cb.raw) {
				// Written after the tool messages (userToChat), where
				// its source is checked.
				docs++
				break
			}
			data := field(cb.source, "data")
			if !isStr(data) {
				return dst, 0, cp.bad(".source.data: must be a string")
			}
			est.text(data)
			dst = appendJoinedInner(dst, data, `\n`, &first)
		case "tool_reference":
			// ToolSearch loaded a deferred tool. A chat upstream is
			// offered every tool (defer_loading is dropped): say which.
			if !isStr(cb.toolName) {
				return dst, 0, cp.bad(".tool_name: must be a string")
			}
			est.n += jsonTokens(cb.raw) // as count_tokens counts a block it does not know
			if !first {
				dst = append(dst, `\n`...)
			}
			first = false
			dst = append(dst, toolLoadedPrefix...)
			dst = append(dst, inner(cb.toolName)...)
		default:
			return dst, 0, unsupportedBlock(&cp, cb.typ)
		}
	}
	switch {
	case !first:
	case images > 0:
		dst = append(dst, "(see the attached image)"...)
	case docs > 0:
		dst = append(dst, "(see the attached document)"...)
	}
	return append(dst, `"}`...), images + docs, nil
}

// appendImagePart writes the image block b as an image_url part and adds
// its tokens to est.
func appendImagePart(dst []byte, b string, p *loc, est *tally) ([]byte, *Error) {
	src := field(b, "source")
	if !isObj(src) {
		return dst, p.bad(".source: must be an object")
	}
	dst = sep(dst)
	switch t := field(src, "type"); {
	case strEq(t, "base64"):
		mt, data := field(src, "media_type"), field(src, "data")
		if !isStr(mt) || !isStr(data) {
			return dst, p.bad(".source: base64 images need media_type and data strings")
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
			return dst, p.bad(".source.url: must be a string")
		}
		est.n += tokensImage
		dst = append(dst, `{"type":"image_url","image_url":{"url":`...)
		dst = append(dst, u...)
		return append(dst, `}}`...), nil
	default:
		return dst, p.bad(".source.type: images must be base64 or url")
	}
}

// appendDocumentPart writes the document block b as text or file parts and
// adds its tokens to est (a text document's text, any other one's JSON).
func appendDocumentPart(dst []byte, b string, p *loc, est *tally) ([]byte, *Error) {
	src := field(b, "source")
	if !isObj(src) {
		return dst, p.bad(".source: must be an object")
	}
	t := field(src, "type")
	if !strEq(t, "text") {
		est.n += jsonTokens(b)
	}
	switch {
	case strEq(t, "text"):
		data := field(src, "data")
		if !isStr(data) {
			return dst, p.bad(".source.data: must be a string")
		}
		est.text(data)
		dst = sep(dst)
		dst = append(dst, `{"type":"text","text":`...)
		dst = append(dst, data...)
		return append(dst, '}'), nil
	case strEq(t, "base64"):
		mt, data := field(src, "media_type"), field(src, "data")
		if !isStr(mt) || !isStr(data) {
			return dst, p.bad(".source: base64 documents need media_type and data strings")
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
			return dst, p.bad(".source.content: must be a string or text blocks")
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
	return dst, p.bad(".source.type: documents must be text, base64 or content here")
}

// assistantToChat writes an assistant turn: text joined into content, tool_use
// blocks as tool_calls and, on a turn that calls tools, its thinking as
// reasoning_content (reasoning templates need it to continue after the
// results come back).
func assistantToChat(dst []byte, content string, p *loc, est *tally) ([]byte, bool, *Error) {
	if isStr(content) {
		est.text(content)
		dst = sep(dst)
		dst = append(dst, `{"role":"assistant","content":`...)
		dst = append(dst, content...)
		return append(dst, '}'), false, nil
	}
	// The blocks are read once and written in three passes (text, thinking,
	// tool calls); a turn's first eight stay on the stack.
	var buf [8]block
	blocks := buf[:0]
	var texts, tools, thinks int
	cp := p.member("content")
	c := cursor{s: content}
	c.arr()
	for i := 0; c.more(); i++ {
		bp := cp.elem(i)
		b, err := readBlock(&c, &bp)
		if err != nil {
			return dst, false, err
		}
		switch b.typ {
		case "text":
			if !isStr(b.text) {
				return dst, false, bp.bad(".text: must be a string")
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
				return dst, false, bp.bad(": tool_use needs id and name strings")
			}
			if !isObj(b.input) && !isNull(b.input) {
				return dst, false, bp.bad(".input: must be an object")
			}
			est.n += tokensPerCall + jsonTokens(b.input)
			est.text(b.name)
			tools++
		default:
			return dst, false, unsupportedBlock(&bp, b.typ)
		}
		blocks = append(blocks, b)
	}
	if texts == 0 && tools == 0 {
		return dst, false, nil
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
		return append(dst, '}'), false, nil
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
	return append(dst, `]}`...), true, nil
}

// appendToolsChat writes tool definitions and tool_choice, and adds the
// definitions' tokens to est. Their shapes are validated (validate.go).
func appendToolsChat(dst []byte, tools, choice string, est *tally) ([]byte, *Error) {
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
		if dst, err = appendToolChat(dst, t, i); err != nil {
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
	case strEq(t, "tool"): // with a name string (validated)
		dst = append(dst, `{"type":"function","function":{"name":`...)
		dst = append(dst, field(choice, "name")...)
		dst = append(dst, `}}`...)
	default: // auto
		dst = append(dst, `"auto"`...)
	}
	if field(choice, "disable_parallel_tool_use") == "true" {
		dst = append(dst, `,"parallel_tool_calls":false`...)
	}
	return dst, nil
}

// appendToolChat writes the client tool t, tools[i], as a function tool.
// Its members a function cannot carry (cache_control, defer_loading,
// input_examples...) follow the field rule. Its shape (an object, a name,
// an input_schema object, no server-side type) is validated (validate.go).
func appendToolChat(dst []byte, t string, i int) ([]byte, *Error) {
	tools := loc{name: "tools"}
	p := tools.elem(i)
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
			if !isBool(v) && !isNull(v) { // checkBool, with the path spelled only on failure
				return dst, p.bad(".strict: must be a boolean")
			}
			strict = v
		default:
			if err := uncarriedIn(Messages, "tools", i, k, v); err != nil {
				return dst, err
			}
		}
	}
	if !isNull(typ) && !strEq(typ, "custom") {
		return dst, p.bad(": tool type " + str(typ) + " is not supported; only client tools are")
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
