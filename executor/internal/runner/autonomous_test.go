package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// agentAnswer is an LLM answer of JSON content.
func agentAnswer(v any) openai.ChatCompletionMessage {
	b, _ := json.Marshal(v)
	return text(string(b))
}

// An autonomous run through the runner, on real Postgres: the plan's tool step calls a
// tool behind the skill's approval gate, the run pauses pending_review holding no worker,
// the approval resumes it, a failed router call on the reflection is retried by another
// attempt, and the run completes having asked every LLM call and made the tool call once
// — the journal replayed the rest — with the agent's spans and events recorded.
func TestAutonomousRunPausesResumesAndReplays(t *testing.T) {
	t.Parallel()
	step := func(id, typ string, tools ...string) map[string]any {
		return map[string]any{"step_id": id, "description": "do " + id, "execution_type": typ, "tools": tools,
			"success_criteria": []string{id + " done"}}
	}
	b := setup(t, map[string]openai.ChatCompletionMessage{
		"plan/1/try/1":      agentAnswer(map[string]any{"steps": []any{step("s1", "tool_using", "deploy"), step("s2", "llm_only")}}),
		"exec/1/iter/1/llm": callTool("c1", "deploy", `{"env":"prod"}`),
		"exec/1/iter/2/llm": text("deployed"),
		"reflect/1/try/1":   agentAnswer(map[string]any{"verdict": "pass", "reasoning": "the tool said ok", "summary": "deployed"}),
		"exec/2/llm":        text("report"),
		"reflect/2/try/1":   agentAnswer(map[string]any{"verdict": "pass", "reasoning": "written"}),
		"eval/try/1":        agentAnswer(map[string]any{"goal_achieved": true, "reasoning": "all done", "answer": "deployed and reported"}),
	})
	b.router.fail("reflect/1/try/1", providerUnavailable())
	ct := newCountingTool(t)
	ct.register(t, b, tool.Tool{Name: "deploy", SideEffecting: true})
	runID := b.newRun(t, skill.Skill{JobType: "agent", ExecutionType: "autonomous", MaxTokens: 64, MaxIterations: 3,
		Tools: []string{"deploy"}, Autonomous: json.RawMessage(`{"require_approval_for":["deploy"],"approval_timeout":"72h"}`)})
	ctx := withDelivery(context.Background(), 0, 3)

	require.NoError(t, b.handle(ctx, runID))
	rr := b.run(t, runID)
	require.Equal(t, "pending_review", rr.Status)
	// The pause's deadline is the skill's approval_timeout from the pause, in Postgres.
	var left int64 // nanoseconds
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT (extract(epoch FROM approval_deadline - now()) * 1e9)::bigint
		FROM runs WHERE id = $1`, runID).Scan(&left))
	require.InDelta(t, float64(72*time.Hour), float64(left), float64(time.Minute))
	require.Equal(t, "deploy", rr.HoldReasons[0]["tool"])
	require.Zero(t, ct.count())
	// job:pending_review carries the proposed call and the step that wants it.
	var review map[string]any
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT data FROM run_events WHERE run_id = $1 AND type = 'job:pending_review'`,
		runID).Scan(&review))
	require.Equal(t, 1.0, review["agent_step"])
	require.Equal(t, "s1", review["step_id"])
	require.Equal(t, "do s1", review["step"])
	proposed := review["tools"].([]any)[0].(map[string]any)
	require.Equal(t, "deploy", proposed["tool"])
	require.Equal(t, map[string]any{"env": "prod"}, proposed["arguments"])

	b.review(t, runID, "approve")
	require.Error(t, b.handle(ctx, runID), "the reflection's router call failed: a transient error, retried")
	require.Equal(t, "queued", b.status(t, runID))
	require.NoError(t, b.handle(withDelivery(context.Background(), 1, 3), runID))

	rr = b.run(t, runID)
	require.Equal(t, "completed", rr.Status, "%v", rr.Error)
	require.Equal(t, 1, ct.count(), "the approved call was made once")
	for s, n := range map[string]int{"plan/1/try/1": 1, "exec/1/iter/1/llm": 1, "exec/1/iter/2/llm": 1,
		"reflect/1/try/1": 2, "exec/2/llm": 1, "reflect/2/try/1": 1, "eval/try/1": 1} {
		require.Equal(t, n, b.router.count(s), s)
	}
	require.Equal(t, 7, rr.LLMCalls, "billed once per answer")
	var out map[string]any
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT output FROM runs WHERE id = $1`, runID).Scan(&out))
	require.Equal(t, "deployed and reported", out["content"])
	require.Equal(t, true, out["goal_achieved"])
	for typ, n := range map[string]int{"goal_decompose": 1, "goal_evaluate": 1, "chain_step": 2} {
		require.Equal(t, n, b.count(t, `SELECT count(*) FROM spans WHERE run_id = $1 AND type = $2`, runID, typ), typ)
	}
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM spans WHERE run_id = $1 AND type = 'reflection'
		AND attributes->>'verdict' = 'pass'`, runID), "one reflection span per step, reopened by the retry, not doubled")
	require.Subset(t, b.events(t, runID), []string{"job:plan_created", "job:held", "job:reflection", "job:completed"})
}

