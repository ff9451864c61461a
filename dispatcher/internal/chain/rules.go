package chain

import "encoding/json"

// StepFailure is an error Rules.Begin returns for a step that cannot run as written (an
// expression that fails to evaluate): the step fails with Body as its error, and the
// chain goes on as after any failure. Any other error rolls the transition back.
type StepFailure struct{ Body json.RawMessage }

func (f *StepFailure) Error() string { return "the step cannot run: " + string(f.Body) }

// Rules are what the language a chain was written in decides, where a chain skill's own
// block (conditions, output mappings, on_failure) does not apply: a workflow in GitHub
// Actions syntax (package workflow) compiles to a chain whose steps carry `if:`
// expressions, `with:` templates, continue-on-error and fail-fast. The engine keeps
// everything else — the DAG, the rows, dispatch and stopping, events, spans, the parent
// run — so a workflow gets the chain's governance, hand-off and restart survival.
//
// A chain skill's definition has no Rules (Engine.Rules nil): the engine applies its own.
type Rules interface {
	// Ready reports whether an unblocked step may begin now (a matrix's max-parallel).
	Ready(s *State, step *Step) bool
	// Begin decides an unblocked step: skip it, dispatch it, or fail it (a *StepFailure).
	Begin(s *State, step *Step) (Decision, error)
	// Ended returns the steps to cancel now that row ended (a fail-fast matrix's other
	// instances); the engine cancels the pending ones and stops the dispatched ones.
	Ended(s *State, row *StepRow) []string
	// Outcome is the chain's end once every step has: its status (apitypes.ChainCompleted
	// or ChainFailed), error and output.
	Outcome(s *State) (status string, output, errBody json.RawMessage, err error)
}

// Decision is what Rules.Begin decided for a step.
type Decision struct {
	// Skip, when not empty, skips the step with this reason.
	Skip    string
	Payload json.RawMessage
	// TimeoutSeconds bounds the step's run; 0: its skill's own timeout.
	TimeoutSeconds int
	// Queue runs the step on this queue or queue class instead of its skill's ("": the
	// skill's).
	Queue string
}

// RulesFunc returns the Rules of a definition written in another language; the
// coordinator calls it for a definition with Workflow set.
type RulesFunc func(def *Definition) (Rules, error)
