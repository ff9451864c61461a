package skill

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-ai/switchyard/client/apitypes"
)

// Autonomous is the `autonomous` block of a skill with execution_type autonomous: the
// budgets and gates of its agent (docs/executor.md, "Autonomous tier"). ParseAutonomous
// reads it with its defaults filled.
type Autonomous struct {
	// AgentPattern is how many agents work and how (seed 004 §6.6.2): execute (the
	// default: one agent plans, executes and reflects), compete (Agents agents in
	// parallel, a judge picks the best answer), self_consistent (Agents agents with varied
	// temperatures or prompts, a majority vote on their normalised answers, ties to a
	// judge), critic (a generator, then Rounds of critique and revision) or collaborate
	// (Specialists in parallel, a coordinator synthesises). docs/executor.md, "Patterns".
	AgentPattern string `json:"agent_pattern,omitempty"`
	// Agents is how many agents compete or vote (compete, self_consistent); default 3, at
	// most 10.
	Agents int `json:"agents,omitempty"`
	// Temperatures are the self_consistent agents' temperatures, agent i taking the i-th
	// (cycled when there are fewer than agents); default spread from 0.2 to 1.0.
	Temperatures []float64 `json:"temperatures,omitempty"`
	// Prompts are variations of the instructions for compete and self_consistent agents:
	// agent i's system prompt gains the i-th (cycled); default none.
	Prompts []string `json:"prompts,omitempty"`
	// JudgePrompt replaces the system prompt of the judge (compete; self_consistent ties).
	JudgePrompt string `json:"judge_prompt,omitempty"`
	// Rounds is how many critique-and-revise rounds a critic run may take; default 2, at
	// most 10. A round whose critic approves the draft ends the run early.
	Rounds int `json:"rounds,omitempty"`
	// CriticPrompt replaces the critic's system prompt (critic).
	CriticPrompt string `json:"critic_prompt,omitempty"`
	// Specialists are the collaborate agents, run in parallel: each a role, the
	// instructions for it, and the tools it may use (a subset of the skill's).
	Specialists []Specialist `json:"specialists,omitempty"`
	// CoordinatorPrompt replaces the system prompt of the coordinator that synthesises the
	// specialists' answers (collaborate).
	CoordinatorPrompt string `json:"coordinator_prompt,omitempty"`
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

// Specialist is one agent of a collaborate pattern.
type Specialist struct {
	// Role names the specialist ("researcher"); unique within the skill.
	Role string `json:"role"`
	// Prompt is the specialist's instructions, added to the skill's system prompt.
	Prompt string `json:"prompt"`
	// Tools are the skill's tools this specialist may use; none: it reasons only.
	Tools []string `json:"tools,omitempty"`
}

// The agent patterns.
const (
	PatternExecute        = "execute"
	PatternCompete        = "compete"
	PatternSelfConsistent = "self_consistent"
	PatternCritic         = "critic"
	PatternCollaborate    = "collaborate"
)

// The defaults and limits of the autonomous block.
const (
	DefaultAgents       = 3
	MaxAgents           = 10
	DefaultRounds       = 2
	MaxRounds           = 10
	maxRoleLen          = 64
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
		a.AgentPattern = PatternExecute
	}
	a.checkPattern(tools, bad)
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
		"reflector_prompt": a.ReflectorPrompt, "evaluator_prompt": a.EvaluatorPrompt, "judge_prompt": a.JudgePrompt,
		"critic_prompt": a.CriticPrompt, "coordinator_prompt": a.CoordinatorPrompt} {
		if len(p) > maxAgentPrompt {
			bad(name, "max", "must be at most %d characters", maxAgentPrompt)
		}
	}
	slices.SortFunc(fields, func(x, y apitypes.FieldError) int { return strings.Compare(x.Field, y.Field) })
	return a, fields
}

