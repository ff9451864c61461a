package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/chain"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/workflow/expr"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// Rules run a compiled workflow with GitHub's semantics on the chain engine: a job's and a
// step's `if` (with the implicit success()), `with:` and `env` templates, continue-on-error
// (outcome and conclusion), timeout-minutes (a job or step out of time is cancelled),
// a matrix's fail-fast and max-parallel, and the run's outcome and outputs.
type Rules struct {
	plan  *Plan
	jobs  map[string]*Job
	steps map[string]stepRef
	now   func() time.Time
	// exprs keeps the plan's expressions parsed: the coordinator keeps one Rules per chain
	// and asks it at every transition.
	exprs expr.Cache
}

type stepRef struct {
	job      *Job
	instance int // -1: not a matrix job
	k        int // the step's position in its job
}

// NewRules returns the Rules of a definition Compile built; it satisfies chain.RulesFunc.
func NewRules(def *chain.Definition) (chain.Rules, error) {
	return newRules(def, nil)
}

func newRules(def *chain.Definition, now func() time.Time) (*Rules, error) {
	var p Plan
	if err := json.Unmarshal(def.Workflow, &p); err != nil || p.Workflow == nil {
		return nil, fmt.Errorf("the workflow plan does not decode: %v", err)
	}
	r := &Rules{plan: &p, jobs: map[string]*Job{}, steps: map[string]stepRef{}, now: now}
	for _, j := range p.Workflow.Jobs {
		r.jobs[j.ID] = j
		for _, inst := range p.instances(j) {
			for k := range j.Steps {
				r.steps[StepID(j, inst, k)] = stepRef{job: j, instance: inst, k: k}
			}
		}
	}
	for _, s := range def.Steps {
		if _, ok := r.steps[s.StepID]; !ok {
			return nil, fmt.Errorf("step %q is not in the workflow plan", s.StepID)
		}
	}
	return r, nil
}

func (r *Rules) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now().UTC()
}

// Reasons a workflow step is skipped (chain_steps.reason).
const (
	reasonIf         = "if"          // the step's if is false
	reasonJobIf      = "job_if"      // its job's if is false: the job is skipped
	reasonJobTimeout = "job_timeout" // its job ran out of timeout-minutes: cancelled
)

// Ready holds back a matrix instance's first step while max-parallel instances run.
func (r *Rules) Ready(s *chain.State, step *chain.Step) bool {
	ref := r.steps[step.StepID]
	m := ref.job.Matrix
	if ref.k != 0 || m == nil || m.MaxParallel <= 0 {
		return true
	}
	v := rowsOf(s)
	active := 0
	for _, inst := range r.plan.instances(ref.job) {
		first := v.rows[StepID(ref.job, inst, 0)]
		lastRow := v.rows[StepID(ref.job, inst, len(ref.job.Steps)-1)]
		if first != nil && first.Status != chain.Pending && (lastRow == nil || !ended(lastRow)) {
			active++
		}
	}
	return active < m.MaxParallel
}

