package translate

// A Gemini request's systemInstruction and contents as chat messages:
// parts read one by one (readGeminiPart), model turns as assistant messages
// with their function calls, user turns as tool messages for their
// function responses and a user message for the rest, and the ids that
// pair each response with its call.

import (
	"strconv"
	"sync"
)

// appendGeminiSystem writes systemInstruction, a Content of text parts (or,
// leniently, a string), as the system message.
func appendGeminiSystem(dst []byte, v string) ([]byte, *Error) {
	if isNull(v) {
		return dst, nil
	}
	mark := len(dst)
	dst = sep(dst)
	dst = append(dst, sysOpen...)
	body := len(dst)
	first := true
	switch {
	case isStr(v):
		dst = appendJoinedInner(dst, v, `\n\n`, &first)
	case isObj(v):
		parts := geminiField(v, "parts")
		it, ok := arrIter(parts)
		if !ok {
			if isNull(parts) {
				return dst[:mark], nil
			}
			return dst, badRequest("systemInstruction.parts: must be an array of text parts")
		}
		for j := 0; ; j++ {
			part, ok := it.elem()
			if !ok {
				break
			}
			txt := field(part, "text")
			if !isObj(part) || !isStr(txt) {
				return dst, badRequest(pathi("systemInstruction.parts", j) + ": only text parts are supported in systemInstruction")
			}
			dst = appendJoinedInner(dst, txt, `\n\n`, &first)
		}
	default:
		return dst, badRequest("systemInstruction: must be a Content object {parts: [{text}]}")
	}
	if len(dst) == body {
		return dst[:mark], nil
	}
	return append(dst, `"}`...), nil
}

// geminiField is field for a member with either spelling of its name.
func geminiField(raw, name string) string {
	it, ok := objIter(raw)
	if !ok {
		return ""
	}
	for {
		k, v, ok := it.next()
		if !ok {
			return ""
		}
		if geminiKey(k) == name {
			return v
		}
	}
}

// part kinds
const (
	gpNone     uint8 = iota // no data to carry (an empty text, a signature alone)
	gpText                  // text
	gpThought               // text with thought: true
	gpInline                // inlineData
	gpFile                  // fileData
	gpCall                  // functionCall
	gpResponse              // functionResponse
)

// geminiPart is a part as readGeminiPart read it: its kind and the raw
// value of its data member.
type geminiPart struct {
	kind uint8
	v    string
}

// readGeminiPart reads the part at c, the element at p, and moves c past it.
func readGeminiPart(c *cursor, p *loc) (geminiPart, *Error) {
	var gp geminiPart
	if !c.obj() {
		c.skip()
		return gp, p.bad(": must be an object (a Part)")
	}
	var thought, server string
	data := 0
	for {
		k, ok := c.key()
		if !ok {
			break
		}
		name := geminiKey(k)
		kind := gpNone
		switch name {
		case "text":
			kind = gpText
		case "inlineData":
			kind = gpInline
		case "fileData":
			kind = gpFile
		case "functionCall":
			kind = gpCall
		case "functionResponse":
			kind = gpResponse
		case "thought":
			firstOf(&thought, c.raw())
			continue
		case "executableCode", "codeExecutionResult", "toolCall", "toolResponse":
			if v := c.raw(); !isNull(v) && server == "" {
				server = name
				data++
			}
			continue
		default: // thoughtSignature, videoMetadata, mediaResolution, partMetadata: hints
			continue
		}
		v := c.raw()
		if isNull(v) || gp.kind == kind {
			continue
		}
		data++
		gp.kind, gp.v = kind, v
	}
	switch {
	case !isNull(thought) && !isBool(thought):
		return gp, p.bad(".thought: must be a boolean")
	case server != "":
		return gp, p.bad(": " + server + " parts belong to server-side tools (code execution), which are not supported")
	case data > 1:
		return gp, p.bad(": a part holds one of text, inlineData, fileData, functionCall or functionResponse, not several")
	case data == 0:
		// A thoughtSignature alone (or another hint), or nothing: the SDKs
		// send a stream's closing {"text":""} back as {} (the Go SDK omits
		// the empty string). Nothing to carry.
		return gp, nil
	}
	if gp.kind == gpText {
		if !isStr(gp.v) {
			return gp, p.bad(".text: must be a string")
		}
		if emptyStr(gp.v) {
			gp.kind = gpNone
		} else if thought == "true" {
			gp.kind = gpThought
		}
	}
	return gp, nil
}

