package runner

import (
	"context"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// ticketSkill is a ReAct skill whose first LLM answer calls the side-effecting tool
// file_ticket, and whose second answers.
func ticketSkill() skill.Skill {
	return skill.Skill{JobType: "ticket", ExecutionType: "tool_using", MaxTokens: 16, Tools: []string{"file_ticket"},
		MaxIterations: 3}
}

func ticketAnswers() map[string]openai.ChatCompletionMessage {
	return map[string]openai.ChatCompletionMessage{
		"iter/1/llm": callTool("c1", "file_ticket", `{"title":"printer on fire"}`),
		"iter/2/llm": text("filed"),
	}
}

// A resumed attempt — a retry after a failed call, or the next delivery after its worker
// died — replays what the journal holds: the first LLM answer and the side-effecting tool
// call are not requested again; only the step that never answered is.
func TestResumedAttemptReplaysTheJournal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// first ends the first attempt while the run's second LLM call is asked for.
		first func(t *testing.T, b *bundle, runID string)
	}{
		{"retry after a router error", func(t *testing.T, b *bundle, runID string) {
			b.router.fail("iter/2/llm", providerUnavailable())
			require.Error(t, b.handle(withDelivery(context.Background(), 0, 4), runID))
			require.Equal(t, "queued", b.status(t, runID))
		}},
		{"worker lost", func(t *testing.T, b *bundle, runID string) {
			// The second LLM call is in flight when the worker loses its lease: asynq ends
			// the handler's context.
			ctx, kill := context.WithCancel(context.Background())
			defer kill()
			b.router.hang("iter/2/llm")
			b.router.before = func(step string) {
				if step == "iter/2/llm" {
					kill()
				}
			}
			require.Error(t, b.handle(ctx, runID))
			require.Equal(t, "running", b.status(t, runID), "the run resumes on the task's next delivery")
			b.router.mu.Lock()
			b.router.before = nil
			b.router.mu.Unlock()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, ticketAnswers())
			ct := newCountingTool(t)
			ct.register(t, b, tool.Tool{Name: "file_ticket", SideEffecting: true})
			runID := b.newRun(t, ticketSkill())

			c.first(t, b, runID)
			require.Equal(t, 1, b.router.count("iter/1/llm"))
			require.Equal(t, 1, ct.count(), "the tool was called by the first attempt")

			require.NoError(t, b.handle(withDelivery(context.Background(), 1, 4), runID))
			rr := b.run(t, runID)
			require.Equal(t, "completed", rr.Status)
			require.Equal(t, 2, rr.Attempts)
			require.Equal(t, 1, b.router.count("iter/1/llm"), "the journaled LLM answer was replayed, not requested")
			require.Equal(t, 1, ct.count(), "the journaled side-effecting call was not sent again")
			require.Equal(t, 1, b.count(t, `SELECT count(*) FROM tool_calls WHERE run_id = $1`, runID))

			// The resumed attempt's conversation is the first attempt's: the tool's answer is in it.
			b.router.mu.Lock()
			msgs := b.router.requests["iter/2/llm"].Messages
			b.router.mu.Unlock()
			last := msgs[len(msgs)-1]
			require.Equal(t, openai.ChatMessageRoleTool, last.Role)
			require.JSONEq(t, `{"ok":true}`, last.Content)

			m := scrape(t, b.metrics)
			require.Equal(t, "1", m[`switchyard_executor_llm_calls_total{outcome="replayed"}`])
			require.Equal(t, "1", m[`switchyard_executor_tool_calls_total{outcome="replayed",tool="file_ticket"}`])
		})
	}
}
