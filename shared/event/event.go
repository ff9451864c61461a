// Package event defines a run's events — their types and wire envelope — and publishes
// them to the organisation's Redis channel. Every event has the run's next sequence number,
// taken when the run store (runstore) journals it, so a client that reconnects can be
// replayed exactly what it missed.
package event

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Event types of the UNO taxonomy that Switchyard emits.
const (
	JobQueued        = "job:queued"
	JobHeld          = "job:held"
	JobApproved      = "job:approved"
	JobRejected      = "job:rejected"
	JobStarted       = "job:started"
	JobSkillResolved = "job:skill_resolved"
	JobLLMCall       = "job:llm_call"
	JobLLMResponse   = "job:llm_response"
	JobToolCall      = "job:tool_call"
	JobToolResult    = "job:tool_result"
	JobSpan          = "job:span"
	JobProgress      = "job:progress"
	JobCompleted     = "job:completed"
	JobFailed        = "job:failed"
	JobCancelled     = "job:cancelled"
	JobRetrying      = "job:retrying"
	JobGPUMetrics    = "job:gpu_metrics"
	// JobWaiting: the run went back to queued to wait (data.reason "provider_capacity"),
	// holding no worker, until data.retry_at.
	JobWaiting = "job:waiting"
	// JobPlanCreated: {plan, replan, steps[]} — an autonomous agent made its plan (plan 1)
	// or a new one after a replan verdict.
	JobPlanCreated = "job:plan_created"
	// JobReflection: {agent_step, step_id, verdict, reasoning} — the agent judged a step.
	JobReflection = "job:reflection"
	// JobPlanAdjusted: {kind adjust|replan, agent_step, reasoning, removed[], added[],
	// steps[]} — a reflection changed the remaining steps.
	JobPlanAdjusted = "job:plan_adjusted"
	// JobThinking: {jobId, agent?, phase plan|reflection|evaluation|judge|critique|synthesis,
	// agent_step?, reasoning} — an agent's reasoning as it answered (agent: the agent of a
	// multi-agent pattern, 1-based).
	JobThinking = "job:thinking"
	// JobPendingReview: {status, tools[] {tool, call_id, arguments}, reasoning, and for an
	// agent agent_step, step_id, step} — the run paused for a reviewer's decision on the
	// proposed tool calls (besides job:held, which carries the hold's reason code).
	JobPendingReview = "job:pending_review"
)

// Chain events, journaled on the chain's parent run (job_id is the parent's; data carries
// chainId). Each step's run has its own job:* events besides.
const (
	// ChainStepDispatched: {chainId, stepId, instance?, jobId, jobType, queue, status,
	// dependsOn, attempt} — a step's run was recorded (queued, or held_for_review).
	ChainStepDispatched = "chain:step_dispatched"
	// ChainStepEnded: {chainId, stepId, instance?, jobId?, status, error?, costUsd} — a step
	// (or instance) ended, including skipped and cancelled steps that never had a run.
	ChainStepEnded = "chain:step_ended"
	// ChainFork: {chainId, trigger, forked[]} — one step's end unblocked several, or a
	// for_each step fanned out (trigger the step, forked its instances as "step[i]").
	ChainFork = "chain:fork"
	// ChainJoin: {chainId, joinStepId, completedPredecessors[]} — a step with several
	// parents (or a for_each step's instances) was unblocked by the last of them.
	ChainJoin = "chain:join"
	// ChainProgress: {chainId, progress, completed, total, costUsd, status}.
	ChainProgress = "chain:progress"
)

// Envelope is the wire form of an event.
type Envelope struct {
	Type  string          `json:"type"`
	JobID string          `json:"job_id"`
	OrgID string          `json:"org_id"`
	Seq   int64           `json:"seq"`
	TS    time.Time       `json:"ts"`
	Data  json.RawMessage `json:"data"`
}

// Channel is the Redis Pub/Sub channel of an organisation's events.
func Channel(orgID string) string { return "events:org:" + orgID }

// Draft is an event encoded but not yet journaled: its data is fixed when it is drafted, so
// later changes to the value it came from do not reach the journal.
type Draft struct {
	Type string
	Data json.RawMessage
}

// NewDraft encodes an event's data.
func NewDraft(typ string, data any) (Draft, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Draft{}, fmt.Errorf("encoding %s event: %w", typ, err)
	}
	return Draft{Type: typ, Data: raw}, nil
}

// Publisher publishes journaled events on Redis.
type Publisher struct {
	Redis redis.UniversalClient
}

// Publish sends journaled envelopes to their organisations' channels. A failed publish
// loses nothing: the journal holds the event and clients replay from it.
func (p *Publisher) Publish(ctx context.Context, envs ...Envelope) error {
	if len(envs) == 0 {
		return nil
	}
	pipe := p.Redis.Pipeline()
	for _, env := range envs {
		b, err := json.Marshal(env)
		if err != nil {
			return err
		}
		pipe.Publish(ctx, Channel(env.OrgID), b)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("publishing events: %w", err)
	}
	return nil
}
