package client

import (
	"context"
	"net/http"

	"github.com/switchyard-ai/switchyard/client/apitypes"
)

// WorkflowCheck is what ValidateWorkflow answers for a valid file. A file with problems
// is an *APIError with code VALIDATION_FAILED whose FieldErrors carry each problem's line,
// column, rule and hint.
type WorkflowCheck = apitypes.WorkflowCheck

// WorkflowRun is an ad hoc workflow run: the file as written and its inputs, plus the
// fields of any dispatch.
type WorkflowRun struct {
	// Workflow is the file's text (GitHub Actions syntax). Required.
	Workflow string `json:"workflow"`
	// Inputs are the workflow's inputs (on.workflow_dispatch.inputs).
	Inputs         map[string]any `json:"inputs,omitempty"`
	UserID         string         `json:"user_id,omitempty"`
	Priority       Priority       `json:"priority,omitempty"`
	CallbackURL    string         `json:"callback_url,omitempty"`
	IdempotencyKey string         `json:"idempotency_key,omitempty"`
	Metadata       *Metadata      `json:"metadata,omitempty"`
}

// ValidateWorkflow checks a workflow file against the organisation's skills and queues
// without running it.
func (c *Client) ValidateWorkflow(ctx context.Context, workflow string) (WorkflowCheck, error) {
	var out WorkflowCheck
	err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/workflows/validate",
		body: map[string]string{"workflow": workflow}, retryable: true}, &out)
	return out, err
}

// RunWorkflow runs a workflow file once (what an agent that wrote one calls). The answer
// is a dispatch's: JobID is the workflow's parent run, ChainID its chain.
func (c *Client) RunWorkflow(ctx context.Context, run WorkflowRun) (DispatchResult, error) {
	return c.accept(ctx, "/api/v1/workflows/run", run, run.IdempotencyKey)
}
