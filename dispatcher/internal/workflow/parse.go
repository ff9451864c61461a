package workflow

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/rhysd/actionlint"
)

// Options are what Parse needs to know of the platform and of the organisation.
type Options struct {
	// RunnerLabels are the names a job's runs-on may give: the registered queues and the
	// queue classes (cpu, gpu). They are actionlint's self-hosted runner labels. The label
	// "any" (each step runs on its skill's own queue) is always accepted.
	RunnerLabels []string
	// KnownSkill reports whether the organisation has the skill jobType. Nil accepts every
	// well-formed job type (a lint without an organisation).
	KnownSkill func(jobType string) bool
}

// AnyQueue is the runs-on label that leaves each step on its skill's own queue.
const AnyQueue = "any"

// Parse reads a workflow file: actionlint's full rule set first (syntax, expressions and
// their contexts, needs, matrix, ids), then the platform's own rules (rules.go). Problems
// come sorted by line and column. The workflow is returned whenever the file is YAML that
// actionlint could read, even with problems, so that a caller may show what it understood;
// a workflow with problems must not run.
func Parse(src []byte, opts Options) (*Workflow, []Problem) {
	labels := append([]string{AnyQueue}, opts.RunnerLabels...)
	cfg := &actionlint.Config{}
	cfg.SelfHostedRunner.Labels = labels

	capture := &captureRule{RuleBase: actionlint.NewRuleBase("switchyard-capture", "keeps the parsed workflow")}
	linter, err := actionlint.NewLinter(io.Discard, &actionlint.LinterOptions{
		OnRulesCreated: func(rules []actionlint.Rule) []actionlint.Rule {
			// The linter applies a config only when it found a file for it: hand ours to
			// every rule here instead (the runner-label rule reads the labels from it).
			for _, r := range rules {
				r.SetConfig(cfg)
			}
			return append(rules, capture)
		},
	})
	if err != nil { // only for invalid options, which are constant here
		panic(fmt.Sprintf("workflow: actionlint options: %v", err))
	}
	// "<stdin>" keeps actionlint from looking for a repository around a path.
	errs, err := linter.Lint("<stdin>", src, nil)
	if err != nil {
		return nil, []Problem{{Line: 1, Column: 1, Rule: "internal", Message: "the file could not be checked: " + err.Error(),
			Hint: "check that the file is a YAML workflow and try again"}}
	}
	var problems []Problem
	for _, e := range errs {
		// actionlint gives column 0 for some YAML errors; a Problem's column is 1-based.
		problems = append(problems, Problem{Line: max(e.Line, 1), Column: max(e.Column, 1), Rule: e.Kind, Message: e.Message, Hint: actionlintHint(e)})
	}
	if capture.wf == nil {
		sortProblems(problems)
		return nil, problems
	}

	p := &parser{src: src, opts: opts, labels: labels, values: indexYAML(src)}
	wf := p.workflow(capture.wf)
	problems = append(problems, p.problems...)
	refused := checkContexts(p.values.root)
	// A refused context that actionlint also found wanting ("property x is not defined")
	// is reported once, with the platform's hint.
	problems = slices.DeleteFunc(problems, func(q Problem) bool {
		return q.Rule == "expression" && slices.ContainsFunc(refused, func(r Problem) bool { return r.Line == q.Line && r.Column == q.Column })
	})
	problems = append(problems, refused...)
	sortProblems(problems)
	return wf, problems
}

func sortProblems(ps []Problem) {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
}

// captureRule is an actionlint pass that only keeps the syntax tree, so that the file is
// parsed once for the rules and the model.
type captureRule struct {
	actionlint.RuleBase
	wf *actionlint.Workflow
}

func (r *captureRule) VisitWorkflowPre(w *actionlint.Workflow) error {
	r.wf = w
	return nil
}

// parser builds the model from actionlint's tree and collects the platform's problems.
type parser struct {
	src      []byte
	opts     Options
	labels   []string
	values   *yamlIndex
	problems []Problem
}

func (p *parser) refuse(pos *actionlint.Pos, rule, msg, hint string) {
	line, col := 1, 1
	if pos != nil {
		line, col = pos.Line, pos.Col
	}
	p.problems = append(p.problems, Problem{Line: line, Column: col, Rule: rule, Message: msg, Hint: hint})
}

func posOf(pos *actionlint.Pos) Pos {
	if pos == nil {
		return Pos{}
	}
	return Pos{Line: pos.Line, Col: pos.Col}
}

func str(s *actionlint.String) string {
	if s == nil {
		return ""
	}
	return s.Value
}

// byPos sorts actionlint's maps (keyed by lower-cased names) back into file order.
func byPos[T any](m map[string]T, pos func(T) *actionlint.Pos) []T {
	out := make([]T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b T) int {
		pa, pb := pos(a), pos(b)
		if pa == nil || pb == nil {
			return 0
		}
		return cmp.Or(cmp.Compare(pa.Line, pb.Line), cmp.Compare(pa.Col, pb.Col))
	})
	return out
}

