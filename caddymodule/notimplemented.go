package caddymodule

import (
	"encoding/json"
	"net/http"
	"strings"
)

// notImplemented answers 501 in the caller's own format, so a client sees
// what is missing instead of a fake success.
func notImplemented(w http.ResponseWriter, r *http.Request, msg string) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotImplemented)
	var body any
	switch {
	case strings.HasSuffix(r.URL.Path, "/v1/messages"):
		body = map[string]any{"type": "error", "error": map[string]string{"type": "api_error", "message": msg}}
	case strings.HasSuffix(r.URL.Path, "/v1/chat/completions"):
		body = map[string]any{"error": map[string]any{"message": msg, "type": "not_implemented", "param": nil, "code": "not_implemented"}}
	default:
		body = map[string]any{"success": false, "error": msg}
	}
	return json.NewEncoder(w).Encode(body)
}
