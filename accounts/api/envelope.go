// Package api serves the account API (/api/*) and the operator endpoints over
// HTTP with the {success, data} / {success: false, error} envelope. It holds
// no domain logic: every request is one accounts.Service call.
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
)

type envelope struct {
	Success bool   `json:"success"`
	Data    any    `json:"data,omitempty"`
	Error   string `json:"error,omitempty"`
}

// writeData answers with a success envelope.
func writeData(w http.ResponseWriter, status int, data any) {
	writeJSON(w, status, envelope{Success: true, Data: data})
}

// writeError answers with a failure envelope: *accounts.Error keeps its
// status and message; anything else is logged and answered 500 without
// details.
func writeError(w http.ResponseWriter, logger *zap.Logger, err error) {
	var ae *accounts.Error
	if errors.As(err, &ae) {
		writeJSON(w, ae.Status, envelope{Success: false, Error: ae.Message, Data: ae.Data})
		return
	}
	logger.Error("account API request failed", zap.Error(err))
	writeJSON(w, http.StatusInternalServerError, envelope{Success: false, Error: "internal error; the operator has been told"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeBody reads a JSON object body into dst. An empty body is allowed
// when optional is true. Oversized bodies are a 413, malformed ones a 400
// that says where the JSON is wrong.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, dst any, optional bool) error {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &accounts.Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body is larger than %d bytes", mbe.Limit)}
		}
		return accounts.Invalid("reading request body: %v", err)
	}
	if len(body) == 0 {
		if optional {
			return nil
		}
		return accounts.Invalid("request body is empty; send a JSON object")
	}
	if err := json.Unmarshal(body, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return accounts.Invalid("request body must be a JSON object, not %s", te.Value)
			}
			return accounts.Invalid("field %q must be of type %s, not %s", te.Field, te.Type.String(), te.Value)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := position(body, se.Offset)
			return accounts.Invalid("request body is not valid JSON at line %d, column %d (byte %d): %v", line, col, se.Offset, err)
		}
		return accounts.Invalid("request body is not valid JSON: %v", err)
	}
	return nil
}

// position turns a byte offset of body into a 1-based line and column.
func position(body []byte, offset int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < offset-1 && i < int64(len(body)); i++ {
		if body[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}
