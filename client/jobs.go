package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/switchyard-ai/switchyard/client/apitypes"
)

// Priority orders jobs within a named queue.
type Priority = apitypes.Priority

// The priorities, highest first.
const (
	PriorityCritical = apitypes.PriorityCritical
	PriorityHigh     = apitypes.PriorityHigh
	PriorityNormal   = apitypes.PriorityNormal
	PriorityLow      = apitypes.PriorityLow
)

// Status is where a run is in its lifecycle; Terminal reports whether it will change again.
type Status = apitypes.Status

// The run statuses of ARCHITECTURE.md.
const (
	StatusHeldForReview            = apitypes.StatusHeldForReview
	StatusQueued                   = apitypes.StatusQueued
	StatusRunning                  = apitypes.StatusRunning
	StatusPendingReview            = apitypes.StatusPendingReview
	StatusCompleted                = apitypes.StatusCompleted
	StatusCompletedMaxIterations   = apitypes.StatusCompletedMaxIterations
	StatusCompletedBudgetExhausted = apitypes.StatusCompletedBudgetExhausted
	StatusFailed                   = apitypes.StatusFailed
	StatusTimedOut                 = apitypes.StatusTimedOut
	StatusCancelled                = apitypes.StatusCancelled
	StatusRejected                 = apitypes.StatusRejected
	StatusSkipped                  = apitypes.StatusSkipped
)

// DispatchRequest is the body of POST /api/v1/dispatch.
type DispatchRequest struct {
	// JobType names the skill binding, e.g. demo_llm. Required.
	JobType string `json:"job_type"`
	// Payload is the job's input: any value that encodes as a JSON object, such as a map,
	// a struct or a json.RawMessage. The LLM tiers read "messages" or "prompt". Required.
	Payload any `json:"payload"`
	// UserID is the end user the job is for; per-user rate limits apply to it.
	UserID string `json:"user_id,omitempty"`
	// Priority within the skill's queue; empty means normal.
	Priority Priority `json:"priority,omitempty"`
	// CallbackURL receives a signed POST when the run ends.
	CallbackURL string `json:"callback_url,omitempty"`
	// IdempotencyKey makes a repeated dispatch return the original job; with it set,
	// Dispatch also retries 429 and 503 answers safely.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Metadata is stored with the run for the caller's own correlation.
	Metadata *Metadata `json:"metadata,omitempty"`
}

// Metadata is what the calling service says about a job; stored, not trusted.
type Metadata = apitypes.Metadata

// HoldReason says why a job was held for review: the governance check, the detector and
// the JSON path that matched, never the matched value. Raw keeps the reason as the
// dispatcher sent it, for fields this client does not know.
type HoldReason = apitypes.HoldReason

// DispatchResult is the answer to an accepted dispatch.
type DispatchResult struct {
	JobID             string `json:"jobId"`
	TraceID           string `json:"traceId"`
	Status            Status `json:"status"`
	Queue             string `json:"queue"`
	WSChannel         string `json:"wsChannel"`
	Consumers         int    `json:"consumers"`
	EstimatedPosition int    `json:"estimatedPosition"`
	// EstimatedStartAt is zero while the queue has no measured drain rate.
	EstimatedStartAt time.Time    `json:"estimatedStartAt,omitzero"`
	HoldReasons      []HoldReason `json:"holdReasons"`
	AuditFlagged     bool         `json:"auditFlagged"`
	// Duplicate is true when the idempotency key matched an earlier job (HTTP 200), whose
	// answer this is.
	Duplicate bool `json:"duplicate"`
	// ChainID is set when the job type is a chain skill: the job is the chain's parent run;
	// follow the chain with Chain and WatchChain.
	ChainID string `json:"chainId,omitempty"`
}

// Run is one job as GET /api/v1/dispatch/{id} shows it.
type Run = apitypes.Run

// Timings are a run's timestamps and the durations derived from them.
type Timings = apitypes.Timings

// Billing is what a run has cost so far.
type Billing = apitypes.Billing

// Dispatch submits one job. A repeated idempotency key returns the original job with
// Duplicate set.
func (c *Client) Dispatch(ctx context.Context, req DispatchRequest) (DispatchResult, error) {
	return c.accept(ctx, "/api/v1/dispatch", req, req.IdempotencyKey)
}

