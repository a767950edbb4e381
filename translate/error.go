package translate

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// ErrorKind is the error type named in an error body. The names are the
// messages format's; chat bodies carry the same names in `type`.
type ErrorKind string

// The error kinds of the messages format.
const (
	InvalidRequest  ErrorKind = "invalid_request_error"
	Authentication  ErrorKind = "authentication_error"
	Permission      ErrorKind = "permission_error"
	NotFound        ErrorKind = "not_found_error"
	RequestTooLarge ErrorKind = "request_too_large"
	RateLimit       ErrorKind = "rate_limit_error"
	APIError        ErrorKind = "api_error"
	Overloaded      ErrorKind = "overloaded_error"
)

// KindForStatus is the error kind that goes with an HTTP status.
func KindForStatus(status int) ErrorKind {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusMethodNotAllowed, http.StatusUnsupportedMediaType:
		return InvalidRequest
	case http.StatusUnauthorized:
		return Authentication
	case http.StatusForbidden, http.StatusPaymentRequired:
		return Permission
	case http.StatusNotFound:
		return NotFound
	case http.StatusRequestEntityTooLarge:
		return RequestTooLarge
	case http.StatusTooManyRequests:
		return RateLimit
	case http.StatusServiceUnavailable, 529:
		return Overloaded
	}
	if status >= 400 && status < 500 {
		return InvalidRequest
	}
	return APIError
}

// Error is an inference error: an HTTP status and a body that the client can
// read in its own format. It is also what the gate answers with.
type Error struct {
	Status  int
	Kind    ErrorKind
	Message string
	// Code and Param fill the chat body's `code` and `param`; empty renders null.
	Code  string
	Param string
	// RetryAfter, in seconds, is when to try again (0: not said). The
	// caller sends it as Retry-After; the Gemini body carries it too, as
	// google.rpc.RetryInfo, the only delay Gemini CLI reads.
	RetryAfter int
}

// NewError builds an error. A zero status is taken from the kind and an
// empty kind from the status.
func NewError(status int, kind ErrorKind, msg string) *Error {
	if kind == "" {
		kind = KindForStatus(status)
	}
	if status == 0 {
		status = statusForKind(kind)
	}
	return &Error{Status: status, Kind: kind, Message: msg}
}

func badRequest(msg string) *Error { return NewError(http.StatusBadRequest, InvalidRequest, msg) }

func statusForKind(k ErrorKind) int {
	switch k {
	case InvalidRequest:
		return http.StatusBadRequest
	case Authentication:
		return http.StatusUnauthorized
	case Permission:
		return http.StatusForbidden
	case NotFound:
		return http.StatusNotFound
	case RequestTooLarge:
		return http.StatusRequestEntityTooLarge
	case RateLimit:
		return http.StatusTooManyRequests
	case Overloaded:
		return 529
	}
	return http.StatusInternalServerError
}

func (e *Error) Error() string { return string(e.Kind) + ": " + e.Message }

// Body renders the error body in format f.
func (e *Error) Body(f Format) []byte { return e.AppendBody(nil, f) }

// AppendBody appends the error body in format f to dst:
// messages {"type":"error","error":{"type":..,"message":..}},
// chat and Responses {"error":{"message":..,"type":..,"param":..,"code":..}},
// Gemini {"error":{"code":..,"message":..,"status":..}}.
func (e *Error) AppendBody(dst []byte, f Format) []byte {
	kind := e.Kind
	if kind == "" {
		kind = KindForStatus(e.Status)
	}
	c, ok := codecFor(f)
	if !ok {
		c = &codecs[Chat]
	}
	return c.appendError(dst, e, kind)
}

func appendMessagesError(dst []byte, e *Error, kind ErrorKind) []byte {
	dst = append(dst, `{"type":"error","error":{"type":`...)
	dst = appendStr(dst, string(kind))
	dst = append(dst, `,"message":`...)
	dst = appendStr(dst, e.Message)
	return append(dst, `}}`...)
}

func appendChatError(dst []byte, e *Error, kind ErrorKind) []byte {
	dst = append(dst, `{"error":{"message":`...)
	dst = appendStr(dst, e.Message)
	dst = append(dst, `,"type":`...)
	dst = appendStr(dst, string(kind))
	dst = append(dst, `,"param":`...)
	dst = appendOptStr(dst, e.Param)
	dst = append(dst, `,"code":`...)
	dst = appendOptStr(dst, e.Code)
	return append(dst, `}}`...)
}

func appendOptStr(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendStr(dst, s)
}

// Write answers the request with the error in format f.
func (e *Error) Write(w http.ResponseWriter, f Format) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.WriteHeader(e.Status)
	_, err := w.Write(e.AppendBody(make([]byte, 0, 128+len(e.Message)), f))
	return err
}

// WriteError answers with status, kind and message in format f; the gate
// uses it for its own rejections.
func WriteError(w http.ResponseWriter, f Format, status int, kind ErrorKind, msg string) error {
	return NewError(status, kind, msg).Write(w, f)
}

// UpstreamError reads an upstream error body (any of the shapes servers send:
// {"error":{"message",..}}, {"type":"error","error":{..}}, {"error":"..."},
// {"object":"error","message",..}, {"detail":..}, or plain text) into an Error
// with the upstream's status.
func UpstreamError(status int, body []byte) *Error {
	if status < 400 {
		status = http.StatusBadGateway
	}
	e := &Error{Status: status, Kind: KindForStatus(status)}
	s := trimJSON(b2s(body))
	if gjson.Valid(s) && isObj(s) {
		errv := field(s, "error")
		switch {
		case isObj(errv):
			e.Message = strField(errv, "message")
			if t := strField(errv, "type"); knownKind(t) {
				e.Kind = ErrorKind(t)
			}
			if c := field(errv, "code"); isStr(c) {
				e.Code = str(c)
			}
			if p := field(errv, "param"); isStr(p) {
				e.Param = str(p)
			}
		case isStr(errv):
			e.Message = str(errv)
		default:
			e.Message = strField(s, "message")
			if e.Message == "" {
				if d := field(s, "detail"); isStr(d) {
					e.Message = str(d)
				} else if d != "" {
					e.Message = d
				}
			}
		}
	} else if s != "" && !strings.HasPrefix(s, "<") {
		e.Message = s
	}
	if len(e.Message) > 2048 {
		e.Message = e.Message[:2048]
	}
	if e.Message == "" {
		e.Message = "upstream answered " + strconv.Itoa(status) + " " + http.StatusText(status)
	}
	return e
}

func strField(obj, k string) string {
	if v := field(obj, k); isStr(v) {
		return str(v)
	}
	return ""
}

func knownKind(t string) bool {
	switch ErrorKind(t) {
	case InvalidRequest, Authentication, Permission, NotFound, RequestTooLarge, RateLimit, APIError, Overloaded:
		return true
	}
	return false
}

// TranslateErrorBody rewrites an upstream error body (non-2xx) into the
// client's format, appending to dst. A body already in the client's format
// passes unchanged.
func TranslateErrorBody(client, upstream Format, status int, body, dst []byte) []byte {
	if client == upstream && wellFormedError(client, body) {
		return append(dst, body...)
	}
	return UpstreamError(status, body).AppendBody(dst, client)
}

func wellFormedError(f Format, body []byte) bool {
	s := trimJSON(b2s(body))
	if !gjson.Valid(s) {
		return false
	}
	e := field(s, "error")
	if !isObj(e) || !isStr(field(e, "message")) {
		return false
	}
	if f == Messages {
		return strEq(field(s, "type"), "error") && isStr(field(e, "type"))
	}
	return true
}
