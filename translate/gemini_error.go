package translate

// Gemini's error body is Google's: {"error":{"code":404,"message":"...",
// "status":"NOT_FOUND"}}, the status a google.rpc code name that the
// Gemini SDKs and Gemini CLI read beside the HTTP status.

import "net/http"

func appendGeminiError(dst []byte, e *Error, _ ErrorKind) []byte {
	dst = append(dst, `{"error":{"code":`...)
	dst = appendInt(dst, int64(e.Status))
	dst = append(dst, `,"message":`...)
	dst = appendStr(dst, e.Message)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, geminiStatus(e.Status)...)
	dst = append(dst, '"')
	if e.RetryAfter > 0 {
		// Gemini CLI ignores Retry-After and retries a 429 or a 5xx ten
		// times over minutes, unless the body says when: a delay past five
		// minutes stops it at once.
		dst = append(dst, `,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"`...)
		dst = appendInt(dst, int64(e.RetryAfter))
		dst = append(dst, `s"}]`...)
	}
	return append(dst, `}}`...)
}

// geminiStatus is the google.rpc code name Google's APIs send with an HTTP
// status (google.golang.org/genproto's code.proto, "HTTP Mapping").
func geminiStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusPaymentRequired, http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case http.StatusServiceUnavailable, http.StatusBadGateway, 529:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 400 && status < 500 {
		return "FAILED_PRECONDITION"
	}
	return "INTERNAL"
}
