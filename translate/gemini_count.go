package translate

// Gemini's countTokens (POST .../models/{model}:countTokens) answered
// without the upstream, as count_tokens is for messages clients (count.go):
// the request is translated to a messages body, the Gemini request
// translation itself with a messages upstream, and that body is estimated.
// The count is thus the one a messages client sending the same
// conversation gets, and what generateContent refuses is refused here too.

// CountGeminiTokens estimates the input tokens of a countTokens body:
// {"contents": [...]} or {"generateContentRequest": {model, contents,
// systemInstruction, tools, ...}}; model is the path's. Errors are 400s
// (413 past cfg.MaxBodyBytes) naming the member.
func CountGeminiTokens(body []byte, model string, cfg *Config) (int64, *Error) {
	s, err := checkRequest(body, cfg, false)
	if err != nil {
		return 0, err
	}
	prefix := ""
	if gcr := geminiField(s, "generateContentRequest"); !isNull(gcr) {
		if !isObj(gcr) {
			return 0, badRequest("generateContentRequest: must be an object (a GenerateContentRequest)")
		}
		s, prefix = gcr, "generateContentRequest."
	}
	if model == "" {
		model = "model" // only the count is wanted
	}
	up := *cfg
	up.Upstream = Messages
	out, _, err := geminiRequest(nil, s, &up, Call{Model: model})
	if err != nil {
		if prefix != "" { // each message starts with the member's path
			err = badRequest(prefix + err.Message)
		}
		return 0, err
	}
	return estimateMessages(b2s(out)), nil
}

// AppendGeminiCountTokens appends countTokens' answer, {"totalTokens":n}.
func AppendGeminiCountTokens(dst []byte, n int64) []byte {
	dst = append(dst, `{"totalTokens":`...)
	dst = appendInt(dst, n)
	return append(dst, '}')
}
