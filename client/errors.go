package client

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-ai/switchyard/client/apitypes"
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

// sentinels holds every sentinel by code; TestClientSentinelsCoverEveryCode (in the
// dispatcher module, dispatcher/clienttest) checks that it has one for each code the
// dispatcher answers with or the client makes (shared/apierr/codes.go). The client module
// imports no other module of the repository, so the codes are written out here.
var sentinels = map[string]error{}

// codeUnexpectedResponse is the code of an answer that is not the structured error body.
const codeUnexpectedResponse = "UNEXPECTED_RESPONSE"

// Codes returns the error codes the client has a sentinel for, sorted: every code the
// dispatcher answers with, and UNEXPECTED_RESPONSE.
func Codes() []string { return slices.Sorted(maps.Keys(sentinels)) }

// newSentinel returns the sentinel of an error code and records it.
func newSentinel(code string) error {
	s := sentinel(code)
	sentinels[code] = s
	return s
}

// Sentinels for the error codes of the dispatcher's answers; errors.Is(err, ErrJobNotFound)
// is true for any *APIError with that code. docs/errors.md lists every code.
var (
	ErrValidationFailed         = newSentinel("VALIDATION_FAILED")
	ErrPayloadTooLarge          = newSentinel("PAYLOAD_TOO_LARGE")
	ErrUnauthenticated          = newSentinel("UNAUTHENTICATED")
	ErrForbidden                = newSentinel("FORBIDDEN")
	ErrJobNotFound              = newSentinel("JOB_NOT_FOUND")
	ErrSkillNotFound            = newSentinel("SKILL_NOT_FOUND")
	ErrKeyNotFound              = newSentinel("KEY_NOT_FOUND")
	ErrChainNotFound            = newSentinel("CHAIN_NOT_FOUND")
	ErrChainAlreadyFinished     = newSentinel("CHAIN_ALREADY_FINISHED")
	ErrChainNotFinished         = newSentinel("CHAIN_NOT_FINISHED")
	ErrRouteNotFound            = newSentinel("ROUTE_NOT_FOUND")
	ErrMethodNotAllowed         = newSentinel("METHOD_NOT_ALLOWED")
	ErrBadRequest               = newSentinel("BAD_REQUEST")
	ErrUnsupportedExecutionType = newSentinel("UNSUPPORTED_EXECUTION_TYPE")
	ErrRateLimited              = newSentinel("RATE_LIMITED")
	ErrQuotaExceeded            = newSentinel("QUOTA_EXCEEDED")
	ErrBacklogFull              = newSentinel("BACKLOG_FULL")
	ErrResidencyViolation       = newSentinel("RESIDENCY_VIOLATION")
	ErrJobNotReviewable         = newSentinel("JOB_NOT_REVIEWABLE")
	ErrJobAlreadyFinished       = newSentinel("JOB_ALREADY_FINISHED")
	ErrCallbackURLForbidden     = newSentinel("CALLBACK_URL_FORBIDDEN")
	ErrWebSocketRequired        = newSentinel("WEBSOCKET_REQUIRED")
	ErrDatabaseUnavailable      = newSentinel("DATABASE_UNAVAILABLE")
	ErrQueueUnavailable         = newSentinel("QUEUE_UNAVAILABLE")
	ErrNotReady                 = newSentinel("NOT_READY")
	ErrShuttingDown             = newSentinel("SHUTTING_DOWN")
	ErrUINotBuilt               = newSentinel("UI_NOT_BUILT")
	ErrInternal                 = newSentinel("INTERNAL")
	ErrUnexpectedResponse       = newSentinel("UNEXPECTED_RESPONSE")
	ErrOrgSuspended             = newSentinel("ORG_SUSPENDED")
	ErrOrgNotFound              = newSentinel("ORG_NOT_FOUND")
	ErrOrgExists                = newSentinel("ORG_EXISTS")
	ErrCostBudgetExceeded       = newSentinel("COST_BUDGET_EXCEEDED")
	ErrProviderNotFound         = newSentinel("PROVIDER_NOT_FOUND")
	ErrCredentialUnavailable    = newSentinel("CREDENTIAL_UNAVAILABLE")
)

// decodeError builds the APIError of a non-2xx answer. A body that is not the structured
// error (a proxy's HTML page, say) becomes UNEXPECTED_RESPONSE with the start of the body.
func decodeError(resp *http.Response, raw []byte) *APIError {
	e := &APIError{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	var body struct {
		Code            string         `json:"code"`
		Message         string         `json:"message"`
		Troubleshooting []string       `json:"troubleshooting"`
		Context         map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &body); err == nil && body.Code != "" {
		e.Code, e.Message, e.Troubleshooting, e.Context = body.Code, body.Message, body.Troubleshooting, body.Context
		return e
	}
	text := strings.TrimSpace(string(raw))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	e.Code = codeUnexpectedResponse
	e.Message = fmt.Sprintf("%s: %s", http.StatusText(resp.StatusCode), text)
	return e
}
