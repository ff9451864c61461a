// Package apierr is the structured error every Switchyard service answers with:
// {"error": true, "code", "message", "troubleshooting", "context"}. Handlers return *Error
// values; Handler turns any error into that body, and never lets internal text reach a
// client.
package apierr

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is a failure a client can act on. Its Code is UPPER_SNAKE and documented in
// docs/errors.md; Troubleshooting names what to do; Context carries non-secret detail.
type Error struct {
	Status          int            `json:"-"`
	Code            string         `json:"code"`
	Message         string         `json:"message"`
	Troubleshooting []string       `json:"troubleshooting"`
	Context         map[string]any `json:"context"`
	// Header holds response headers such as Retry-After.
	Header http.Header `json:"-"`
	// cause is logged, never sent.
	cause error
	// expected marks an answer that is part of the normal flow, not a refusal (see Expected).
	expected bool
}

// Body is the JSON shape of an error answer.
type Body struct {
	Error           bool           `json:"error"`
	Code            string         `json:"code"`
	Message         string         `json:"message"`
	Troubleshooting []string       `json:"troubleshooting"`
	Context         map[string]any `json:"context"`
}

// New returns an error with the given HTTP status, code and message.
func New(status int, code, message string, troubleshooting ...string) *Error {
	return &Error{Status: status, Code: code, Message: message, Troubleshooting: troubleshooting}
}

func (e *Error) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.cause)
	}
	return e.Code + ": " + e.Message
}

// Unwrap returns the internal cause.
func (e *Error) Unwrap() error { return e.cause }

// With adds context entries and returns e.
func (e *Error) With(kv ...any) *Error {
	if e.Context == nil {
		e.Context = map[string]any{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok {
			e.Context[k] = kv[i+1]
		}
	}
	return e
}

// Wrap records an internal cause that is logged but never sent to the client.
func (e *Error) Wrap(cause error) *Error {
	e.cause = cause
	return e
}

// Expected marks the answer as part of the normal flow rather than a refusal — a call told to
// come back later, say — so that it is logged at debug, not warn: under load it is the
// common case, and a warning per call would bury the real ones.
func (e *Error) Expected() *Error {
	e.expected = true
	return e
}

// SetHeader sets a response header sent with the error.
func (e *Error) SetHeader(key, value string) *Error {
	if e.Header == nil {
		e.Header = http.Header{}
	}
	e.Header.Set(key, value)
	return e
}

// Body returns the JSON body of the error.
func (e *Error) Body() Body {
	ts := e.Troubleshooting
	if ts == nil {
		ts = []string{}
	}
	ctx := e.Context
	if ctx == nil {
		ctx = map[string]any{}
	}
	return Body{Error: true, Code: e.Code, Message: e.Message, Troubleshooting: ts, Context: ctx}
}

// As returns err as an *Error, or an INTERNAL error wrapping it.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Internal(err)
}

// Internal is a 500 whose cause is logged and hidden.
func Internal(cause error) *Error {
	return New(http.StatusInternalServerError, CodeInternal,
		"An internal error occurred.",
		"Retry the request; if it keeps failing, report the trace id from the service logs.").Wrap(cause)
}
