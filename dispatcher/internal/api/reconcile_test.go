package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// After Redis lost its set of queues (a flush: this process's asynq client still believes
// it registered them), a run whose task was archived — retries spent while Postgres was
// down — is still repaired: the reconciler re-registers the queue, replaces the task, and
// does not stop at the first run it cannot look up.
func TestReconcilerRepairsAfterRedisLostItsQueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var ids []string
	for range 2 {
		code, out := b.do(b.key, http.MethodPost, "/api/v1/dispatch", `{"job_type":"demo_llm","payload":{"prompt":"hi"}}`)
		require.Equal(t, http.StatusAccepted, code, "%v", out)
		ids = append(ids, out["jobId"].(string))
	}
	tier := queue.Tier("default", run.PriorityNormal)
	for _, id := range ids {
		require.NoError(t, b.inspector.ArchiveTask(tier, id))
	}
	require.NoError(t, queue.ForgetQueues(ctx, b.rdb))
	_, err := b.pool.Exec(ctx, `UPDATE runs SET updated_at = now() - interval '1 minute'`)
	require.NoError(t, err)

	n, err := b.app.Reconciler.Once(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for _, id := range ids {
		info, err := b.inspector.GetTaskInfo(tier, id)
		require.NoError(t, err)
		require.Equal(t, asynq.TaskStatePending, info.State)
	}
}
