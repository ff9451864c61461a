// Package chain holds what the dispatcher knows of chains (Tier 3): a chain skill's
// definition — a DAG of governed steps — and its validation, which runs when the skill is
// saved and again when it is dispatched.
//
// The coordinator that runs chains is not built yet (issue 19); until it is, chain skills
// are refused at dispatch with UNSUPPORTED_EXECUTION_TYPE.
package chain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/switchyard-ai/switchyard/client/apitypes"
)

// Definition is a chain skill's `chain` block.
type Definition struct {
	Steps []Step `json:"steps"`
	// OnFailure is what a failed step does to the rest: abort (the default) cancels every
	// step not yet ended, skip_dependents skips what depends on it, continue runs on.
	OnFailure string `json:"on_failure,omitempty"`
	// MaxStepRetries is how often a failed step is dispatched again before OnFailure applies.
	MaxStepRetries int `json:"max_step_retries,omitempty"`
	// TimeoutSeconds bounds the whole chain; 0: the steps' own timeouts only.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// CostCeilingUSD bounds what all of the chain's steps may spend together.
	CostCeilingUSD *float64 `json:"cost_ceiling_usd,omitempty"`
	// Workflow is set on a chain compiled from a workflow file (package workflow): the
	// plan its Rules read. Such a chain's steps are the compiler's ("job/step",
	// "job/<i>/step" for a matrix instance), its on_failure is continue, and its steps'
	// if and payload are the Rules' to decide.
	Workflow json.RawMessage `json:"workflow,omitempty"`
}

// Step is one node of the DAG: a dispatch of JobType once its parents have ended.
type Step struct {
	StepID    string          `json:"step_id"`
	JobType   string          `json:"job_type"`
	DependsOn []string        `json:"depends_on,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	// OutputMapping copies a parent's output into this step's payload:
	// "<parent>.output.<path>" → "payload.<path>".
	OutputMapping map[string]string `json:"output_mapping,omitempty"`
	// Condition runs the step only when it holds on a parent's output; otherwise the step
	// is skipped.
	Condition      *Condition `json:"condition,omitempty"`
	TimeoutSeconds int        `json:"timeout_seconds,omitempty"`
	// ForEach fans the step out: one instance per item of "<parent>.output.<list path>"
	// (or of "input.<list path>", a list in the chain's input),
	// at most MaxItems (required with ForEach); the join waits for every instance.
	ForEach  string `json:"for_each,omitempty"`
	MaxItems int    `json:"max_items,omitempty"`
	// Job and Matrix place a workflow's step: its job's id and, in a matrix job, the
	// instance's index (nil otherwise).
	Job    string `json:"job,omitempty"`
	Matrix *int   `json:"matrix,omitempty"`
}

// Condition compares a field of a parent's output with a value.
type Condition struct {
	// Field is "<parent>.output.<path>".
	Field    string          `json:"field"`
	Operator string          `json:"operator"`
	Value    json.RawMessage `json:"value,omitempty"`
}

// Limits of a definition: a chain is a plan a person or an agent can read, and every
// instance of a fan-out is a governed dispatch.
const (
	MaxSteps = 256
	// MaxWorkflowSteps bounds a compiled workflow: every job's steps times its matrix
	// instances (at most 256 per job).
	MaxWorkflowSteps  = 4096
	MaxFanOut         = 1000
	MaxStepRetries    = 10
	MaxTimeoutSeconds = 7 * 24 * 3600
)

var (
	stepIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	// A workflow's step ids are built by its compiler from GitHub's job and step ids.
	workflowStepIDPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_./-]{0,254}$`)
	onFailures            = []string{"abort", "skip_dependents", "continue"}
	operators             = []string{"eq", "neq", "gt", "lt", "contains", "exists"}
)