func (p *parser) workflow(w *actionlint.Workflow) *Workflow {
	wf := &Workflow{Name: str(w.Name)}
	p.workflowKeys(w)
	for _, ev := range w.On {
		switch ev := ev.(type) {
		case *actionlint.WorkflowDispatchEvent:
			for _, in := range byPos(ev.Inputs, func(i *actionlint.DispatchInput) *actionlint.Pos { return i.Name.Pos }) {
				p.addInput(wf, p.dispatchInput(in))
			}
		case *actionlint.WorkflowCallEvent:
			for _, in := range ev.Inputs {
				p.addInput(wf, p.callInput(in))
			}
			for _, out := range byPos(ev.Outputs, func(o *actionlint.WorkflowCallEventOutput) *actionlint.Pos { return o.Name.Pos }) {
				wf.Outputs = append(wf.Outputs, Output{Name: str(out.Name), Description: str(out.Description), Value: str(out.Value), Pos: posOf(out.Name.Pos)})
			}
		}
	}
	wf.Env = p.env(w.Env)
	for _, j := range byPos(w.Jobs, func(j *actionlint.Job) *actionlint.Pos { return j.Pos }) {
		wf.Jobs = append(wf.Jobs, p.job(j))
	}
	return wf
}

// addInput adds an input; one declared under both triggers must be declared alike.
func (p *parser) addInput(wf *Workflow, in Input) {
	for _, have := range wf.Inputs {
		if !strings.EqualFold(have.Name, in.Name) {
			continue
		}
		if have.Type != in.Type || have.Required != in.Required || have.Default != in.Default {
			p.refuse(&actionlint.Pos{Line: in.Pos.Line, Col: in.Pos.Col}, "input",
				fmt.Sprintf("input %q is declared under workflow_dispatch and workflow_call with a different type, required or default", in.Name),
				fmt.Sprintf("declare input %q with the same type, required and default under both triggers, or keep it under one of them", in.Name))
		}
		return
	}
	wf.Inputs = append(wf.Inputs, in)
}

func (p *parser) dispatchInput(in *actionlint.DispatchInput) Input {
	out := Input{Name: str(in.Name), Description: str(in.Description), Pos: posOf(in.Name.Pos)}
	if in.Required != nil {
		out.Required = in.Required.Value
	}
	switch in.Type {
	case actionlint.WorkflowDispatchEventInputTypeBoolean:
		out.Type = "boolean"
	case actionlint.WorkflowDispatchEventInputTypeNumber:
		out.Type = "number"
	case actionlint.WorkflowDispatchEventInputTypeChoice:
		out.Type = "choice"
	case actionlint.WorkflowDispatchEventInputTypeEnvironment:
		out.Type = "environment"
		p.refuse(in.Name.Pos, "input", fmt.Sprintf("input %q has type environment; the platform has no deployment environments", out.Name),
			fmt.Sprintf("give input %q type string (or choice with options) instead of environment", out.Name))
	default:
		out.Type = "string"
	}
	for _, o := range in.Options {
		out.Options = append(out.Options, o.Value)
	}
	out.Default = p.inputDefault(out, in.Default)
	return out
}

func (p *parser) callInput(in *actionlint.WorkflowCallEventInput) Input {
	out := Input{Name: str(in.Name), Description: str(in.Description), Required: in.IsRequired(), Pos: posOf(in.Name.Pos)}
	switch in.Type {
	case actionlint.WorkflowCallEventInputTypeBoolean:
		out.Type = "boolean"
	case actionlint.WorkflowCallEventInputTypeNumber:
		out.Type = "number"
	default:
		out.Type = "string"
	}
	out.Default = p.inputDefault(out, in.Default)
	return out
}

// inputDefault types a default as its input's type. actionlint has already said when a
// default does not fit its type; an unreadable one is left as written.
func (p *parser) inputDefault(in Input, def *actionlint.String) any {
	if def == nil {
		return nil
	}
	switch in.Type {
	case "boolean":
		if b, err := strconv.ParseBool(strings.ToLower(strings.TrimSpace(def.Value))); err == nil {
			return b
		}
	case "number":
		if f, err := strconv.ParseFloat(strings.TrimSpace(def.Value), 64); err == nil {
			return f
		}
	}
	return def.Value
}

func (p *parser) env(e *actionlint.Env) map[string]string {
	if e == nil {
		return nil
	}
	if e.Expression != nil {
		p.refuse(e.Expression.Pos, "unsupported-key", "env given as one expression is not supported",
			"write env as a mapping of names to values, e.g. `env: {TOPIC: ${{ inputs.topic }}}`")
		return nil
	}
	out := make(map[string]string, len(e.Vars))
	for _, v := range e.Vars {
		out[str(v.Name)] = str(v.Value)
	}
	return out
}

