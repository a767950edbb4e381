package caddymodule

// The endpoints the gate serves. Caddyfile.example sends every /v1/*,
// /compat/v1/* and /gemini/* request through the gate, so it tells them
// apart itself, by path suffix like the translator (any prefix works), and
// answers anything else with a JSON 404 or 405 before it looks at the key:
// an unknown path costs no key check and says nothing about keys. The
// Gemini API's paths (.../v1beta/models/{model}:method) name the model.

import (
	"net/http"
	"strings"

	"github.com/timeblock/timeblock/translate"
)

// gateEndpoint is what a request through the gate asks for.
type gateEndpoint uint8

const (
	epUnknown      gateEndpoint = iota
	epChat                      // POST .../v1/chat/completions
	epMessages                  // POST .../v1/messages
	epResponses                 // POST .../v1/responses
	epCount                     // POST .../v1/messages/count_tokens: no lane
	epModels                    // GET .../v1/models: answered by the gate
	epModel                     // GET .../v1/models/{id}: answered by the gate
	epKey                       // GET .../v1/key: the key's status, answered by the gate
	epKeyLanes                  // GET .../v1/key/lanes: SSE stream of the key's lanes in use
	epGemini                    // POST .../v1beta/models/{model}:generateContent or :streamGenerateContent
	epGeminiCount               // POST .../v1beta/models/{model}:countTokens: no lane
	epGeminiModels              // GET .../v1beta/models: answered by the gate
	epGeminiModel               // GET .../v1beta/models/{model}: answered by the gate
)

const (
	countTokensPath = "/v1/messages/count_tokens"
	modelsPath      = "/v1/models"
	keyPath         = "/v1/key"
	keyLanesPath    = "/v1/key/lanes"
)

// gateRoute tells the endpoint from the request path; for epModel and the
// Gemini endpoints it also returns the model id (which may hold slashes).
func gateRoute(p string) (gateEndpoint, string) {
	switch translate.FormatFromPath(p) {
	case translate.Chat:
		return epChat, ""
	case translate.Messages:
		return epMessages, ""
	case translate.Responses:
		return epResponses, ""
	}
	if model, m, ok := translate.ParseGeminiPath(p); ok {
		switch m {
		case translate.GeminiGenerate, translate.GeminiStream:
			return epGemini, model
		case translate.GeminiCount:
			return epGeminiCount, model
		case translate.GeminiModel:
			return epGeminiModel, model
		}
		return epGeminiModels, ""
	}
	p = strings.TrimSuffix(p, "/")
	switch {
	case strings.HasSuffix(p, countTokensPath):
		return epCount, ""
	case strings.HasSuffix(p, modelsPath):
		return epModels, ""
	}
	if i := strings.Index(p, modelsPath+"/"); i >= 0 {
		return epModel, p[i+len(modelsPath)+1:]
	}
	switch {
	case strings.HasSuffix(p, keyPath):
		return epKey, ""
	case strings.HasSuffix(p, keyLanesPath):
		return epKeyLanes, ""
	}
	return epUnknown, ""
}

// format is the wire format the endpoint answers (and fails) in. The model
// lists, and paths the gate does not serve, answer in the Gemini format
// under .../v1beta/, in the messages format when the path is under
// /compat/ or the client sends anthropic-version (as the messages SDKs do),
// and in the chat format otherwise.
func (e gateEndpoint) format(r *http.Request) translate.Format {
	switch e {
	case epChat:
		return translate.Chat
	case epMessages, epCount:
		return translate.Messages
	case epResponses:
		return translate.Responses
	case epGemini, epGeminiCount, epGeminiModels, epGeminiModel:
		return translate.Gemini
	}
	if geminiStyle(r.URL.Path) {
		return translate.Gemini
	}
	if messagesStyle(r) {
		return translate.Messages
	}
	return translate.Chat
}

func messagesStyle(r *http.Request) bool {
	if v := r.Header[translate.MessagesVersionHeader]; len(v) > 0 && v[0] != "" {
		return true
	}
	return strings.Contains(r.URL.Path, "/compat/")
}

// geminiStyle tells a path under the Gemini API's version prefix.
func geminiStyle(p string) bool { return strings.Contains(p, geminiVersionPrefix) }

const geminiVersionPrefix = "/v1beta/"

// gets tells whether the endpoint is read with GET (else POST).
func (e gateEndpoint) gets() bool {
	switch e {
	case epModels, epModel, epKey, epKeyLanes, epGeminiModels, epGeminiModel:
		return true
	}
	return false
}

// allows tells whether the endpoint takes the method.
func (e gateEndpoint) allows(method string) bool {
	if e.gets() {
		return method == http.MethodGet || method == http.MethodHead
	}
	return method == http.MethodPost
}

func (e gateEndpoint) allowHeader() string {
	if e.gets() {
		return "GET, HEAD"
	}
	return "POST"
}

// maxPathInMessage bounds how much of a request path an error message repeats.
const maxPathInMessage = 200

func shortPath(p string) string {
	if len(p) > maxPathInMessage {
		return p[:maxPathInMessage] + "..."
	}
	return p
}

// unknownEndpoint answers 404 with the endpoints served under the request's
// prefix (the part of its path before /v1 or /v1beta).
func (g *Gate) unknownEndpoint(w http.ResponseWriter, r *http.Request, format translate.Format) error {
	p := r.URL.Path
	if format == translate.Gemini {
		prefix := p[:strings.Index(p, geminiVersionPrefix)] + translate.GeminiModelsPath
		msg := "no endpoint " + r.Method + " " + shortPath(p) + " here; served: " +
			"POST " + prefix + "/{model}:generateContent, " +
			"POST " + prefix + "/{model}:streamGenerateContent, " +
			"POST " + prefix + "/{model}:countTokens, " +
			"GET " + prefix + ", " +
			"GET " + prefix + "/{model}"
		return g.reject(w, format, rejectUnknownEndpoint, http.StatusNotFound, "unknown_endpoint", msg, 0, nil)
	}
	prefix := ""
	if i := strings.Index(p, "/v1"); i > 0 {
		prefix = p[:i]
	}
	msg := "no endpoint " + r.Method + " " + shortPath(p) + " here; served: " +
		"POST " + prefix + "/v1/chat/completions, " +
		"POST " + prefix + "/v1/messages, " +
		"POST " + prefix + countTokensPath + ", " +
		"POST " + prefix + "/v1/responses, " +
		"GET " + prefix + modelsPath + ", " +
		"GET " + prefix + modelsPath + "/{model}, " +
		"GET " + prefix + keyPath + ", " +
		"GET " + prefix + keyLanesPath
	return g.reject(w, format, rejectUnknownEndpoint, http.StatusNotFound, "unknown_endpoint", msg, 0, nil)
}

// methodNotAllowed answers 405 with Allow.
func (g *Gate) methodNotAllowed(w http.ResponseWriter, r *http.Request, ep gateEndpoint, format translate.Format) error {
	allow := ep.allowHeader()
	w.Header().Set("Allow", allow)
	return g.reject(w, format, rejectMethodNotAllowed, http.StatusMethodNotAllowed, "method_not_allowed",
		r.Method+" is not allowed on "+shortPath(r.URL.Path)+"; use "+strings.ReplaceAll(allow, ", ", " or "), 0, nil)
}
