package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/workflow"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

// Workflows in the pipeline. A chain skill written as a workflow file is compiled at each
// dispatch, with the dispatch's inputs, into the chain definition the coordinator runs
// (package workflow); from there on it is a chain like any other. The parsed file is kept
// by its text, so a dispatch does not parse it again.

// workflows caches parsed workflow files by organisation and text.
type workflows struct {
	mu     sync.Mutex
	parsed map[string]*workflow.Workflow
}

const maxCachedWorkflows = 512

// ParseWorkflow parses and validates a workflow file for an organisation: its steps must
// call the organisation's skills (known), its runs-on name queues. Problems come back as
// a 400 VALIDATION_FAILED whose fields carry line, column, rule and hint.
func (s *Service) ParseWorkflow(ctx context.Context, src []byte, known func(string) bool) (*workflow.Workflow, error) {
	labels, err := s.Registry.QueueLabels(ctx)
	if err != nil {
		return nil, dbError(err)
	}
	w, problems := workflow.Parse(src, workflow.Options{RunnerLabels: labels, KnownSkill: known})
	if len(problems) > 0 {
		return nil, WorkflowInvalid(problems)
	}
	return w, nil
}

// WorkflowInvalid is the answer to a workflow file with problems: every one a field error
// with its place in the file.
func WorkflowInvalid(problems []workflow.Problem) *apierr.Error {
	fields := make([]apitypes.FieldError, len(problems))
	for i, p := range problems {
		fields[i] = apitypes.FieldError{Field: "workflow:" + strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Column),
			Rule: p.Rule, Message: p.Message, Line: p.Line, Column: p.Column, Hint: p.Hint}
	}
	first := problems[0]
	return apierr.New(http.StatusBadRequest, apierr.CodeValidationFailed,
		fmt.Sprintf("The workflow has %d problem(s); the first, at line %d column %d: %s", len(problems), first.Line, first.Column, first.Message),
		"Fix each problem in fields (line, column, rule, hint) and submit the file again; POST /api/v1/workflows/validate checks a file without running it.").
		With("fields", fields)
}

// workflowDefinition compiles a workflow skill for one dispatch: the chain definition
// (JSON) to record, or a 400 naming what is wrong with the file or the inputs.
func (s *Service) workflowDefinition(ctx context.Context, orgID string, sk skill.Skill, input json.RawMessage, known func(string) bool) (json.RawMessage, error) {
	// By the file's text (and its organisation, whose skills it was checked against): an ad
	// hoc workflow has no skill id or version, and two of them must never share an entry.
	sum := sha256.Sum256([]byte(sk.Workflow))
	key := orgID + ":" + hex.EncodeToString(sum[:])
	s.workflows.mu.Lock()
	w := s.workflows.parsed[key]
	s.workflows.mu.Unlock()
	if w == nil {
		var err error
		if w, err = s.ParseWorkflow(ctx, []byte(sk.Workflow), known); err != nil {
			return nil, err
		}
		s.workflows.mu.Lock()
		if s.workflows.parsed == nil || len(s.workflows.parsed) >= maxCachedWorkflows {
			s.workflows.parsed = map[string]*workflow.Workflow{}
		}
		s.workflows.parsed[key] = w
		s.workflows.mu.Unlock()
	}
	return CompileWorkflow(w, input)
}

// CompileWorkflow compiles a parsed workflow with a run's inputs: a 400 names an input
// that is missing, unknown or of the wrong type.
func CompileWorkflow(w *workflow.Workflow, input json.RawMessage) (json.RawMessage, error) {
	def, errs := workflow.Compile(w, input)
	if errs != nil {
		return nil, apierr.New(http.StatusBadRequest, apierr.CodeValidationFailed,
			fmt.Sprintf("The workflow cannot run with these inputs: %s", errs[0].Message),
			"Send the workflow's inputs as the dispatch's payload, as on.workflow_dispatch.inputs declares them.").
			With("fields", errs)
	}
	raw, err := json.Marshal(def)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	return raw, nil
}