// Begin evaluates a step's job if (at its first step), its own if, env and with; the
// step runs on its job's runs-on.
func (r *Rules) Begin(s *chain.State, step *chain.Step) (chain.Decision, error) {
	ref := r.steps[step.StepID]
	j := ref.job
	v := rowsOf(s)
	if ref.k == 0 {
		if run, err := r.jobIf(v, j); err != nil {
			return chain.Decision{}, fail(j.If, "jobs."+j.ID+".if", err)
		} else if !run {
			return chain.Decision{Skip: reasonJobIf}, nil
		}
	} else if first := v.rows[StepID(j, ref.instance, 0)]; first != nil && first.Reason == reasonJobIf {
		return chain.Decision{Skip: reasonJobIf}, nil
	}
	timeout := 0
	if j.TimeoutMinutes > 0 {
		start := r.clock()
		if first := v.rows[StepID(j, ref.instance, 0)]; ref.k > 0 && first != nil && first.StartedAt != nil {
			start = *first.StartedAt
		}
		left := time.Duration(j.TimeoutMinutes*float64(time.Minute)) - r.clock().Sub(start)
		if left <= 0 {
			return chain.Decision{Skip: reasonJobTimeout}, nil
		}
		timeout = int(math.Ceil(left.Seconds()))
	}
	st := j.Steps[ref.k]
	if st.TimeoutMinutes > 0 {
		if t := int(math.Ceil(st.TimeoutMinutes * 60)); timeout == 0 || t < timeout {
			timeout = t
		}
	}
	ctx, names, err := r.stepContext(v, ref, true)
	if err != nil {
		return chain.Decision{}, fail("env", "jobs."+j.ID+".env", err)
	}
	ctx.Status = r.stepStatus(v, ref)
	ok, err := r.exprs.Condition(orSuccess(st.If), names, ctx)
	if err != nil {
		return chain.Decision{}, fail(st.If, r.stepField(ref)+".if", err)
	}
	if !ok {
		return chain.Decision{Skip: reasonIf}, nil
	}
	payload := map[string]any{}
	for k, v := range st.With {
		tmpl, isTemplate := v.(string)
		if !isTemplate {
			payload[k] = v
			continue
		}
		val, err := r.exprs.Interpolate(tmpl, names, ctx)
		if err != nil {
			return chain.Decision{}, fail(tmpl, r.stepField(ref)+".with."+k, err)
		}
		payload[k] = val
	}
	out, err := json.Marshal(payload)
	if err != nil {
		return chain.Decision{}, fail("with", r.stepField(ref)+".with", err)
	}
	return chain.Decision{Payload: out, TimeoutSeconds: timeout, Queue: j.RunsOn}, nil
}

func (r *Rules) stepField(ref stepRef) string {
	return fmt.Sprintf("jobs.%s.steps[%d]", ref.job.ID, ref.k)
}

// fail is a step failure for an expression that could not be evaluated.
func fail(expression, field string, err error) error {
	var ee *expr.Error
	reason := err.Error()
	if errors.As(err, &ee) {
		reason = ee.Message
	}
	b, _ := json.Marshal(map[string]any{"code": apierr.CodeWorkflowExpression,
		"message": fmt.Sprintf("%s: %s", field, reason),
		"context": map[string]any{"expression": expression, "field": field, "reason": reason}})
	return &chain.StepFailure{Body: b}
}

// jobIf evaluates a job's if over the results of the jobs it needs (success(): all of them
// succeeded; failure(): one of its ancestors failed).
func (r *Rules) jobIf(v *view, j *Job) (bool, error) {
	needs := map[string]any{}
	for _, n := range j.Needs {
		needs[n] = r.jobContext(v, r.jobs[n])
	}
	ctx := expr.Context{Named: map[string]any{"inputs": r.plan.Inputs, "vars": map[string]any{}, "needs": needs},
		Status: func(fn string) bool {
			switch fn {
			case "always":
				return true
			case "cancelled":
				return false // a cancelled workflow dispatches nothing more
			case "failure":
				return r.ancestorFailed(v, j, map[string]bool{})
			}
			for _, n := range j.Needs {
				if r.jobResult(v, r.jobs[n]) != "success" {
					return false
				}
			}
			return true
		}}
	return r.exprs.Condition(orSuccess(j.If), []string{"inputs", "vars", "needs"}, ctx)
}

// orSuccess is an if as written, or GitHub's default for none: success().
func orSuccess(cond string) string {
	if strings.TrimSpace(cond) == "" {
		return "success()"
	}
	return cond
}

func (r *Rules) ancestorFailed(v *view, j *Job, seen map[string]bool) bool {
	for _, n := range j.Needs {
		if seen[n] {
			continue
		}
		seen[n] = true
		if r.jobResult(v, r.jobs[n]) == "failure" || r.ancestorFailed(v, r.jobs[n], seen) {
			return true
		}
	}
	return false
}

