package translate

// The Gemini answer: a GenerateContentResponse with one candidate, whose
// parts are, in order, the reasoning ({"text":…,"thought":true}), the text
// and each tool call ({"functionCall":{"id","name","args"}}). A messages
// upstream's answer goes through chat first, as the Responses client's
// does: chat is the one reading this writer knows.
//
// Gemini's usage counts thoughts apart: candidatesTokenCount is the answer
// without them, thoughtsTokenCount the thoughts, and totalTokenCount the
// prompt and both. Like Google's server (and the genai SDKs' omitempty), a
// count of zero is left out.
//
// A call's args must be a JSON object. Arguments that are not one (cut
// short by max tokens, or a model's bad JSON) are wrapped whole as
// {"arguments":"<text>"} rather than dropped for {}: a tool run with {}
// would run on its defaults, while the wrapped text fails the tool's schema
// where the model can see what it wrote.

// geminiResponse writes an upstream's whole answer s as a Gemini
// GenerateContentResponse.
func geminiResponse(dst []byte, s string, upstream Format, req *Request, prefilled bool) []byte {
	if upstream == Chat {
		return chatToGemini(dst, s, req, prefilled)
	}
	mark := len(dst)
	mid := messagesResponseToChat(dst, s, prefilled)
	end := len(mid)
	out := chatToGemini(mid, b2s(mid[mark:end]), req, false)
	n := copy(out[mark:], out[end:])
	return out[:mark+n]
}

func chatToGemini(dst []byte, s string, req *Request, prefilled bool) []byte {
	var cc chatCompletion
	cc.read(s)
	a, u := &cc.a, &cc.u
	a.split(prefilled)

	dst = append(dst, `{"candidates":[{"content":{"role":"model","parts":[`...)
	if a.hasReasoning() {
		dst = append(dst, `{"text":`...)
		dst = a.appendReasoning(dst)
		dst = append(dst, `,"thought":true}`...)
	}
	if a.hasText() || (!a.hasReasoning() && a.tools == 0) {
		dst = sep(dst)
		dst = append(dst, `{"text":`...)
		dst = a.appendText(dst)
		dst = append(dst, '}')
	}
	var toolBytes int64
	var args []byte
	if ti, ok := arrIter(cc.calls); ok {
		for {
			c, ok := ti.elem()
			if !ok {
				break
			}
			idLit, name, argsV := readChatCall(c)
			if !named(name) {
				continue // no client can run it (dropTool)
			}
			args = args[:0]
			switch {
			case isStr(argsV):
				toolBytes += int64(len(argsV) - 2)
				args = appendUnescaped(args, inner(argsV))
			case isObj(argsV): // some servers send the object itself
				toolBytes += int64(len(argsV))
				args = append(args, argsV...)
			}
			dst = sep(dst)
			dst = appendGeminiCall(dst, []byte(idLit), inner(name), b2s(args))
		}
	}
	dst = append(dst, `]},"finishReason":"`...)
	dst = append(dst, geminiFinish(a.finalStop())...)
	dst = append(dst, `","index":0}]`...)
	if u.seen {
		dst = append(dst, `,"usageMetadata":`...)
		dst = appendGeminiUsage(dst, u, u.reasoningTokens(a.reasonLen(), a.textLen()+toolBytes))
	}
	return appendGeminiTail(dst, cc.id, cc.model, req.call.Model)
}

// geminiFinish is Gemini's finishReason for a stop reason. Every normal end
// (a tool turn included: Gemini has no reason of its own for one) is STOP.
func geminiFinish(r stopReason) string {
	switch r {
	case stopNone, stopEnd, stopTool, stopSeq:
		return "STOP"
	case stopMax:
		return "MAX_TOKENS"
	case stopRefusal:
		return "SAFETY"
	}
	return "OTHER"
}

// appendGeminiCall writes a functionCall part. idLit is the upstream's id
// (a literal; one is made up without it: the client names it in its
// functionResponse, and the request translation maps it back to the
// call), name escaped content, args the arguments' JSON text, decoded.
func appendGeminiCall(dst, idLit []byte, name, args string) []byte {
	dst = append(dst, `{"functionCall":{"id":`...)
	dst = appendToolID(dst, idLit, Chat)
	dst = append(dst, `,"name":"`...)
	dst = append(dst, name...)
	dst = append(dst, `","args":`...)
	dst = appendGeminiArgs(dst, args)
	return append(dst, `}}`...)
}

// appendGeminiArgs writes a call's arguments as the object args holds: the
// object compacted (an SSE data line holds no line break), {} for none, or
// the text wrapped (see the top of the file).
func appendGeminiArgs(dst []byte, text string) []byte {
	t := trimJSON(text)
	switch {
	case t == "":
		return append(dst, "{}"...)
	case isObj(t) && validJSON(t):
		return appendCompact(dst, t)
	}
	dst = append(dst, `{"arguments":`...)
	dst = appendStr(dst, text)
	return append(dst, '}')
}

// appendCompact appends the valid JSON text s without the whitespace
// between its tokens.
func appendCompact(dst []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			e := stringEnd(s, i)
			if e < 0 {
				return append(dst, s[start:]...)
			}
			i = e - 1
		case isSpace(c):
			dst = append(dst, s[start:i]...)
			start = i + 1
		}
	}
	return append(dst, s[start:]...)
}

// appendGeminiUsage writes a usageMetadata object; thoughts are the
// reasoning tokens among the output ones.
func appendGeminiUsage(dst []byte, u *usage, thoughts int64) []byte {
	prompt := u.promptTotal()
	candidates := max(u.output-thoughts, 0)
	dst = append(dst, '{')
	dst = appendGeminiCount(dst, "promptTokenCount", prompt)
	dst = appendGeminiCount(dst, "candidatesTokenCount", candidates)
	dst = appendGeminiCount(dst, "totalTokenCount", prompt+candidates+thoughts)
	dst = appendGeminiCount(dst, "cachedContentTokenCount", u.cacheRead)
	dst = appendGeminiCount(dst, "thoughtsTokenCount", thoughts)
	return append(dst, '}')
}

func appendGeminiCount(dst []byte, k string, n int64) []byte {
	if n <= 0 {
		return dst
	}
	dst = sep(dst)
	dst = append(dst, '"')
	dst = append(dst, k...)
	dst = append(dst, `":`...)
	return appendInt(dst, n)
}

// appendGeminiTail ends a response object with modelVersion (the
// upstream's model, else the one the request's path named) and responseId
// (the upstream's id, else a random one).
func appendGeminiTail(dst []byte, idLit, modelLit, pathModel string) []byte {
	switch {
	case isStr(modelLit) && !emptyStr(modelLit):
		dst = append(dst, `,"modelVersion":`...)
		dst = append(dst, modelLit...)
	case pathModel != "":
		dst = append(dst, `,"modelVersion":`...)
		dst = appendStr(dst, pathModel)
	}
	dst = append(dst, `,"responseId":"`...)
	dst = appendIDBase(dst, idLit)
	return append(dst, `"}`...)
}
