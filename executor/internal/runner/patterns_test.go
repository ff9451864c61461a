package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/span"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// TestEnvIsSafeForConcurrentAgents: the agents of a pattern share one execution. Many
// goroutines start, end and flush spans and emit events at once; every span ends ended
// (an older write never overwrites a newer one) and the events are numbered without gap.
// Run with -race.
func TestEnvIsSafeForConcurrentAgents(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	runID := b.newRun(t, skill.Skill{JobType: "agent", ExecutionType: "autonomous"})
	ctx := context.Background()
	rn, err := b.runner.runs().LoadWork(ctx, runID)
	require.NoError(t, err)
	x := &execution{Runner: b.runner, run: rn, log: b.runner.Log, attempt: 1}
	const agents, spans = 6, 15
	// Besides the agents' own flushes (before each of their calls), flushers write whatever
	// is buffered at any moment: a span's start may then be in one write and its end in a
	// concurrent one.
	stop := make(chan struct{})
	var flushers sync.WaitGroup
	for range 2 {
		flushers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					x.flush(ctx)
				}
			}
		})
	}
	var wg sync.WaitGroup
	for a := range agents {
		wg.Go(func() {
			for i := range spans {
				sp := x.StepSpan(ctx, runID, span.ChainStep, "step", fmt.Sprintf("agent/%d/exec/%d", a, i), nil)
				x.Event(ctx, "job:progress", map[string]any{"agent": a, "i": i})
				x.EndSpan(ctx, sp.Set("done", true), span.OK)
				if i%3 == 0 {
					x.flush(ctx)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	flushers.Wait()
	x.flush(ctx)
	require.Equal(t, agents*spans, b.count(t, `SELECT count(*) FROM spans WHERE run_id = $1`, runID))
	require.Zero(t, b.count(t, `SELECT count(*) FROM spans WHERE run_id = $1 AND (status <> 'ok' OR attributes->>'done' IS NULL)`, runID),
		"every span keeps its last state")
	var n, distinct, top int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT seq), coalesce(max(seq), 0) FROM run_events
		WHERE run_id = $1`, runID).Scan(&n, &distinct, &top))
	require.Equal(t, n, distinct)
	require.Equal(t, n, top, "seq has no gap")
	require.Equal(t, 3*agents*spans, n, "a job:span as each span starts and ends, and a job:progress")
}

// TestPatternRunThroughRunner: a compete run of three agents on real Postgres. Two agents
// want the gated tool; the third finishes; the run pauses once with both calls. Approved,
// each call is made once; rejected, each agent reads the reason as its call's result and
// none is made. Either way the judge picks and nothing journaled is asked again.
func TestPatternRunThroughRunner(t *testing.T) {
	t.Parallel()
	for _, decision := range []string{"approve", "reject"} {
		t.Run(decision, func(t *testing.T) {
			t.Parallel()
			patternThroughRunner(t, decision)
		})
	}
}

func patternThroughRunner(t *testing.T, decision string) {
	answers := map[string]openai.ChatCompletionMessage{
		"judge/try/1": agentAnswer(map[string]any{"chosen": 2, "reasoning": "agent 2 deployed and says so"}),
	}
	for i := 1; i <= 3; i++ {
		p := fmt.Sprintf("agent/%d/", i)
		typ, tools := "llm_only", []string{}
		if i < 3 {
			typ, tools = "tool_using", []string{"deploy"}
			answers[p+"exec/1/iter/1/llm"] = callTool(fmt.Sprintf("c%d", i), "deploy", fmt.Sprintf(`{"agent":%d}`, i))
			answers[p+"exec/1/iter/2/llm"] = text("deployed")
		} else {
			answers[p+"exec/1/llm"] = text("wrote a plan instead")
		}
		answers[p+"plan/1/try/1"] = agentAnswer(map[string]any{"reasoning": "one step will do", "steps": []any{map[string]any{
			"step_id": "s1", "description": "do it", "execution_type": typ, "tools": tools, "success_criteria": []string{"done"}}}})
		answers[p+"reflect/1/try/1"] = agentAnswer(map[string]any{"verdict": "pass", "reasoning": "it is done"})
		answers[p+"eval/try/1"] = agentAnswer(map[string]any{"goal_achieved": true, "reasoning": "done",
			"answer": fmt.Sprintf("answer of agent %d", i)})
	}
	b := setup(t, answers)
	ct := newCountingTool(t)
	ct.register(t, b, tool.Tool{Name: "deploy", SideEffecting: true})
	runID := b.newRun(t, skill.Skill{JobType: "agent", ExecutionType: "autonomous", MaxTokens: 64, MaxIterations: 3,
		Tools: []string{"deploy"}, Autonomous: json.RawMessage(`{"agent_pattern":"compete","require_approval_for":["deploy"]}`)})
	ctx := withDelivery(context.Background(), 0, 3)

	require.NoError(t, b.handle(ctx, runID))
	rr := b.run(t, runID)
	require.Equal(t, "pending_review", rr.Status, "%s", rr.Error)
	require.Len(t, rr.HoldReasons, 2, "both agents' calls wait for the one review")
	require.Zero(t, ct.count())
	require.Equal(t, 1, b.router.count("agent/3/eval/try/1"), "the agent without a gate ran to its end")

	// The dispatcher queues a reviewed autonomous run again, approved or rejected.
	_, err := b.pool.Exec(ctx, `INSERT INTO reviews (run_id, org_id, decision, reviewer, reason)
		VALUES ($1, $2, $3, 'rita', 'not today')`, runID, b.orgID, decision)
	require.NoError(t, err)
	_, err = runstore.New(b.pool).Transition(ctx, runID, []run.Status{run.PendingReview}, run.Queued, runstore.Change{})
	require.NoError(t, err)
	require.NoError(t, b.handle(ctx, runID))
	rr = b.run(t, runID)
	require.Equal(t, "completed", rr.Status, "%s", rr.Error)
	if decision == "approve" {
		require.Equal(t, 2, ct.count(), "each agent's approved call, once")
	} else {
		require.Zero(t, ct.count())
		for _, p := range []string{"agent/1/", "agent/2/"} {
			msgs := b.router.requests[p+"exec/1/iter/2/llm"].Messages
			require.Contains(t, msgs[len(msgs)-1].Content, "The reviewer's reason: not today")
		}
	}
	for step := range answers {
		require.Equal(t, 1, b.router.count(step), step)
	}
	var out map[string]any
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT output FROM runs WHERE id = $1`, runID).Scan(&out))
	require.Equal(t, "answer of agent 2", out["content"])
	require.Equal(t, 2.0, out["chosen"])
	require.Len(t, out["agents"], 3)
	require.Equal(t, 3, b.count(t, `SELECT count(*) FROM spans WHERE run_id = $1 AND type = 'agent' AND parent_id = run_id`, runID))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM spans WHERE run_id = $1 AND type = 'judge'
		AND (attributes->>'chosen')::int = 2`, runID))
	require.Zero(t, b.count(t, `SELECT count(*) FROM spans WHERE run_id = $1 AND status = 'running'`, runID))
	// The plans were announced once, by the attempt that got them, each naming its agent.
	require.Equal(t, 3, b.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'job:plan_created'`, runID))
	require.Equal(t, 3, b.count(t, `SELECT count(DISTINCT data->>'agent') FROM run_events WHERE run_id = $1
		AND type = 'job:thinking' AND data->>'phase' = 'plan'`, runID))
}
