package run

// ExecutionType is the tier a skill runs in.
type ExecutionType string

// The execution types.
const (
	LLMOnly    ExecutionType = "llm_only"
	ToolUsing  ExecutionType = "tool_using"
	Chain      ExecutionType = "chain"
	Autonomous ExecutionType = "autonomous"
)

// Runnable reports whether this version of the platform runs the execution type. Skills of
// the others can be stored but not dispatched: a dispatch would be accepted for work that
// never runs.
func (t ExecutionType) Runnable() bool { return t == LLMOnly || t == ToolUsing || t == Autonomous }

// Priority orders work within a named queue.
type Priority string

// The priorities, highest first.
const (
	PriorityCritical Priority = "critical"
	PriorityHigh     Priority = "high"
	PriorityNormal   Priority = "normal"
	PriorityLow      Priority = "low"
)

// Priorities lists every priority, highest first.
var Priorities = []Priority{PriorityCritical, PriorityHigh, PriorityNormal, PriorityLow}
