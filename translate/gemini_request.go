package translate

// geminiRequest reads a Gemini generateContent request into cfg.Upstream's
// format. (Being written.)
func geminiRequest(dst []byte, s string, cfg *Config, call Call) ([]byte, Request, *Error) {
	return dst, Request{}, NewError(501, InvalidRequest, "the Gemini API is not served yet")
}
