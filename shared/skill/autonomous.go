package skill

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-ai/switchyard/shared/apitypes"
)

// Autonomous is the `autonomous` block of a skill with execution_type autonomous: the
// budgets and gates of its agent (docs/executor.md, "Autonomous tier"). ParseAutonomous
// reads it with its defaults filled.
type Autonomous struct {
	// AgentPattern is how many agents work and how (seed 004 §6.6.2); only "execute", the
	// default, one agent planning, executing and reflecting, is run by this version.
	AgentPattern string `json:"agent_pattern,omitempty"`
	// MaxSteps bounds the plan steps executed across all plans of a run; default 20.
	MaxSteps int `json:"max_steps,omitempty"`
	// MaxReplans bounds the re-decompositions of the goal; default 3, 0 allows none.
	MaxReplans *int `json:"max_replans,omitempty"`
	// RequireApprovalFor lists the skill's tools whose every call waits for a reviewer,
	// besides the tools that require approval wherever they are used.
	RequireApprovalFor []string `json:"require_approval_for,omitempty"`
	// ApprovalTimeout is how long a call may wait for a reviewer, a Go duration ("72h"),
	// at most 720h (30 days); empty: no limit of the skill's own.
	ApprovalTimeout string `json:"approval_timeout,omitempty"`
	// PlannerPrompt, ReflectorPrompt and EvaluatorPrompt replace the system prompts of
	// goal decomposition, reflection and goal evaluation; empty: the built-in ones.
	PlannerPrompt   string `json:"planner_prompt,omitempty"`
	ReflectorPrompt string `json:"reflector_prompt,omitempty"`
	EvaluatorPrompt string `json:"evaluator_prompt,omitempty"`
}

// The defaults and limits of the autonomous block.
const (
	DefaultMaxSteps     = 20
	DefaultMaxReplans   = 3
	MaxAutonomousSteps  = 1000
	MaxAutonomousReplan = 100
	// MaxApprovalTimeout is the longest pause for approval a skill may ask for.
	MaxApprovalTimeout = 30 * 24 * time.Hour
	maxAgentPrompt     = 100000
)

// Replans returns MaxReplans, or its default when unset.
func (a Autonomous) Replans() int {
	if a.MaxReplans == nil {
		return DefaultMaxReplans
	}
	return *a.MaxReplans
}

// ApprovalTimeoutDuration returns ApprovalTimeout parsed; 0 when unset. ParseAutonomous has
// checked it.
func (a Autonomous) ApprovalTimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(a.ApprovalTimeout)
	return d
}

// NeedsApproval reports whether the block puts tool behind an approval gate.
func (a Autonomous) NeedsApproval(tool string) bool {
	return slices.Contains(a.RequireApprovalFor, tool)
}

// ParseAutonomous reads and checks the autonomous block of a skill whose tools are tools.
// A missing block (nil, null) is every default. Problems name the field by its JSON path
// (autonomous.max_steps), in the form of the dispatcher's VALIDATION_FAILED details.
func ParseAutonomous(raw json.RawMessage, tools []string) (Autonomous, []apitypes.FieldError) {
	var a Autonomous
	if len(bytes.TrimSpace(raw)) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return Autonomous{}, []apitypes.FieldError{decodeProblem(err)}
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return Autonomous{}, []apitypes.FieldError{{Field: "autonomous", Rule: "json",
				Message: "must be one JSON object"}}
		}
	}
	var fields []apitypes.FieldError
	bad := func(field, rule, format string, args ...any) {
		fields = append(fields, apitypes.FieldError{Field: "autonomous." + field, Rule: rule,
			Message: fmt.Sprintf(format, args...)})
	}
	if a.AgentPattern == "" {
		a.AgentPattern = "execute"
	}
	if a.AgentPattern != "execute" {
		bad("agent_pattern", "oneof", "must be execute; the other patterns (compete, self_consistent, critic, collaborate) are not run by this version")
	}
	if a.MaxSteps == 0 {
		a.MaxSteps = DefaultMaxSteps
	}
	if a.MaxSteps < 1 || a.MaxSteps > MaxAutonomousSteps {
		bad("max_steps", "range", "must be between 1 and %d", MaxAutonomousSteps)
	}
	if r := a.Replans(); r < 0 || r > MaxAutonomousReplan {
		bad("max_replans", "range", "must be between 0 and %d", MaxAutonomousReplan)
	}
	for i, t := range a.RequireApprovalFor {
		if !slices.Contains(tools, t) {
			bad(fmt.Sprintf("require_approval_for[%d]", i), "subset",
				"%q is not one of the skill's tools; only a tool the skill lists can be gated", t)
		}
	}
	if a.ApprovalTimeout != "" {
		d, err := time.ParseDuration(a.ApprovalTimeout)
		switch {
		case err != nil:
			bad("approval_timeout", "duration", "must be a duration such as 30m, 72h or 720h")
		case d <= 0 || d > MaxApprovalTimeout:
			bad("approval_timeout", "range", "must be more than 0 and at most 720h (30 days)")
		}
	}
	for name, p := range map[string]string{"planner_prompt": a.PlannerPrompt,
		"reflector_prompt": a.ReflectorPrompt, "evaluator_prompt": a.EvaluatorPrompt} {
		if len(p) > maxAgentPrompt {
			bad(name, "max", "must be at most %d characters", maxAgentPrompt)
		}
	}
	slices.SortFunc(fields, func(x, y apitypes.FieldError) int { return strings.Compare(x.Field, y.Field) })
	return a, fields
}

// decodeProblem names the field a JSON decoding error is about, in the block's terms.
func decodeProblem(err error) apitypes.FieldError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return apitypes.FieldError{Field: "autonomous." + te.Field, Rule: "type",
			Message: "must be " + jsonKind(te.Type.Kind().String()) + ", not " + te.Value}
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return apitypes.FieldError{Field: "autonomous." + strings.Trim(f, `"`), Rule: "unknown",
			Message: "is not a field of the autonomous block; the fields are agent_pattern, approval_timeout, " +
				"evaluator_prompt, max_replans, max_steps, planner_prompt, reflector_prompt, require_approval_for"}
	}
	return apitypes.FieldError{Field: "autonomous", Rule: "json", Message: "must be a JSON object"}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64", "ptr":
		return "a whole number"
	case "slice":
		return "a list of strings"
	default:
		return "a string"
	}
}
