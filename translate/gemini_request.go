package translate

// The Gemini API's GenerateContentRequest as a client request. As with the
// Responses API, chat completions is the pivot: the request is written as a
// chat request, and for a messages upstream the chat → messages translation
// then runs on it (geminiRequest). Everything that translation would refuse
// in chat's words is checked here first, so a client reads errors about its
// own members (contents.2.parts.0.inlineData.mimeType, …).
//
// Decisions where the two APIs differ:
//   - The path names the model (Call.Model); a model member in the body is
//     ignored, as the Gemini API does. Both spellings of member names are
//     read: the SDKs' lowerCamelCase and the proto's snake_case that the
//     REST examples use (geminiKey). Of duplicate members the first counts,
//     as with gjson, which the gate reads.
//   - contents: user (and the older function) turns become tool messages for
//     their functionResponse parts, then one user message for the rest;
//     model turns one assistant message: text joined as content, function
//     calls as tool_calls and, on a turn that calls, its thought parts as
//     reasoning_content (reasoning templates need it to continue after the
//     results come back; a turn without calls drops them, as the other
//     translations do). thoughtSignature is opaque and dropped.
//   - functionCall ids: the client's when it sent one, else made up from
//     the position, call_<content>_<part>, so that a conversation resent
//     turn after turn keeps the same ids (and a model server's prefix cache
//     its hits). A functionResponse takes the id of the call it answers,
//     matched by id, else by name in order, among the calls of the last
//     model turn that called.
//   - A functionResponse's tool message holds response.output (or content,
//     or result) when that is the response's only member and a string (what
//     Gemini CLI sends), "Error: " + response.error likewise, else the
//     response object as JSON text. Images and PDFs of its parts go to the
//     user message that follows the tool messages, since a tool message
//     holds text only.
//   - inlineData: PNG, JPEG, GIF and WebP images become image_url data URLs,
//     PDFs file parts; fileData: images by http(s) URL only. Other media,
//     files of the Files API, and the parts of server-side tools
//     (executableCode, codeExecutionResult) are a 400.
//   - Function parameters in Google's OpenAPI subset (UPPERCASE types,
//     nullable, propertyOrdering) are written as JSON Schema
//     (appendGeminiSchema); parametersJsonSchema passes as it is. Tools
//     other than functionDeclarations run on Google's servers: a 400.
//   - toolConfig.functionCallingConfig: AUTO and VALIDATED are auto, ANY is
//     required (a named function when exactly one is allowed), NONE none;
//     allowedFunctionNames withholds the other functions.
//   - generationConfig: temperature and topP are held to 0-1, as on every
//     endpoint; responseMimeType application/json becomes response_format
//     json_object, or json_schema with responseSchema or responseJsonSchema
//     (a messages upstream enforces only a schema: json_object alone is a
//     400 there). thinkingConfig is the reasoning control: thinkingBudget 0
//     turns it off, -1 (dynamic) on at the default level, a budget on with
//     that budget (the nearest effort where the dialect takes one);
//     thinkingLevel sets the effort; includeThoughts alone turns it on. No
//     thinkingConfig leaves the control unset, as in the other formats.
//     The rest follows the field rule (fields.go has the Gemini rows).

import (
	"strconv"
	"strings"
)

// geminiRequest translates a Gemini request for cfg.Upstream.
func geminiRequest(dst []byte, s string, cfg *Config, call Call) ([]byte, Request, *Error) {
	if cfg.Upstream == Chat {
		return geminiToChat(dst, s, cfg, call, true)
	}
	// Chat first, then chat → messages; the messages body is then moved
	// down over the chat body, in the same buffer.
	mark := len(dst)
	mid, req, err := geminiToChat(dst, s, cfg, call, false)
	if err != nil {
		return mid, req, err
	}
	end := len(mid)
	out, mreq, err := chatToMessages(mid, b2s(mid[mark:end]), cfg)
	if err != nil {
		return out, req, err
	}
	req.InputTokens = mreq.InputTokens
	n := copy(out[mark:], out[end:])
	return out[:mark+n], req, nil
}

// geminiConfig is what generationConfig asks for.
type geminiConfig struct {
	temperature, topP, topK, seed, presence, frequency string // raw
	stop                                               string // raw array
	format                                             string // a chat response_format, or ""
	maxTokens                                          int64
}

