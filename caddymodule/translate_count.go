package caddymodule

// Token counts through the translator. POST .../v1/messages/count_tokens
// is forwarded to a messages upstream (the body as it came, the path its
// messages path + /count_tokens) and estimated here for a chat upstream,
// which has no such endpoint; errors are in the messages format either way.
// The Gemini API's :countTokens is estimated here for either upstream.

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/timeblock/timeblock/translate"
)

// isCountTokens tells whether the request path is the token count endpoint.
func isCountTokens(p string) bool {
	return strings.HasSuffix(strings.TrimSuffix(p, "/"), countTokensPath)
}

// serveCountTokens answers a token count.
func (t *Translate) serveCountTokens(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		return translate.WriteError(w, translate.Messages, http.StatusMethodNotAllowed, translate.InvalidRequest,
			r.Method+" is not allowed on "+shortPath(r.URL.Path)+"; use POST")
	}
	fb, checked, err := t.requestBody(r)
	if err != nil {
		return t.readFailed(w, translate.Messages, err)
	}
	if !checked {
		defer fb.release()
	}
	body := fb.Bytes()
	if !checked { // the gate checks what it reads
		if terr := translate.CheckBody(body); terr != nil {
			return terr.Write(w, translate.Messages)
		}
	}
	if t.cfg.Upstream != translate.Messages {
		return writeCount(w, body)
	}
	// A messages upstream counts, but only what the messages endpoint
	// itself would take.
	if terr := translate.ValidateCountTokens(body); terr != nil {
		return terr.Write(w, translate.Messages)
	}

	r.URL.Path, r.URL.RawPath = t.Path+"/count_tokens", ""
	// An error body is read and rewritten here, so it must come uncompressed.
	r.Header.Set("Accept-Encoding", "identity")
	if r.Header.Get(translate.MessagesVersionHeader) == "" {
		r.Header.Set(translate.MessagesVersionHeader, translate.MessagesVersion)
	}
	cw := &countWriter{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}}
	err = next.ServeHTTP(cw, r)
	if err != nil || !cw.holding {
		return err // nothing held: Caddy's error handling answers, or the count went out as it came
	}
	switch cw.status {
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		// The upstream speaks messages but does not count tokens: the
		// estimate is the best answer there is.
		t.logger.Debug("the upstream does not count tokens; answering an estimate",
			zap.Int("status", cw.status), zap.String("path", r.URL.Path))
		return writeCount(w, body)
	}
	out := translate.TranslateErrorBody(translate.Messages, translate.Messages, cw.status, cw.held.Bytes(), nil)
	w.Header().Del("Content-Encoding")
	return writeJSONBody(w, cw.status, out)
}

// writeCount answers the estimate of body's input tokens.
func writeCount(w http.ResponseWriter, body []byte) error {
	n, terr := translate.CountTokens(body)
	if terr != nil {
		return terr.Write(w, translate.Messages)
	}
	return writeJSONBody(w, http.StatusOK, translate.AppendCountTokens(make([]byte, 0, 32), n))
}

// maxHeldCountError bounds an upstream error body held for rewriting.
const maxHeldCountError = 1 << 20

// countWriter passes a successful count through and holds an error answer,
// which serveCountTokens rewrites in the messages format (or replaces with
// the estimate).
type countWriter struct {
	*caddyhttp.ResponseWriterWrapper
	decided, holding bool
	status           int
	held             bytes.Buffer
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (cw *countWriter) Unwrap() http.ResponseWriter { return cw.ResponseWriterWrapper.ResponseWriter }

func (cw *countWriter) WriteHeader(status int) {
	if cw.decided || status < 200 {
		if !cw.decided {
			cw.ResponseWriterWrapper.WriteHeader(status)
		}
		return
	}
	cw.decided, cw.status = true, status
	if status >= 400 {
		cw.holding = true
		return
	}
	cw.ResponseWriterWrapper.WriteHeader(status)
}

func (cw *countWriter) Write(p []byte) (int, error) {
	if !cw.decided {
		cw.WriteHeader(http.StatusOK)
	}
	if !cw.holding {
		return cw.ResponseWriterWrapper.Write(p)
	}
	if cw.held.Len()+len(p) <= maxHeldCountError {
		cw.held.Write(p)
	}
	return len(p), nil
}

// ReadFrom goes through Write, so that io.Copy cannot bypass the holding.
func (cw *countWriter) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(writerOnly{cw}, r)
}

// writerOnly hides ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }

// FlushError flushes a count passing through; a held error waits.
func (cw *countWriter) FlushError() error {
	if cw.holding {
		return nil
	}
	return http.NewResponseController(cw.ResponseWriterWrapper.ResponseWriter).Flush()
}

var (
	_ http.ResponseWriter = (*countWriter)(nil)
	_ io.ReaderFrom       = (*countWriter)(nil)
)

// serveGeminiCount answers a Gemini API token count (POST
// .../models/{model}:countTokens) with the estimate, whatever the upstream:
// neither upstream format counts a Gemini request.
func (t *Translate) serveGeminiCount(w http.ResponseWriter, r *http.Request, model string) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		return translate.WriteError(w, translate.Gemini, http.StatusMethodNotAllowed, translate.InvalidRequest,
			r.Method+" is not allowed on "+shortPath(r.URL.Path)+"; use POST")
	}
	fb, checked, err := t.requestBody(r)
	if err != nil {
		return t.readFailed(w, translate.Gemini, err)
	}
	if !checked {
		defer fb.release()
	}
	n, terr := translate.CountGeminiTokens(fb.Bytes(), model, &t.cfg)
	if terr != nil {
		return terr.Write(w, translate.Gemini)
	}
	return writeJSONBody(w, http.StatusOK, translate.AppendGeminiCountTokens(make([]byte, 0, 32), n))
}