// checkPattern checks agent_pattern and the fields of the patterns, filling their defaults.
// A field of another pattern than the block's is a problem (rule "pattern"): it would be
// silently ignored otherwise.
func (a *Autonomous) checkPattern(tools []string, bad func(field, rule, format string, args ...any)) {
	p := a.AgentPattern
	patterns := []string{PatternExecute, PatternCompete, PatternSelfConsistent, PatternCritic, PatternCollaborate}
	if !slices.Contains(patterns, p) {
		bad("agent_pattern", "oneof", "must be one of %s", strings.Join(patterns, ", "))
		return
	}
	only := func(field string, set bool, allowed ...string) bool {
		if set && !slices.Contains(allowed, p) {
			bad(field, "pattern", "applies only to agent_pattern %s, not %s", strings.Join(allowed, " or "), p)
			return false
		}
		return set
	}
	if only("agents", a.Agents != 0, PatternCompete, PatternSelfConsistent) &&
		(a.Agents < 2 || a.Agents > MaxAgents) {
		bad("agents", "range", "must be between 2 and %d", MaxAgents)
	}
	if (p == PatternCompete || p == PatternSelfConsistent) && a.Agents == 0 {
		a.Agents = DefaultAgents
	}
	if only("temperatures", len(a.Temperatures) > 0, PatternSelfConsistent) {
		if len(a.Temperatures) > max(a.Agents, 1) {
			bad("temperatures", "max", "must list at most one temperature per agent (%d)", a.Agents)
		}
		for i, t := range a.Temperatures {
			if t < 0 || t > 2 {
				bad(fmt.Sprintf("temperatures[%d]", i), "range", "must be between 0 and 2")
			}
		}
	}
	if only("prompts", len(a.Prompts) > 0, PatternCompete, PatternSelfConsistent) {
		if len(a.Prompts) > max(a.Agents, 1) {
			bad("prompts", "max", "must list at most one prompt per agent (%d)", a.Agents)
		}
		for i, s := range a.Prompts {
			if strings.TrimSpace(s) == "" || len(s) > maxAgentPrompt {
				bad(fmt.Sprintf("prompts[%d]", i), "range", "must be between 1 and %d characters", maxAgentPrompt)
			}
		}
	}
	only("judge_prompt", a.JudgePrompt != "", PatternCompete, PatternSelfConsistent)
	if only("rounds", a.Rounds != 0, PatternCritic) && (a.Rounds < 1 || a.Rounds > MaxRounds) {
		bad("rounds", "range", "must be between 1 and %d", MaxRounds)
	}
	if p == PatternCritic && a.Rounds == 0 {
		a.Rounds = DefaultRounds
	}
	only("critic_prompt", a.CriticPrompt != "", PatternCritic)
	only("coordinator_prompt", a.CoordinatorPrompt != "", PatternCollaborate)
	if !only("specialists", len(a.Specialists) > 0, PatternCollaborate) {
		if p == PatternCollaborate {
			bad("specialists", "required", "must list at least 2 specialists ({role, prompt, tools}) for collaborate")
		}
		return
	}
	if len(a.Specialists) < 2 || len(a.Specialists) > MaxAgents {
		bad("specialists", "range", "must list between 2 and %d specialists", MaxAgents)
	}
	roles := map[string]bool{}
	for i, s := range a.Specialists {
		at := fmt.Sprintf("specialists[%d]", i)
		switch {
		case strings.TrimSpace(s.Role) == "" || len(s.Role) > maxRoleLen:
			bad(at+".role", "range", "must be between 1 and %d characters", maxRoleLen)
		case roles[s.Role]:
			bad(at+".role", "unique", "%q is the role of another specialist", s.Role)
		}
		roles[s.Role] = true
		if strings.TrimSpace(s.Prompt) == "" || len(s.Prompt) > maxAgentPrompt {
			bad(at+".prompt", "range", "must be between 1 and %d characters", maxAgentPrompt)
		}
		for j, t := range s.Tools {
			if !slices.Contains(tools, t) {
				bad(fmt.Sprintf("%s.tools[%d]", at, j), "subset", "%q is not one of the skill's tools", t)
			}
		}
	}
}

// AgentCount is how many agents the pattern runs at most: 1 for execute, Agents for
// compete and self_consistent, 1 + 2×Rounds for critic (generator, then a critic and a
// reviser per round), the specialists for collaborate.
func (a Autonomous) AgentCount() int {
	switch a.AgentPattern {
	case PatternCompete, PatternSelfConsistent:
		return a.Agents
	case PatternCritic:
		return 1 + 2*a.Rounds
	case PatternCollaborate:
		return len(a.Specialists)
	}
	return 1
}

// decodeProblem names the field a JSON decoding error is about, in the block's terms.
func decodeProblem(err error) apitypes.FieldError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return apitypes.FieldError{Field: "autonomous." + te.Field, Rule: "type",
			Message: "must be " + jsonKind(te.Type) + ", not " + te.Value}
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return apitypes.FieldError{Field: "autonomous." + strings.Trim(f, `"`), Rule: "unknown",
			Message: "is not a field of the autonomous block; the fields are agent_pattern, agents, approval_timeout, " +
				"coordinator_prompt, critic_prompt, evaluator_prompt, judge_prompt, max_replans, max_steps, " +
				"planner_prompt, prompts, reflector_prompt, require_approval_for, rounds, specialists, temperatures"}
	}
	return apitypes.FieldError{Field: "autonomous", Rule: "json", Message: "must be a JSON object"}
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Pointer:
		return "a whole number"
	case reflect.Float64:
		return "a number"
	case reflect.Struct:
		return "an object"
	case reflect.Slice:
		switch t.Elem().Kind() {
		case reflect.Float64:
			return "a list of numbers"
		case reflect.Struct:
			return "a list of objects"
		}
		return "a list of strings"
	default:
		return "a string"
	}
}
