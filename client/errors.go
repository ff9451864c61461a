package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/apitypes"
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
type FieldError = apitypes.FieldError

// sentinel is an error code that errors.Is compares with APIError.Code.
type sentinel string

func (s sentinel) Error() string { return "switchyard: " + string(s) }

// sentinels holds every sentinel by code; TestSentinelsCoverEveryCode checks that it has one
// for each code the dispatcher answers with or the client makes (shared/apierr/codes.go).
var sentinels = map[string]error{}

// newSentinel returns the sentinel of an error code of shared/apierr and records it.
func newSentinel(code string) error {
	s := sentinel(code)
	sentinels[code] = s
	return s
}

// Sentinels for the error codes of the dispatcher's answers; errors.Is(err, ErrJobNotFound)
// is true for any *APIError with that code. docs/errors.md lists every code.
var (
	ErrValidationFailed         = newSentinel(apierr.CodeValidationFailed)
	ErrPayloadTooLarge          = newSentinel(apierr.CodePayloadTooLarge)
	ErrUnauthenticated          = newSentinel(apierr.CodeUnauthenticated)
	ErrForbidden                = newSentinel(apierr.CodeForbidden)
	ErrJobNotFound              = newSentinel(apierr.CodeJobNotFound)
	ErrSkillNotFound            = newSentinel(apierr.CodeSkillNotFound)
	ErrKeyNotFound              = newSentinel(apierr.CodeKeyNotFound)
	ErrChainNotFound            = newSentinel(apierr.CodeChainNotFound)
	ErrChainAlreadyFinished     = newSentinel(apierr.CodeChainAlreadyFinished)
	ErrChainNotFinished         = newSentinel(apierr.CodeChainNotFinished)
	ErrRouteNotFound            = newSentinel(apierr.CodeRouteNotFound)
	ErrMethodNotAllowed         = newSentinel(apierr.CodeMethodNotAllowed)
	ErrBadRequest               = newSentinel(apierr.CodeBadRequest)
	ErrUnsupportedExecutionType = newSentinel(apierr.CodeUnsupportedExecutionType)
	ErrRateLimited              = newSentinel(apierr.CodeRateLimited)
	ErrQuotaExceeded            = newSentinel(apierr.CodeQuotaExceeded)
	ErrBacklogFull              = newSentinel(apierr.CodeBacklogFull)
	ErrResidencyViolation       = newSentinel(apierr.CodeResidencyViolation)
	ErrJobNotReviewable         = newSentinel(apierr.CodeJobNotReviewable)
	ErrJobAlreadyFinished       = newSentinel(apierr.CodeJobAlreadyFinished)
	ErrCallbackURLForbidden     = newSentinel(apierr.CodeCallbackURLForbidden)
	ErrWebSocketRequired        = newSentinel(apierr.CodeWebSocketRequired)
	ErrDatabaseUnavailable      = newSentinel(apierr.CodeDatabaseUnavailable)
	ErrQueueUnavailable         = newSentinel(apierr.CodeQueueUnavailable)
	ErrNotReady                 = newSentinel(apierr.CodeNotReady)
	ErrShuttingDown             = newSentinel(apierr.CodeShuttingDown)
	ErrUINotBuilt               = newSentinel(apierr.CodeUINotBuilt)
	ErrInternal                 = newSentinel(apierr.CodeInternal)
	ErrUnexpectedResponse       = newSentinel(apierr.CodeUnexpectedResponse)
	ErrOrgSuspended             = newSentinel(apierr.CodeOrgSuspended)
	ErrOrgNotFound              = newSentinel(apierr.CodeOrgNotFound)
	ErrOrgExists                = newSentinel(apierr.CodeOrgExists)
	ErrCostBudgetExceeded       = newSentinel(apierr.CodeCostBudgetExceeded)
)

// decodeError builds the APIError of a non-2xx answer. A body that is not the structured
// error (a proxy's HTML page, say) becomes UNEXPECTED_RESPONSE with the start of the body.
func decodeError(resp *http.Response, raw []byte) *APIError {
	e := &APIError{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	var body apierr.Body
	if err := json.Unmarshal(raw, &body); err == nil && body.Code != "" {
		e.Code, e.Message, e.Troubleshooting, e.Context = body.Code, body.Message, body.Troubleshooting, body.Context
		return e
	}
	text := strings.TrimSpace(string(raw))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	e.Code = apierr.CodeUnexpectedResponse
	e.Message = fmt.Sprintf("%s: %s", http.StatusText(resp.StatusCode), text)
	return e
}
