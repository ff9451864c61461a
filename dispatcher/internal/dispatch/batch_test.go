package dispatch

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/ids"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// TestBatchWriteFailureStaysWithItsJob: when a statement of the batch's one transaction
// fails, the items are written one by one and each failure stays with its item. Two causes:
// the race the batch's key lookup cannot see (another request takes an item's idempotency key
// between the lookup and the write), reported as a duplicate; and data Postgres refuses (a
// NUL character in jsonb, which request checks refuse earlier in the API).
func TestBatchWriteFailureStaysWithItsJob(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	orgID := testkit.NewOrg(t, pool)
	snap := storedSnapshot(t, pool, orgID)
	s := &Service{DB: pool, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	t.Cleanup(s.Close)

	other, _ := dispatchRows(t, snap, "k")
	require.NoError(t, other.write(ctx, pool), "the other request wins the key")
	newJob := func(key string) *job {
		w, env := dispatchRows(t, snap, key)
		return &job{req: Request{IdempotencyKey: key}, orgID: orgID, snap: snap, rows: *w, event: env,
			runID: env.JobID}
	}
	refused := newJob("")
	refused.rows.runs = runstore.RunBatch{}
	refused.rows.runs.Add(runstore.NewRun{ID: refused.runID, OrgID: orgID, TraceID: ids.New(), JobType: "noop",
		SkillVersion: 1, SkillSnapshotDigest: snap.Digest, ExecutionType: "llm_only", Queue: "default",
		Priority: "normal", Status: "queued", Payload: []byte(`{"n":"\u0000"}`)})
	jobs := []*job{newJob(""), newJob("k"), refused, newJob("fresh")}
	batchID := ids.New()
	failed, err := s.writeBatch(ctx, batchID, orgID, 4, jobs)
	require.NoError(t, err)
	require.Len(t, failed, 2)
	require.ErrorIs(t, failed[jobs[1]], runstore.ErrDuplicate)
	require.Equal(t, http.StatusBadRequest, dbError(failed[refused]).Status, "%v", failed[refused])
	var runs, batches int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM runs WHERE id = ANY($1::uuid[])),
		(SELECT count(*) FROM batches WHERE id = $2)`, []string{jobs[0].runID, jobs[3].runID}, batchID).Scan(&runs, &batches))
	require.Equal(t, []int{2, 1}, []int{runs, batches})
	require.False(t, jobs[0].event.TS.IsZero(), "the envelope carries its journaled time")
}