// stepStatus answers a step's status functions from the steps before it in its job
// instance: success() while none failed or was cancelled, failure() once one failed.
func (r *Rules) stepStatus(v *view, ref stepRef) func(string) bool {
	return func(fn string) bool {
		failed, cancelled := false, false
		for k := range ref.k {
			_, conclusion := r.conclusion(v, stepRef{job: ref.job, instance: ref.instance, k: k})
			failed = failed || conclusion == "failure"
			cancelled = cancelled || conclusion == "cancelled"
		}
		switch fn {
		case "always":
			return true
		case "failure":
			return failed
		case "cancelled":
			return cancelled
		}
		return !failed && !cancelled
	}
}

// The contexts a step's expressions may use.
var stepContexts = []string{"inputs", "env", "vars", "job", "needs", "steps", "matrix", "strategy"}

// stepContext builds the contexts of a step (withStep: with its own env).
func (r *Rules) stepContext(v *view, ref stepRef, withStep bool) (expr.Context, []string, error) {
	j := ref.job
	needs := map[string]any{}
	for _, n := range j.Needs {
		needs[n] = r.jobContext(v, r.jobs[n])
	}
	var matrix map[string]any
	if ref.instance >= 0 {
		matrix = r.plan.Matrices[j.ID][ref.instance]
	}
	if matrix == nil {
		matrix = map[string]any{}
	}
	strategy := map[string]any{"fail-fast": true, "job-index": 0.0, "job-total": 1.0, "max-parallel": 1.0}
	if m := j.Matrix; m != nil {
		total := float64(len(r.plan.Matrices[j.ID]))
		maxPar := total
		if m.MaxParallel > 0 {
			maxPar = float64(min(m.MaxParallel, len(r.plan.Matrices[j.ID])))
		}
		strategy = map[string]any{"fail-fast": m.FailFast, "job-index": float64(ref.instance), "job-total": total, "max-parallel": maxPar}
	}
	steps := map[string]any{}
	for k := range ref.k {
		prev := stepRef{job: j, instance: ref.instance, k: k}
		if id := j.Steps[k].ID; id != "" {
			outcome, conclusion := r.conclusion(v, prev)
			steps[id] = map[string]any{"outputs": outputs(v.rows[StepID(j, ref.instance, k)]),
				"outcome": outcome, "conclusion": conclusion}
		}
	}
	env := map[string]any{}
	ctx := expr.Context{Named: map[string]any{"inputs": r.plan.Inputs, "vars": map[string]any{}, "needs": needs,
		"matrix": matrix, "strategy": strategy, "steps": steps, "env": env,
		"job": map[string]any{"status": r.instanceStatus(v, ref)}}}
	scopes := []map[string]string{r.plan.Workflow.Env, j.Env}
	if withStep {
		scopes = append(scopes, j.Steps[ref.k].Env)
	}
	for _, scope := range scopes {
		next := maps.Clone(env)
		for k, tmpl := range scope {
			v, err := r.exprs.Interpolate(tmpl, stepContexts, ctx)
			if err != nil {
				return ctx, nil, fmt.Errorf("env %s: %w", k, err)
			}
			next[k] = expr.String(v)
		}
		env = next
		ctx.Named["env"] = env
	}
	return ctx, stepContexts, nil
}

// instanceStatus is job.status for a step: failure once a step before it failed.
func (r *Rules) instanceStatus(v *view, ref stepRef) string {
	st := r.stepStatus(v, ref)
	switch {
	case st("cancelled"):
		return "cancelled"
	case st("failure"):
		return "failure"
	}
	return "success"
}

// conclusion is a step's outcome and conclusion, GitHub's words for how it ended before
// and after continue-on-error; "" while it has not ended.
func (r *Rules) conclusion(v *view, ref stepRef) (outcome, conclusion string) {
	row := v.rows[StepID(ref.job, ref.instance, ref.k)]
	if row == nil || !ended(row) {
		return "", ""
	}
	switch row.Status {
	case chain.Completed:
		outcome = "success"
	case chain.Skipped:
		outcome = "skipped"
		if row.Reason == reasonJobTimeout {
			outcome = "cancelled"
		}
	case chain.Cancelled:
		outcome = "cancelled"
	default:
		outcome = "failure"
		if errorCode(row.Error) == apierr.CodeTimedOut {
			outcome = "cancelled" // out of timeout-minutes
		}
	}
	conclusion = outcome
	if outcome == "failure" && ref.job.Steps[ref.k].ContinueOnError {
		conclusion = "success"
	}
	return outcome, conclusion
}

