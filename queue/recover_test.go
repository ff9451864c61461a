package queue

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/redisconn"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// TestRecoverOrphans puts two tasks in asynq's active state as a worker would, one whose
// lease its worker keeps extending and one whose worker stopped extending it, and checks
// that only the orphan goes back to pending, at the front, with its task state updated.
func TestRecoverOrphans(t *testing.T) {
	t.Parallel()
	url, rdb := testkit.Redis(t)
	opt, err := redisconn.Asynq(url)
	require.NoError(t, err)
	client := asynq.NewClient(opt)
	defer client.Close()
	ctx := context.Background()
	tier := Tier("default", run.PriorityNormal)
	for _, id := range []string{"alive", "orphan", "waiting"} {
		task, err := NewRunTask(Enqueue{RunID: id, OrgID: "o", Queue: "default", Priority: run.PriorityNormal})
		require.NoError(t, err)
		_, err = client.Enqueue(task)
		require.NoError(t, err)
	}
	now := time.Now()
	// Dequeue "alive" and "orphan" the way asynq does: pending -> active with a lease.
	for id, lease := range map[string]time.Time{"alive": now.Add(25 * time.Second), "orphan": now.Add(10 * time.Second)} {
		require.NoError(t, rdb.LRem(ctx, PendingKey(tier), 0, id).Err())
		require.NoError(t, rdb.LPush(ctx, activeKey(tier), id).Err())
		require.NoError(t, rdb.ZAdd(ctx, leaseKey(tier), redisZ(lease.Unix(), id)).Err())
		require.NoError(t, rdb.HSet(ctx, taskPrefix(tier)+id, "state", "active").Err())
	}

	moved, err := RecoverOrphans(ctx, rdb, []string{"default"}, now)
	require.NoError(t, err)
	require.Equal(t, []string{"orphan"}, moved)
	active, err := rdb.LRange(ctx, activeKey(tier), 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"alive"}, active)
	// asynq dequeues from the right: the orphan is next.
	next, err := rdb.LIndex(ctx, PendingKey(tier), -1).Result()
	require.NoError(t, err)
	require.Equal(t, "orphan", next)

	insp := asynq.NewInspector(opt)
	defer insp.Close()
	info, err := insp.GetTaskInfo(tier, "orphan")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStatePending, info.State)

	// Nothing else is stale: a second pass moves nothing.
	moved, err = RecoverOrphans(ctx, rdb, []string{"default"}, now)
	require.NoError(t, err)
	require.Empty(t, moved)
}

func redisZ(score int64, member string) redis.Z {
	return redis.Z{Score: float64(score), Member: member}
}