// Parse decodes and validates a chain block. known tells whether a job type names a skill
// the organisation has (nil: not checked). It returns every problem found, each naming its
// field under "chain", or the definition with OnFailure defaulted.
func Parse(raw json.RawMessage, known func(jobType string) bool) (*Definition, []apitypes.FieldError) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, []apitypes.FieldError{{Field: "chain", Rule: "required",
			Message: "a skill with execution_type chain needs a chain block with its steps"}}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var d Definition
	if err := dec.Decode(&d); err != nil {
		return nil, []apitypes.FieldError{{Field: "chain", Rule: "json",
			Message: "the chain block is not a valid definition: " + strings.TrimPrefix(err.Error(), "json: ")}}
	}
	if d.OnFailure == "" {
		d.OnFailure = "abort"
	}
	v := validator{d: &d, known: known, index: map[string]int{}}
	v.check()
	if len(v.errs) > 0 {
		return nil, v.errs
	}
	return &d, nil
}

type validator struct {
	d     *Definition
	known func(string) bool
	index map[string]int // step id → position
	errs  []apitypes.FieldError
}

func (v *validator) add(field, rule, format string, args ...any) {
	v.errs = append(v.errs, apitypes.FieldError{Field: field, Rule: rule, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) check() {
	d := v.d
	if !slices.Contains(onFailures, d.OnFailure) {
		v.add("chain.on_failure", "oneof", "on_failure %q: want one of %s", d.OnFailure, strings.Join(onFailures, ", "))
	}
	if d.MaxStepRetries < 0 || d.MaxStepRetries > MaxStepRetries {
		v.add("chain.max_step_retries", "range", "max_step_retries %d: want 0 to %d", d.MaxStepRetries, MaxStepRetries)
	}
	if d.TimeoutSeconds < 0 || d.TimeoutSeconds > MaxTimeoutSeconds {
		v.add("chain.timeout_seconds", "range", "timeout_seconds %d: want 0 (none) to %d", d.TimeoutSeconds, MaxTimeoutSeconds)
	}
	if d.CostCeilingUSD != nil && *d.CostCeilingUSD < 0 {
		v.add("chain.cost_ceiling_usd", "min", "cost_ceiling_usd must not be negative")
	}
	maxSteps, idPattern := MaxSteps, stepIDPattern
	if d.Workflow != nil {
		maxSteps, idPattern = MaxWorkflowSteps, workflowStepIDPattern
	}
	switch n := len(d.Steps); {
	case n == 0:
		v.add("chain.steps", "required", "a chain needs at least one step")
		return
	case n > maxSteps:
		v.add("chain.steps", "max", "%d steps: a chain has at most %d", n, maxSteps)
		return
	}
	for i, s := range d.Steps {
		f := fmt.Sprintf("chain.steps[%d].step_id", i)
		switch {
		case !idPattern.MatchString(s.StepID):
			v.add(f, "step_id", "step_id %q: want 1-64 of a-z, 0-9, _ and -, starting with a letter or digit", s.StepID)
		case v.index[s.StepID] > 0:
			v.add(f, "unique", "step_id %q is used by chain.steps[%d] too", s.StepID, v.index[s.StepID]-1)
		default:
			v.index[s.StepID] = i + 1 // 0 means absent
		}
	}
	for i := range d.Steps {
		v.checkStep(i)
	}
	if len(v.errs) == 0 {
		v.checkCycles()
	}
}

func (v *validator) checkStep(i int) {
	s := &v.d.Steps[i]
	at := fmt.Sprintf("chain.steps[%d]", i)
	switch {
	case s.JobType == "":
		v.add(at+".job_type", "required", "every step names the job_type it dispatches")
	case v.known != nil && !v.known(s.JobType):
		v.add(at+".job_type", "known", "job_type %q is not an enabled skill of this organisation that a step can run (a chain or workflow skill cannot be a step: chains do not nest)", s.JobType)
	}
	parents := map[string]bool{}
	for j, p := range s.DependsOn {
		f := fmt.Sprintf("%s.depends_on[%d]", at, j)
		switch {
		case p == s.StepID:
			v.add(f, "self", "step %q depends on itself", p)
		case v.index[p] == 0:
			v.add(f, "step", "depends_on %q: no step has that step_id", p)
		case parents[p]:
			v.add(f, "unique", "depends_on %q is listed twice", p)
		}
		parents[p] = true
	}
	if len(s.Payload) > 0 {
		var obj map[string]json.RawMessage
		if json.Unmarshal(s.Payload, &obj) != nil {
			v.add(at+".payload", "object", "a step's payload is a JSON object")
		}
	}
	keys := make([]string, 0, len(s.OutputMapping))
	for k := range s.OutputMapping {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, from := range keys {
		f := fmt.Sprintf("%s.output_mapping[%q]", at, from)
		v.checkParentRef(f, from, parents)
		if to := s.OutputMapping[from]; !strings.HasPrefix(to, "payload.") || len(to) == len("payload.") {
			v.add(f, "target", "maps to %q: want \"payload.<path>\"", to)
		}
	}
	if c := s.Condition; c != nil {
		v.checkParentRef(at+".condition.field", c.Field, parents)
		switch {
		case !slices.Contains(operators, c.Operator):
			v.add(at+".condition.operator", "oneof", "operator %q: want one of %s", c.Operator, strings.Join(operators, ", "))
		case c.Operator != "exists" && len(c.Value) == 0:
			v.add(at+".condition.value", "required", "operator %s compares with a value", c.Operator)
		}
	}
	if s.ForEach != "" {
		if path, ok := strings.CutPrefix(s.ForEach, "input."); !ok || path == "" {
			v.checkParentRef(at+".for_each", s.ForEach, parents)
		}
		if s.MaxItems < 1 || s.MaxItems > MaxFanOut {
			v.add(at+".max_items", "range", "max_items %d: a for_each step needs 1 to %d — the most instances it may become", s.MaxItems, MaxFanOut)
		}
	} else if s.MaxItems != 0 {
		v.add(at+".max_items", "for_each", "max_items bounds a for_each fan-out; this step has no for_each")
	}
	if s.TimeoutSeconds < 0 || s.TimeoutSeconds > MaxTimeoutSeconds {
		v.add(at+".timeout_seconds", "range", "timeout_seconds %d: want 0 (the skill's own) to %d", s.TimeoutSeconds, MaxTimeoutSeconds)
	}
}

// checkParentRef checks a "<parent>.output.<path>" reference: the parent must be one the
// step depends on, since only a parent's output exists when the step starts.
func (v *validator) checkParentRef(field, ref string, parents map[string]bool) {
	step, path, ok := strings.Cut(ref, ".output.")
	switch {
	case !ok || step == "" || path == "":
		v.add(field, "reference", "%q: want \"<step>.output.<path>\"", ref)
	case !parents[step]:
		v.add(field, "parent", "%q reads step %q, which this step does not depend on", ref, step)
	}
}

// checkCycles reports one cycle per step that starts one, naming its path.
func (v *validator) checkCycles() {
	const (
		unseen = iota
		open
		done
	)
	state := make([]int, len(v.d.Steps))
	var path []string
	var visit func(i int) bool
	visit = func(i int) bool {
		state[i] = open
		path = append(path, v.d.Steps[i].StepID)
		for _, p := range v.d.Steps[i].DependsOn {
			j := v.index[p] - 1
			switch state[j] {
			case open:
				start := slices.Index(path, p)
				cycle := append(slices.Clone(path[start:]), p)
				slices.Reverse(cycle) // dependency order: what runs first comes first
				v.add(fmt.Sprintf("chain.steps[%d].depends_on", i), "cycle", "a cycle: %s", strings.Join(cycle, " → "))
				return true
			case unseen:
				if visit(j) {
					return true
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = done
		return false
	}
	for i := range v.d.Steps {
		if state[i] == unseen && visit(i) {
			return // one cycle is enough to name; fixing it may change the rest
		}
	}
}

// Roots are the steps that depend on nothing: the ones a chain starts with.
func (d *Definition) Roots() []string {
	var roots []string
	for _, s := range d.Steps {
		if len(s.DependsOn) == 0 {
			roots = append(roots, s.StepID)
		}
	}
	return roots
}