// geminiToChat writes the chat request. final says it goes upstream as it
// is (the reasoning control is then written in the upstream's dialect);
// otherwise it is the input of the chat → messages translation and carries
// the control as a chat client would.
func geminiToChat(dst []byte, s string, cfg *Config, call Call, final bool) ([]byte, Request, *Error) {
	var (
		contents, system, tools, toolConfig, gen string
		g                                        geminiConfig
		r                                        reasoning
		req                                      Request
		err                                      *Error
	)
	top := cursor{s: s}
	top.obj()
	for {
		k, ok := top.key()
		if !ok {
			break
		}
		v := top.raw()
		switch name := geminiKey(k); name {
		case "contents":
			firstOf(&contents, v)
		case "systemInstruction":
			firstOf(&system, v)
		case "tools":
			firstOf(&tools, v)
		case "toolConfig":
			firstOf(&toolConfig, v)
		case "generationConfig":
			firstOf(&gen, v)
		case "model": // the path names the model
		default:
			// safetySettings and labels are dropped, cachedContent
			// refused (fields.go).
			err = uncarried(Gemini, name, v)
		}
		if err != nil {
			return dst, req, err
		}
	}
	if call.Model == "" {
		return dst, req, badRequest("the request path must name the model: /v1beta/models/{model}:generateContent")
	}
	if err = g.read(gen, &r, cfg); err != nil {
		return dst, req, err
	}
	if err = r.resolve(); err != nil {
		return dst, req, err
	}
	req.Stream = call.Stream
	req.Reasoning = r.on
	maxTokens := g.maxTokens
	if final {
		r.fix(cfg.Dialect(), &maxTokens)
	}

	dst = append(dst, `{"model":`...)
	dst = appendStr(dst, call.Model)
	dst = append(dst, `,"messages":[`...)
	if dst, err = appendGeminiSystem(dst, system); err != nil {
		return dst, req, err
	}
	if dst, err = appendGeminiContents(dst, contents); err != nil {
		return dst, req, err
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
	for _, m := range [...]struct{ name, v string }{
		{"temperature", g.temperature}, {"top_p", g.topP}, {"stop", g.stop}, {"seed", g.seed},
		{"presence_penalty", g.presence}, {"frequency_penalty", g.frequency},
	} {
		if !isNull(m.v) {
			dst = appendRawMember(dst, m.name, m.v)
		}
	}
	if !isNull(g.topK) && !(final && cfg.OmitTopK) {
		dst = appendRawMember(dst, "top_k", g.topK)
	}
	if dst, err = appendGeminiTools(dst, tools, toolConfig); err != nil {
		return dst, req, err
	}
	if g.format != "" {
		dst = appendRawMember(dst, "response_format", g.format)
	}
	if final {
		dst = r.appendReasoning(dst, cfg, true)
	} else if r.set {
		switch {
		case !r.on:
			dst = append(dst, `,"reasoning_effort":"none"`...)
		case r.budget > 0: // the chat → messages translation reads thinking too
			dst = append(dst, `,"thinking":{"type":"enabled","budget_tokens":`...)
			dst = appendInt(dst, r.budget)
			dst = append(dst, '}')
		default:
			dst = append(dst, `,"reasoning_effort":"`...)
			dst = append(dst, [...]string{effUnset: "medium", effLow: "low", effMedium: "medium", effHigh: "high", effMax: "max"}[r.effort]...)
			dst = append(dst, '"')
		}
	}
	return append(dst, '}'), req, nil
}

// firstOf keeps the first of duplicate members.
func firstOf(dst *string, v string) {
	if *dst == "" {
		*dst = v
	}
}

// geminiKeys are the member names of the Gemini API that hold more than one
// word, as the SDKs spell them; geminiSnake maps their snake_case spelling
// (the proto's, which the API also takes) to them.
var geminiKeys = [...]string{
	"systemInstruction", "toolConfig", "generationConfig", "safetySettings", "cachedContent",
	"generateContentRequest", "functionCallingConfig", "allowedFunctionNames", "functionDeclarations",
	"parametersJsonSchema", "responseJsonSchema", "inlineData", "fileData", "mimeType", "fileUri",
	"functionCall", "functionResponse", "thoughtSignature", "executableCode", "codeExecutionResult",
	"toolCall", "toolResponse", "maxOutputTokens", "stopSequences", "topP", "topK", "candidateCount",
	"presencePenalty", "frequencyPenalty", "responseMimeType", "responseSchema", "responseModalities",
	"thinkingConfig", "includeThoughts", "thinkingBudget", "thinkingLevel", "speechConfig",
	"mediaResolution", "responseLogprobs", "audioTimestamp", "enableEnhancedCivicAnswers",
	"routingConfig", "modelSelectionConfig", "imageConfig", "retrievalConfig",
	"includeServerSideToolInvocations", "anyOf", "propertyOrdering", "minItems", "maxItems",
	"minLength", "maxLength", "minProperties", "maxProperties",
}

var geminiSnake = func() map[string]string {
	m := make(map[string]string, len(geminiKeys))
	for _, k := range geminiKeys {
		var b strings.Builder
		for i := 0; i < len(k); i++ {
			if c := k[i]; c >= 'A' && c <= 'Z' {
				b.WriteByte('_')
				b.WriteByte(c + 'a' - 'A')
			} else {
				b.WriteByte(c)
			}
		}
		m[b.String()] = k
	}
	return m
}()

// geminiKey is the lowerCamelCase name of the raw member name k; only a
// snake_case name nobody listed allocates.
func geminiKey(k string) string {
	if strings.IndexByte(k, '_') < 0 {
		return k
	}
	if c, ok := geminiSnake[k]; ok {
		return c
	}
	b := make([]byte, 0, len(k))
	up := false
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_' && i > 0:
			up = true
			continue
		case up && c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		}
		up = false
		b = append(b, c)
	}
	return string(b)
}

