package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

type bundle struct {
	ctx   context.Context
	pool  *pgxpool.Pool
	orgID string
}

func setup(t *testing.T) bundle {
	t.Helper()
	_, pool := testkit.DB(t)
	return bundle{ctx: context.Background(), pool: pool, orgID: testkit.NewOrg(t, pool)}
}

// referencing writes a run as the dispatcher does now: its snapshot stored apart, the run
// holding the digest.
func (b bundle) referencing(t *testing.T, binding map[string]any) string {
	t.Helper()
	snap, err := store.NewSnapshot(b.orgID, binding)
	require.NoError(t, err)
	require.NoError(t, store.EnsureSnapshot(b.ctx, b.pool, snap))
	id := uuid.NewString()
	var rb runstore.RunBatch
	rb.Add(runstore.NewRun{ID: id, OrgID: b.orgID, TraceID: uuid.NewString(), JobType: "x", SkillVersion: 1,
		SkillSnapshotDigest: snap.Digest, ExecutionType: "llm_only", Queue: "default", Priority: "normal",
		Status: "queued", Payload: []byte(`{}`)})
	batch := &pgx.Batch{}
	rb.Queue(batch)
	require.NoError(t, b.pool.SendBatch(b.ctx, batch).Close())
	require.Equal(t, 1, rb.Inserted())
	return id
}

// inline writes a run as the dispatcher did before migration 00013: the snapshot copied in.
func (b bundle) inline(t *testing.T, snapshot string) string {
	t.Helper()
	id := uuid.NewString()
	_, err := b.pool.Exec(b.ctx, `INSERT INTO runs (id, org_id, trace_id, job_type, skill_version, skill_snapshot,
		execution_type, queue, status, payload) VALUES ($1, $2, $3, 'x', 1, $4, 'llm_only', 'default', 'queued', '{}')`,
		id, b.orgID, uuid.NewString(), snapshot)
	require.NoError(t, err)
	return id
}

func TestRunStoresOnlyTheDigest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.referencing(t, map[string]any{"job_type": "x", "version": 1})
	var inline, digest []byte
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT skill_snapshot, skill_snapshot_digest FROM runs WHERE id = $1`, id).
		Scan(&inline, &digest))
	require.Nil(t, inline, "no copy of the snapshot in the run")
	require.Len(t, digest, 32)
}

func TestEnqueueInfoReadsReferencedAndInlineSnapshots(t *testing.T) {
	t.Parallel()
	b := setup(t)
	referenced := b.referencing(t, map[string]any{"job_type": "x", "timeout_seconds": 42, "max_retries": 7})
	old := b.inline(t, `{"job_type": "x", "timeout_seconds": 17, "max_retries": 1}`)
	bare := b.referencing(t, map[string]any{"job_type": "x"})

	for _, tc := range []struct {
		name, id         string
		timeout, retries int
	}{
		{"referenced", referenced, 42, 7},
		{"inline", old, 17, 1},
		{"neither set: the queue's timeout and 3 retries", bare, 300, 3},
	} {
		e, err := runstore.New(b.pool).GetEnqueueInfo(b.ctx, tc.id)
		require.NoError(t, err, tc.name)
		require.Equal(t, []any{tc.id, b.orgID, "default", "normal", tc.timeout, tc.retries},
			[]any{e.ID, e.OrgID, e.Queue, e.Priority, e.TimeoutSeconds, e.MaxRetries}, tc.name)

		var snap struct {
			TimeoutSeconds *int `json:"timeout_seconds"`
		}
		require.NoError(t, runstore.New(b.pool).SkillSnapshot(b.ctx, tc.id, &snap), tc.name)
		if tc.id != bare {
			require.NotNil(t, snap.TimeoutSeconds, tc.name)
			require.Equal(t, tc.timeout, *snap.TimeoutSeconds, tc.name)
		}
	}
}

func TestSnapshotRowsAreOnePerOrganisationAndContent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := testkit.NewOrg(t, b.pool)
	binding := map[string]any{"job_type": "x", "version": 3}
	mine, err := store.NewSnapshot(b.orgID, binding)
	require.NoError(t, err)
	again, err := store.NewSnapshot(b.orgID, binding)
	require.NoError(t, err)
	theirs, err := store.NewSnapshot(other, binding)
	require.NoError(t, err)
	require.Equal(t, mine.Digest, again.Digest, "the same content has the same digest")
	require.NotEqual(t, mine.Digest, theirs.Digest, "another organisation's equal binding is another row")
	for _, s := range []store.Snapshot{mine, again, theirs} {
		require.NoError(t, store.EnsureSnapshot(b.ctx, b.pool, s))
	}
	var n int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM skill_snapshots`).Scan(&n))
	require.Equal(t, 2, n)
}

// TestOrgDeletionTakesRunsAndSnapshots: the runs' reference to skill_snapshots restricts
// nothing when the organisation goes, since its runs go in the same statement.
func TestOrgDeletionTakesRunsAndSnapshots(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.referencing(t, map[string]any{"job_type": "x", "version": 1})
	b.referencing(t, map[string]any{"job_type": "x", "version": 2})
	b.inline(t, `{"job_type": "x"}`)
	_, err := b.pool.Exec(b.ctx, `DELETE FROM orgs WHERE id = $1`, b.orgID)
	require.NoError(t, err)
	var runs, snapshots int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM skill_snapshots)`).
		Scan(&runs, &snapshots))
	require.Equal(t, []int{0, 0}, []int{runs, snapshots})
}

func TestMissingSnapshotIsRecognised(t *testing.T) {
	t.Parallel()
	b := setup(t)
	snap, err := store.NewSnapshot(b.orgID, map[string]any{"job_type": "x"})
	require.NoError(t, err)
	var rb runstore.RunBatch
	rb.Add(runstore.NewRun{ID: uuid.NewString(), OrgID: b.orgID, TraceID: uuid.NewString(), JobType: "x",
		SkillVersion: 1, SkillSnapshotDigest: snap.Digest, ExecutionType: "llm_only", Queue: "default",
		Priority: "normal", Status: "queued", Payload: []byte(`{}`)})
	batch := &pgx.Batch{}
	rb.Queue(batch)
	err = b.pool.SendBatch(b.ctx, batch).Close()
	require.Error(t, err, "a run cannot reference a snapshot that is not stored")
	require.True(t, store.IsMissingSnapshot(err), "%v", err)
}
