package accounts

import (
	"fmt"
	"net/http"
)

// Error is a failure a client can act on: it carries the HTTP status the API
// answers with and a message that says what to fix. Anything else a Service
// method returns is an internal failure (500, logged, message withheld).
type Error struct {
	Status  int
	Message string
	Data    any // optional payload, e.g. the current terms version on a stale acknowledgment
}

func (e *Error) Error() string { return e.Message }

func errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// Invalid is a 400: the request is well-formed but breaks a rule.
func Invalid(format string, args ...any) *Error {
	return errorf(http.StatusBadRequest, format, args...)
}

// Unauthorized is a 401: missing, unknown, expired or wrong-kind credentials.
func Unauthorized(format string, args ...any) *Error {
	return errorf(http.StatusUnauthorized, format, args...)
}

// NotFound is a 404, also used for other users' objects so that their
// existence is never revealed.
func NotFound(format string, args ...any) *Error { return errorf(http.StatusNotFound, format, args...) }

// Conflict is a 409: a state conflict (sold out, pool not active, wrong state).
func Conflict(format string, args ...any) *Error { return errorf(http.StatusConflict, format, args...) }

// PaymentDeclined is a 402: the charge was declined and nothing was created.
func PaymentDeclined(format string, args ...any) *Error {
	return errorf(http.StatusPaymentRequired, format, args...)
}