// read reads generationConfig, its thinkingConfig into r.
func (g *geminiConfig) read(v string, r *reasoning, cfg *Config) *Error {
	if isNull(v) {
		return nil
	}
	it, ok := objIter(v)
	if !ok {
		return badRequest("generationConfig: must be an object")
	}
	var mime, schema, jsonSchema, thinking string
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		name := geminiKey(k)
		var err *Error
		switch name {
		case "temperature":
			firstOf(&g.temperature, val)
			err = checkRange(val, "generationConfig.temperature", 0, 1)
		case "topP":
			firstOf(&g.topP, val)
			err = checkRange(val, "generationConfig.topP", 0, 1)
		case "topK":
			firstOf(&g.topK, val)
			if n, ok := toInt(val); !isNull(val) && (!ok || n < 0) {
				err = badRequest("generationConfig.topK: must be a non-negative integer")
			}
		case "seed":
			firstOf(&g.seed, val)
			if _, ok := toInt(val); !isNull(val) && !ok {
				err = badRequest("generationConfig.seed: must be an integer")
			}
		case "presencePenalty":
			firstOf(&g.presence, val)
			err = checkRange(val, "generationConfig.presencePenalty", -2, 2)
		case "frequencyPenalty":
			firstOf(&g.frequency, val)
			err = checkRange(val, "generationConfig.frequencyPenalty", -2, 2)
		case "stopSequences":
			firstOf(&g.stop, val)
			if !isNull(val) && !isArr(val) {
				err = badRequest("generationConfig.stopSequences: must be an array of strings")
			} else {
				err = stopList(val, "generationConfig.stopSequences")
			}
		case "maxOutputTokens":
			if !isNull(val) && g.maxTokens == 0 {
				g.maxTokens, err = readMaxTokens(val, "generationConfig.maxOutputTokens")
			}
		case "responseMimeType":
			firstOf(&mime, val)
		case "responseSchema":
			firstOf(&schema, val)
		case "responseJsonSchema":
			firstOf(&jsonSchema, val)
		case "thinkingConfig":
			firstOf(&thinking, val)
		default:
			// candidateCount above 1, audio and image output and log
			// probabilities are refused; the rest are hints (fields.go).
			err = uncarriedIn(Gemini, "generationConfig", -1, name, val)
		}
		if err != nil {
			return err
		}
	}
	if err := g.readFormat(mime, schema, jsonSchema, cfg); err != nil {
		return err
	}
	return readThinkingConfig(thinking, r)
}

