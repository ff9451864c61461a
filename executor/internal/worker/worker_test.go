package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/shared/redisconn"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func TestShards(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		concurrency, size int
		want              []int
	}{
		{1, 250, []int{1}},
		{250, 250, []int{250}},
		{251, 250, []int{126, 125}},
		{1000, 250, []int{250, 250, 250, 250}},
		{5, 2, []int{2, 2, 1}},
	} {
		require.Equal(t, tc.want, shards(tc.concurrency, tc.size), "shards(%d, %d)", tc.concurrency, tc.size)
	}
}

// TestShardedQueue registers a queue of concurrency 5 with at most 2 handlers per asynq
// server: the worker starts three servers for it, and together they run five tasks at
// once — no more, and none of the servers idle.
func TestShardedQueue(t *testing.T) {
	t.Parallel()
	_, db := testkit.DB(t)
	url, _ := testkit.Redis(t)
	opt, err := redisconn.Asynq(url)
	require.NoError(t, err)
	ctx := context.Background()
	name := fmt.Sprintf("wide%d", time.Now().UnixNano()%1e6)
	_, err = db.Exec(ctx, `INSERT INTO queues (name, class, concurrency, timeout_seconds, description)
		VALUES ($1, 'cpu', 5, 60, 'sharded')`, name)
	require.NoError(t, err)

	var running, peak atomic.Int32
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	mux := asynq.NewServeMux()
	mux.HandleFunc(queue.TypeRun, func(ctx context.Context, _ *asynq.Task) error {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		defer running.Add(-1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	w := New(db, opt, mux, Options{Class: "cpu", Only: []string{name}, ShardSize: 2, ShutdownTimeout: 5 * time.Second},
		slog.New(slog.DiscardHandler))
	require.NoError(t, w.Start(ctx))
	defer w.Stop()

	client := queue.NewClient(opt)
	defer client.Close()
	for i := range 7 {
		task, err := queue.NewRunTask(queue.Enqueue{RunID: fmt.Sprintf("r%d", i), OrgID: "o", Queue: name, Priority: run.PriorityNormal})
		require.NoError(t, err)
		_, err = client.EnqueueContext(ctx, task)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return running.Load() == 5 }, 10*time.Second, 10*time.Millisecond,
		"five handlers should run at once; running %d", running.Load())
	time.Sleep(200 * time.Millisecond) // a sixth would have started by now
	require.EqualValues(t, 5, peak.Load(), "the queue's concurrency is 5 across its servers")

	insp := asynq.NewInspector(opt)
	defer insp.Close()
	require.Eventually(t, func() bool {
		servers, err := insp.Servers()
		if err != nil {
			return false
		}
		n, total := 0, 0
		for _, s := range servers {
			if _, ok := s.Queues[queue.Tier(name, run.PriorityNormal)]; ok {
				n++
				total += s.Concurrency
			}
		}
		return n == 3 && total == 5
	}, 10*time.Second, 50*time.Millisecond, "three asynq servers with concurrency 2+2+1")

	once.Do(func() { close(release) })
	require.Eventually(t, func() bool {
		q, err := insp.GetQueueInfo(queue.Tier(name, run.PriorityNormal))
		return err == nil && q.Processed >= 7 && q.Pending == 0 && q.Active == 0
	}, 10*time.Second, 20*time.Millisecond, "all seven tasks ran")
}
