package queue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/run"
)

// The contract with the pinned asynq version: what this package reads and writes of asynq's
// Redis state is what asynq itself writes. Each test drives real asynq (client, server,
// inspector) against real Redis and fails when asynq stops behaving the way the code assumes.

// TestKeyLayoutContract follows one task from enqueue to its worker and checks every key and
// field this package reads: the pending list and the registered-queue set, the paused key,
// the active list, the lease and its expiry, the task hash's state — and that asynq's
// heartbeat extends a lease by LeaseDuration at least every Heartbeat.
func TestKeyLayoutContract(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tier := Tier(b.name, run.PriorityNormal)
	wake := b.rdb.Subscribe(b.ctx, wakeChannel(tier))
	defer wake.Close()
	_, err := wake.Receive(b.ctx) // the subscription's confirmation
	require.NoError(t, err)
	// asynq's enqueue script has the shape the Client's hook recognises: the announcement
	// goes in the same round trip.
	task, err := NewRunTask(Enqueue{RunID: "t1", OrgID: "o", Queue: b.name, Priority: run.PriorityNormal})
	require.NoError(t, err)
	announced := new(bool)
	_, err = b.client.aq.EnqueueContext(context.WithValue(b.ctx, announcedKey{}, announced), task)
	require.NoError(t, err)
	require.True(t, *announced, "the enqueue script was recognised and its push announced with it")
	msg, err := wake.ReceiveTimeout(b.ctx, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, wakeChannel(tier), msg.(*redis.Message).Channel)

	pending, err := b.rdb.LRange(b.ctx, PendingKey(tier), 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"t1"}, pending)
	require.Equal(t, "pending", b.rdb.HGet(b.ctx, taskPrefix(tier)+"t1", "state").Val())
	require.True(t, b.rdb.SIsMember(b.ctx, allQueues, tier).Val(), "asynq registers the queue in %s", allQueues)
	counts, err := Pending(b.ctx, b.rdb, b.name)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 0, 1, 0}, counts, "pending per tier, highest first")

	in := asynq.NewInspector(b.opt)
	defer in.Close()
	require.NoError(t, in.PauseQueue(tier))
	require.EqualValues(t, 1, b.rdb.Exists(b.ctx, pausedKey(tier)).Val())
	require.NoError(t, in.UnpauseQueue(tier))

	// Register restores what asynq's client would have written.
	require.NoError(t, b.rdb.SRem(b.ctx, allQueues, tier).Err())
	_, err = in.GetTaskInfo(tier, "t1")
	require.ErrorIs(t, err, asynq.ErrQueueNotFound)
	require.NoError(t, Register(b.ctx, b.rdb, tier))
	_, err = in.GetTaskInfo(tier, "t1")
	require.NoError(t, err)

	started, looks := make(chan string, 1), &atomic.Int64{}
	release := make(chan struct{})
	b.server(t, nil, 1, func(ctx context.Context, task *asynq.Task) error {
		started <- task.ResultWriter().TaskID()
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}, countDequeues{looks})
	require.Equal(t, "t1", recv(t, started, 5*time.Second, "the server took the task"))
	require.Positive(t, looks.Load(), "asynq's dequeue script has the shape the wake-up hook recognises")
	at := time.Now()

	active, err := b.rdb.LRange(b.ctx, activeKey(tier), 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"t1"}, active)
	require.Equal(t, "active", b.rdb.HGet(b.ctx, taskPrefix(tier)+"t1", "state").Val())
	lease, err := b.rdb.ZScore(b.ctx, leaseKey(tier), "t1").Result()
	require.NoError(t, err)
	require.InDelta(t, float64(at.Add(LeaseDuration).Unix()), lease, 2, "a lease is LeaseDuration long")
	require.Eventually(t, func() bool {
		return b.rdb.ZScore(b.ctx, leaseKey(tier), "t1").Val() > lease
	}, Heartbeat+2*time.Second, 100*time.Millisecond, "the heartbeat extends the lease within Heartbeat")
	extended := b.rdb.ZScore(b.ctx, leaseKey(tier), "t1").Val()
	require.InDelta(t, float64(time.Now().Add(LeaseDuration).Unix()), extended, 2, "by LeaseDuration from now")
	close(release)
}

// dying is a go-redis hook that, once killed, fails every command: a worker process that
// died without a word, whose heartbeats stop.
type dying struct{ dead atomic.Bool }

var errDead = errors.New("worker is dead")

func (d *dying) DialHook(next redis.DialHook) redis.DialHook { return next }
func (d *dying) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if d.dead.Load() {
			return errDead
		}
		return next(ctx, cmds)
	}
}
func (d *dying) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if d.dead.Load() {
			cmd.SetErr(errDead)
			return errDead
		}
		return next(ctx, cmd)
	}
}

// TestRecoverDeadWorkerContract kills a worker holding a task, in real time against asynq's
// own heartbeat: RecoverOrphans leaves alone the task of a live worker all along — its
// heartbeat keeps its lease fresh — and hands the dead worker's task back within StaleAfter
// plus a heartbeat, announcing it so that an idle server (waiting a minute) takes it at once.
func TestRecoverDeadWorkerContract(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tier := Tier(b.name, run.PriorityNormal)
	kill := &dying{}
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	held := make(chan string, 4)
	block := func(ctx context.Context, task *asynq.Task) error {
		held <- task.ResultWriter().TaskID()
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	b.server(t, nil, 1, block, kill)
	b.enqueue(t, "orphan", run.PriorityNormal)
	require.Equal(t, "orphan", recv(t, held, 5*time.Second, "the doomed worker took its task"))

	// The live worker: one slot holds "alive" all along, the other waits idle for work.
	ran := make(chan string, 4)
	b.server(t, b.follow(t, time.Minute), 2, func(ctx context.Context, task *asynq.Task) error {
		if task.ResultWriter().TaskID() == "alive" {
			return block(ctx, task)
		}
		ran <- task.ResultWriter().TaskID()
		return nil
	})
	b.enqueue(t, "alive", run.PriorityNormal)
	require.Equal(t, "alive", recv(t, held, 5*time.Second, "the live worker took its task"))

	kill.dead.Store(true)
	killed := time.Now()
	var moved []string
	for len(moved) == 0 {
		require.Less(t, time.Since(killed), StaleAfter+Heartbeat+3*time.Second,
			"the dead worker's task is recovered within StaleAfter and a heartbeat")
		ids, err := RecoverOrphans(b.ctx, b.rdb, []string{b.name}, time.Now())
		require.NoError(t, err)
		moved = ids
		time.Sleep(250 * time.Millisecond)
	}
	took := time.Since(killed)
	t.Logf("recovered after %s", took.Round(100*time.Millisecond))
	require.Equal(t, []string{"orphan"}, moved, "only the dead worker's task")
	require.Greater(t, took, StaleAfter-Heartbeat-2*time.Second, "a live lease is not taken for dead")
	require.Equal(t, "orphan", recv(t, ran, 3*time.Second, "the idle live server took the recovered task"))

	active, err := b.rdb.LRange(b.ctx, activeKey(tier), 0, -1).Result()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"alive"}, active, "the live worker's task stayed active")
	releaseOnce.Do(func() { close(release) })
	in := asynq.NewInspector(b.opt)
	defer in.Close()
	require.Eventually(t, func() bool {
		q, err := in.GetQueueInfo(tier)
		return err == nil && q.Active == 0 && q.Pending == 0 && q.Processed >= 2
	}, 10*time.Second, 50*time.Millisecond, "asynq finished both tasks")
}