// geminiPastCall is a function call of the last model turn that called, for
// the functionResponse parts that answer it.
type geminiPastCall struct {
	id       string // the client's id (a literal), or "" for a made-up one
	name     string // a literal
	content  int    // where it is: the made-up id says it
	part     int
	answered bool
}

// appendID writes the call's id literal.
func (g *geminiPastCall) appendID(dst []byte) []byte {
	if g.id != "" {
		return append(dst, g.id...)
	}
	return appendMadeUpID(dst, g.content, g.part)
}

func appendMadeUpID(dst []byte, content, part int) []byte {
	dst = append(dst, `"call_`...)
	dst = strconv.AppendInt(dst, int64(content), 10)
	dst = append(dst, '_')
	dst = strconv.AppendInt(dst, int64(part), 10)
	return append(dst, '"')
}

// contentsWriter writes the contents as chat messages.
type contentsWriter struct {
	dst   []byte
	calls []geminiPastCall // the last model turn's calls
	parts []geminiPart     // the content being written
	turns bool             // a user or assistant message was written
}

// contentsScratch keeps a request's parts and calls from one request to the
// next, so that reading a conversation allocates nothing for them. (Arrays
// on the stack escape: the writer's methods append to them.)
type contentsScratch struct {
	parts []geminiPart
	calls []geminiPastCall
}

var contentsPool = sync.Pool{New: func() any {
	return &contentsScratch{parts: make([]geminiPart, 0, 16), calls: make([]geminiPastCall, 0, 8)}
}}

// maxPooledParts bounds what the pool keeps of an unusually long content.
const maxPooledParts = 1024

// put returns the scratch to the pool with the slices as they grew,
// cleared: they point into the request's body, which must not be kept.
func (sc *contentsScratch) put(parts []geminiPart, calls []geminiPastCall) {
	if cap(parts) > maxPooledParts || cap(calls) > maxPooledParts {
		return
	}
	clear(parts[:cap(parts)])
	clear(calls[:cap(calls)])
	sc.parts, sc.calls = parts[:0], calls[:0]
	contentsPool.Put(sc)
}

// appendGeminiContents writes the contents array.
func appendGeminiContents(dst []byte, contents string) ([]byte, *Error) {
	if isNull(contents) {
		return dst, badRequest("contents: required, an array of Content objects {role, parts}")
	}
	c := cursor{s: contents}
	if !c.arr() {
		return dst, badRequest("contents: must be an array of Content objects {role, parts}")
	}
	sc := contentsPool.Get().(*contentsScratch)
	w := contentsWriter{dst: dst, parts: sc.parts[:0], calls: sc.calls[:0]}
	defer func() { sc.put(w.parts, w.calls) }() // as they grew
	cl := loc{name: "contents"}
	i := 0
	for ; c.more(); i++ {
		p := cl.elem(i)
		if err := w.content(&c, i, &p); err != nil {
			return w.dst, err
		}
	}
	switch {
	case i == 0:
		return w.dst, badRequest("contents: must not be empty")
	case !w.turns:
		return w.dst, badRequest("contents: " + noTurnsMsg)
	}
	return w.dst, nil
}

// content writes contents[i], the value at c.
func (w *contentsWriter) content(c *cursor, i int, p *loc) *Error {
	if !c.obj() {
		return p.bad(": must be an object (a Content {role, parts})")
	}
	// The SDKs write parts before role: the parts are taken whole and
	// walked once the role is known.
	var role, parts string
	for {
		k, ok := c.key()
		if !ok {
			break
		}
		switch geminiKey(k) {
		case "role":
			firstOf(&role, c.raw())
		case "parts":
			firstOf(&parts, c.raw())
		}
	}
	model := false
	switch {
	case isNull(role), strEq(role, "user"), strEq(role, "function"):
	case strEq(role, "model"):
		model = true
	default:
		return p.bad(".role: must be user or model")
	}
	pc := cursor{s: parts}
	if !pc.arr() {
		if isNull(parts) {
			return p.bad(".parts: required, an array of parts")
		}
		return p.bad(".parts: must be an array of parts")
	}
	w.parts = w.parts[:0]
	pl := p.member("parts")
	for j := 0; pc.more(); j++ {
		at := pl.elem(j)
		gp, err := readGeminiPart(&pc, &at)
		if err != nil {
			return err
		}
		w.parts = append(w.parts, gp)
	}
	if model {
		return w.model(i, &pl)
	}
	return w.user(&pl)
}

