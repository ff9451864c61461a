package queue

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/run"
)

// ranInto returns a handler that reports each task's id on ran and then works for work.
func ranInto(ran chan<- string, work time.Duration) asynq.HandlerFunc {
	return func(_ context.Context, task *asynq.Task) error {
		ran <- task.ResultWriter().TaskID()
		time.Sleep(work)
		return nil
	}
}

// An idle queue's server waits for an announced push instead of polling Redis every 5 ms,
// and every kind of push starts it at once — an enqueue through Client, and asynq's
// forwarder making a scheduled task pending (announced by the hook): IdleWait is a minute
// here, so only the announcement can have woken it. With wake-ups off the same count shows
// the polling, so the count can tell the two apart; it also fails if asynq's dequeue script
// stops matching the shape the hook recognises.
func TestIdleQueueWaitsForPushes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		wakeup bool
		check  func(t *testing.T, looksPerSecond int64)
	}{
		{"wake-ups", true, func(t *testing.T, n int64) {
			require.Less(t, n, int64(20), "an idle queue with wake-ups should hardly look; it looked %d times in a second", n)
		}},
		{"polling", false, func(t *testing.T, n int64) {
			require.Greater(t, n, int64(100), "polling every 5 ms looks hundreds of times a second; counted %d", n)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var w *Wakeup
			if tc.wakeup {
				w = b.follow(t, time.Minute)
			}
			ran, looks := make(chan string, 16), &atomic.Int64{}
			b.server(t, w, 2, ranInto(ran, 0), countDequeues{looks})
			if tc.wakeup {
				// Only the served queue's channels are followed: pushes for other queues cost nothing.
				tiers := TierNames(b.name)
				subs, err := b.rdb.PubSubNumSub(b.ctx, wakeChannel(tiers[0]), wakeChannel(b.name+"-someone-else")).Result()
				require.NoError(t, err)
				require.Equal(t, int64(1), subs[wakeChannel(tiers[0])])
				require.Zero(t, subs[wakeChannel(b.name+"-someone-else")])
			}

			time.Sleep(300 * time.Millisecond) // settle into idle
			n0 := looks.Load()
			time.Sleep(time.Second)
			t.Logf("dequeue scripts in one idle second: %d", looks.Load()-n0)
			tc.check(t, looks.Load()-n0)

			for _, p := range []run.Priority{run.PriorityLow, run.PriorityCritical} {
				b.enqueue(t, "now-"+string(p), p)
				require.Equal(t, "now-"+string(p), recv(t, ran, 5*time.Second, "a task enqueued on an idle queue"))
			}
			b.enqueue(t, "later", run.PriorityNormal, asynq.ProcessIn(300*time.Millisecond))
			require.Equal(t, "later", recv(t, ran, 5*time.Second, "a scheduled task once asynq's forwarder made it pending"))
		})
	}
}

// A task that a plain asynq client enqueues is not announced: an idle queue finds it within
// the idle wait, not at once. (The Client's announcement is what the test above measures.)
func TestUnannouncedPushWaitsAtMostIdleWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.follow(t, 400*time.Millisecond)
	ran := make(chan string, 4)
	b.server(t, w, 1, ranInto(ran, 0))
	time.Sleep(100 * time.Millisecond)
	aq := asynq.NewClient(b.opt)
	defer aq.Close()
	task, err := NewRunTask(Enqueue{RunID: "quiet", OrgID: "o", Queue: b.name, Priority: run.PriorityNormal})
	require.NoError(t, err)
	_, err = aq.Enqueue(task)
	require.NoError(t, err)
	require.Equal(t, "quiet", recv(t, ran, 3*time.Second, "an unannounced task within a few idle waits"))
}

// A server that shuts down with a task in hand puts it back on its queue (asynq's requeue
// script); the hook announces that push, so another executor's idle server takes the task at
// once instead of after its idle wait (a minute here).
func TestRequeueAtShutdownWakesAnotherServer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan string, 4)
	first := b.server(t, b.follow(t, time.Minute), 1, func(ctx context.Context, task *asynq.Task) error {
		started <- task.ResultWriter().TaskID()
		<-ctx.Done() // shutdown cancels it: asynq requeues the task
		return ctx.Err()
	})
	b.enqueue(t, "handed-over", run.PriorityNormal)
	require.Equal(t, "handed-over", recv(t, started, 5*time.Second, "the first server took the task"))

	ran := make(chan string, 4)
	b.server(t, b.follow(t, time.Minute), 1, ranInto(ran, 0))
	time.Sleep(300 * time.Millisecond) // the second server is idle, waiting
	first.Shutdown()
	require.Equal(t, "handed-over", recv(t, ran, 5*time.Second, "the second server took the requeued task"))
}

// A busy queue's looks skip the tiers known to be empty: asynq tries critical, high,
// normal and low in turn, so without the hook every normal-priority task costs at least
// three dequeue scripts; with it, about one.
func TestBusyQueueSkipsTiersKnownEmpty(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		wakeup bool
		check  func(t *testing.T, perTask float64)
	}{
		{"wake-ups", true, func(t *testing.T, perTask float64) {
			require.Less(t, perTask, 1.6, "dequeue scripts per task with the empty tiers skipped")
		}},
		{"polling", false, func(t *testing.T, perTask float64) {
			require.Greater(t, perTask, 2.5, "every look tries the critical and high tiers first")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var w *Wakeup
			if tc.wakeup {
				w = b.follow(t, time.Minute)
			}
			ran, looks := make(chan string, 1024), &atomic.Int64{}
			b.server(t, w, 2, ranInto(ran, 2*time.Millisecond), countDequeues{looks})
			const n = 200
			b.enqueue(t, "warm", run.PriorityNormal)
			recv(t, ran, 5*time.Second, "the first task")
			time.Sleep(50 * time.Millisecond)
			l0 := looks.Load()
			for i := range n {
				b.enqueue(t, fmt.Sprintf("busy-%d", i), run.PriorityNormal)
			}
			for range n {
				recv(t, ran, 10*time.Second, "the queue's tasks")
			}
			perTask := float64(looks.Load()-l0) / n
			t.Logf("dequeue scripts per task: %.2f", perTask)
			tc.check(t, perTask)
		})
	}
}

// A tier found empty because its queue was paused gets no announcement when the queue is
// unpaused: it must not be skipped for longer than the idle wait, or the tasks would wait
// for the next push.
func TestUnpausedQueueIsLookedAtWithinIdleWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ran := make(chan string, 4)
	b.server(t, b.follow(t, 300*time.Millisecond), 2, ranInto(ran, 0))
	in := asynq.NewInspector(b.opt)
	defer in.Close()
	tier := Tier(b.name, run.PriorityNormal)
	require.NoError(t, in.PauseQueue(tier))
	b.enqueue(t, "paused", run.PriorityNormal)
	select {
	case <-ran:
		t.Fatal("a paused queue ran a task")
	case <-time.After(time.Second):
	}
	require.NoError(t, in.UnpauseQueue(tier))
	require.Equal(t, "paused", recv(t, ran, 3*time.Second, "an unpaused queue's task within a few idle waits"))
}
