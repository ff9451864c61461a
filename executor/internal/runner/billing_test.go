package runner

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/tool"
)

// Every paid answer is added to the run's totals once, and drawn once as an llm_call span
// with its billing: a refused call adds nothing, and a resumed attempt that replays a paid
// answer does not add it again. (The fake router bills 10 tokens in, 5 out and $0.001 a call.)
func TestBillingOncePerPaidCall(t *testing.T) {
	t.Parallel()
	b := setup(t, ticketAnswers())
	ct := newCountingTool(t)
	ct.register(t, b, tool.Tool{Name: "file_ticket", SideEffecting: true})
	b.router.fail("iter/2/llm", providerUnavailable())
	runID := b.newRun(t, ticketSkill())

	require.Error(t, b.handle(withDelivery(context.Background(), 0, 4), runID))
	rr := b.run(t, runID)
	require.Equal(t, 1, rr.LLMCalls)
	require.Equal(t, int64(10), rr.TokensIn)
	require.Equal(t, int64(5), rr.TokensOut)
	require.InDelta(t, 0.001, rr.CostUSD, 1e-9)

	require.NoError(t, b.handle(withDelivery(context.Background(), 1, 4), runID))
	rr = b.run(t, runID)
	require.Equal(t, "completed", rr.Status)
	require.Equal(t, 3, b.router.count("iter/1/llm")+b.router.count("iter/2/llm"), "three calls, two of them paid")
	require.Equal(t, 2, rr.LLMCalls)
	require.Equal(t, int64(20), rr.TokensIn)
	require.Equal(t, int64(10), rr.TokensOut)
	require.InDelta(t, 0.002, rr.CostUSD, 1e-9)

	var spans, tokensIn int
	var cost float64
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*), coalesce(sum(tokens_in), 0),
		coalesce(sum(cost_usd), 0)::float8 FROM spans WHERE run_id = $1 AND type = 'llm_call' AND cost_usd IS NOT NULL`,
		runID).Scan(&spans, &tokensIn, &cost))
	require.Equal(t, 2, spans, "one billed span per paid call")
	require.Equal(t, 20, tokensIn)
	require.InDelta(t, 0.002, cost, 1e-9)
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'job:llm_response'`, runID))
}
