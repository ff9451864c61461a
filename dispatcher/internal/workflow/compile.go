package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/chain"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/workflow/expr"
)

// A workflow runs as a chain. Compile turns a workflow and the inputs of one run into a
// chain definition: every step of every job (of every matrix instance) becomes one chain
// step, depending on the step before it in its job, and a job's first step on the last
// steps of the jobs it needs. The workflow itself travels in the definition as the plan
// its Rules read, so a run keeps the workflow it started with.

// Plan is what a compiled workflow's Rules read: the workflow, the run's inputs with
// their defaults, and each matrix job's instances.
type Plan struct {
	Workflow *Workflow                   `json:"workflow"`
	Inputs   map[string]any              `json:"inputs"`
	Matrices map[string][]map[string]any `json:"matrices,omitempty"`
}

// MaxMatrixInstances bounds a job's matrix, as GitHub does.
const MaxMatrixInstances = 256

// Compile builds the chain of one run of w with input (a JSON object of the workflow's
// inputs). A problem with the input or a matrix is returned as field errors naming it.
func Compile(w *Workflow, input json.RawMessage) (*chain.Definition, []apitypes.FieldError) {
	inputs, errs := Inputs(w, input)
	if errs != nil {
		return nil, errs
	}
	p := &Plan{Workflow: w, Inputs: inputs, Matrices: map[string][]map[string]any{}}
	ctx := expr.Context{Named: map[string]any{"inputs": inputs, "vars": map[string]any{}}}
	for _, j := range w.Jobs {
		if j.Matrix == nil {
			continue
		}
		instances, err := j.Matrix.Expand(func(src string) (any, error) {
			return expr.Interpolate(src, []string{"inputs", "vars"}, ctx)
		})
		if err != nil {
			return nil, []apitypes.FieldError{{Field: "jobs." + j.ID + ".strategy.matrix", Rule: "matrix",
				Message: fmt.Sprintf("line %d: %v", j.Matrix.Pos.Line, err)}}
		}
		if len(instances) == 0 {
			return nil, []apitypes.FieldError{{Field: "jobs." + j.ID + ".strategy.matrix", Rule: "matrix",
				Message: fmt.Sprintf("line %d: the matrix has no combination: remove it or give it values", j.Matrix.Pos.Line)}}
		}
		p.Matrices[j.ID] = instances
	}
	plan, err := json.Marshal(p)
	if err != nil {
		return nil, []apitypes.FieldError{{Field: "workflow", Rule: "json", Message: err.Error()}}
	}
	def := &chain.Definition{OnFailure: "continue", Workflow: plan}
	last := map[string][]string{} // job → the last step of each of its instances
	for _, j := range order(w.Jobs) {
		var after []string
		for _, n := range j.Needs {
			after = append(after, last[n]...)
		}
		for _, inst := range p.instances(j) {
			deps := after
			for k, s := range j.Steps {
				id := StepID(j, inst, k)
				st := chain.Step{StepID: id, JobType: s.JobType, DependsOn: slices.Clone(deps), Job: j.ID}
				if inst >= 0 {
					st.Matrix = new(inst)
				}
				def.Steps = append(def.Steps, st)
				deps = []string{id}
			}
			last[j.ID] = append(last[j.ID], deps...)
		}
	}
	if len(def.Steps) > chain.MaxWorkflowSteps {
		return nil, []apitypes.FieldError{{Field: "jobs", Rule: "max", Message: fmt.Sprintf(
			"%d steps once the matrices are expanded: a workflow runs at most %d", len(def.Steps), chain.MaxWorkflowSteps)}}
	}
	return def, nil
}

// instances lists a job's matrix instances by index, or -1 for a job without a matrix.
func (p *Plan) instances(j *Job) []int {
	m, ok := p.Matrices[j.ID]
	if !ok {
		return []int{-1}
	}
	out := make([]int, len(m))
	for i := range m {
		out[i] = i
	}
	return out
}

// StepID names a workflow step in its chain: "job/step", "job/<i>/step" in a matrix job;
// a step without an id is named by its position from 1 (GitHub's ids cannot be digits).
func StepID(j *Job, instance, k int) string {
	key := j.Steps[k].ID
	if key == "" {
		key = strconv.Itoa(k + 1)
	}
	if instance < 0 {
		return j.ID + "/" + key
	}
	return j.ID + "/" + strconv.Itoa(instance) + "/" + key
}

