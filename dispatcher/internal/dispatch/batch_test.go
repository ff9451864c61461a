package dispatch

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/shared/ids"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// TestBatchWriteKeyTakenMeanwhile covers the race the batch's key lookup cannot see: another
// request takes an item's idempotency key between the lookup and the write. The batch's one
// transaction then fails whole; the items are written one by one, the item with the taken key
// is reported as a duplicate and the others are written.
func TestBatchWriteKeyTakenMeanwhile(t *testing.T) {
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
	jobs := []*job{newJob(""), newJob("k"), newJob("fresh")}
	batchID := ids.New()
	failed, err := s.writeBatch(ctx, batchID, orgID, 3, jobs)
	require.NoError(t, err)
	require.Equal(t, map[*job]error{jobs[1]: store.ErrDuplicate}, failed)
	var runs, batches int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM runs WHERE id = ANY($1::uuid[])),
		(SELECT count(*) FROM batches WHERE id = $2)`, []string{jobs[0].runID, jobs[2].runID}, batchID).Scan(&runs, &batches))
	require.Equal(t, []int{2, 1}, []int{runs, batches})
	require.False(t, jobs[0].event.TS.IsZero(), "the envelope carries its journaled time")
}
