package runstore_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// TestChainRowsRoundTrip writes a chain and its step rows as the coordinator does and
// reads them back under the chain's lock, through the API's view and the pending count.
func TestChainRowsRoundTrip(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	orgID := testkit.NewOrg(t, pool)
	chainID := uuid.NewString()
	b := &pgx.Batch{}
	runstore.QueueChain(b, runstore.NewChain{ID: chainID, OrgID: orgID, TraceID: uuid.NewString(), JobType: "c",
		Definition: json.RawMessage(`{"steps":[]}`), Input: json.RawMessage(`{"topic":"x"}`), Priority: "normal",
		ParentRunID: uuid.NewString()})
	rs := runstore.New(pool)
	require.NoError(t, rs.SendBatch(ctx, b))

	n := 2
	require.NoError(t, rs.SaveChainSteps(ctx, chainID, []runstore.ChainStep{
		{StepID: "a", Instance: -1, Status: "completed", Output: json.RawMessage(`{"v":1}`), CostUSD: 0.5},
		{StepID: "b", Instance: -1, Status: "pending"},
		{StepID: "c", Instance: -1, Status: "dispatched", Instances: &n},
		{StepID: "c", Instance: 0, Status: "pending"},
	}))
	pending, err := rs.PendingSteps(ctx, chainID)
	require.NoError(t, err)
	require.Equal(t, 2, pending)

	require.NoError(t, rs.InTx(ctx, func(tx *runstore.Store) error {
		c, steps, err := tx.LockChain(ctx, chainID)
		require.NoError(t, err)
		require.Equal(t, "running", c.Status)
		require.JSONEq(t, `{"topic":"x"}`, string(c.Input))
		require.Len(t, steps, 4)
		require.Equal(t, 2, *steps[2].Instances)
		b := &pgx.Batch{}
		steps[1].Status = "skipped"
		runstore.QueueChainSteps(b, chainID, steps[1:2])
		runstore.QueueUpdateChain(b, chainID, "completed", nil, 0.5)
		return tx.SendBatch(ctx, b)
	}))
	v, err := rs.GetChain(ctx, orgID, chainID)
	require.NoError(t, err)
	require.Equal(t, "completed", v.Status)
	require.NotNil(t, v.FinishedAt)
	require.Equal(t, "skipped", v.Steps[1].Status)
	pending, err = rs.PendingSteps(ctx, chainID)
	require.NoError(t, err)
	require.Equal(t, 1, pending)

	_, err = rs.GetChain(ctx, testkit.NewOrg(t, pool), chainID)
	require.ErrorIs(t, err, runstore.ErrChainNotFound, "another organisation's chain")
	_, _, err = rs.LockChain(ctx, uuid.NewString())
	require.ErrorIs(t, err, runstore.ErrChainNotFound)
}