// An autonomous run whose third step's router call fails resumes, on its next attempt, from
// the snapshot the first attempt saved after step 2: it answers none of the first two
// steps' calls from the journal (without the snapshot it would replay all five), asks the
// router nothing twice, and ends as an uninterrupted run does.
func TestAutonomousRunResumesFromSnapshot(t *testing.T) {
	t.Parallel()
	step := func(id string) map[string]any {
		return map[string]any{"step_id": id, "description": "do " + id, "execution_type": "llm_only",
			"success_criteria": []string{id + " done"}}
	}
	pass := func(s string) openai.ChatCompletionMessage {
		return agentAnswer(map[string]any{"verdict": "pass", "reasoning": s + " is right", "summary": s})
	}
	b := setup(t, map[string]openai.ChatCompletionMessage{
		"plan/1/try/1":    agentAnswer(map[string]any{"steps": []any{step("s1"), step("s2"), step("s3")}}),
		"exec/1/llm":      text("one"),
		"reflect/1/try/1": pass("one"),
		"exec/2/llm":      text("two"),
		"reflect/2/try/1": pass("two"),
		"exec/3/llm":      text("three"),
		"reflect/3/try/1": pass("three"),
		"eval/try/1":      agentAnswer(map[string]any{"goal_achieved": true, "reasoning": "all done", "answer": "one two three"}),
	})
	b.router.fail("exec/3/llm", providerUnavailable())
	runID := b.newRun(t, skill.Skill{JobType: "agent", ExecutionType: "autonomous", MaxTokens: 64, MaxIterations: 3,
		Autonomous: json.RawMessage(`{}`)})

	require.Error(t, b.handle(withDelivery(context.Background(), 0, 3), runID), "step 3's router call failed: retried")
	var seq int
	var state map[string]any
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT (state->>'seq')::int, state->'state'
		FROM run_snapshots WHERE run_id = $1 AND step_key = 'snapshot'`, runID).Scan(&seq, &state))
	require.Equal(t, 2, seq, "the snapshot after the second reflection")
	require.Len(t, state["done"], 2)
	require.Len(t, state["remaining"], 1)

	require.NoError(t, b.handle(withDelivery(context.Background(), 1, 3), runID))
	rr := b.run(t, runID)
	require.Equal(t, "completed", rr.Status, "%v", rr.Error)
	require.Equal(t, "0", cmp.Or(scrape(t, b.metrics)[`switchyard_executor_llm_calls_total{outcome="replayed"}`], "0"),
		"nothing before the snapshot was read back from the journal")
	for s, n := range map[string]int{"plan/1/try/1": 1, "exec/1/llm": 1, "reflect/1/try/1": 1, "exec/2/llm": 1,
		"reflect/2/try/1": 1, "exec/3/llm": 2, "reflect/3/try/1": 1, "eval/try/1": 1} {
		require.Equal(t, n, b.router.count(s), s)
	}
	var out map[string]any
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT output FROM runs WHERE id = $1`, runID).Scan(&out))
	require.Equal(t, "one two three", out["content"])
	require.EqualValues(t, 3, out["steps_executed"])
	require.Len(t, out["steps"], 3)
	require.Equal(t, 3, b.count(t, `SELECT count(*) FROM spans WHERE run_id = $1 AND type = 'chain_step'`, runID),
		"one span per step")
}

