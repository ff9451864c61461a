package workflow

import (
	"strings"

	"github.com/rhysd/actionlint"
)

// actionlintHint phrases a repair for one of actionlint's problems, by its kind; the
// message itself (actionlint's) says what is wrong.
func actionlintHint(e *actionlint.Error) string {
	switch e.Kind {
	case "syntax-check":
		if strings.Contains(e.Message, "could not parse as YAML") {
			return "fix the YAML at this line (indentation, a missing colon, an unclosed quote), then check again"
		}
		if strings.Contains(e.Message, "unexpected key") {
			return "remove the key or move it to where GitHub Actions syntax allows it; the keys allowed here are listed in the message"
		}
		return "change this line to follow GitHub Actions workflow syntax as the message says"
	case "expression":
		return "fix the ${{ }} expression: use only the contexts inputs, env, vars, job, jobs, needs, steps, matrix and strategy, " +
			"name jobs through `needs.<job>.outputs.<key>` (the job must be listed in `needs:`) and steps through `steps.<id>.outputs.<key>`"
	case "id":
		return "give each job and each step of a job its own id: letters, digits, '-' and '_', starting with a letter or '_'"
	case "job-needs":
		return "make `needs:` list only job ids of this workflow, without cycles"
	case "matrix":
		return "make every `exclude` and `include` entry use the matrix's own keys and values, and each value appear once per dimension"
	case "runner-label":
		return "set `runs-on:` to one queue or queue class of the platform, or `any` for each skill's own queue"
	case "events":
		return "write `on: workflow_dispatch:` (with `inputs:`) or `on: workflow_call:` (with `inputs:` and `outputs:`)"
	case "workflow-call":
		return "declare each workflow_call input with a `type` (string, number or boolean) and give each output a `value: ${{ jobs.<id>.outputs.<key> }}`"
	case "if-cond":
		return "write the condition without text around it: `if: ${{ cond }}` or `if: cond`"
	case "env-var":
		return "use environment variable names of letters, digits and '_' without spaces or '='"
	case "permissions":
		return "use a permission scope and value GitHub knows, or remove `permissions` (the platform gives workflows no token)"
	}
	return "change the line as the message says"
}