// jobResult is needs.<job>.result, the job's conclusion: its outcome, except that a job
// with continue-on-error whose outcome is failure concludes success — as on GitHub, its
// dependents run and the run does not fail ("" while the job runs).
func (r *Rules) jobResult(v *view, j *Job) string {
	outcome := r.jobOutcome(v, j)
	if outcome == "failure" && j.ContinueOnError {
		return "success"
	}
	return outcome
}

// jobOutcome is how a job ended: failure when an instance's step concluded failure, else
// cancelled when one was cancelled, skipped when the job's if skipped it, success
// otherwise; "" while the job runs.
func (r *Rules) jobOutcome(v *view, j *Job) string {
	result, skipped, all := "success", true, 0
	for _, inst := range r.plan.instances(j) {
		for k := range j.Steps {
			all++
			ref := stepRef{job: j, instance: inst, k: k}
			row := v.rows[StepID(j, inst, k)]
			if row == nil || !ended(row) {
				return ""
			}
			if row.Reason != reasonJobIf {
				skipped = false
			}
			switch _, c := r.conclusion(v, ref); {
			case c == "failure":
				result = "failure"
			case c == "cancelled" && result != "failure":
				result = "cancelled"
			}
		}
	}
	if skipped && all > 0 {
		return "skipped"
	}
	return result
}

// jobContext is needs.<job> (and jobs.<job>): its result and outputs.
func (r *Rules) jobContext(v *view, j *Job) map[string]any {
	if c, ok := v.jobs[j.ID]; ok {
		return c
	}
	c := map[string]any{"result": r.jobResult(v, j), "outputs": r.jobOutputs(v, j)}
	v.jobs[j.ID] = c
	return c
}

// jobOutputs evaluates a job's outputs over its steps; in a matrix job the last instance
// that sets a key non-empty wins. A key that cannot be evaluated is empty, as on GitHub.
func (r *Rules) jobOutputs(v *view, j *Job) map[string]any {
	out := map[string]any{}
	if len(j.Outputs) == 0 {
		return out
	}
	v.outputsEvaluated++
	for _, inst := range r.plan.instances(j) {
		ref := stepRef{job: j, instance: inst, k: len(j.Steps)}
		ctx, names, err := r.stepContext(v, ref, false)
		if err != nil {
			continue
		}
		for key, tmpl := range j.Outputs {
			v, err := r.exprs.Interpolate(tmpl, names, ctx)
			if s := expr.String(v); err == nil && (s != "" || out[key] == nil) {
				out[key] = s
			}
		}
	}
	return out
}

// Ended cancels a fail-fast matrix job's other instances when one of its steps fails.
func (r *Rules) Ended(s *chain.State, row *chain.StepRow) []string {
	ref, ok := r.steps[row.StepID]
	if !ok || ref.instance < 0 || ref.job.Matrix == nil || !ref.job.Matrix.FailFast {
		return nil
	}
	if row.Status != chain.Failed || ref.job.Steps[ref.k].ContinueOnError || ref.job.ContinueOnError {
		return nil
	}
	// Each other instance's current step is cancelled (stopped, if it runs); the steps after
	// it then see cancelled() and are skipped unless their if says always().
	v := rowsOf(s)
	var cancel []string
	for _, inst := range r.plan.instances(ref.job) {
		if inst == ref.instance {
			continue
		}
		for k := range ref.job.Steps {
			id := StepID(ref.job, inst, k)
			if rw := v.rows[id]; rw == nil || !ended(rw) {
				cancel = append(cancel, id)
				break
			}
		}
	}
	return cancel
}

