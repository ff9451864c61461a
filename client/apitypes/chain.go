package apitypes

import (
	"encoding/json"
	"time"
)

// Chain statuses: a chain runs until every step has ended, then is completed, or failed
// (a step failed under abort, or any step failed and the chain ran on), cancelled or
// timed_out.
const (
	ChainRunning   = "running"
	ChainCompleted = "completed"
	ChainFailed    = "failed"
	ChainCancelled = "cancelled"
	ChainTimedOut  = "timed_out"
)

// StepPending is the status of a chain step whose parents have not all ended; once
// dispatched a step has its run's status (held_for_review, queued, running, pending_review,
// completed, failed, rejected, timed_out, cancelled), or skipped (its condition did not hold,
// or a parent failed under skip_dependents).
const StepPending = "pending"

// Chain is GET /api/v1/chains/{chainId}: a chain run, its steps and what it has cost.
type Chain struct {
	ChainID string `json:"chainId"`
	// JobID is the chain's parent run: it ends with the chain, its output the steps' outputs.
	JobID   string `json:"jobId"`
	JobType string `json:"jobType"`
	TraceID string `json:"traceId"`
	Status  string `json:"status"`
	// Progress is 0 to 1, weighted by each step's timeout (seed 004 §5.4).
	Progress       float64  `json:"progress"`
	CostUSD        float64  `json:"costUsd"`
	CostCeilingUSD *float64 `json:"costCeilingUsd,omitempty"`
	OnFailure      string   `json:"onFailure"`
	// RerunOf is the chain this one re-runs (POST /api/v1/chains/{chainId}/rerun).
	RerunOf    string          `json:"rerunOf,omitempty"`
	Error      json.RawMessage `json:"error,omitempty"`
	CreatedAt  time.Time       `json:"createdAt"`
	DeadlineAt *time.Time      `json:"deadlineAt,omitempty"`
	FinishedAt *time.Time      `json:"finishedAt,omitempty"`
	Steps      []ChainStep     `json:"steps"`
	// Workflow is set for a chain written as a workflow: its jobs, the DAG a workflow is
	// drawn as.
	Workflow *WorkflowView `json:"workflow,omitempty"`
}

// WorkflowView is a workflow run's jobs: each with what it needs, its matrix size and,
// once it has ended, its result (success, failure, cancelled or skipped) and outputs.
type WorkflowView struct {
	Name string        `json:"name"`
	Jobs []WorkflowJob `json:"jobs"`
}

// WorkflowJob is one job of a workflow run; its steps are the chain's steps whose Job is
// its ID.
type WorkflowJob struct {
	ID    string   `json:"id"`
	Name  string   `json:"name,omitempty"`
	Needs []string `json:"needs"`
	// Instances is a matrix job's number of instances; absent otherwise.
	Instances *int `json:"instances,omitempty"`
	// Result is empty while the job has not ended. It is the job's conclusion: a job with
	// continue-on-error that failed concludes success (as on GitHub); Outcome tells the
	// truth (failure).
	Result  string         `json:"result,omitempty"`
	Outcome string         `json:"outcome,omitempty"`
	Outputs map[string]any `json:"outputs,omitempty"`
}

// ChainStep is one step of a chain, or one instance of a for_each step.
type ChainStep struct {
	StepID string `json:"stepId"`
	// Instance is the index of a for_each step's instance; absent for other steps and for
	// a for_each step not yet fanned out (or fanned out to no items). Instances is how many
	// instances the step has.
	Instance  *int     `json:"instance,omitempty"`
	Instances *int     `json:"instances,omitempty"`
	JobID     string   `json:"jobId,omitempty"`
	JobType   string   `json:"jobType"`
	Status    string   `json:"status"`
	DependsOn []string `json:"dependsOn"`
	// Attempt counts the step's dispatches (1 + its retries so far); 0 while pending.
	Attempt int `json:"attempt"`
	// Reason says why a step ended without running or as it did: condition (its condition
	// did not hold), parent_failed:<step> (skip_dependents), refused (governance refused its
	// dispatch), no_items (an empty for_each), or the chain's end (cancelled, failed,
	// timed_out) for a step it stopped.
	Reason string `json:"reason,omitempty"`
	// Reused is true when a rerun took this step's output from the chain it re-runs.
	Reused     bool            `json:"reused,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      json.RawMessage `json:"error,omitempty"`
	StartedAt  *time.Time      `json:"startedAt,omitempty"`
	FinishedAt *time.Time      `json:"finishedAt,omitempty"`
	CostUSD    float64         `json:"costUsd"`
	// Job and Matrix place a workflow's step: its job, and its matrix instance's index.
	Job    string `json:"job,omitempty"`
	Matrix *int   `json:"matrix,omitempty"`
}

// ChainSummary is one chain of GET /api/v1/chains (newest first).
type ChainSummary struct {
	ChainID    string     `json:"chainId"`
	JobID      string     `json:"jobId"`
	JobType    string     `json:"jobType"`
	Status     string     `json:"status"`
	Progress   float64    `json:"progress"`
	CostUSD    float64    `json:"costUsd"`
	Steps      int        `json:"steps"`
	RerunOf    string     `json:"rerunOf,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
}

// ChainList is the answer of GET /api/v1/chains; NextCursor pages on.
type ChainList struct {
	Items      []ChainSummary `json:"items"`
	NextCursor string         `json:"nextCursor,omitempty"`
}

// ChainControl is the answer of POST /api/v1/chains/{chainId}/cancel and /rerun: the chain
// acted on (for a rerun, the new one) and its status.
type ChainControl struct {
	ChainID string `json:"chainId"`
	JobID   string `json:"jobId"`
	Status  string `json:"status"`
	// RerunOf is set on a rerun's answer; Reused lists the steps whose outputs it took over.
	RerunOf string   `json:"rerunOf,omitempty"`
	Reused  []string `json:"reused,omitempty"`
}