// An autonomous run whose first attempt ends after journaling its plan but before the
// plan's announcements reached the run's events (the write carrying them is lost, as when
// the executor is killed before its flush) announces the plan on its next attempt, which
// replays it; one whose announcements were written does not announce them again. Either
// way the run's events hold each announcement once, naming the answer it announces. A run
// whose announcements were written by an executor from before they named their answer
// keeps that executor's rule: a replayed answer is not announced again.
func TestAutonomousAnnouncesEachAnswerOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name         string
		lost, legacy bool
	}{{"announcements lost with the first attempt", true, false}, {"announcements written by the first attempt", false, false},
		{"announcements written without their key", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, map[string]openai.ChatCompletionMessage{
				"plan/1/try/1": agentAnswer(map[string]any{"reasoning": "one step will do", "steps": []any{map[string]any{
					"step_id": "s1", "description": "do s1", "execution_type": "llm_only", "success_criteria": []string{"done"}}}}),
				"exec/1/llm":      text("one"),
				"reflect/1/try/1": agentAnswer(map[string]any{"verdict": "pass", "reasoning": "it is done", "summary": "one"}),
				"eval/try/1":      agentAnswer(map[string]any{"goal_achieved": true, "reasoning": "all done", "answer": "one"}),
			})
			runID := b.newRun(t, skill.Skill{JobType: "agent", ExecutionType: "autonomous", MaxTokens: 64, MaxIterations: 3,
				Autonomous: json.RawMessage(`{}`)})
			ctx := context.Background()
			if c.lost {
				// Postgres refuses the run's plan announcement: the write of the events
				// buffered since the plan was journaled (before the step's router call) fails
				// for its data, is not retried, and is gone.
				_, err := b.pool.Exec(ctx, `CREATE FUNCTION refuse_announcement() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN RAISE EXCEPTION 'refused'; END $$;
					CREATE TRIGGER refuse_announcement BEFORE INSERT ON run_events FOR EACH ROW
					WHEN (NEW.type = 'job:plan_created' AND NEW.run_id = '`+runID+`') EXECUTE FUNCTION refuse_announcement()`)
				require.NoError(t, err)
			}
			b.router.fail("exec/1/llm", providerUnavailable())
			require.Error(t, b.handle(withDelivery(ctx, 0, 3), runID), "the step's router call failed: retried")
			require.Equal(t, 1, b.router.count("plan/1/try/1"))
			planned := 1
			if c.lost {
				planned = 0
				_, err := b.pool.Exec(ctx, `DROP TRIGGER refuse_announcement ON run_events`)
				require.NoError(t, err)
			}
			require.Equal(t, planned, b.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1
				AND type = 'job:plan_created'`, runID))
			plan := "plan/1/try/1"
			if c.legacy {
				_, err := b.pool.Exec(ctx, `UPDATE run_events SET data = data - 'announces' WHERE run_id = $1`, runID)
				require.NoError(t, err)
				plan = "-"
			}

			require.NoError(t, b.handle(withDelivery(ctx, 1, 3), runID))
			require.Equal(t, "completed", b.run(t, runID).Status)
			require.Equal(t, 1, b.router.count("plan/1/try/1"), "the plan was replayed")
			rows, err := b.pool.Query(ctx, `SELECT type || ' ' || coalesce(data->>'phase', '') || ' ' ||
				coalesce(data->>'announces', '-'), count(*) FROM run_events
				WHERE run_id = $1 AND type IN ('job:plan_created', 'job:reflection', 'job:plan_adjusted', 'job:thinking')
				GROUP BY 1`, runID)
			require.NoError(t, err)
			got := map[string]int{}
			var k string
			var n int
			_, err = pgx.ForEachRow(rows, []any{&k, &n}, func() error { got[k] = n; return nil })
			require.NoError(t, err)
			require.Equal(t, map[string]int{
				"job:plan_created  " + plan:               1,
				"job:thinking plan " + plan:               1,
				"job:reflection  reflect/1/try/1":         1,
				"job:thinking reflection reflect/1/try/1": 1,
				"job:thinking evaluation eval/try/1":      1,
			}, got)
		})
	}
}
