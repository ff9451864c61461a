package apierr

import (
	"net/http"
	"slices"
)

// The error codes of every Switchyard service and of the runs they record, each stated
// once here. docs/errors.md documents every one (TestDocsListEveryCode fails when it lacks a
// code or lists one that is not here); the Go client's sentinels and the executor's list of
// permanent router answers are derived from the table below.
const (
	// Answers of the dispatcher and the router.

	CodeValidationFailed         = "VALIDATION_FAILED"
	CodePayloadTooLarge          = "PAYLOAD_TOO_LARGE"
	CodeUnauthenticated          = "UNAUTHENTICATED"
	CodeForbidden                = "FORBIDDEN"
	CodeRouteNotFound            = "ROUTE_NOT_FOUND"
	CodeMethodNotAllowed         = "METHOD_NOT_ALLOWED"
	CodeBadRequest               = "BAD_REQUEST"
	CodeJobNotFound              = "JOB_NOT_FOUND"
	CodeSkillNotFound            = "SKILL_NOT_FOUND"
	CodeUnsupportedExecutionType = "UNSUPPORTED_EXECUTION_TYPE"
	CodeRateLimited              = "RATE_LIMITED"
	CodeBacklogFull              = "BACKLOG_FULL"
	CodeQuotaExceeded            = "QUOTA_EXCEEDED"
	CodeResidencyViolation       = "RESIDENCY_VIOLATION"
	CodeCallbackURLForbidden     = "CALLBACK_URL_FORBIDDEN"
	CodeJobNotReviewable         = "JOB_NOT_REVIEWABLE"
	CodeJobAlreadyFinished       = "JOB_ALREADY_FINISHED"
	CodeKeyNotFound              = "KEY_NOT_FOUND"
	CodeDatabaseUnavailable      = "DATABASE_UNAVAILABLE"
	CodeQueueUnavailable         = "QUEUE_UNAVAILABLE"
	CodeNotReady                 = "NOT_READY"
	CodeInternal                 = "INTERNAL"
	CodeChainNotFound            = "CHAIN_NOT_FOUND"
	CodeChainAlreadyFinished     = "CHAIN_ALREADY_FINISHED"
	CodeChainNotFinished         = "CHAIN_NOT_FINISHED"
	CodeWebSocketRequired        = "WEBSOCKET_REQUIRED"
	CodeShuttingDown             = "SHUTTING_DOWN"
	CodeUINotBuilt               = "UI_NOT_BUILT"
	CodeRoutingFailed            = "ROUTING_FAILED"
	CodeProviderRateLimited      = "PROVIDER_RATE_LIMITED"
	CodeProviderUnavailable      = "PROVIDER_UNAVAILABLE"
	CodeProviderRejected         = "PROVIDER_REJECTED"
	CodeBudgetExceeded           = "BUDGET_EXCEEDED"
	CodePriceUnknown             = "PRICE_UNKNOWN"
	CodeRateLimitDeadline        = "RATE_LIMIT_DEADLINE"
	CodeRateLimitWait            = "RATE_LIMIT_WAIT"
	CodeProviderCircuitOpen      = "PROVIDER_CIRCUIT_OPEN"
	CodeRateLimiterUnavailable   = "RATE_LIMITER_UNAVAILABLE"
	CodeBudgetUnavailable        = "BUDGET_UNAVAILABLE"
	CodeCredentialUnavailable    = "CREDENTIAL_UNAVAILABLE"
	CodeCredentialRevoked        = "CREDENTIAL_REVOKED"
	CodeProviderNotFound         = "PROVIDER_NOT_FOUND"
	CodeCancelled                = "CANCELLED"
	CodeCallInFlight             = "CALL_IN_FLIGHT"
	CodeHandoffUnavailable       = "HANDOFF_UNAVAILABLE"
	CodeOrgSuspended             = "ORG_SUSPENDED"
	CodeOrgNotFound              = "ORG_NOT_FOUND"
	CodeOrgExists                = "ORG_EXISTS"
	CodeCostBudgetExceeded       = "COST_BUDGET_EXCEEDED"

	// Made by the Go client.

	CodeUnexpectedResponse = "UNEXPECTED_RESPONSE"

	// Recorded on runs by the executor (error, attemptErrors, warnings, hold reasons, span
	// attributes).

	CodeSkillDisabledAfterDispatch = "SKILL_DISABLED_AFTER_DISPATCH"
	CodeInvalidPayload             = "INVALID_PAYLOAD"
	CodeTimedOut                   = "TIMED_OUT"
	CodeRateLimitQueueTimeout      = "RATE_LIMIT_QUEUE_TIMEOUT"
	CodeExecutionError             = "EXECUTION_ERROR"
	CodeRouterUnreachable          = "ROUTER_UNREACHABLE"
	CodeRouterBadAnswer            = "ROUTER_BAD_ANSWER"
	CodeRouterError                = "ROUTER_ERROR"
	CodeNoToolsAvailable           = "NO_TOOLS_AVAILABLE"
	CodeLLMEmptyAnswer             = "LLM_EMPTY_ANSWER"
	CodeRejected                   = "REJECTED"
	CodeMaxIterations              = "MAX_ITERATIONS"
	CodeToolRequiresApproval       = "TOOL_REQUIRES_APPROVAL"
	CodeApprovalTimeout            = "APPROVAL_TIMEOUT"
	CodeJournalUnavailable         = "JOURNAL_UNAVAILABLE"
	CodeChainStepFailed            = "CHAIN_STEP_FAILED"
	CodeChainForEachInvalid        = "CHAIN_FOR_EACH_INVALID"
	CodeWorkflowFailed             = "WORKFLOW_FAILED"
	CodeWorkflowExpression         = "WORKFLOW_EXPRESSION_FAILED"
	CodePlanParseFailed            = "PLAN_PARSE_FAILED"
	CodeAgentStepFailed            = "AGENT_STEP_FAILED"
	CodeCostEstimateExceeded       = "COST_ESTIMATE_EXCEEDS_CEILING"
)

