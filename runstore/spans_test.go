package runstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/span"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// setup returns a database with one running run of its own organisation.
func setup(t *testing.T) (ctx context.Context, pool *pgxpool.Pool, runID, orgID, traceID string) {
	t.Helper()
	_, pool = testkit.DB(t)
	ctx = context.Background()
	runID, orgID = testkit.NewRun(t, pool, "running")
	require.NoError(t, pool.QueryRow(ctx, `SELECT trace_id FROM runs WHERE id = $1`, runID).Scan(&traceID))
	return ctx, pool, runID, orgID, traceID
}

func TestBatch(t *testing.T) {
	t.Parallel()
	ctx, pool, runID, orgID, traceID := setup(t)

	write := func(sb *runstore.SpanBatch) {
		t.Helper()
		b := &pgx.Batch{}
		sb.Queue(b)
		require.NoError(t, pool.SendBatch(ctx, b).Close())
	}

	// A span started and ended within one batch is written once, in its last state; a span
	// changed after it was added keeps, in this batch, the state it had.
	var sb runstore.SpanBatch
	root := span.Start(runID, orgID, traceID, "", span.SkillResolve, "resolve")
	require.NoError(t, sb.Add(root))
	require.NoError(t, sb.Add(root.Set("version", 3).End(span.OK)))
	call := span.Start(runID, orgID, traceID, root.ID, span.LLMCall, "llm step")
	require.NoError(t, sb.Add(call))
	call.Set("later", true)
	require.Equal(t, 2, sb.Len())
	write(&sb)

	spans, err := runstore.New(pool).ListSpans(ctx, orgID, runID)
	require.NoError(t, err)
	require.Len(t, spans, 2)
	byID := map[string]span.Span{spans[0].ID: spans[0], spans[1].ID: spans[1]}
	require.Equal(t, span.OK, byID[root.ID].Status)
	require.NotNil(t, byID[root.ID].EndedAt)
	require.EqualValues(t, 3, byID[root.ID].Attributes["version"])
	require.Equal(t, span.Running, byID[call.ID].Status)
	require.Equal(t, root.ID, byID[call.ID].ParentID)
	require.NotContains(t, byID[call.ID].Attributes, "later")
	require.Nil(t, byID[call.ID].Billing)

	// A later batch ends the running span and adds its billing.
	call.Billing = &span.Billing{Provider: "sim", Model: "sim-fast", TokensIn: 12, TokensOut: 34, CostUSD: 0.00012}
	var next runstore.SpanBatch
	require.NoError(t, next.Add(call.End(span.OK)))
	call.Billing.TokensIn = 999 // added already: the row keeps 12
	write(&next)
	spans, err = runstore.New(pool).ListSpans(ctx, orgID, runID)
	require.NoError(t, err)
	for _, s := range spans {
		if s.ID == call.ID {
			require.Equal(t, span.OK, s.Status)
			require.True(t, s.Attributes["later"].(bool))
			require.Equal(t, &span.Billing{Provider: "sim", Model: "sim-fast", TokensIn: 12, TokensOut: 34, CostUSD: 0.00012}, s.Billing)
		}
	}

	var empty runstore.SpanBatch
	b := &pgx.Batch{}
	empty.Queue(b)
	require.Zero(t, b.Len())
}

// TestAbandon closes, in one statement, what earlier attempts left running: not the
// dispatcher's spans, not the current attempt's, not a review waiting for its reviewer.
func TestAbandon(t *testing.T) {
	t.Parallel()
	ctx, pool, runID, orgID, traceID := setup(t)

	start := func(attempt int, typ span.Type, name string) *span.Span {
		s := span.Start(runID, orgID, traceID, runID, typ, name)
		s.Attempt = attempt
		require.NoError(t, runstore.New(pool).SaveSpan(ctx, s))
		return s
	}
	dispatch := start(0, span.GovernanceCheck, "governance")
	done := start(1, span.ReactIteration, "iteration 1")
	require.NoError(t, runstore.New(pool).SaveSpan(ctx, done.End(span.OK)))
	iter := start(1, span.ReactIteration, "iteration 2")
	call := start(1, span.ToolCall, "tool t")
	review := start(1, span.GovernanceReview, "approval of tool calls")
	current := start(2, span.SkillResolve, "resolve")
	_, err := pool.Exec(ctx, `INSERT INTO run_journal (run_id, step_key, kind, data)
		VALUES ($1, 'iter/2/approval', 'decision', jsonb_build_object('review_span_id', $2::text))`, runID, review.ID)
	require.NoError(t, err)

	closed, err := runstore.New(pool).AbandonSpans(ctx, orgID, runID, 2)
	require.NoError(t, err)
	var ids []string
	for _, s := range closed {
		ids = append(ids, s.ID)
		require.Equal(t, span.Abandoned, s.Status)
		require.NotNil(t, s.EndedAt)
		require.Equal(t, 1, s.Attempt)
		require.EqualValues(t, 2, s.Attributes["abandoned_by_attempt"])
	}
	require.ElementsMatch(t, []string{iter.ID, call.ID}, ids)

	spans, err := runstore.New(pool).ListSpans(ctx, orgID, runID)
	require.NoError(t, err)
	status := map[string]span.Status{}
	for _, s := range spans {
		status[s.ID] = s.Status
	}
	require.Equal(t, span.Running, status[dispatch.ID], "the dispatcher's span is not an attempt's")
	require.Equal(t, span.OK, status[done.ID])
	require.Equal(t, span.Running, status[review.ID], "a pause's review waits for its reviewer")
	require.Equal(t, span.Running, status[current.ID], "the resuming attempt's own span")
	require.Equal(t, span.Abandoned, status[iter.ID])

	again, err := runstore.New(pool).AbandonSpans(ctx, orgID, runID, 2)
	require.NoError(t, err)
	require.Empty(t, again)
}