// accept posts what starts a run (a dispatch, a workflow run): retried only with an
// idempotency key; 200 is a repeat of the key, answered with the original run.
func (c *Client) accept(ctx context.Context, path string, body any, idempotencyKey string) (DispatchResult, error) {
	var res DispatchResult
	var status int
	err := c.do(ctx, request{method: http.MethodPost, path: path, body: body,
		retryable: idempotencyKey != "", okStatus: &status}, &res)
	if status == http.StatusOK {
		res.Duplicate = true
	}
	return res, err
}

// BatchResult is the answer to a batch: one item per request, in order.
type BatchResult struct {
	BatchID string `json:"batchId"`
	// Accepted and Failed count the items accepted (202 or 200) and refused.
	Accepted int         `json:"accepted"`
	Failed   int         `json:"failed"`
	Items    []BatchItem `json:"items"`
}

// BatchItem is the outcome of one request of a batch: Result when it was accepted
// (Status 202 or 200), Error otherwise.
type BatchItem struct {
	Index  int             `json:"index"`
	Status int             `json:"status"`
	Result *DispatchResult `json:"result,omitempty"`
	Error  *APIError       `json:"error,omitempty"`
}

// UnmarshalJSON fills the item's error status, which the body carries beside it.
func (b *BatchItem) UnmarshalJSON(raw []byte) error {
	type plain BatchItem
	if err := json.Unmarshal(raw, (*plain)(b)); err != nil {
		return err
	}
	if b.Error != nil {
		b.Error.Status = b.Status
	}
	if b.Result != nil && b.Status == http.StatusOK {
		b.Result.Duplicate = true
	}
	return nil
}

// DispatchBatch submits up to 500 jobs; each is validated, governed and answered on its
// own, so one bad item never fails the others. It is retried on 429/503 only when every
// item carries an idempotency key.
func (c *Client) DispatchBatch(ctx context.Context, items []DispatchRequest) (BatchResult, error) {
	retryable := len(items) > 0
	for _, it := range items {
		retryable = retryable && it.IdempotencyKey != ""
	}
	var res BatchResult
	err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/dispatch/batch",
		body: map[string]any{"items": items}, retryable: retryable}, &res)
	return res, err
}

// Get returns one of the organisation's jobs.
func (c *Client) Get(ctx context.Context, jobID string) (Run, error) {
	var r Run
	err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/dispatch/" + pathEscape(jobID), retryable: true}, &r)
	return r, err
}

// Span is one node of a run's execution tree.
type Span struct {
	ID       string `json:"id"`
	RunID    string `json:"runId"`
	TraceID  string `json:"traceId"`
	ChainID  string `json:"chainId,omitempty"`
	ParentID string `json:"parentId,omitempty"`
	// Attempt is the attempt of the run that made the span (1 for the first); 0 for the
	// dispatcher's spans, made before any attempt.
	Attempt int    `json:"attempt,omitempty"`
	Type    string `json:"type"`
	Name    string `json:"name"`
	// Status is running, ok, error, skipped or abandoned (left running by an attempt
	// whose worker died, and closed by the attempt that resumed the run).
	Status     string         `json:"status"`
	StartedAt  time.Time      `json:"startedAt"`
	EndedAt    *time.Time     `json:"endedAt,omitempty"`
	DurationMS *float64       `json:"durationMs,omitempty"`
	Attributes map[string]any `json:"attributes"`
	Billing    *SpanBilling   `json:"billing,omitempty"`
}

// SpanBilling is what an llm_call span cost.
type SpanBilling struct {
	Provider     string  `json:"provider"`
	Model        string  `json:"model"`
	TokensIn     int64   `json:"tokensIn"`
	TokensOut    int64   `json:"tokensOut"`
	TokensCached int64   `json:"tokensCached"`
	CostUSD      float64 `json:"costUsd"`
}

// SpanNode is a span with its children.
type SpanNode struct {
	Span
	Children []*SpanNode `json:"children"`
}

// Spans is a run's spans, flat and as a tree.
type Spans struct {
	JobID   string      `json:"jobId"`
	TraceID string      `json:"traceId"`
	Status  Status      `json:"status"`
	Spans   []Span      `json:"spans"`
	Tree    []*SpanNode `json:"tree"`
}

// Spans returns a job's execution spans.
func (c *Client) Spans(ctx context.Context, jobID string) (Spans, error) {
	var s Spans
	err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/dispatch/" + pathEscape(jobID) + "/spans", retryable: true}, &s)
	return s, err
}

// Event is one journaled event of a run, in the envelope every stream uses.
type Event struct {
	Type  string          `json:"type"`
	JobID string          `json:"job_id"`
	OrgID string          `json:"org_id"`
	Seq   int64           `json:"seq"`
	TS    time.Time       `json:"ts"`
	Data  json.RawMessage `json:"data"`
}

