package apitypes

import (
	"encoding/json"
	"time"
)

// Run is one job as GET /api/v1/dispatch/{id} shows it (and the list, the review queue and
// the callback carry it).
type Run struct {
	JobID         string          `json:"jobId"`
	TraceID       string          `json:"traceId"`
	JobType       string          `json:"jobType"`
	SkillVersion  int             `json:"skillVersion"`
	ExecutionType string          `json:"executionType"`
	Status        Status          `json:"status"`
	Queue         string          `json:"queue"`
	Priority      Priority        `json:"priority"`
	UserID        string          `json:"userId"`
	Metadata      json.RawMessage `json:"metadata"`
	Output        json.RawMessage `json:"output"`
	Error         json.RawMessage `json:"error"`
	AttemptErrors json.RawMessage `json:"attemptErrors"`
	Warnings      json.RawMessage `json:"warnings"`
	HoldReasons   []HoldReason    `json:"holdReasons"`
	AuditFlagged  bool            `json:"auditFlagged"`
	Attempts      int             `json:"attempts"`
	ChainID       string          `json:"chainId,omitempty"`
	ChainStep     string          `json:"chainStep,omitempty"`
	BatchID       string          `json:"batchId,omitempty"`
	Timings       Timings         `json:"timings"`
	Billing       Billing         `json:"billing"`
	// ApprovalDeadline is when a run paused for approval (pending_review) times out
	// (APPROVAL_TIMEOUT): set for an autonomous skill with approval_timeout.
	ApprovalDeadline *time.Time `json:"approvalDeadline,omitempty"`
}

// Timings are a run's timestamps and the durations derived from them.
type Timings struct {
	CreatedAt   time.Time  `json:"createdAt"`
	QueuedAt    *time.Time `json:"queuedAt"`
	StartedAt   *time.Time `json:"startedAt"`
	FinishedAt  *time.Time `json:"finishedAt"`
	QueueWaitMS *float64   `json:"queueWaitMs"`
	DurationMS  *float64   `json:"durationMs"`
}

// Billing is what a run has cost so far.
type Billing struct {
	TokensIn     int64   `json:"tokensIn"`
	TokensOut    int64   `json:"tokensOut"`
	TokensCached int64   `json:"tokensCached"`
	CostUSD      float64 `json:"costUsd"`
	LLMCalls     int     `json:"llmCalls"`
}

// HoldReason says why a job was held for review: the governance check, the detector and
// the JSON path that matched, never the matched value.
type HoldReason struct {
	// Check is the governance check, e.g. risk, pii or approval.
	Check    string `json:"check,omitempty"`
	Detector string `json:"detector,omitempty"`
	Path     string `json:"path,omitempty"`
	Message  string `json:"message,omitempty"`
	// Raw is the reason as it was decoded, for members this type does not know; it is
	// encoded as it came, so a reason passes through unchanged.
	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps the raw form beside the known fields; a plain string becomes Message.
func (h *HoldReason) UnmarshalJSON(b []byte) error {
	h.Raw = append(json.RawMessage(nil), b...)
	var s string
	if json.Unmarshal(b, &s) == nil {
		h.Message = s
		return nil
	}
	type plain HoldReason
	return json.Unmarshal(b, (*plain)(h))
}

// MarshalJSON writes the raw form a reason was decoded from, else its fields.
func (h HoldReason) MarshalJSON() ([]byte, error) {
	if len(h.Raw) > 0 {
		return h.Raw, nil
	}
	type plain HoldReason
	return json.Marshal(plain(h))
}