// readFormat reads responseMimeType and the schemas into a chat
// response_format.
func (g *geminiConfig) readFormat(mime, schema, jsonSchema string, cfg *Config) *Error {
	if !isNull(schema) && !isNull(jsonSchema) {
		return badRequest("generationConfig: send responseSchema or responseJsonSchema, not both")
	}
	switch {
	case isNull(mime) || strEq(mime, "text/plain"):
		if !isNull(schema) || !isNull(jsonSchema) {
			return badRequest("generationConfig.responseMimeType: a response schema needs responseMimeType application/json")
		}
		return nil
	case !strEq(mime, "application/json"):
		return badRequest("generationConfig.responseMimeType: must be text/plain or application/json")
	}
	var b []byte
	switch {
	case !isNull(schema):
		if !isObj(schema) {
			return badRequest("generationConfig.responseSchema: must be an object (a Schema)")
		}
		b = append(b, `{"type":"json_schema","json_schema":{"name":"response","schema":`...)
		p := loc{name: "generationConfig.responseSchema"}
		var err *Error
		if b, err = appendGeminiSchema(b, schema, &p); err != nil {
			return err
		}
		b = append(b, "}}"...)
	case !isNull(jsonSchema):
		if !isObj(jsonSchema) {
			return badRequest("generationConfig.responseJsonSchema: must be an object (a JSON schema)")
		}
		b = append(b, `{"type":"json_schema","json_schema":{"name":"response","schema":`...)
		b = append(b, jsonSchema...)
		b = append(b, "}}"...)
	case cfg.Upstream != Chat:
		// A messages upstream enforces a JSON schema (output_config.format,
		// which the chat → messages translation writes), not "any object".
		return badRequest("generationConfig.responseMimeType: this model's upstream can enforce only a JSON schema: send responseJsonSchema (or responseSchema) with application/json, or describe the format in the prompt")
	default:
		g.format = jsonObjectFormat
		return nil
	}
	g.format = string(b)
	return nil
}

// readThinkingConfig reads thinkingConfig {includeThoughts, thinkingBudget,
// thinkingLevel} into the uniform control.
func readThinkingConfig(v string, r *reasoning) *Error {
	if isNull(v) {
		return nil
	}
	it, ok := objIter(v)
	if !ok {
		return badRequest("generationConfig.thinkingConfig: must be an object {includeThoughts?, thinkingBudget?, thinkingLevel?}")
	}
	var include, budget, level string
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		switch geminiKey(k) {
		case "includeThoughts":
			firstOf(&include, val)
		case "thinkingBudget":
			firstOf(&budget, val)
		case "thinkingLevel":
			firstOf(&level, val)
		}
	}
	if err := checkBool(include, "generationConfig.thinkingConfig.includeThoughts"); err != nil {
		return err
	}
	if !isNull(level) && strings.EqualFold(inner(level), "THINKING_LEVEL_UNSPECIFIED") {
		level = ""
	}
	switch {
	case !isNull(budget) && !isNull(level):
		return badRequest("generationConfig.thinkingConfig: send thinkingBudget or thinkingLevel, not both")
	case !isNull(budget):
		n, ok := toInt(budget)
		switch {
		case !ok || n < -1:
			return badRequest("generationConfig.thinkingConfig.thinkingBudget: must be an integer: 0 (off), -1 (dynamic) or a number of tokens")
		case n == 0:
			r.effortSrc = -1
		case n == -1:
			r.effortSrc = 1 // the upstream's default level
		default:
			r.effortSrc, r.budget = 1, n
		}
	case !isNull(level):
		if !isStr(level) {
			return badRequest("generationConfig.thinkingConfig.thinkingLevel: must be a string: minimal, low, medium or high")
		}
		switch l := inner(level); {
		case strings.EqualFold(l, "minimal"), strings.EqualFold(l, "low"):
			r.effortSrc, r.effort = 1, effLow
		case strings.EqualFold(l, "medium"):
			r.effortSrc, r.effort = 1, effMedium
		case strings.EqualFold(l, "high"):
			r.effortSrc, r.effort = 1, effHigh
		default:
			return badRequest("generationConfig.thinkingConfig.thinkingLevel: must be minimal, low, medium or high")
		}
	case include == "true":
		// Thoughts asked for, at the default level.
		r.effortSrc = 1
	}
	return nil
}

// isGeminiTextOnly: responseModalities that ask for text alone.
func isGeminiTextOnly(v string) bool {
	it, ok := arrIter(v)
	if !ok {
		return false
	}
	for {
		e, ok := it.elem()
		if !ok {
			return true
		}
		if !isStr(e) || !strings.EqualFold(inner(e), "TEXT") {
			return false
		}
	}
}

// ---- contents → chat messages ----

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