// Terminal reports whether the event ends its run: completed, failed, cancelled, rejected,
// timed out or skipped.
func (e Event) Terminal() bool {
	switch e.Type {
	case "job:completed", "job:failed", "job:cancelled", "job:rejected", "job:timed_out", "job:skipped":
		return true
	}
	return false
}

// Events returns a job's journaled events with seq greater than afterSeq, in order.
func (c *Client) Events(ctx context.Context, jobID string, afterSeq int64) ([]Event, error) {
	var out list[Event]
	err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/dispatch/" + pathEscape(jobID) + "/events",
		query: url.Values{"after": {strconv.FormatInt(afterSeq, 10)}}, retryable: true}, &out)
	return out.items, err
}

// ListOptions filter GET /api/v1/dispatch; zero fields are not sent.
type ListOptions struct {
	Status  Status
	JobType string
	Queue   string
	Since   time.Time
	Until   time.Time
	// Limit is the page size (the dispatcher's default is 50).
	Limit int
	// Cursor continues from a previous page's NextCursor.
	Cursor string
}

func (o ListOptions) values() url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("status", string(o.Status))
	set("job_type", o.JobType)
	set("queue", o.Queue)
	if !o.Since.IsZero() {
		q.Set("since", o.Since.UTC().Format(time.RFC3339Nano))
	}
	if !o.Until.IsZero() {
		q.Set("until", o.Until.UTC().Format(time.RFC3339Nano))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	set("cursor", o.Cursor)
	return q
}

// RunPage is one page of List.
type RunPage struct {
	Items []Run `json:"items"`
	// NextCursor continues the listing; empty on the last page.
	NextCursor string `json:"nextCursor"`
}

// List returns one page of the organisation's jobs, newest first.
func (c *Client) List(ctx context.Context, opts ListOptions) (RunPage, error) {
	var p RunPage
	err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/dispatch", query: opts.values(), retryable: true}, &p)
	return p, err
}

// ListAll iterates over every job matching opts, fetching pages as it goes. It stops at
// the first error, which it yields.
func (c *Client) ListAll(ctx context.Context, opts ListOptions) iter.Seq2[Run, error] {
	return pages(opts.Cursor, func(cursor string) ([]Run, string, error) {
		opts.Cursor = cursor
		page, err := c.List(ctx, opts)
		return page.Items, page.NextCursor, err
	})
}

// StatusAnswer is what cancel, approve and reject answer; CancelRequested is true when a
// running job was asked to stop at its next step (HTTP 202), its Status still running.
type StatusAnswer = apitypes.StatusAnswer

// Cancel cancels a job: a queued one leaves its queue, a held one is cancelled, a running
// one is asked to stop at its next step (CancelRequested; watch it for job:cancelled).
func (c *Client) Cancel(ctx context.Context, jobID string) (StatusAnswer, error) {
	var a StatusAnswer
	err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/dispatch/" + pathEscape(jobID) + "/cancel",
		retryable: true}, &a)
	return a, err
}

// Approve releases a held job to its queue, or resumes one pending review (role approve).
func (c *Client) Approve(ctx context.Context, jobID, reason string) (StatusAnswer, error) {
	var a StatusAnswer
	err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/dispatch/" + pathEscape(jobID) + "/approve",
		body: map[string]string{"reason": reason}}, &a)
	return a, err
}

// Reject ends a held or pending-review job as rejected; the reason is required (role
// approve).
func (c *Client) Reject(ctx context.Context, jobID, reason string) (StatusAnswer, error) {
	var a StatusAnswer
	err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/dispatch/" + pathEscape(jobID) + "/reject",
		body: map[string]string{"reason": reason}}, &a)
	return a, err
}

// Review is a job waiting for a reviewer.
type Review struct {
	Run
	// Payload is the job's input with personal data masked.
	Payload json.RawMessage `json:"payload"`
	// Tools are the tools the job's skill may call.
	Tools []string `json:"tools"`
	// CostCeilingUSD is the job's budget, nil when unlimited.
	CostCeilingUSD *float64 `json:"costCeilingUsd"`
	RiskLevel      string   `json:"riskLevel"`
	// Pending describes what a pending_review job paused for (its job:held event data).
	Pending json.RawMessage `json:"pending,omitempty"`
}

// Reviews lists the held and pending-review jobs (role approve).
func (c *Client) Reviews(ctx context.Context) ([]Review, error) {
	var out list[Review]
	err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/reviews", retryable: true}, &out)
	return out.items, err
}
