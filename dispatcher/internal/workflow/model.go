// Package workflow runs workflows written in GitHub Actions syntax (issue 21): a workflow
// file is parsed and checked with rhysd/actionlint, refused where it asks for what a
// governed platform will not do (`run:`, marketplace actions, `container`, `services`), and
// compiled to a chain (package chain) whose steps are skill calls. Its `${{ }}` expressions
// are evaluated with GitHub's semantics by package expr.
package workflow

// Workflow is a workflow file as the platform runs it: parsed and validated, its
// expressions still text (they are evaluated when the run reaches them).
type Workflow struct {
	Name string
	// Inputs are on.workflow_dispatch.inputs and on.workflow_call.inputs, in file order.
	Inputs []Input
	// Outputs are on.workflow_call.outputs: each Value a template over jobs.<id>.outputs.
	Outputs []Output
	// Env is the workflow's env: name → template.
	Env map[string]string
	// Jobs in file order.
	Jobs []*Job
}

// Input is one input of the workflow.
type Input struct {
	Name        string
	Description string
	// Type is string, boolean, number or choice (GitHub's default: string).
	Type     string
	Required bool
	// Default is the default's value typed as Type (string, bool, float64); nil: none.
	Default any
	// Options are a choice input's options.
	Options []string
	Pos     Pos
}

// Output is one output of the workflow.
type Output struct {
	Name, Description string
	// Value is a template, e.g. "${{ jobs.summarise.outputs.text }}".
	Value string
	Pos   Pos
}

// Job is one job: a node of the workflow's DAG whose steps run in order.
type Job struct {
	ID, Name string
	Needs    []string
	// If is the job's condition without its optional ${{ }} wrapper; "" runs when every
	// job it needs succeeded.
	If string
	// RunsOn is the queue or queue class the job's steps run on ("" : each skill's own).
	RunsOn string
	Env    map[string]string
	// Outputs: key → template over steps.<id>.outputs.
	Outputs map[string]string
	// Matrix is nil for a job without strategy.matrix.
	Matrix          *Matrix
	TimeoutMinutes  float64 // 0: none
	ContinueOnError bool
	Steps           []*Step
	Pos             Pos
}

// Matrix is a job's strategy, before expansion (which may need the workflow's inputs).
type Matrix struct {
	// Expr is set when the whole matrix is one expression (`matrix: ${{ fromJSON(…) }}`).
	Expr string
	// Dimensions in file order; each value is a list ([]any) or an expression (string
	// "${{ … }}") that must evaluate to one.
	Dimensions []Dimension
	// Include and Exclude are lists of combinations; either may instead be one expression,
	// then in IncludeExpr or ExcludeExpr ("${{ … }}") and the list is nil.
	Include, Exclude         []map[string]any
	IncludeExpr, ExcludeExpr string
	// FailFast (GitHub's default true) cancels the job's other instances when one fails.
	FailFast bool
	// MaxParallel bounds how many instances run at once; 0: no bound.
	MaxParallel int
	Pos         Pos
}

// Dimension is one key of a matrix and its values.
type Dimension struct {
	Name   string
	Values any // []any, or an expression string
}

// Step is one step of a job: a call of the organisation's skill JobType.
type Step struct {
	// ID is the step's id (steps.<id>.outputs); "" when it has none.
	ID, Name string
	// Uses is as written ("./skills/summarise"); JobType the skill it names.
	Uses, JobType string
	// With is the step's payload: each value a template string, or a bool, number or nil
	// when YAML typed it so. A value that is exactly one ${{ }} keeps the expression's type.
	With            map[string]any
	If              string
	Env             map[string]string
	TimeoutMinutes  float64
	ContinueOnError bool
	Pos             Pos
}

// Pos is a line and column in the workflow file (1-based).
type Pos struct{ Line, Col int }

// Problem is one reason a workflow is refused: where, which rule, what is wrong, and a
// hint phrased so that whoever wrote the file (a person or an LLM) can repair it.
type Problem struct {
	Line, Column  int
	Rule, Message string
	Hint          string
}