// Outcome ends the workflow: failed when a job that is not continue-on-error failed or
// was cancelled; its output the workflow's outputs and every job's result and outputs.
func (r *Rules) Outcome(s *chain.State) (string, json.RawMessage, json.RawMessage, error) {
	v := rowsOf(s)
	jobs := map[string]any{}
	var failed []string
	for _, j := range r.plan.Workflow.Jobs {
		c := r.jobContext(v, j)
		jobs[j.ID] = c
		if res := c["result"]; res == "failure" || (res == "cancelled" && !j.ContinueOnError) {
			failed = append(failed, j.ID)
		}
	}
	outputs := map[string]any{}
	ctx := expr.Context{Named: map[string]any{"inputs": r.plan.Inputs, "vars": map[string]any{}, "jobs": jobs}}
	for _, o := range r.plan.Workflow.Outputs {
		v, err := r.exprs.Interpolate(o.Value, []string{"inputs", "vars", "jobs"}, ctx)
		if err != nil {
			failed = append(failed, "outputs."+o.Name)
			continue
		}
		outputs[o.Name] = expr.String(v)
	}
	out, err := json.Marshal(map[string]any{"chainId": s.ID, "workflow": r.plan.Workflow.Name, "outputs": outputs, "jobs": jobs})
	if err != nil {
		return "", nil, nil, err
	}
	if len(failed) == 0 {
		return apitypes.ChainCompleted, out, nil, nil
	}
	body, _ := json.Marshal(map[string]any{"code": apierr.CodeWorkflowFailed,
		"message": fmt.Sprintf("job(s) %s did not succeed", strings.Join(failed, ", ")),
		"context": map[string]any{"failed_jobs": failed}})
	return apitypes.ChainFailed, out, body, nil
}

// outputs are steps.<id>.outputs: the step's JSON output keys as strings (objects and
// lists as JSON), its text answer also as `result`.
func outputs(row *chain.StepRow) map[string]any {
	out := map[string]any{}
	if row == nil || row.Status != chain.Completed || len(row.Output) == 0 {
		return out
	}
	var v any
	if json.Unmarshal(row.Output, &v) != nil {
		return out
	}
	switch o := v.(type) {
	case map[string]any:
		for k, val := range o {
			out[k] = expr.String(val)
		}
		if c, ok := o["content"].(string); ok {
			if _, has := out["result"]; !has {
				out["result"] = c
			}
		}
	case string:
		out["result"] = o
	default:
		out["result"] = expr.String(o)
	}
	return out
}

// view is one decision's look at a workflow run: its step rows by id, and the jobs'
// contexts worked out from them (each once: a job's context reads its needs' contexts,
// which in a wide DAG would otherwise be worked out again for every path to them).
type view struct {
	rows map[string]*chain.StepRow
	jobs map[string]map[string]any
	// outputsEvaluated counts the jobs whose outputs were worked out (tests).
	outputsEvaluated int
}

func rowsOf(s *chain.State) *view {
	v := &view{rows: make(map[string]*chain.StepRow, len(s.Steps)), jobs: map[string]map[string]any{}}
	for _, r := range s.Steps {
		if r.Instance == chain.Whole {
			v.rows[r.StepID] = r
		}
	}
	return v
}

func ended(r *chain.StepRow) bool { return r.Status != chain.Pending && r.Status != chain.Dispatched }

func errorCode(body json.RawMessage) string {
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Code
}

// View is a workflow run's jobs as the API shows them, from its chain's state.
func View(def *chain.Definition, s *chain.State) (*apitypes.WorkflowView, error) {
	r, err := newRules(def, nil)
	if err != nil {
		return nil, err
	}
	v := rowsOf(s)
	out := &apitypes.WorkflowView{Name: r.plan.Workflow.Name, Jobs: []apitypes.WorkflowJob{}}
	for _, j := range r.plan.Workflow.Jobs {
		job := apitypes.WorkflowJob{ID: j.ID, Name: j.Name, Needs: append([]string{}, j.Needs...),
			Result: r.jobResult(v, j), Outcome: r.jobOutcome(v, j)}
		if m, ok := r.plan.Matrices[j.ID]; ok {
			job.Instances = new(len(m))
		}
		if job.Result != "" {
			job.Outputs = r.jobOutputs(v, j)
		}
		out.Jobs = append(out.Jobs, job)
	}
	return out, nil
}
