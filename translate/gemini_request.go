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

import "strings"

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
	// showThoughts: thinkingConfig.includeThoughts is true. Without it
	// the model may think, but the answer holds no thought parts, as
	// Google's API answers (thoughtsTokenCount still counts them).
	showThoughts bool
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
	req.showThoughts = g.showThoughts
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
	dst = appendChatLimits(dst, maxTokens, req.Stream, final)
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
	dst = r.appendPivot(dst, cfg, final)
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
