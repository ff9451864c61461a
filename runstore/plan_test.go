package runstore

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// planConn is a connection to a database of the test's own, with the planner setting set.
func planConn(t *testing.T, set string) *pgxpool.Conn {
	t.Helper()
	_, pool := testkit.DB(t)
	conn, err := pool.Acquire(context.Background())
	require.NoError(t, err)
	t.Cleanup(conn.Release)
	_, err = conn.Exec(context.Background(), set)
	require.NoError(t, err)
	return conn
}

// A connection keeps the generic plan of a prepared statement for its lifetime. The plans
// of the claim and transition statements, made against an empty runs table as a fresh
// deployment's first claims are, must find the run through its index and never scan the
// table: such a plan, kept, costs a full scan per claim once the table has grown.
func TestStatementsFindTheRunByIndexWhateverTheTableSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := planConn(t, `SET plan_cache_mode = force_generic_plan`)

	id := uuid.NewString()
	transition, _, err := transitionStatement(id, nil, run.Completed, Change{}, nil)
	require.NoError(t, err)
	for name, c := range map[string]struct {
		sql  string
		args string
	}{
		"claim":      {claimWorkSQL, `'` + id + `', now()`},
		"transition": {transition, `'` + id + `', 'completed', '{running}', '{}', '{}'`},
	} {
		_, err := conn.Exec(ctx, `PREPARE stmt AS `+c.sql)
		require.NoError(t, err, name)
		plan := testkit.Explain(t, conn, `EXECUTE stmt(`+c.args+`)`)
		require.NotContains(t, plan, "Seq Scan", "%s plan:\n%s", name, plan)
		require.Contains(t, plan, "Index Scan using runs_pkey on runs r", "%s plan:\n%s", name, plan)
		_, err = conn.Exec(ctx, `DEALLOCATE stmt`)
		require.NoError(t, err)
	}
}

// The reconciler's scan runs every few seconds for the life of the deployment; it must read
// live runs through their partial index, never the whole table of finished runs. With
// sequential scans disabled the planner still picks one when no index serves the query, so
// this fails without runs_live_idx whatever the table holds.
func TestStrandedScanReadsLiveRunsThroughTheirIndex(t *testing.T) {
	t.Parallel()
	conn := planConn(t, `SET enable_seqscan = off`)
	plan := testkit.Explain(t, conn, strandedSQL, 10.0)
	require.NotContains(t, plan, "Seq Scan", plan)
	require.Contains(t, plan, "runs_live_idx", plan)
}
