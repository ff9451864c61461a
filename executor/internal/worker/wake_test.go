package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/queue"
	"github.com/switchyard-ai/switchyard/shared/redisconn"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// testQueue is one named queue testQueue by a worker's asynq server, for the wake-up tests.
type testQueue struct {
	ctx   context.Context
	rdb   *redis.Client
	opt   asynq.RedisClientOpt
	name  string
	ran   chan string   // task ids, as handlers start
	looks *atomic.Int64 // dequeue scripts sent to Redis (not those the wake-up hook answered)
	w     *Worker
}

// startQueue serves a new queue (concurrency 2) whose handler reports each task and takes
// work long; idleWait < 0 turns wake-ups off. It returns once the queue's pushes are followed.
func startQueue(t *testing.T, idleWait, work time.Duration) *testQueue {
	t.Helper()
	_, db := testkit.DB(t)
	url, rdb := testkit.Redis(t)
	opt, err := redisconn.Asynq(url)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	q := &testQueue{ctx: ctx, rdb: rdb, opt: opt, name: fmt.Sprintf("q%d", time.Now().UnixNano()%1e9),
		ran: make(chan string, 1024), looks: &atomic.Int64{}}
	mux := asynq.NewServeMux()
	mux.HandleFunc(queue.TypeRun, func(_ context.Context, task *asynq.Task) error {
		q.ran <- task.ResultWriter().TaskID()
		time.Sleep(work)
		return nil
	})
	w := New(db, opt, mux, Options{Class: "cpu", IdleWait: idleWait}, slog.New(slog.DiscardHandler))
	w.cancel = cancel
	q.w = w
	if idleWait > 0 {
		w.startWakeups(ctx)
		require.NotNil(t, w.wake, "keyspace events should be enabled on the test Redis")
	}
	srv, client, err := w.newServer(spec{Name: q.name, Class: "cpu", Concurrency: 2}, 2)
	require.NoError(t, err)
	if idleWait > 0 {
		tiers := tierNames(q.name)
		require.Eventually(t, func() bool {
			w.wake.mu.Lock()
			defer w.wake.mu.Unlock()
			return len(w.wake.byTier[tiers[0]].subscribed) == len(tiers)
		}, 5*time.Second, 10*time.Millisecond, "subscribed to pushes onto the queue's tiers")
	}
	client.AddHook(countDequeues{q.looks})
	require.NoError(t, srv.Start(mux))
	t.Cleanup(func() {
		if w.wake != nil {
			w.wake.close()
		}
		srv.Shutdown()
		_ = client.Close()
		cancel()
		w.follows.Wait()
	})
	return q
}

// enqueue puts a run task with id on the queue's tier p.
func (q *testQueue) enqueue(t *testing.T, aq *asynq.Client, id string, p run.Priority, opts ...asynq.Option) {
	t.Helper()
	task, err := queue.NewRunTask(queue.Enqueue{RunID: id, OrgID: "o", Queue: q.name, Priority: p})
	require.NoError(t, err)
	_, err = aq.Enqueue(task, opts...)
	require.NoError(t, err)
}

// countDequeues is a go-redis hook counting asynq's dequeue scripts.
type countDequeues struct{ n *atomic.Int64 }

