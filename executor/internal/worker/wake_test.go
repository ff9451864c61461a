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
			_, db := testkit.DB(t)
			url, rdb := testkit.Redis(t)
			opt, err := redisconn.Asynq(url)
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			name := fmt.Sprintf("idle%d", time.Now().UnixNano()%1e6)

			ran := make(chan string, 4)
			mux := asynq.NewServeMux()
			mux.HandleFunc(queue.TypeRun, func(_ context.Context, task *asynq.Task) error {
				ran <- task.ResultWriter().TaskID()
				return nil
			})
			w := New(db, opt, mux, Options{Class: "cpu", IdleWait: tc.idleWait}, slog.New(slog.DiscardHandler))
			w.cancel = cancel
			if tc.idleWait > 0 {
				w.startWakeups(ctx)
				require.NotNil(t, w.wake, "keyspace events should be enabled on the test Redis")
			}
			srv, client, err := w.newServer(spec{Name: name, Class: "cpu", Concurrency: 2}, 2)
			require.NoError(t, err)
			if tc.idleWait > 0 {
				tiers := tierNames(name)
				require.Eventually(t, func() bool {
					w.wake.mu.Lock()
					defer w.wake.mu.Unlock()
					return len(w.wake.byTier[tiers[0]].subscribed) == len(tiers)
				}, 5*time.Second, 10*time.Millisecond, "subscribed to pushes onto the queue's tiers")
				// Only the served queue's lists are followed: pushes for other queues cost nothing.
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
			var looks atomic.Int64
			client.AddHook(countDequeues{&looks})
			require.NoError(t, srv.Start(mux))
			defer func() {
				if w.wake != nil {
					w.wake.close()
				}
				srv.Shutdown()
				_ = client.Close()
				cancel()
				w.follows.Wait()
			}()

			time.Sleep(300 * time.Millisecond) // settle into idle
			n0 := looks.Load()
			time.Sleep(time.Second)
			t.Logf("dequeue scripts in one idle second: %d", looks.Load()-n0)
			tc.check(t, looks.Load()-n0)

			aq := asynq.NewClient(opt)
			defer aq.Close()
			for _, p := range []run.Priority{run.PriorityLow, run.PriorityCritical} {
				task, err := queue.NewRunTask(queue.Enqueue{RunID: "now-" + string(p), OrgID: "o", Queue: name, Priority: p})
				require.NoError(t, err)
				_, err = aq.Enqueue(task)
				require.NoError(t, err)
				select {
				case id := <-ran:
					require.Equal(t, "now-"+string(p), id)
				case <-time.After(5 * time.Second):
					t.Fatalf("a task enqueued on the %s tier of an idle queue did not start", p)
				}
			}
			task, err := queue.NewRunTask(queue.Enqueue{RunID: "later", OrgID: "o", Queue: name, Priority: run.PriorityNormal})
			require.NoError(t, err)
			_, err = aq.Enqueue(task, asynq.ProcessIn(300*time.Millisecond))
			require.NoError(t, err)
			select {
			case id := <-ran:
				require.Equal(t, "later", id)
			case <-time.After(5 * time.Second):
				t.Fatal("a scheduled task did not start once asynq's forwarder made it pending")
			}
		})
	}
}