func (p *parser) job(j *actionlint.Job) *Job {
	job := &Job{ID: str(j.ID), Name: str(j.Name), If: unwrap(str(j.If)), Pos: posOf(j.Pos)}
	p.jobKeys(j)
	for _, n := range j.Needs {
		job.Needs = append(job.Needs, n.Value)
	}
	job.RunsOn = p.runsOn(j)
	job.Env = p.env(j.Env)
	if len(j.Outputs) > 0 {
		job.Outputs = make(map[string]string, len(j.Outputs))
		for _, o := range j.Outputs {
			job.Outputs[str(o.Name)] = str(o.Value)
		}
	}
	job.TimeoutMinutes = p.staticFloat(j.TimeoutMinutes, "timeout-minutes")
	job.ContinueOnError = p.staticBool(j.ContinueOnError, "continue-on-error", false)
	if j.Strategy != nil && j.Strategy.Matrix != nil {
		job.Matrix = p.matrix(j.Strategy)
	}
	for _, s := range j.Steps {
		job.Steps = append(job.Steps, p.step(s))
	}
	return job
}

// runsOn is the job's one label. "any" (each skill's own queue) is the model's "".
func (p *parser) runsOn(j *actionlint.Job) string {
	r := j.RunsOn
	if r == nil {
		return "" // actionlint reports a missing runs-on
	}
	hint := fmt.Sprintf("write one label: `runs-on: %s` for each skill's own queue", AnyQueue)
	if len(p.labels) > 1 {
		hint += ", or one of: " + strings.Join(p.labels[1:], ", ")
	}
	if r.LabelsExpr != nil {
		p.refuse(r.LabelsExpr.Pos, "runs-on", "runs-on given as an expression is not supported: the queue must be known before the run", hint)
		return ""
	}
	if r.Group != nil {
		p.refuse(r.Group.Pos, "runs-on", "runner groups are not supported", hint)
		return ""
	}
	if len(r.Labels) != 1 {
		var pos *actionlint.Pos
		if len(r.Labels) > 1 {
			pos = r.Labels[1].Pos
		}
		p.refuse(cmp.Or(pos, j.Pos), "runs-on", "runs-on must name exactly one queue or queue class", hint)
		return ""
	}
	l := r.Labels[0]
	if l.ContainsExpression() {
		p.refuse(l.Pos, "runs-on", "runs-on given as an expression is not supported: the queue must be known before the run", hint)
		return ""
	}
	if !slices.Contains(p.labels, l.Value) {
		p.refuse(l.Pos, "runs-on", fmt.Sprintf("runs-on %q is not a queue or queue class of the platform", l.Value), hint)
		return ""
	}
	if l.Value == AnyQueue {
		return ""
	}
	return l.Value
}

// staticFloat reads a number the platform must know before the run.
func (p *parser) staticFloat(f *actionlint.Float, key string) float64 {
	if f == nil {
		return 0
	}
	if f.Expression != nil {
		p.refuse(f.Expression.Pos, "static-value", key+" given as an expression is not supported",
			fmt.Sprintf("write %s as a number, e.g. `%s: 10`", key, key))
		return 0
	}
	return f.Value
}

func (p *parser) staticBool(b *actionlint.Bool, key string, def bool) bool {
	if b == nil {
		return def
	}
	if b.Expression != nil {
		p.refuse(b.Expression.Pos, "static-value", key+" given as an expression is not supported",
			fmt.Sprintf("write %s as true or false", key))
		return def
	}
	return b.Value
}

func (p *parser) step(s *actionlint.Step) *Step {
	st := &Step{ID: str(s.ID), Name: str(s.Name), If: unwrap(str(s.If)), Pos: posOf(s.Pos)}
	st.Env = p.env(s.Env)
	st.TimeoutMinutes = p.staticFloat(s.TimeoutMinutes, "timeout-minutes")
	st.ContinueOnError = p.staticBool(s.ContinueOnError, "continue-on-error", false)
	switch ex := s.Exec.(type) {
	case *actionlint.ExecRun:
		p.refuse(cmp.Or(ex.RunPos, s.Pos), "shell-step", "`run:` steps are refused: there is no shell in a governed platform",
			"replace `run:` with a skill call: `uses: ./skills/<job_type>` and its payload under `with:`")
	case *actionlint.ExecAction:
		st.Uses = str(ex.Uses)
		st.JobType = p.skill(ex.Uses)
		if len(ex.Inputs) > 0 {
			st.With = make(map[string]any, len(ex.Inputs))
			for _, in := range ex.Inputs {
				st.With[str(in.Name)] = p.values.scalar(in.Value)
			}
		}
	}
	return st
}

// unwrap drops an if's optional ${{ }} wrapper.
func unwrap(s string) string {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "${{") && strings.HasSuffix(t, "}}") && strings.Count(t, "${{") == 1 {
		return strings.TrimSpace(t[3 : len(t)-2])
	}
	return s
}
