package reconcile

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// The scan runs every few seconds for the life of the deployment; it must read live runs
// through their partial index, never the whole table of finished runs. With sequential scans
// disabled the planner still picks one when no index serves the query, so this fails
// without runs_live_idx whatever the table holds.
func TestScanReadsLiveRunsThroughTheirIndex(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET enable_seqscan = off`)
	require.NoError(t, err)
	plan := testkit.Explain(t, conn, scanSQL, 10.0)
	require.NotContains(t, plan, "Seq Scan", plan)
	require.Contains(t, plan, "runs_live_idx", plan)
}
