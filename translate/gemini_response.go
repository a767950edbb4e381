package translate

// geminiResponse writes an upstream's whole answer as a Gemini
// GenerateContentResponse. (Being written.)
func geminiResponse(dst []byte, s string, upstream Format, req *Request, prefilled bool) []byte {
	return append(dst, `{"candidates":[]}`...)
}
