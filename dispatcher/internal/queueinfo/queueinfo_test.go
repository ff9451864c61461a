package queueinfo

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/shared/redisconn"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// TestConsumersCountProcesses starts two asynq servers on one named queue in this process,
// as an executor does for a queue of high concurrency: that is one consumer, not two.
func TestConsumersCountProcesses(t *testing.T) {
	t.Parallel()
	url, rdb := testkit.Redis(t)
	opt, err := redisconn.Asynq(url)
	require.NoError(t, err)
	for range 2 {
		srv := asynq.NewServer(opt, asynq.Config{Concurrency: 2, Queues: queue.Tiers("wide"),
			Logger: nopLogger{}, LogLevel: asynq.FatalLevel})
		require.NoError(t, srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })))
		t.Cleanup(srv.Shutdown)
	}
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	tr := &Tracker{Inspector: insp, Redis: rdb, Log: slog.New(slog.DiscardHandler)}
	require.Eventually(t, func() bool {
		servers, err := insp.Servers()
		return err == nil && len(servers) == 2
	}, 5*time.Second, 20*time.Millisecond, "both servers registered")
	tr.refresh(context.Background())
	require.Equal(t, 1, tr.Consumers("wide"))
	require.Equal(t, 0, tr.Consumers("other"))
}

type nopLogger struct{}

func (nopLogger) Debug(...any) {}
func (nopLogger) Info(...any)  {}
func (nopLogger) Warn(...any)  {}
func (nopLogger) Error(...any) {}
func (nopLogger) Fatal(...any) {}

// TestEstimatedStart measures a queue's drain from asynq's processed counters: none before
// anything was processed, then a start time that lies further out the more work is ahead.
func TestEstimatedStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, rdb := testkit.Redis(t)
	opt, err := redisconn.Asynq(url)
	require.NoError(t, err)
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	client := asynq.NewClient(opt)
	defer client.Close()
	tr := &Tracker{Inspector: insp, Redis: rdb, Log: slog.New(slog.DiscardHandler)}
	_, err = tr.Position(ctx, "est", "normal")
	require.NoError(t, err)
	tr.refreshDrains()
	_, ok := tr.EstimatedStart("est", 10)
	require.False(t, ok, "no rate measured yet")

	for range 20 {
		_, err := client.Enqueue(asynq.NewTask("x", nil), asynq.Queue(queue.Tier("est", "normal")))
		require.NoError(t, err)
	}
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: 4, Queues: queue.Tiers("est"),
		TaskCheckInterval: 10 * time.Millisecond, Logger: nopLogger{}, LogLevel: asynq.FatalLevel})
	require.NoError(t, srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })))
	t.Cleanup(srv.Shutdown)
	require.Eventually(t, func() bool {
		info, err := insp.GetQueueInfo(queue.Tier("est", "normal"))
		return err == nil && info.ProcessedTotal == 20
	}, 10*time.Second, 10*time.Millisecond)
	tr.refreshDrains()

	near, ok := tr.EstimatedStart("est", 1)
	require.True(t, ok)
	far, ok := tr.EstimatedStart("est", 1000)
	require.True(t, ok)
	require.False(t, near.Before(time.Now().Add(-time.Second)))
	require.True(t, far.After(near), "more work ahead, a later start")
}
