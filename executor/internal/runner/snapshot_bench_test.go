package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/skill"
)

// BenchmarkAutonomousResume times the attempt that resumes an autonomous run of steps
// llm_only steps whose goal evaluation failed (a transient router error) after every step
// was executed: with the snapshot the first attempt saved after its last reflection
// (snapshot), and with that snapshot deleted so the agent replays its journal (replay).
// journal-reads/op counts the LLM answers the resumed attempt read back from the journal.
// Postgres is the test stack's (scripts/stack.sh test):
//
//	go test ./executor/internal/runner -run '^$' -bench AutonomousResume -benchtime 20x
func BenchmarkAutonomousResume(b *testing.B) {
	for _, steps := range []int{10, 40} {
		for _, mode := range []string{"snapshot", "replay"} {
			b.Run(fmt.Sprintf("steps=%d/%s", steps, mode), func(b *testing.B) {
				benchResume(b, steps, mode == "snapshot")
			})
		}
	}
}

func benchResume(b *testing.B, steps int, snapshot bool) {
	answers := map[string]openai.ChatCompletionMessage{}
	var plan []any
	for i := 1; i <= steps; i++ {
		id := "s" + strconv.Itoa(i)
		plan = append(plan, map[string]any{"step_id": id, "description": "do " + id, "execution_type": "llm_only",
			"success_criteria": []string{id + " done"}})
		answers[fmt.Sprintf("exec/%d/llm", i)] = text("result of " + id)
		answers[fmt.Sprintf("reflect/%d/try/1", i)] = agentAnswer(map[string]any{"verdict": "pass",
			"reasoning": id + " meets its criteria", "summary": id + " is done"})
	}
	answers["plan/1/try/1"] = agentAnswer(map[string]any{"steps": plan})
	answers["eval/try/1"] = agentAnswer(map[string]any{"goal_achieved": true, "reasoning": "all done", "answer": "done"})
	bb := setup(b, answers)
	sk := skill.Skill{JobType: "agent", ExecutionType: "autonomous", MaxTokens: 64, MaxIterations: 3,
		Autonomous: json.RawMessage(fmt.Sprintf(`{"max_steps": %d}`, steps))}
	replayed := func() float64 {
		v, _ := strconv.ParseFloat(scrape(b, bb.metrics)[`switchyard_executor_llm_calls_total{outcome="replayed"}`], 64)
		return v
	}
	ctx := context.Background()
	var reads float64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		runID := bb.newRun(b, sk)
		bb.router.fail("eval/try/1", providerUnavailable())
		require.Error(b, bb.handle(withDelivery(ctx, 0, 3), runID))
		if !snapshot {
			_, err := bb.pool.Exec(ctx, `DELETE FROM run_snapshots WHERE run_id = $1`, runID)
			require.NoError(b, err)
		}
		before := replayed()
		b.StartTimer()
		require.NoError(b, bb.handle(withDelivery(ctx, 1, 3), runID))
		b.StopTimer()
		reads += replayed() - before
		require.Equal(b, "completed", bb.status(b, runID))
		b.StartTimer()
	}
	b.ReportMetric(reads/float64(b.N), "journal-reads/op")
}