func (c countDequeues) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c countDequeues) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (c countDequeues) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if _, ok := dequeueTier(cmd.Args()); ok {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// An idle queue's server waits for a push instead of polling Redis every 5 ms, and a push
// onto any tier — an enqueue, or asynq's forwarder moving a scheduled task — starts it at
// once: IdleWait is a minute here, so only the push can have woken it. With wake-ups off the
// same count shows the polling, so the count can tell the two apart.
func TestIdleQueueWaitsForPushes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		idleWait time.Duration
		check    func(t *testing.T, looksPerSecond int64)
	}{
		{"wake-ups", time.Minute, func(t *testing.T, n int64) {
			require.Less(t, n, int64(20), "an idle queue with wake-ups should hardly look; it looked %d times in a second", n)
		}},
		{"polling", -1, func(t *testing.T, n int64) {
			require.Greater(t, n, int64(100), "polling every 5 ms looks hundreds of times a second; counted %d", n)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := startQueue(t, tc.idleWait, 0)
			ctx, rdb, opt, name, ran, looks := q.ctx, q.rdb, q.opt, q.name, q.ran, q.looks
			if tc.idleWait > 0 {
				// Only the testQueue queue's lists are followed: pushes for other queues cost nothing.
				tiers := tierNames(name)
				prefix := fmt.Sprintf("__keyspace@%d__:", opt.DB)
				subs, err := rdb.PubSubNumSub(ctx, prefix+"asynq:{"+tiers[0]+"}:pending",
					prefix+"asynq:{someone-else}:pending").Result()
				require.NoError(t, err)
				require.Equal(t, int64(1), subs[prefix+"asynq:{"+tiers[0]+"}:pending"])
				require.Zero(t, subs[prefix+"asynq:{someone-else}:pending"])
				psubs, err := rdb.PubSubNumPat(ctx).Result()
				require.NoError(t, err)
				require.Zero(t, psubs, "no pattern subscription receives every queue's pushes")
			}

			time.Sleep(300 * time.Millisecond) // settle into idle
			n0 := looks.Load()
			time.Sleep(time.Second)
			t.Logf("dequeue scripts in one idle second: %d", looks.Load()-n0)
			tc.check(t, looks.Load()-n0)

			aq := asynq.NewClient(opt)
			defer aq.Close()
			for _, p := range []run.Priority{run.PriorityLow, run.PriorityCritical} {
				q.enqueue(t, aq, "now-"+string(p), p)
				select {
				case id := <-ran:
					require.Equal(t, "now-"+string(p), id)
				case <-time.After(5 * time.Second):
					t.Fatalf("a task enqueued on the %s tier of an idle queue did not start", p)
				}
			}
			q.enqueue(t, aq, "later", run.PriorityNormal, asynq.ProcessIn(300*time.Millisecond))
			select {
			case id := <-ran:
				require.Equal(t, "later", id)
			case <-time.After(5 * time.Second):
				t.Fatal("a scheduled task did not start once asynq's forwarder made it pending")
			}
		})
	}
}

// A busy queue's looks skip the tiers known to be empty: asynq tries critical, high,
// normal and low in turn, so without the hook every normal-priority task costs at least
// three dequeue scripts; with it, about one.
func TestBusyQueueSkipsTiersKnownEmpty(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		idleWait time.Duration
		check    func(t *testing.T, perTask float64)
	}{
		{"wake-ups", time.Minute, func(t *testing.T, perTask float64) {
			require.Less(t, perTask, 1.6, "dequeue scripts per task with the empty tiers skipped")
		}},
		{"polling", -1, func(t *testing.T, perTask float64) {
			require.Greater(t, perTask, 2.5, "every look tries the critical and high tiers first")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := startQueue(t, tc.idleWait, 2*time.Millisecond)
			aq := asynq.NewClient(q.opt)
			defer aq.Close()
			const n = 200
			q.enqueue(t, aq, "warm", run.PriorityNormal)
			<-q.ran
			time.Sleep(50 * time.Millisecond)
			l0 := q.looks.Load()
			for i := range n {
				q.enqueue(t, aq, fmt.Sprintf("busy-%d", i), run.PriorityNormal)
			}
			for range n {
				select {
				case <-q.ran:
				case <-time.After(10 * time.Second):
					t.Fatal("the queue did not run its tasks")
				}
			}
			perTask := float64(q.looks.Load()-l0) / n
			t.Logf("dequeue scripts per task: %.2f", perTask)
			tc.check(t, perTask)
		})
	}
}

// A tier found empty because its queue was paused gets no push when the queue is unpaused:
// it must not be skipped for longer than the idle wait, or the tasks would wait for the
// next push.
func TestUnpausedQueueIsLookedAtWithinIdleWait(t *testing.T) {
	t.Parallel()
	q := startQueue(t, 300*time.Millisecond, 0)
	aq := asynq.NewClient(q.opt)
	defer aq.Close()
	in := asynq.NewInspector(q.opt)
	defer in.Close()
	tier := queue.Tier(q.name, run.PriorityNormal)
	require.NoError(t, in.PauseQueue(tier))
	q.enqueue(t, aq, "paused", run.PriorityNormal)
	select {
	case <-q.ran:
		t.Fatal("a paused queue ran a task")
	case <-time.After(time.Second):
	}
	require.NoError(t, in.UnpauseQueue(tier))
	select {
	case id := <-q.ran:
		require.Equal(t, "paused", id)
	case <-time.After(3 * time.Second):
		t.Fatal("an unpaused queue's task did not start within a few idle waits")
	}
}
