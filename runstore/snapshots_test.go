package runstore_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func TestSnapshotsKeepTheNewest(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	s := runstore.New(pool)
	runID, _ := testkit.NewRun(t, pool, "running")

	_, _, ok, err := s.LoadSnapshot(ctx, runID, "snapshot")
	require.NoError(t, err)
	require.False(t, ok, "no snapshot yet")

	require.NoError(t, s.SaveSnapshot(ctx, runID, "snapshot", 2, json.RawMessage(`{"n":2}`)))
	b := &pgx.Batch{}
	runstore.QueueSnapshot(b, runID, "snapshot", 3, json.RawMessage(`{"n":3}`))
	runstore.QueueSnapshot(b, runID, "agent/2/snapshot", 1, json.RawMessage(`{"n":1}`))
	require.NoError(t, s.SendBatch(ctx, b))
	// A lagging attempt's older snapshot, and a repeated one, change nothing.
	require.NoError(t, s.SaveSnapshot(ctx, runID, "snapshot", 1, json.RawMessage(`{"n":1}`)))
	require.NoError(t, s.SaveSnapshot(ctx, runID, "snapshot", 3, json.RawMessage(`{"n":"again"}`)))

	seq, state, ok, err := s.LoadSnapshot(ctx, runID, "snapshot")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 3, seq)
	require.JSONEq(t, `{"n":3}`, string(state))

	seq, state, ok, err = s.LoadSnapshot(ctx, runID, "agent/2/snapshot")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 1, seq)
	require.JSONEq(t, `{"n":1}`, string(state))

	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM run_snapshots WHERE run_id = $1`, runID).Scan(&rows))
	require.Equal(t, 2, rows, "one row per key")
}