// model writes a model turn as an assistant message.
func (w *contentsWriter) model(i int, pl *loc) *Error {
	var texts, thoughts, calls int
	for j, gp := range w.parts {
		switch gp.kind {
		case gpText:
			texts++
		case gpThought:
			thoughts++
		case gpCall:
			calls++
		case gpInline, gpFile:
			at := pl.elem(j)
			return at.bad(": model turns may hold only text, thoughts and function calls here")
		case gpResponse:
			at := pl.elem(j)
			return at.bad(": functionResponse parts belong to user turns")
		}
	}
	if texts == 0 && calls == 0 {
		return nil // thoughts alone: nothing to write
	}
	w.turns = true
	dst := sep(w.dst)
	dst = append(dst, `{"role":"assistant","content":`...)
	if texts == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '"')
		first := true
		for _, gp := range w.parts {
			if gp.kind == gpText {
				dst = appendJoinedInner(dst, gp.v, "", &first)
			}
		}
		dst = append(dst, '"')
	}
	if calls == 0 {
		w.dst = append(dst, '}')
		return nil
	}
	if thoughts > 0 {
		dst = append(dst, `,"reasoning_content":"`...)
		first := true
		for _, gp := range w.parts {
			if gp.kind == gpThought {
				dst = appendJoinedInner(dst, gp.v, `\n\n`, &first)
			}
		}
		dst = append(dst, '"')
	}
	w.calls = w.calls[:0]
	dst = append(dst, `,"tool_calls":[`...)
	for j, gp := range w.parts {
		if gp.kind != gpCall {
			continue
		}
		at := pl.elem(j)
		fc := at.member("functionCall")
		var id, name, args string
		it, ok := objIter(gp.v)
		if !ok {
			return fc.bad(": must be an object {name, args}")
		}
		for {
			k, v, ok := it.next()
			if !ok {
				break
			}
			switch k {
			case "id":
				firstOf(&id, v)
			case "name":
				firstOf(&name, v)
			case "args":
				firstOf(&args, v)
			}
		}
		switch {
		case !isStr(name) || emptyStr(name):
			return fc.bad(".name: must be a non-empty string")
		case !isNull(args) && !isObj(args):
			return fc.bad(".args: must be an object")
		case !isNull(id) && !isStr(id):
			return fc.bad(".id: must be a string")
		}
		if !isStr(id) || emptyStr(id) {
			id = ""
		}
		call := geminiPastCall{id: id, name: name, content: i, part: j}
		w.calls = append(w.calls, call)
		dst = sep(dst)
		dst = append(dst, `{"id":`...)
		dst = call.appendID(dst)
		dst = append(dst, `,"type":"function","function":{"name":`...)
		dst = append(dst, name...)
		dst = append(dst, `,"arguments":`...)
		if isNull(args) {
			dst = append(dst, `"{}"`...)
		} else {
			dst = appendStr(dst, args)
		}
		dst = append(dst, `}}`...)
	}
	w.dst = append(dst, `]}`...)
	return nil
}