// appendGeminiContents writes the contents array.
func appendGeminiContents(dst []byte, contents string) ([]byte, *Error) {
	if isNull(contents) {
		return dst, badRequest("contents: required, an array of Content objects {role, parts}")
	}
	c := cursor{s: contents}
	if !c.arr() {
		return dst, badRequest("contents: must be an array of Content objects {role, parts}")
	}
	// A conversation's parts and calls stay on the stack while they are few.
	var partBuf [16]geminiPart
	var callBuf [8]geminiPastCall
	w := contentsWriter{dst: dst, parts: partBuf[:0], calls: callBuf[:0]}
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
// a string, "Error: " + response.error likewise, else the response as JSON
// text.
func appendResponseContent(dst []byte, resp string, media bool) []byte {
	if isNull(resp) || trimJSON(resp) == "{}" {
		if media {
			return append(dst, `"(see the attached media)"`...)
		}
		return append(dst, `""`...)
	}
	it, _ := objIter(resp)
	k, v, _ := it.next()
	if _, _, more := it.next(); !more && isStr(v) {
		switch k {
		case "output", "content", "result":
			return append(dst, v...)
		case "error":
			dst = append(dst, `"`+errorPrefix...)
			dst = append(dst, inner(v)...)
			return append(dst, '"')
		}
	}
	return appendStr(dst, resp)
}

// mediaPart finds the inlineData or fileData of a functionResponse's part
// (kind gpInline or gpFile, v its value) and checks it.
func mediaPart(part string, p *loc) (kind uint8, v string, err *Error) {
	it, ok := objIter(part)
	if !ok {
		return gpNone, "", p.bad(": must be an object {inlineData} or {fileData}")
	}
	for {
		k, val, ok := it.next()
		if !ok {
			return gpNone, "", p.bad(": must hold inlineData or fileData")
		}
		switch geminiKey(k) {
		case "inlineData":
			at := p.member("inlineData")
			_, _, err = readInlineData(val, &at)
			return gpInline, val, err
		case "fileData":
			at := p.member("fileData")
			_, err = readFileData(val, &at)
			return gpFile, val, err
		}
	}
}

// appendMedia writes checked media (mediaPart) as a chat content part.
func appendMedia(dst []byte, kind uint8, v string) []byte {
	var p loc // not spelled: the media were checked
	if kind == gpInline {
		dst, _ = appendInlineData(dst, v, &p)
	} else {
		dst, _ = appendFileData(dst, v, &p)
	}
	return dst
}

// geminiImageTypes are the image types every upstream takes inline.
var geminiImageTypes = [...]string{"image/png", "image/jpeg", "image/gif", "image/webp"}

const mediaTypesMsg = "image/png, image/jpeg, image/gif, image/webp and application/pdf"

func isGeminiImage(mt string) bool {
	for _, t := range geminiImageTypes {
		if mt == t {
			return true
		}
	}
	return false
}

// readInlineData reads and checks inlineData {mimeType, data}: mt is the
// media type, lowercased, and data the literal of the base64 data.
func readInlineData(v string, p *loc) (mt, data string, err *Error) {
	var mime string
	it, ok := objIter(v)
	if !ok {
		return "", "", p.bad(": must be an object {mimeType, data}")
	}
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		switch geminiKey(k) {
		case "mimeType":
			firstOf(&mime, val)
		case "data":
			firstOf(&data, val)
		}
	}
	switch {
	case !isStr(mime):
		return "", "", p.bad(".mimeType: must be a string")
	case !isStr(data):
		return "", "", p.bad(".data: must be a string (base64)")
	}
	mt = strings.ToLower(inner(mime)) // no copy when already lower case
	if !isGeminiImage(mt) && mt != "application/pdf" {
		return "", "", p.bad(".mimeType: " + mt + " is not supported; inline data may be " + mediaTypesMsg)
	}
	return mt, data, nil
}

// appendInlineData writes inlineData as an image_url part (a data URL) or,
// for a PDF, a file part.
func appendInlineData(dst []byte, v string, p *loc) ([]byte, *Error) {
	mt, data, err := readInlineData(v, p)
	if err != nil {
		return dst, err
	}
	dst = sep(dst)
	if mt == "application/pdf" {
		dst = append(dst, `{"type":"file","file":{"filename":"document.pdf","file_data":"data:`...)
	} else {
		dst = append(dst, `{"type":"image_url","image_url":{"url":"data:`...)
	}
	dst = append(dst, mt...)
	dst = append(dst, ";base64,"...)
	dst = append(dst, inner(data)...)
	return append(dst, `"}}`...), nil
}

