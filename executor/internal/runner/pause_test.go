package runner

import (
	"context"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// A tool that requires approval pauses the run before it is called: pending_review with
// the reason, holding no worker (the handler returns). A stale task of the paused run is
// dropped. After the approval the next delivery replays the LLM answer, calls the tool
// once and finishes.
func TestPauseForApprovalAndResume(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]openai.ChatCompletionMessage{
		"iter/1/llm": callTool("c1", "refund", `{"amount":12}`),
		"iter/2/llm": text("refunded"),
	})
	ct := newCountingTool(t)
	ct.register(t, b, tool.Tool{Name: "refund", SideEffecting: true, RequiresApproval: true})
	runID := b.newRun(t, skill.Skill{JobType: "refund", ExecutionType: "tool_using", MaxTokens: 16,
		Tools: []string{"refund"}, MaxIterations: 3})
	ctx := context.Background()

	require.NoError(t, b.handle(ctx, runID), "a pause is not a failure")
	rr := b.run(t, runID)
	require.Equal(t, "pending_review", rr.Status)
	require.Len(t, rr.HoldReasons, 1)
	require.Equal(t, apierr.CodeToolRequiresApproval, rr.HoldReasons[0]["code"])
	require.Equal(t, "refund", rr.HoldReasons[0]["tool"])
	require.Zero(t, ct.count(), "nothing is called before the approval")
	require.Contains(t, b.events(t, runID), "job:held")
	require.Equal(t, "1", scrape(t, b.metrics)[`switchyard_executor_pauses_total{tier="tool_using"}`])

	// A duplicate task of the paused run: Postgres says it is not runnable.
	require.NoError(t, b.handle(ctx, runID))
	require.Equal(t, "pending_review", b.status(t, runID))
	require.Equal(t, 1, b.router.count("iter/1/llm"))

	b.review(t, runID, "approve")
	require.NoError(t, b.handle(ctx, runID))
	rr = b.run(t, runID)
	require.Equal(t, "completed", rr.Status)
	require.Equal(t, 2, rr.Attempts)
	require.Equal(t, 1, b.router.count("iter/1/llm"), "the answer that asked for the tool was replayed")
	require.Equal(t, 1, b.router.count("iter/2/llm"))
	require.Equal(t, 1, ct.count(), "the approved call was made once")
	require.Equal(t, 2, rr.LLMCalls, "billed once per call")

	var decision string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT data->>'decision' FROM run_journal
		WHERE run_id = $1 AND step_key = 'iter/1/approval/decision'`, runID).Scan(&decision))
	require.Equal(t, "approve", decision, "the decision is journaled")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM spans WHERE run_id = $1 AND type = 'governance_review'
		AND status = 'ok' AND attributes->>'decision' = 'approve'`, runID), "the review span ends with the decision")
}

// A reviewer's rejection of a paused run ends it without calling the tool; a task of it
// delivered afterwards is dropped.
func TestPausedRunRejected(t *testing.T) {
	t.Parallel()
	b, ct, runID := refundRun(t)
	ctx := context.Background()

	require.NoError(t, b.handle(ctx, runID))
	require.Equal(t, "pending_review", b.status(t, runID))
	b.review(t, runID, "reject")
	require.NoError(t, b.handle(ctx, runID))
	require.Equal(t, "rejected", b.status(t, runID))
	require.Zero(t, ct.count())
	require.Equal(t, 1, b.router.count("iter/1/llm"))
}

// The pause and its announcement are one write: when the events cannot be written the run
// is not paused either (it stays running and the task's retry pauses it again), and a run
// seen pending_review always has its job:held — never a pause nobody was told of.
func TestPauseIsWrittenWithItsEvents(t *testing.T) {
	t.Parallel()
	b, ct, runID := refundRun(t)
	ctx := context.Background()

	// Postgres refuses the run's pause events (a constraint a write can break: the events'
	// statement fails while the run's own row could be written).
	_, err := b.pool.Exec(ctx, `CREATE FUNCTION refuse_held() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.type = 'job:held' THEN RAISE EXCEPTION 'refused for the test'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse_held BEFORE INSERT ON run_events FOR EACH ROW EXECUTE FUNCTION refuse_held()`)
	require.NoError(t, err)
	require.Error(t, b.handle(ctx, runID), "the pause could not be written")
	rr := b.run(t, runID)
	require.Equal(t, "running", rr.Status, "paused without its events")
	require.Empty(t, rr.HoldReasons)
	require.NotContains(t, b.events(t, runID), "job:held")

	_, err = b.pool.Exec(ctx, `DROP TRIGGER refuse_held ON run_events`)
	require.NoError(t, err)
	require.NoError(t, b.handle(ctx, runID))
	rr = b.run(t, runID)
	require.Equal(t, "pending_review", rr.Status)
	require.Len(t, rr.HoldReasons, 1)
	held := 0
	for _, typ := range b.events(t, runID) {
		if typ == "job:held" {
			held++
		}
	}
	require.Equal(t, 1, held)
	require.Equal(t, 1, b.router.count("iter/1/llm"), "the retry replayed the answer")
	require.Zero(t, ct.count())
}

// refundRun is a run of a tool_using skill whose one tool, refund, requires approval; its
// model asks for the tool at once.
func refundRun(t *testing.T) (*bundle, *countingTool, string) {
	b := setup(t, map[string]openai.ChatCompletionMessage{"iter/1/llm": callTool("c1", "refund", `{"amount":12}`)})
	ct := newCountingTool(t)
	ct.register(t, b, tool.Tool{Name: "refund", SideEffecting: true, RequiresApproval: true})
	runID := b.newRun(t, skill.Skill{JobType: "refund", ExecutionType: "tool_using", MaxTokens: 16,
		Tools: []string{"refund"}, MaxIterations: 3})
	return b, ct, runID
}