// Where says which part of the platform answers with a code or records it.
type Where uint8

const (
	// Dispatcher answers with the code.
	Dispatcher Where = 1 << iota
	// Router (provider-router) answers with the code.
	Router
	// Run: the executor records the code on a run.
	Run
	// Client: the Go client makes the code itself.
	Client

	// Services is every HTTP service ("all" in docs/errors.md).
	Services = Dispatcher | Router
)

// Spec is what the platform says of one code, stated once.
type Spec struct {
	Code string
	// Status is the HTTP status the code is answered with; 0 when it varies (BAD_REQUEST,
	// UNEXPECTED_RESPONSE) or the code is never an HTTP answer (run codes).
	Status int
	Where  Where
	// Permanent means that repeating the same request — or the same attempt of a run — cannot
	// change the answer: the executor does not retry a router answer with such a code, and
	// fails the run at once.
	Permanent bool
}

// specs is the table every other list of codes comes from.
var specs = []Spec{
	{CodeValidationFailed, http.StatusBadRequest, Services, true},
	{CodePayloadTooLarge, http.StatusRequestEntityTooLarge, Services, true},
	{CodeUnauthenticated, http.StatusUnauthorized, Dispatcher, true},
	{CodeForbidden, http.StatusForbidden, Services, true},
	{CodeRouteNotFound, http.StatusNotFound, Services, true},
	{CodeMethodNotAllowed, http.StatusMethodNotAllowed, Services, true},
	{CodeBadRequest, 0, Services, true},
	{CodeJobNotFound, http.StatusNotFound, Dispatcher, true},
	{CodeSkillNotFound, http.StatusNotFound, Dispatcher, true},
	{CodeUnsupportedExecutionType, http.StatusUnprocessableEntity, Dispatcher | Run, true},
	{CodeRateLimited, http.StatusTooManyRequests, Dispatcher, false},
	{CodeBacklogFull, http.StatusTooManyRequests, Dispatcher, false},
	{CodeQuotaExceeded, http.StatusTooManyRequests, Dispatcher | Router, true},
	{CodeResidencyViolation, http.StatusForbidden, Dispatcher | Router, true},
	{CodeCallbackURLForbidden, http.StatusBadRequest, Dispatcher, true},
	{CodeJobNotReviewable, http.StatusConflict, Dispatcher, true},
	{CodeJobAlreadyFinished, http.StatusConflict, Dispatcher, true},
	{CodeKeyNotFound, http.StatusNotFound, Dispatcher, true},
	{CodeDatabaseUnavailable, http.StatusServiceUnavailable, Services, false},
	{CodeQueueUnavailable, http.StatusServiceUnavailable, Dispatcher, false},
	{CodeNotReady, http.StatusServiceUnavailable, Dispatcher, false},
	{CodeInternal, http.StatusInternalServerError, Services, false},
	{CodeChainNotFound, http.StatusNotFound, Dispatcher, true},
	{CodeChainAlreadyFinished, http.StatusConflict, Dispatcher, true},
	{CodeChainNotFinished, http.StatusConflict, Dispatcher, false},
	{CodeWebSocketRequired, http.StatusBadRequest, Dispatcher, true},
	{CodeShuttingDown, http.StatusServiceUnavailable, Dispatcher, false},
	{CodeUINotBuilt, http.StatusServiceUnavailable, Dispatcher, false},
	{CodeRoutingFailed, http.StatusUnprocessableEntity, Router, true},
	{CodeProviderRateLimited, http.StatusTooManyRequests, Router, false},
	{CodeProviderUnavailable, http.StatusBadGateway, Router | Run, false},
	{CodeProviderRejected, http.StatusBadGateway, Router, true},
	{CodeBudgetExceeded, http.StatusPaymentRequired, Router, true},
	{CodePriceUnknown, http.StatusUnprocessableEntity, Router, true},
	{CodeRateLimitDeadline, http.StatusTooManyRequests, Router, true},
	{CodeRateLimitWait, http.StatusTooManyRequests, Router, false},
	{CodeProviderCircuitOpen, http.StatusServiceUnavailable, Router, false},
	{CodeRateLimiterUnavailable, http.StatusServiceUnavailable, Router, false},
	{CodeBudgetUnavailable, http.StatusServiceUnavailable, Router, false},
	{CodeCredentialUnavailable, http.StatusServiceUnavailable, Dispatcher | Router, false},
	{CodeCredentialRevoked, http.StatusFailedDependency, Router, true},
	{CodeProviderNotFound, http.StatusNotFound, Dispatcher, true},
	{CodeCancelled, StatusClientClosedRequest, Router | Run, false},
	{CodeCallInFlight, http.StatusServiceUnavailable, Router, false},
	{CodeHandoffUnavailable, http.StatusServiceUnavailable, Router, false},
	{CodeOrgSuspended, http.StatusForbidden, Dispatcher, true},
	{CodeOrgNotFound, http.StatusNotFound, Dispatcher, true},
	{CodeOrgExists, http.StatusConflict, Dispatcher, true},
	{CodeCostBudgetExceeded, http.StatusTooManyRequests, Dispatcher, true},

	{CodeUnexpectedResponse, 0, Client, false},

	{CodeSkillDisabledAfterDispatch, 0, Run, true},
	{CodeInvalidPayload, 0, Run, true},
	{CodeTimedOut, 0, Run, true},
	{CodeRateLimitQueueTimeout, 0, Run, true},
	{CodeExecutionError, 0, Run, false},
	{CodeRouterUnreachable, 0, Run, false},
	{CodeRouterBadAnswer, 0, Run, false},
	{CodeRouterError, 0, Run, false},
	{CodeNoToolsAvailable, 0, Run, true},
	{CodeLLMEmptyAnswer, 0, Run, true},
	{CodeRejected, 0, Run, true},
	{CodeMaxIterations, 0, Run, true},
	{CodeToolRequiresApproval, 0, Run, false},
	{CodeApprovalTimeout, 0, Run, true},
	{CodeJournalUnavailable, 0, Run, false},
	{CodeChainStepFailed, 0, Run, true},
	{CodeChainForEachInvalid, 0, Run, true},
	{CodeWorkflowFailed, 0, Run, true},
	{CodeWorkflowExpression, 0, Run, true},
	{CodePlanParseFailed, 0, Run, true},
	{CodeAgentStepFailed, 0, Run, true},
	{CodeCostEstimateExceeded, 0, Run, true},
}

// StatusClientClosedRequest is the status of an answer to a caller that went away
// (CANCELLED), after nginx's 499: no standard status says it.
const StatusClientClosedRequest = 499

// Codes returns every code's Spec, in the order of docs/errors.md.
func Codes() []Spec { return slices.Clone(specs) }

// Lookup returns the Spec of code; false for a code that is not in the table.
func Lookup(code string) (Spec, bool) {
	i := slices.IndexFunc(specs, func(s Spec) bool { return s.Code == code })
	if i < 0 {
		return Spec{}, false
	}
	return specs[i], true
}

// Permanent reports whether repeating a request answered with code cannot change the
// answer. An unknown code is not permanent.
func Permanent(code string) bool {
	s, ok := Lookup(code)
	return ok && s.Permanent
}
