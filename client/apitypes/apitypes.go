// Package apitypes is the wire form of the dispatcher's public HTTP API (docs/api.md): the
// types its handlers encode and the Go client (package client, beside it) decodes, declared
// once so that the two cannot drift. TestSchemasMatchTypes in dispatcher/internal/api checks
// them against the OpenAPI document the dispatcher serves (dispatcher/internal/api/openapi.json).
//
// It lives in the client's module, which imports no other module of the repository, so that
// a plugin service gets the client with one `go get`; the dispatcher, the shared packages and
// the run store (which the executor uses too) import it from there. It holds data only: no
// I/O, and no import beyond the standard library, so the public client stays light.
package apitypes

// Status is where a run is in its lifecycle.
type Status string

// The run statuses of ARCHITECTURE.md.
const (
	StatusHeldForReview            Status = "held_for_review"
	StatusQueued                   Status = "queued"
	StatusRunning                  Status = "running"
	StatusPendingReview            Status = "pending_review"
	StatusCompleted                Status = "completed"
	StatusCompletedMaxIterations   Status = "completed_max_iterations"
	StatusCompletedBudgetExhausted Status = "completed_budget_exhausted"
	StatusFailed                   Status = "failed"
	StatusTimedOut                 Status = "timed_out"
	StatusCancelled                Status = "cancelled"
	StatusRejected                 Status = "rejected"
	StatusSkipped                  Status = "skipped"
)

// Terminal reports whether a run in status s will not change again.
func (s Status) Terminal() bool {
	switch s {
	case StatusCompleted, StatusCompletedMaxIterations, StatusCompletedBudgetExhausted, StatusFailed,
		StatusTimedOut, StatusCancelled, StatusRejected, StatusSkipped:
		return true
	}
	return false
}

// Priority orders jobs within a named queue.
type Priority string

// The priorities, highest first.
const (
	PriorityCritical Priority = "critical"
	PriorityHigh     Priority = "high"
	PriorityNormal   Priority = "normal"
	PriorityLow      Priority = "low"
)

// StatusAnswer is what cancel, approve and reject answer.
type StatusAnswer struct {
	JobID  string `json:"jobId"`
	Status Status `json:"status"`
	// CancelRequested is true when a running job was asked to stop at its next step
	// (HTTP 202); Status is then still running.
	CancelRequested bool `json:"cancelRequested,omitempty"`
}

// Metadata is what the calling service says about a job (the dispatch request's metadata);
// stored with the run, not trusted.
type Metadata struct {
	SourceService string `json:"source_service,omitempty" validate:"max=128"`
	CorrelationID string `json:"correlation_id,omitempty" validate:"max=256"`
	ParentJobID   string `json:"parent_job_id,omitempty" validate:"omitempty,uuid"`
}

// FieldError is one failing field of a VALIDATION_FAILED answer (its context.fields).
type FieldError struct {
	// Field is the JSON path of the field, e.g. metadata.parent_job_id.
	Field string `json:"field"`
	// Rule is the rule it broke, e.g. required or oneof.
	Rule string `json:"rule"`
	// Message explains the rule.
	Message string `json:"message"`
	// Line and Column place a problem in a file (a workflow), Hint says how to repair it.
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
	Hint   string `json:"hint,omitempty"`
}

// WorkflowCheck is the answer to POST /api/v1/workflows/validate for a valid file.
type WorkflowCheck struct {
	Valid  bool     `json:"valid"`
	Name   string   `json:"name"`
	Inputs []string `json:"inputs"`
	Jobs   []string `json:"jobs"`
	// Steps counts the steps of all jobs, before matrices are expanded.
	Steps int `json:"steps"`
}