// readFileData reads and checks fileData {mimeType, fileUri}: only an
// image by http(s) URL is carried; other files, and those of the Files API
// (which need Google's key to read), are refused. uri is a literal.
func readFileData(v string, p *loc) (uri string, err *Error) {
	var mime string
	it, ok := objIter(v)
	if !ok {
		return "", p.bad(": must be an object {mimeType, fileUri}")
	}
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		switch geminiKey(k) {
		case "mimeType":
			firstOf(&mime, val)
		case "fileUri":
			firstOf(&uri, val)
		}
	}
	if !isStr(uri) {
		return "", p.bad(".fileUri: must be a string")
	}
	u := inner(uri)
	switch {
	case strings.Contains(u, "generativelanguage.googleapis.com"):
		return "", p.bad(".fileUri: files uploaded to the Gemini Files API cannot be read here; send the data inline (inlineData)")
	case !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://"):
		return "", p.bad(".fileUri: only http(s) URLs of images are supported; send other files inline (inlineData)")
	case !isStr(mime) || !strings.HasPrefix(strings.ToLower(inner(mime)), "image/"):
		return "", p.bad(".mimeType: only images are supported by URL (an image/... mimeType); send other files inline (inlineData) as " + mediaTypesMsg)
	}
	return uri, nil
}

// appendFileData writes fileData as an image_url part.
func appendFileData(dst []byte, v string, p *loc) ([]byte, *Error) {
	uri, err := readFileData(v, p)
	if err != nil {
		return dst, err
	}
	dst = sep(dst)
	dst = append(dst, `{"type":"image_url","image_url":{"url":`...)
	dst = append(dst, uri...)
	return append(dst, `}}`...), nil
}

// ---- tools ----

// geminiChoice is toolConfig.functionCallingConfig.
type geminiChoice struct {
	mode    uint8  // tcAuto, tcNone, tcRequired; tcFunction is settled later
	set     bool   // a mode was given
	allowed string // raw array of allowedFunctionNames, or ""
}

func readGeminiToolConfig(v string) (geminiChoice, *Error) {
	var gc geminiChoice
	if isNull(v) {
		return gc, nil
	}
	it, ok := objIter(v)
	if !ok {
		return gc, badRequest("toolConfig: must be an object {functionCallingConfig?}")
	}
	var fcc string
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		name := geminiKey(k)
		if name == "functionCallingConfig" {
			firstOf(&fcc, val)
			continue
		}
		if err := uncarriedIn(Gemini, "toolConfig", -1, name, val); err != nil {
			return gc, err
		}
	}
	if isNull(fcc) {
		return gc, nil
	}
	it, ok = objIter(fcc)
	if !ok {
		return gc, badRequest("toolConfig.functionCallingConfig: must be an object {mode?, allowedFunctionNames?}")
	}
	var mode, allowed string
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		switch geminiKey(k) {
		case "mode":
			firstOf(&mode, val)
		case "allowedFunctionNames":
			firstOf(&allowed, val)
		}
	}
	if !isNull(mode) {
		m := inner(mode)
		switch {
		case !isStr(mode):
			return gc, badRequest("toolConfig.functionCallingConfig.mode: must be a string: AUTO, ANY, NONE or VALIDATED")
		case strings.EqualFold(m, "AUTO"), strings.EqualFold(m, "VALIDATED"):
			gc.set = true
		case strings.EqualFold(m, "ANY"):
			gc.mode, gc.set = tcRequired, true
		case strings.EqualFold(m, "NONE"):
			gc.mode, gc.set = tcNone, true
		case strings.EqualFold(m, "MODE_UNSPECIFIED"):
		default:
			return gc, badRequest("toolConfig.functionCallingConfig.mode: must be AUTO, ANY, NONE or VALIDATED")
		}
	}
	if !isNull(allowed) {
		if err := stringArray(allowed, "toolConfig.functionCallingConfig.allowedFunctionNames"); err != nil {
			return gc, err
		}
		if !isEmptyArr(allowed) {
			gc.allowed = allowed
		}
	}
	return gc, nil
}

// allows reports whether the function name (a literal) is allowed.
func (gc *geminiChoice) allows(name string) bool {
	if gc.allowed == "" {
		return true
	}
	it, _ := arrIter(gc.allowed)
	for {
		e, ok := it.elem()
		if !ok {
			return false
		}
		if e == name {
			return true
		}
	}
}