// order sorts jobs so that every job comes after the jobs it needs (file order otherwise).
func order(jobs []*Job) []*Job {
	done := map[string]bool{}
	var out []*Job
	for len(out) < len(jobs) {
		moved := false
		for _, j := range jobs {
			if done[j.ID] || !allDone(j.Needs, done) {
				continue
			}
			done[j.ID], moved = true, true
			out = append(out, j)
		}
		if !moved { // a cycle: the parser refuses these; keep the rest in file order
			for _, j := range jobs {
				if !done[j.ID] {
					done[j.ID] = true
					out = append(out, j)
				}
			}
		}
	}
	return out
}

func allDone(ids []string, done map[string]bool) bool {
	for _, id := range ids {
		if !done[id] {
			return false
		}
	}
	return true
}

// Inputs checks a run's inputs against the workflow's and fills in the defaults: an
// input the workflow does not declare, a required one missing or a value of the wrong
// type is a field error naming "payload.<input>". Strings that spell a boolean or number
// are taken for a boolean or number input, as GitHub's dispatch form sends them.
func Inputs(w *Workflow, input json.RawMessage) (map[string]any, []apitypes.FieldError) {
	given := map[string]any{}
	if t := bytes.TrimSpace(input); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if err := json.Unmarshal(t, &given); err != nil {
			return nil, []apitypes.FieldError{{Field: "payload", Rule: "object",
				Message: "a workflow's payload is a JSON object of its inputs"}}
		}
	}
	var errs []apitypes.FieldError
	out := map[string]any{}
	for name := range given {
		if !slices.ContainsFunc(w.Inputs, func(in Input) bool { return in.Name == name }) {
			declared := make([]string, 0, len(w.Inputs))
			for _, in := range w.Inputs {
				declared = append(declared, in.Name)
			}
			errs = append(errs, apitypes.FieldError{Field: "payload." + name, Rule: "input",
				Message: fmt.Sprintf("the workflow has no input %q (its inputs: %s)", name, strings.Join(declared, ", "))})
		}
	}
	for _, in := range w.Inputs {
		v, ok := given[in.Name]
		if !ok || v == nil {
			if in.Required && in.Default == nil {
				errs = append(errs, apitypes.FieldError{Field: "payload." + in.Name, Rule: "required",
					Message: fmt.Sprintf("input %q is required", in.Name)})
				continue
			}
			v = in.Default
		}
		typed, err := typedInput(in, v)
		if err != nil {
			errs = append(errs, apitypes.FieldError{Field: "payload." + in.Name, Rule: "type", Message: err.Error()})
			continue
		}
		out[in.Name] = typed
	}
	slices.SortFunc(errs, func(a, b apitypes.FieldError) int { return strings.Compare(a.Field, b.Field) })
	return out, errs
}

func typedInput(in Input, v any) (any, error) {
	if v == nil {
		switch in.Type { // an optional input without a default: GitHub gives its zero value
		case "boolean":
			return false, nil
		case "number":
			return 0.0, nil
		}
		return "", nil
	}
	switch in.Type {
	case "boolean":
		switch b := v.(type) {
		case bool:
			return b, nil
		case string:
			if p, err := strconv.ParseBool(b); err == nil && (b == "true" || b == "false") {
				return p, nil
			}
		}
		return nil, fmt.Errorf("input %q is a boolean: want true or false, got %s", in.Name, show(v))
	case "number":
		switch n := v.(type) {
		case float64:
			return n, nil
		case string:
			if f, err := strconv.ParseFloat(strings.TrimSpace(n), 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				return f, nil
			}
		}
		return nil, fmt.Errorf("input %q is a number, got %s", in.Name, show(v))
	case "choice":
		s, ok := v.(string)
		if !ok || !slices.Contains(in.Options, s) {
			return nil, fmt.Errorf("input %q is one of %s, got %s", in.Name, strings.Join(in.Options, ", "), show(v))
		}
		return s, nil
	}
	switch s := v.(type) {
	case string:
		return s, nil
	case bool, float64:
		return expr.String(s), nil
	}
	return nil, fmt.Errorf("input %q is a string, got %s", in.Name, show(v))
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
