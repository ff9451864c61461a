package dispatch

import (
	"context"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/span"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// storedSnapshot stores a skill snapshot of orgID, as record does before its first run.
func storedSnapshot(t *testing.T, pool *pgxpool.Pool, orgID string) store.Snapshot {
	t.Helper()
	snap := newSnapshot(t, orgID)
	require.NoError(t, store.EnsureSnapshot(context.Background(), pool, snap))
	return snap
}

func newSnapshot(t *testing.T, orgID string) store.Snapshot {
	t.Helper()
	snap, err := store.NewSnapshot(orgID, map[string]any{"job_type": "noop", "version": 1})
	require.NoError(t, err)
	return snap
}

// dispatchRows are the rows of one accepted dispatch of snap's organisation, as record
// writes them.
func dispatchRows(t *testing.T, snap store.Snapshot, idempotencyKey string) (*rows, *event.Envelope) {
	t.Helper()
	orgID := snap.OrgID
	id, trace := uuid.NewString(), uuid.NewString()
	var w rows
	w.runs.Add(runstore.NewRun{ID: id, OrgID: orgID, TraceID: trace, JobType: "noop", SkillVersion: 1,
		SkillSnapshotDigest: snap.Digest, ExecutionType: "llm_only", Queue: "default", Priority: "normal",
		Status: "queued", Payload: []byte(`{"n":1}`), IdempotencyKey: idempotencyKey})
	root := span.Start(id, orgID, trace, "", span.Dispatch, "dispatch noop")
	root.ID = id
	require.NoError(t, w.spans.Add(root.End(span.OK)))
	gov := span.Start(id, orgID, trace, id, span.GovernanceCheck, "governance")
	require.NoError(t, w.spans.Add(gov.End(span.OK)))
	env, err := w.events.Add(id, orgID, event.JobQueued, map[string]any{"queue": "default"})
	require.NoError(t, err)
	return &w, env
}

func TestGroupFailureStaysWithItsDispatch(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	snap := storedSnapshot(t, pool, testkit.NewOrg(t, pool))
	c := &committer{db: pool}
	first, firstEnv := dispatchRows(t, snap, "")
	// No such organisation (nor its snapshot): its run breaks the foreign keys.
	orphan, _ := dispatchRows(t, newSnapshot(t, uuid.NewString()), "")
	third, thirdEnv := dispatchRows(t, snap, "")
	group := []*pendingRecord{
		{ctx: ctx, rows: first, done: make(chan error, 1)},
		{ctx: ctx, rows: orphan, done: make(chan error, 1)},
		{ctx: ctx, rows: third, done: make(chan error, 1)},
	}
	c.write(group)
	require.NoError(t, <-group[0].done)
	require.Error(t, <-group[1].done, "the organisation's foreign key fails this one only")
	require.NoError(t, <-group[2].done)
	var runs, spans, events int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM spans),
		(SELECT count(*) FROM run_events)`).Scan(&runs, &spans, &events))
	require.Equal(t, []int{2, 4, 2}, []int{runs, spans, events})
	require.False(t, firstEnv.TS.IsZero(), "the envelope carries its journaled time")
	require.False(t, thirdEnv.TS.IsZero())
}

func TestConcurrentCommitsAllLand(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	snap := storedSnapshot(t, pool, testkit.NewOrg(t, pool))
	var c committer
	defer c.stop()
	const n = 200
	var wg sync.WaitGroup
	errs := make([]error, n)
	envs := make([]*event.Envelope, n)
	for i := range n {
		w, env := dispatchRows(t, snap, "")
		envs[i] = env
		wg.Go(func() { errs[i] = c.commit(ctx, pool, w) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err)
		var journaled int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM run_events WHERE run_id = $1 AND seq = 1 AND ts = $2`,
			envs[i].JobID, envs[i].TS).Scan(&journaled))
		require.Equal(t, 1, journaled, "event %d carries the time it was journaled with", i)
	}
	var runs, spans int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM spans)`).Scan(&runs, &spans))
	require.Equal(t, []int{n, 2 * n}, []int{runs, spans})
}

func TestTakenIdempotencyKeyWritesNothing(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	snap := storedSnapshot(t, pool, testkit.NewOrg(t, pool))
	first, _ := dispatchRows(t, snap, "key-1")
	require.Equal(t, -1, first.runs.Inserted(), "nothing ran yet")
	require.NoError(t, first.write(ctx, pool))
	require.Equal(t, 1, first.runs.Inserted())
	second, _ := dispatchRows(t, snap, "key-1")
	require.Error(t, second.write(ctx, pool), "the rows after the skipped run roll back")
	require.Equal(t, 0, second.runs.Inserted(), "the second run with the key is skipped")
	var runs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM runs`).Scan(&runs))
	require.Equal(t, 1, runs)
}