// user writes a user turn: a tool message per functionResponse part, then
// one user message with the rest, the media of the responses first.
func (w *contentsWriter) user(pl *loc) *Error {
	var (
		parts    int
		soleText string
		err      *Error
	)
	for j, gp := range w.parts {
		switch gp.kind {
		case gpText:
			parts++
			soleText = gp.v
		case gpInline, gpFile:
			parts += 2 // never a sole text
		case gpCall:
			at := pl.elem(j)
			return at.bad(": functionCall parts belong to model turns")
		case gpResponse:
			at := pl.elem(j)
			var media int
			if media, err = w.toolMessage(gp.v, &at); err != nil {
				return err
			}
			parts += 2 * media
		}
	}
	if parts == 0 {
		return nil
	}
	w.turns = true
	w.dst = sep(w.dst)
	w.dst = append(w.dst, `{"role":"user","content":`...)
	if parts == 1 {
		w.dst = append(w.dst, soleText...)
		w.dst = append(w.dst, '}')
		return nil
	}
	w.dst = append(w.dst, '[')
	for _, gp := range w.parts {
		if gp.kind != gpResponse {
			continue
		}
		it, _ := arrIter(geminiField(gp.v, "parts"))
		for {
			rp, ok := it.elem()
			if !ok {
				break
			}
			var none loc // checked by toolMessage
			kind, v, _ := mediaPart(rp, &none)
			w.dst = appendMedia(w.dst, kind, v)
		}
	}
	for j, gp := range w.parts {
		at := pl.elem(j)
		switch gp.kind {
		case gpText:
			w.dst = sep(w.dst)
			w.dst = append(w.dst, `{"type":"text","text":`...)
			w.dst = append(w.dst, gp.v...)
			w.dst = append(w.dst, '}')
		case gpInline:
			p := at.member("inlineData")
			w.dst, err = appendInlineData(w.dst, gp.v, &p)
		case gpFile:
			p := at.member("fileData")
			w.dst, err = appendFileData(w.dst, gp.v, &p)
		}
		if err != nil {
			return err
		}
	}
	w.dst = append(w.dst, `]}`...)
	return nil
}

// toolMessage writes a functionResponse part (raw v, the part at at) as a
// tool message and counts the media of its parts, which the user message
// after the tool messages carries.
func (w *contentsWriter) toolMessage(v string, at *loc) (int, *Error) {
	fr := at.member("functionResponse")
	it, ok := objIter(v)
	if !ok {
		return 0, fr.bad(": must be an object {name, response}")
	}
	var id, name, resp, parts string
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		switch geminiKey(k) {
		case "id":
			firstOf(&id, val)
		case "name":
			firstOf(&name, val)
		case "response":
			firstOf(&resp, val)
		case "parts":
			firstOf(&parts, val)
		}
	}
	switch {
	case !isStr(name) || emptyStr(name):
		return 0, fr.bad(".name: must be a non-empty string")
	case !isNull(id) && !isStr(id):
		return 0, fr.bad(".id: must be a string")
	case !isNull(resp) && !isObj(resp):
		return 0, fr.bad(".response: must be an object")
	case !isNull(parts) && !isArr(parts):
		return 0, fr.bad(".parts: must be an array of parts")
	}
	media := 0
	if pi, ok := arrIter(parts); ok {
		rl := fr.member("parts")
		for k := 0; ; k++ {
			rp, ok := pi.elem()
			if !ok {
				break
			}
			pp := rl.elem(k)
			// Checked now, written after the tool messages.
			if _, _, err := mediaPart(rp, &pp); err != nil {
				return 0, err
			}
			media++
		}
	}
	call := w.answer(id, name)
	if call == nil && (!isStr(id) || emptyStr(id)) {
		return 0, fr.bad(": no functionCall named " + str(name) + " in the last model turn awaits a response; give the id of the call it answers")
	}
	dst := sep(w.dst)
	dst = append(dst, `{"role":"tool","tool_call_id":`...)
	if call != nil {
		dst = call.appendID(dst)
	} else {
		dst = append(dst, id...)
	}
	dst = append(dst, `,"content":`...)
	dst = appendResponseContent(dst, resp, media > 0)
	w.dst = append(dst, '}')
	w.turns = true
	return media, nil
}

// answer finds the call a response answers, by id, else by name in order,
// and marks it answered; nil when none is left.
func (w *contentsWriter) answer(id, name string) *geminiPastCall {
	if isStr(id) && !emptyStr(id) {
		for k := range w.calls {
			if c := &w.calls[k]; !c.answered && c.id == id {
				c.answered = true
				return c
			}
		}
	}
	for k := range w.calls {
		if c := &w.calls[k]; !c.answered && c.name == name && (c.id == "" || !isStr(id) || emptyStr(id)) {
			c.answered = true
			return c
		}
	}
	return nil
}

// appendResponseContent writes a function response as a tool message's
// content: response.output (content, result) when it is the only member and
