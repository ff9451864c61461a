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