// appendGeminiTools writes the function declarations as chat tools, and the
// tool choice.
func appendGeminiTools(dst []byte, tools, toolConfig string) ([]byte, *Error) {
	gc, err := readGeminiToolConfig(toolConfig)
	if err != nil {
		return dst, err
	}
	mark := len(dst)
	dst = append(dst, `,"tools":[`...)
	n := 0
	var only string // the name of the one function written
	if !isNull(tools) {
		it, ok := arrIter(tools)
		if !ok {
			return dst, badRequest("tools: must be an array of Tool objects {functionDeclarations}")
		}
		tl := loc{name: "tools"}
		for i := 0; ; i++ {
			t, ok := it.elem()
			if !ok {
				break
			}
			p := tl.elem(i)
			ti, ok := objIter(t)
			if !ok {
				return dst, p.bad(": must be an object {functionDeclarations}")
			}
			for {
				k, v, ok := ti.next()
				if !ok {
					break
				}
				name := geminiKey(k)
				if name != "functionDeclarations" {
					if isNull(v) {
						continue
					}
					return dst, p.bad(": server-side tool " + strconv.Quote(name) + " is not supported; declare the functions your client runs in functionDeclarations instead")
				}
				di, ok := arrIter(v)
				if !ok {
					return dst, p.bad(".functionDeclarations: must be an array")
				}
				dl := p.member("functionDeclarations")
				for j := 0; ; j++ {
					d, ok := di.elem()
					if !ok {
						break
					}
					dp := dl.elem(j)
					var wrote string
					if dst, wrote, err = appendGeminiFunction(dst, d, &dp, &gc); err != nil {
						return dst, err
					}
					if wrote != "" {
						n++
						only = wrote
					}
				}
			}
		}
	}
	if gc.allowed != "" {
		if err = checkAllowed(&gc, tools); err != nil {
			return dst[:mark], err
		}
	}
	if n == 0 {
		dst = dst[:mark]
		if gc.mode == tcRequired {
			return dst, badRequest("toolConfig.functionCallingConfig.mode: ANY requires a function, but no functionDeclarations are given")
		}
		return dst, nil
	}
	dst = append(dst, ']')
	switch {
	case gc.mode == tcNone:
		dst = append(dst, `,"tool_choice":"none"`...)
	case gc.mode == tcRequired && n == 1 && gc.allowed != "":
		dst = append(dst, `,"tool_choice":{"type":"function","function":{"name":`...)
		dst = append(dst, only...)
		dst = append(dst, `}}`...)
	case gc.mode == tcRequired:
		dst = append(dst, `,"tool_choice":"required"`...)
	case gc.set:
		dst = append(dst, `,"tool_choice":"auto"`...)
	}
	return dst, nil
}

// checkAllowed makes sure each allowed name is declared.
func checkAllowed(gc *geminiChoice, tools string) *Error {
	it, _ := arrIter(gc.allowed)
	for i := 0; ; i++ {
		name, ok := it.elem()
		if !ok {
			return nil
		}
		if !declared(tools, name) {
			return badRequest(pathi("toolConfig.functionCallingConfig.allowedFunctionNames", i) + ": no function named " + str(name) + " is declared in tools")
		}
	}
}

// declared reports whether a function named name (a literal) is declared.
func declared(tools, name string) bool {
	it, _ := arrIter(tools)
	for {
		t, ok := it.elem()
		if !ok {
			return false
		}
		di, _ := arrIter(geminiField(t, "functionDeclarations"))
		for {
			d, ok := di.elem()
			if !ok {
				break
			}
			if field(d, "name") == name {
				return true
			}
		}
	}
}

// appendGeminiFunction writes one function declaration as a chat function
// tool; wrote is its name (a literal), or "" when it is not allowed.
func appendGeminiFunction(dst []byte, d string, p *loc, gc *geminiChoice) ([]byte, string, *Error) {
	it, ok := objIter(d)
	if !ok {
		return dst, "", p.bad(": must be an object {name, description?, parameters?}")
	}
	var name, desc, params, jsonParams string
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch geminiKey(k) {
		case "name":
			firstOf(&name, v)
		case "description":
			firstOf(&desc, v)
		case "parameters":
			firstOf(&params, v)
		case "parametersJsonSchema":
			firstOf(&jsonParams, v)
		}
		// response, responseJsonSchema and behavior describe the result or
		// how the Live API runs the call: hints, dropped.
	}
	switch {
	case !isStr(name) || emptyStr(name):
		return dst, "", p.bad(".name: must be a non-empty string")
	case !isNull(desc) && !isStr(desc):
		return dst, "", p.bad(".description: must be a string")
	case !isNull(params) && !isNull(jsonParams):
		return dst, "", p.bad(": send parameters or parametersJsonSchema, not both")
	case !isNull(params) && !isObj(params):
		return dst, "", p.bad(".parameters: must be an object (a Schema)")
	case !isNull(jsonParams) && !isObj(jsonParams):
		return dst, "", p.bad(".parametersJsonSchema: must be an object (a JSON schema)")
	}
	if !gc.allows(name) {
		return dst, "", nil
	}
	dst = sep(dst)
	dst = append(dst, `{"type":"function","function":{"name":`...)
	dst = append(dst, name...)
	if isStr(desc) {
		dst = appendRawMember(dst, "description", desc)
	}
	dst = append(dst, `,"parameters":`...)
	switch {
	case !isNull(params):
		pp := p.member("parameters")
		var err *Error
		if dst, err = appendGeminiSchema(dst, params, &pp); err != nil {
			return dst, "", err
		}
	case !isNull(jsonParams):
		dst = append(dst, jsonParams...)
	default:
		dst = append(dst, `{"type":"object","properties":{}}`...)
	}
	return append(dst, `}}`...), name, nil
}

