package runstore_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func drafts(t *testing.T, typed ...any) []event.Draft {
	t.Helper()
	var out []event.Draft
	for i := 0; i < len(typed); i += 2 {
		d, err := event.NewDraft(typed[i].(string), typed[i+1])
		require.NoError(t, err)
		out = append(out, d)
	}
	return out
}

func TestQueueRecordAll(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()

	t.Run("events take consecutive numbers after the run's last, in the order given", func(t *testing.T) {
		runID, orgID := testkit.NewRun(t, pool, "queued")
		first, err := runstore.New(pool).RecordEvent(ctx, runID, orgID, event.JobQueued, map[string]any{"n": 0})
		require.NoError(t, err)
		require.EqualValues(t, 1, first.Seq)

		data := map[string]any{"n": 1}
		b := &pgx.Batch{}
		envs := runstore.QueueEvents(b, runID, orgID, drafts(t, event.JobStarted, data, event.JobSpan, map[string]any{"n": 2},
			event.JobCompleted, map[string]any{"n": 3}))
		data["n"] = 99 // drafted already: the journal keeps 1
		require.NoError(t, pool.SendBatch(ctx, b).Close())

		require.Len(t, envs, 3)
		for i, e := range envs {
			require.EqualValues(t, i+2, e.Seq)
			require.Equal(t, runID, e.JobID)
			require.Equal(t, orgID, e.OrgID)
			require.False(t, e.TS.IsZero())
		}
		got, err := runstore.New(pool).Replay(ctx, orgID, runID, 0)
		require.NoError(t, err)
		require.Len(t, got, 4)
		for i, typ := range []string{event.JobQueued, event.JobStarted, event.JobSpan, event.JobCompleted} {
			require.Equal(t, typ, got[i].Type)
			require.EqualValues(t, i+1, got[i].Seq)
			require.JSONEq(t, `{"n":`+string(rune('0'+i))+`}`, string(got[i].Data))
		}
		var seq int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT event_seq FROM runs WHERE id = $1`, runID).Scan(&seq))
		require.EqualValues(t, 4, seq)
	})

	t.Run("a run that does not exist fails the batch and journals nothing", func(t *testing.T) {
		_, orgID := testkit.NewRun(t, pool, "queued")
		missing := uuid.NewString()
		b := &pgx.Batch{}
		runstore.QueueEvents(b, missing, orgID, drafts(t, event.JobStarted, map[string]any{}))
		require.ErrorIs(t, pool.SendBatch(ctx, b).Close(), pgx.ErrNoRows)
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM run_events WHERE run_id = $1`, missing).Scan(&n))
		require.Zero(t, n)
	})

	t.Run("no drafts queue nothing", func(t *testing.T) {
		b := &pgx.Batch{}
		require.Nil(t, runstore.QueueEvents(b, uuid.NewString(), uuid.NewString(), nil))
		require.Zero(t, b.Len())
	})
}

// Announced answers the keys of the run's announcements of the types asked, and says when
// one carries none (written before announcements carried a key); another run's do not count.
func TestAnnounced(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	s := runstore.New(pool)
	types := []string{event.JobPlanCreated, event.JobThinking}
	runID, orgID := testkit.NewRun(t, pool, "running")
	other, otherOrg := testkit.NewRun(t, pool, "running")

	keys, unkeyed, err := s.Announced(ctx, runID, types)
	require.NoError(t, err)
	require.Empty(t, keys)
	require.False(t, unkeyed)

	b := &pgx.Batch{}
	runstore.QueueEvents(b, runID, orgID, drafts(t,
		event.JobPlanCreated, map[string]any{"plan": 1, "announces": "plan/1/try/2"},
		event.JobThinking, map[string]any{"phase": "plan", "announces": "plan/1/try/2"},
		event.JobProgress, map[string]any{"announces": "not an announcement type"},
		event.JobThinking, map[string]any{"phase": "reflection", "announces": "agent/2/reflect/1/try/1"}))
	runstore.QueueEvents(b, other, otherOrg, drafts(t, event.JobPlanCreated, map[string]any{"plan": 1}))
	require.NoError(t, pool.SendBatch(ctx, b).Close())

	keys, unkeyed, err = s.Announced(ctx, runID, types)
	require.NoError(t, err)
	require.False(t, unkeyed)
	require.Equal(t, map[string]bool{"job:plan_created plan/1/try/2": true, "job:thinking plan/1/try/2": true,
		"job:thinking agent/2/reflect/1/try/1": true}, keys)

	keys, unkeyed, err = s.Announced(ctx, other, types)
	require.NoError(t, err)
	require.True(t, unkeyed, "an announcement without a key")
	require.Empty(t, keys)
}
