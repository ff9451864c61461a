package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// APIError is a non-2xx answer of the dispatcher: its structured error body (docs/errors.md)
// plus the HTTP status and, for 429 and 503, how long the dispatcher asked to wait.
type APIError struct {
	// Status is the HTTP status code.
	Status int `json:"-"`
	// Code is the UPPER_SNAKE error code, e.g. JOB_NOT_FOUND.
	Code string `json:"code"`
	// Message says what happened.
	Message string `json:"message"`
	// Troubleshooting says what to do about it.
	Troubleshooting []string `json:"troubleshooting"`
	// Context carries non-secret detail: failing fields, the limit hit, the job id.
	Context map[string]any `json:"context"`
	// RetryAfter is the Retry-After header, zero when absent.
	RetryAfter time.Duration `json:"-"`
}

// Error returns "switchyard: <status> <code>: <message>".
func (e *APIError) Error() string {
	return fmt.Sprintf("switchyard: %d %s: %s", e.Status, e.Code, e.Message)
}

// Is lets errors.Is match an APIError against the sentinel of its code.
func (e *APIError) Is(target error) bool {
	s, ok := target.(sentinel)
	return ok && string(s) == e.Code
}

// FieldErrors returns the failing fields of a VALIDATION_FAILED answer.
func (e *APIError) FieldErrors() []FieldError {
	raw, ok := e.Context["fields"]
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var out []FieldError
	_ = json.Unmarshal(b, &out)
	return out
}

// FieldError is one failing field of a VALIDATION_FAILED answer.
type FieldError struct {
	// Field is the JSON path of the field, e.g. metadata.parent_job_id.
	Field string `json:"field"`
	// Rule is the rule it broke, e.g. required or oneof.
	Rule string `json:"rule"`
	// Message explains the rule.
	Message string `json:"message"`
}

// sentinel is an error code that errors.Is compares with APIError.Code.
type sentinel string

func (s sentinel) Error() string { return "switchyard: " + string(s) }

// Sentinels for the error codes a caller most often handles; errors.Is(err, ErrJobNotFound)
// is true for any *APIError with that code. docs/errors.md lists every code.
var (
	ErrValidationFailed     error = sentinel("VALIDATION_FAILED")
	ErrPayloadTooLarge      error = sentinel("PAYLOAD_TOO_LARGE")
	ErrUnauthenticated      error = sentinel("UNAUTHENTICATED")
	ErrForbidden            error = sentinel("FORBIDDEN")
	ErrJobNotFound          error = sentinel("JOB_NOT_FOUND")
	ErrSkillNotFound        error = sentinel("SKILL_NOT_FOUND")
	ErrKeyNotFound          error = sentinel("KEY_NOT_FOUND")
	ErrRouteNotFound        error = sentinel("ROUTE_NOT_FOUND")
	ErrRateLimited          error = sentinel("RATE_LIMITED")
	ErrQuotaExceeded        error = sentinel("QUOTA_EXCEEDED")
	ErrBacklogFull          error = sentinel("BACKLOG_FULL")
	ErrResidencyViolation   error = sentinel("RESIDENCY_VIOLATION")
	ErrJobNotReviewable     error = sentinel("JOB_NOT_REVIEWABLE")
	ErrJobAlreadyFinished   error = sentinel("JOB_ALREADY_FINISHED")
	ErrCallbackURLForbidden error = sentinel("CALLBACK_URL_FORBIDDEN")
	ErrDatabaseUnavailable  error = sentinel("DATABASE_UNAVAILABLE")
	ErrQueueUnavailable     error = sentinel("QUEUE_UNAVAILABLE")
	ErrInternal             error = sentinel("INTERNAL")
	ErrUnexpectedResponse   error = sentinel("UNEXPECTED_RESPONSE")
)

// decodeError builds the APIError of a non-2xx answer. A body that is not the structured
// error (a proxy's HTML page, say) becomes UNEXPECTED_RESPONSE with the start of the body.
func decodeError(resp *http.Response, raw []byte) *APIError {
	e := &APIError{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	var body struct {
		Error bool `json:"error"`
		APIError
	}
	if err := json.Unmarshal(raw, &body); err == nil && body.Code != "" {
		e.Code, e.Message, e.Troubleshooting, e.Context = body.Code, body.Message, body.Troubleshooting, body.Context
		return e
	}
	text := strings.TrimSpace(string(raw))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	e.Code = string(ErrUnexpectedResponse.(sentinel))
	e.Message = fmt.Sprintf("%s: %s", http.StatusText(resp.StatusCode), text)
	return e
}
