package simulator

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"
)

// serveCountTokens answers POST /v1/messages/count_tokens as the messages
// API does, {"input_tokens": n}, with the count the simulator reports as a
// request's input usage: four bytes of system, messages and tools a token.
func (s *Server) serveCountTokens(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		return simError(w, simMessages, http.StatusMethodNotAllowed, "use POST for "+r.URL.Path)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, simMaxBody))
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			return simError(w, simMessages, http.StatusRequestEntityTooLarge, "the request body is larger than 32 MiB")
		}
		return simError(w, simMessages, http.StatusBadRequest, "reading the request body: "+err.Error())
	}
	if !gjson.ValidBytes(body) {
		return simError(w, simMessages, http.StatusBadRequest, "the request body is not valid JSON")
	}
	doc := gjson.ParseBytes(body)
	if !doc.IsObject() {
		return simError(w, simMessages, http.StatusBadRequest, "the request body must be a JSON object")
	}
	if m := doc.Get("model"); m.Type != gjson.String || m.Str == "" {
		return simError(w, simMessages, http.StatusBadRequest, "model: field required")
	}
	messages := doc.Get("messages")
	if !messages.IsArray() {
		return simError(w, simMessages, http.StatusBadRequest, "messages: field required, an array of message objects")
	}
	n := simPromptTokens(doc.Get("system").Raw, messages.Raw, doc.Get("tools").Raw)
	out := strconv.AppendInt([]byte(`{"input_tokens":`), int64(n), 10)
	out = append(out, '}')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(out)
	return err
}

// simPromptTokens is the simulator's input count: about four bytes a token,
// as for English text.
func simPromptTokens(system, messages, tools string) int {
	return max(1, (len(system)+len(messages)+len(tools)+3)/4)
}