// appendGeminiSchema writes a Schema of Google's OpenAPI subset as JSON
// Schema: types lowercased, nullable folded into the type (and into enum
// and anyOf), propertyOrdering and example dropped, counts written as
// numbers (the proto's int64s may come as strings). Members it does not know
// pass as they are, so that a JSON schema sent as parameters survives.
func appendGeminiSchema(dst []byte, v string, p *loc) ([]byte, *Error) {
	it, ok := objIter(v)
	if !ok {
		return dst, p.bad(": must be an object (a Schema)")
	}
	var typ string
	nullable := false
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		switch k {
		case "type":
			firstOf(&typ, val)
		case "nullable":
			nullable = val == "true"
		}
	}
	dst = append(dst, '{')
	if isStr(typ) && !strings.EqualFold(inner(typ), "TYPE_UNSPECIFIED") {
		dst = append(dst, `"type":`...)
		if nullable {
			dst = append(dst, '[')
		}
		dst = append(dst, '"')
		for _, c := range []byte(inner(typ)) {
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
		}
		dst = append(dst, '"')
		if nullable {
			dst = append(dst, `,"null"]`...)
		}
	} else if !isNull(typ) && !isStr(typ) {
		dst = appendRawMember(dst, "type", typ) // a JSON schema's type array
	}
	it, _ = objIter(v)
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		name := geminiKey(k)
		var err *Error
		switch name {
		case "type", "nullable", "propertyOrdering", "example":
		case "format":
			if !strEq(val, "enum") { // Google's marker of a string enum
				dst = appendRawMember(dst, name, val)
			}
		case "properties":
			pi, ok := objIter(val)
			if !ok {
				return dst, p.bad(".properties: must be an object of schemas")
			}
			dst = append(dst, `,"properties":{`...)
			pl := p.member("properties")
			first := true
			for {
				pk, pv, ok := pi.next()
				if !ok {
					break
				}
				if !first {
					dst = append(dst, ',')
				}
				first = false
				dst = append(dst, '"')
				dst = append(dst, pk...)
				dst = append(dst, `":`...)
				at := pl.member(pk)
				if dst, err = appendGeminiSchema(dst, pv, &at); err != nil {
					return dst, err
				}
			}
			dst = append(dst, '}')
		case "items":
			dst = key(dst, "items")
			at := p.member("items")
			dst, err = appendGeminiSchema(dst, val, &at)
		case "anyOf":
			ai, ok := arrIter(val)
			if !ok {
				return dst, p.bad(".anyOf: must be an array of schemas")
			}
			dst = key(dst, "anyOf")
			dst = append(dst, '[')
			al := p.member("anyOf")
			for j := 0; ; j++ {
				s, ok := ai.elem()
				if !ok {
					break
				}
				dst = sep(dst)
				at := al.elem(j)
				if dst, err = appendGeminiSchema(dst, s, &at); err != nil {
					return dst, err
				}
			}
			if nullable && !isStr(typ) {
				dst = append(dst, `,{"type":"null"}`...)
			}
			dst = append(dst, ']')
		case "enum":
			if nullable && isArr(val) && !isEmptyArr(val) {
				// A nullable enum takes null too.
				t := trimJSON(val)
				dst = key(dst, "enum")
				dst = append(dst, t[:len(t)-1]...)
				dst = append(dst, ",null]"...)
			} else {
				dst = appendRawMember(dst, "enum", val)
			}
		case "minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties":
			if isStr(val) {
				if n, ok := toInt(inner(val)); ok {
					dst = key(dst, name)
					dst = appendInt(dst, n)
					continue
				}
			}
			dst = appendRawMember(dst, name, val)
		default:
			dst = appendRawMember(dst, k, val)
		}
		if err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}
