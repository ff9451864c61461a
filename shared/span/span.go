// Package span defines a run's execution spans: one tree per run (for chains, one tree per
// chain with each step's run a subtree). The run store (runstore) writes a span when it
// starts and again when it ends; every write is also an event (job:span) carrying the
// whole span.
package span

import (
	"time"

	"github.com/switchyard-ai/switchyard/shared/ids"
)

// Type is one of the closed list of span types of ARCHITECTURE.md.
type Type string

// The span types.
const (
	Dispatch         Type = "dispatch"
	GovernanceCheck  Type = "governance_check"
	GovernanceReview Type = "governance_review"
	QueueWait        Type = "queue_wait"
	SkillResolve     Type = "skill_resolve"
	ReactIteration   Type = "react_iteration"
	LLMCall          Type = "llm_call"
	ToolCall         Type = "tool_call"
	ChainStep        Type = "chain_step"
	ChainFork        Type = "chain_fork"
	ChainJoin        Type = "chain_join"
	GoalDecompose    Type = "goal_decompose"
	Reflection       Type = "reflection"
	PlanAdjust       Type = "plan_adjust"
	GoalEvaluate     Type = "goal_evaluate"
	BatchFanout      Type = "batch_fanout"
	BatchAggregate   Type = "batch_aggregate"
	// Agent is one agent of an autonomous run's multi-agent pattern (compete,
	// self_consistent, critic, collaborate); its phases' spans hang under it.
	Agent Type = "agent"
	// Judge is the call that picks (compete, self_consistent) or synthesises (collaborate)
	// the answer of a multi-agent pattern.
	Judge Type = "judge"
)

// Status of a span.
type Status string

// Span statuses.
const (
	Running Status = "running"
	OK      Status = "ok"
	Error   Status = "error"
	Skipped Status = "skipped"
	// Abandoned closes a span that an attempt left running when it died (SIGKILL, lost
	// lease): the attempt that resumes the run closes it, see Abandon.
	Abandoned Status = "abandoned"
)

// Billing is what an llm_call span costs.
type Billing struct {
	Provider     string  `json:"provider"`
	Model        string  `json:"model"`
	TokensIn     int64   `json:"tokensIn"`
	TokensOut    int64   `json:"tokensOut"`
	TokensCached int64   `json:"tokensCached"`
	CostUSD      float64 `json:"costUsd"`
}

// Span is one node of a run's tree.
type Span struct {
	ID       string `json:"id"`
	RunID    string `json:"runId"`
	OrgID    string `json:"-"`
	TraceID  string `json:"traceId"`
	ChainID  string `json:"chainId,omitempty"`
	ParentID string `json:"parentId,omitempty"`
	// Attempt is the attempt of the run that made the span (1 for the first); 0 for the
	// dispatcher's spans, made before any attempt. A span reopened by a later attempt keeps
	// the attempt that made it.
	Attempt    int            `json:"attempt,omitempty"`
	Type       Type           `json:"type"`
	Name       string         `json:"name"`
	Status     Status         `json:"status"`
	StartedAt  time.Time      `json:"startedAt"`
	EndedAt    *time.Time     `json:"endedAt,omitempty"`
	DurationMS *float64       `json:"durationMs,omitempty"`
	Attributes map[string]any `json:"attributes"`
	Billing    *Billing       `json:"billing,omitempty"`
}

// Start returns a new running span.
func Start(runID, orgID, traceID, parentID string, typ Type, name string) *Span {
	return &Span{
		ID: ids.New(), RunID: runID, OrgID: orgID, TraceID: traceID, ParentID: parentID,
		Type: typ, Name: name, Status: Running, StartedAt: time.Now().UTC(), Attributes: map[string]any{},
	}
}

// End closes the span with a status.
func (s *Span) End(st Status) *Span {
	now := time.Now().UTC()
	s.EndedAt = &now
	s.Status = st
	d := float64(now.Sub(s.StartedAt).Microseconds()) / 1000
	s.DurationMS = &d
	return s
}

// Set adds an attribute and returns the span.
func (s *Span) Set(key string, v any) *Span {
	if s.Attributes == nil {
		s.Attributes = map[string]any{}
	}
	s.Attributes[key] = v
	return s
}

// Node is a span with its children, for the tree view.
type Node struct {
	Span
	Children []*Node `json:"children"`
}

// Tree arranges spans (ordered by start) into trees; spans whose parent is missing are roots.
func Tree(spans []Span) []*Node {
	nodes := make(map[string]*Node, len(spans))
	for i := range spans {
		nodes[spans[i].ID] = &Node{Span: spans[i], Children: []*Node{}}
	}
	roots := []*Node{}
	for i := range spans {
		n := nodes[spans[i].ID]
		if p, ok := nodes[n.ParentID]; ok && n.ParentID != "" {
			p.Children = append(p.Children, n)
		} else {
			roots = append(roots, n)
		}
	}
	return roots
}
