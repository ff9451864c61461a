package api

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/dispatch"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/workflow"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

// Workflows submitted as files: what an agent that wrote a workflow calls. validate
// answers every problem with its line, column, rule and a hint; run dispatches the file
// once, governed like a registered workflow (its steps call the organisation's skills,
// each step passes governance, the organisation's limits apply).

// workflowRequest is the body of both calls: the file, and for run the dispatch's fields.
type workflowRequest struct {
	Workflow       string             `json:"workflow" validate:"required,max=1000000"`
	Inputs         json.RawMessage    `json:"inputs"`
	UserID         string             `json:"user_id" validate:"max=256"`
	CallbackURL    string             `json:"callback_url" validate:"omitempty,max=2048,httpurl"`
	Priority       string             `json:"priority" validate:"omitempty,oneof=critical high normal low"`
	IdempotencyKey string             `json:"idempotency_key" validate:"omitempty,max=256,printascii"`
	Metadata       *apitypes.Metadata `json:"metadata"`
}

func (s *Server) parseWorkflow(c echo.Context) (*workflow.Workflow, workflowRequest, error) {
	var req workflowRequest
	if err := dispatch.Decode(c.Request().Body, s.Validator, &req); err != nil {
		return nil, req, err
	}
	ctx := c.Request().Context()
	skills, err := skill.List(ctx, s.DB, principal(c).OrgID)
	if err != nil {
		return nil, req, dispatchDBError(err)
	}
	known := map[string]bool{}
	for _, sk := range skills {
		known[sk.JobType] = sk.Callable()
	}
	w, err := s.Dispatch.ParseWorkflow(ctx, []byte(req.Workflow), func(jt string) bool { return known[jt] })
	return w, req, err
}

func (s *Server) validateWorkflow(c echo.Context) error {
	w, _, err := s.parseWorkflow(c)
	if err != nil {
		return err
	}
	jobs, steps := make([]string, len(w.Jobs)), 0
	for i, j := range w.Jobs {
		jobs[i] = j.ID
		steps += len(j.Steps)
	}
	inputs := make([]string, len(w.Inputs))
	for i, in := range w.Inputs {
		inputs[i] = in.Name
	}
	return c.JSON(http.StatusOK, apitypes.WorkflowCheck{Valid: true, Name: w.Name, Jobs: jobs, Steps: steps, Inputs: inputs})
}

func (s *Server) runWorkflow(c echo.Context) error {
	w, req, err := s.parseWorkflow(c)
	if err != nil {
		return err
	}
	inputs := req.Inputs
	if len(inputs) == 0 || string(inputs) == "null" {
		inputs = json.RawMessage(`{}`)
	}
	jobType := AdHocJobType(w.Name)
	sk := skill.Skill{JobType: jobType, Enabled: true, ExecutionType: "chain", Workflow: req.Workflow,
		Description: "ad hoc workflow " + w.Name}
	sk.Defaults()
	res, err := s.Dispatch.Dispatch(c.Request().Context(), principal(c), dispatch.Request{JobType: jobType,
		UserID: req.UserID, Payload: inputs, CallbackURL: req.CallbackURL, Priority: req.Priority,
		IdempotencyKey: req.IdempotencyKey, Metadata: req.Metadata}, dispatch.Options{AdHoc: &sk})
	if err != nil {
		return err
	}
	return accepted(c, res)
}

var notJobType = regexp.MustCompile(`[^a-z0-9_.-]+`)

// AdHocJobType is the job type an ad hoc workflow's run is recorded under:
// "adhoc.<its name>", lower-cased, other characters as "-".
func AdHocJobType(name string) string {
	slug := strings.Trim(notJobType.ReplaceAllString(strings.ToLower(name), "-"), "-.")
	if slug == "" {
		slug = "workflow"
	}
	return ("adhoc." + slug)[:min(128, len("adhoc.")+len(slug))]
}
