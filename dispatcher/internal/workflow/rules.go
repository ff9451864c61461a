package workflow

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/rhysd/actionlint"
)

// The platform's own rules, on top of actionlint's. The principle: a key the platform does
// not carry out is refused, never ignored, because the file's author (often an LLM) wrote
// it expecting GitHub's meaning; a silently dropped `concurrency` or `environment` would
// run something other than what was written. The one exception is `permissions`: it only
// narrows the GITHUB_TOKEN, and a workflow here has no token at all, so the strictest
// permissions are already in force and honouring the key changes nothing.

// Rule names of the platform's problems (actionlint's own keep actionlint's kinds:
// syntax-check, expression, id, job-needs, matrix, runner-label, events, …).
const (
	RuleShellStep      = "shell-step"      // run: steps
	RuleSkillCall      = "skill-call"      // uses: other than ./skills/<job_type>
	RuleUnknownSkill   = "unknown-skill"   // the organisation has no such skill
	RuleUnsupportedKey = "unsupported-key" // container, services, concurrency, …
	RuleTrigger        = "trigger"         // on: other than workflow_dispatch / workflow_call
	RuleContext        = "context"         // secrets, github, runner; hashFiles()
	RuleRunsOn         = "runs-on"         // not one queue or queue class
	RuleStaticValue    = "static-value"    // an expression where a value must be known before the run
	RuleMatrixSize     = "matrix-size"     // more than MaxMatrix instances
	RuleInput          = "input"           // environment inputs; inputs declared twice differently
)

// skillUses is the one form of `uses:` the platform runs; the job type's pattern is the
// registry's (migrations: skills.job_type).
var skillUses = regexp.MustCompile(`^\./skills/([a-z][a-z0-9_.-]{0,127})$`)

// skill checks a step's uses and returns the job type it names ("" when refused).
func (p *parser) skill(uses *actionlint.String) string {
	if uses == nil {
		return ""
	}
	u := uses.Value
	m := skillUses.FindStringSubmatch(u)
	if m == nil {
		what := "a marketplace action"
		switch {
		case strings.HasPrefix(u, "docker://"):
			what = "a container image"
		case strings.HasPrefix(u, "./skills/"):
			what = "not a job type (lower-case letters, digits, '_', '.' and '-', starting with a letter; no version after it)"
		case strings.HasPrefix(u, "./"):
			what = "a local path that is not a skill"
		}
		p.refuse(uses.Pos, RuleSkillCall, fmt.Sprintf("`uses: %s` is %s; a step can only call one of the organisation's skills", u, what),
			"replace it with `uses: ./skills/<job_type>` naming a skill of the catalogue (`yard skills list`), with the skill's payload under `with:`")
		return ""
	}
	jobType := m[1]
	if p.opts.KnownSkill != nil && !p.opts.KnownSkill(jobType) {
		p.refuse(uses.Pos, RuleUnknownSkill, fmt.Sprintf("the organisation has no enabled skill %q that a step can call", jobType),
			"use an llm_only, tool_using or autonomous job type from the organisation's catalogue (`yard skills list`) in `uses: ./skills/<job_type>`, or register the skill first; a chain or workflow skill cannot be a step (chains do not nest)")
	}
	return jobType
}

// unsupportedKeys: why each refused key is refused and how to repair the file.
var unsupportedKeys = map[string]struct{ why, hint string }{
	"run-name":    {"a run is named by its workflow's `name`", "remove `run-name`; set the workflow's `name` instead"},
	"defaults":    {"it only sets defaults for `run:` steps, which the platform refuses", "remove `defaults`"},
	"concurrency": {"runs and jobs are not serialised or cancelled by group", "remove `concurrency`; bound a matrix job's parallelism with `strategy.max-parallel` instead"},
	"secrets":     {"provider credentials stay with the platform and never reach a workflow", "remove `secrets:`; a skill reaches its provider through the platform without a secret in the workflow"},
	"container":   {"steps are skill calls, not processes in a container", "remove `container`; each step runs as the skill it calls"},
	"services":    {"a job cannot start service containers", "remove `services`; reach other systems through a skill's tools"},
	"environment": {"the platform has no deployment environments or their protection rules", "remove `environment`; a step that needs a person's approval calls a skill whose risk level holds it for review"},
	"snapshot":    {"there is no runner image to snapshot", "remove `snapshot`"},
}

// unsupported refuses key at pos.
func (p *parser) unsupported(key string, pos *actionlint.Pos) {
	u := unsupportedKeys[key]
	p.refuse(pos, RuleUnsupportedKey, fmt.Sprintf("`%s` is not supported: %s", key, u.why), u.hint)
}

// workflowKeys refuses the workflow-level keys and triggers the platform does not carry out.
func (p *parser) workflowKeys(w *actionlint.Workflow) {
	if w.RunName != nil {
		p.unsupported("run-name", w.RunName.Pos)
	}
	if w.Defaults != nil {
		p.unsupported("defaults", w.Defaults.Pos)
	}
	if w.Concurrency != nil {
		p.unsupported("concurrency", w.Concurrency.Pos)
	}
	triggers := "write `on: workflow_dispatch:` (with `inputs:`) or `on: workflow_call:` (with `inputs:` and `outputs:`)"
	for _, ev := range w.On {
		switch ev := ev.(type) {
		case *actionlint.WorkflowDispatchEvent:
		case *actionlint.WorkflowCallEvent:
			for _, s := range byPos(ev.Secrets, func(s *actionlint.WorkflowCallEventSecret) *actionlint.Pos { return s.Name.Pos }) {
				p.unsupported("secrets", s.Name.Pos)
			}
		default:
			p.refuse(eventPos(ev), RuleTrigger, fmt.Sprintf("trigger %q is not supported: a workflow runs when it is dispatched", ev.EventName()), triggers)
		}
	}
}

func eventPos(ev actionlint.Event) *actionlint.Pos {
	switch ev := ev.(type) {
	case *actionlint.WebhookEvent:
		return ev.Pos
	case *actionlint.ScheduledEvent:
		return ev.Pos
	case *actionlint.RepositoryDispatchEvent:
		return ev.Pos
	case *actionlint.ImageVersionEvent:
		return ev.Pos
	}
	return nil
}

// jobKeys refuses the job-level keys the platform does not carry out.
func (p *parser) jobKeys(j *actionlint.Job) {
	if j.WorkflowCall != nil && j.WorkflowCall.Uses != nil {
		p.refuse(j.WorkflowCall.Uses.Pos, RuleSkillCall, "a job that calls another workflow (`jobs.<id>.uses`) is not supported",
			"give the job `runs-on` and `steps` calling skills (`uses: ./skills/<job_type>`); to reuse another workflow, copy its jobs into this file — workflows do not nest")
	}
	if j.Container != nil {
		p.unsupported("container", j.Container.Pos)
	}
	if j.Services != nil {
		p.unsupported("services", j.Services.Pos)
	}
	if j.Environment != nil {
		p.unsupported("environment", j.Environment.Pos)
	}
	if j.Concurrency != nil {
		p.unsupported("concurrency", j.Concurrency.Pos)
	}
	if j.Defaults != nil {
		p.unsupported("defaults", j.Defaults.Pos)
	}
	if j.Snapshot != nil && j.Snapshot.ImageName != nil {
		p.unsupported("snapshot", j.Snapshot.ImageName.Pos)
	}
}
