package translate

// CountGeminiTokens estimates a Gemini countTokens body. (Being written.)
func CountGeminiTokens(body []byte, model string, cfg *Config) (int64, *Error) {
	return 0, NewError(501, InvalidRequest, "not yet")
}

// AppendGeminiCountTokens appends {"totalTokens":n}.
func AppendGeminiCountTokens(dst []byte, n int64) []byte {
	dst = append(dst, `{"totalTokens":`...)
	dst = appendInt(dst, n)
	return append(dst, '}')
}
