package queue

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
	"go.uber.org/goleak"

	"github.com/switchyard-ai/switchyard/shared/redisconn"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// bundle is one test's Redis database, asynq connection and queue name.
type bundle struct {
	ctx    context.Context
	rdb    *redis.Client
	opt    asynq.RedisClientOpt
	name   string
	client *Client
}

var queueSeq atomic.Int64

func setup(t *testing.T) *bundle {
	t.Helper()
	url, rdb := testkit.Redis(t)
	opt, err := redisconn.Asynq(url)
	require.NoError(t, err)
	client := NewClient(opt)
	t.Cleanup(func() { _ = client.Close() })
	// Pub/Sub channels span the server's databases: names are unique across test processes.
	name := fmt.Sprintf("q%d_%d", time.Now().UnixNano()%1e9, queueSeq.Add(1))
	return &bundle{ctx: context.Background(), rdb: rdb, opt: opt, name: name, client: client}
}

// follow starts a Wakeup of the given idle wait following announcements until the test
// ends.
func (b *bundle) follow(t *testing.T, idleWait time.Duration) *Wakeup {
	t.Helper()
	w := NewWakeup(idleWait, discardLog)
	rdb := redis.NewClient(&redis.Options{Addr: b.opt.Addr, DB: b.opt.DB, Password: b.opt.Password})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Follow(ctx, rdb) }()
	t.Cleanup(func() {
		w.Close()
		cancel()
		<-done
		_ = rdb.Close()
	})
	return w
}

// server starts an asynq server of the queue configured as the executor configures its own
// (executor/internal/worker), with w's hook when w is not nil, hooks added to its client,
// and stops it when the test ends. It returns once, with w, the queue's announcements are
// followed.
func (b *bundle) server(t *testing.T, w *Wakeup, concurrency int, h asynq.HandlerFunc, hooks ...redis.Hook) *asynq.Server {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: b.opt.Addr, DB: b.opt.DB, Password: b.opt.Password})
	if w != nil {
		w.Register(b.name)
		client.AddHook(w.Hook())
		require.Eventually(t, func() bool { return w.Followed(b.name) }, 5*time.Second, 5*time.Millisecond,
			"subscribed to the announcements of the queue's tiers")
	}
	for _, h := range hooks {
		client.AddHook(h)
	}
	srv := asynq.NewServerFromRedisClient(client, asynq.Config{
		Concurrency:              concurrency,
		Queues:                   Tiers(b.name),
		TaskCheckInterval:        5 * time.Millisecond,
		DelayedTaskCheckInterval: 500 * time.Millisecond,
		ShutdownTimeout:          time.Second,
		Logger:                   nopLogger{},
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc(TypeRun, h)
	require.NoError(t, srv.Start(mux))
	t.Cleanup(func() {
		if w != nil {
			w.Close() // a waiting dequeue would hold the shutdown for the idle wait
		}
		srv.Shutdown()
		_ = client.Close()
	})
	return srv
}

// enqueue puts a run task with id on the queue's tier p through the Client.
func (b *bundle) enqueue(t *testing.T, id string, p run.Priority, opts ...asynq.Option) {
	t.Helper()
	task, err := NewRunTask(Enqueue{RunID: id, OrgID: "o", Queue: b.name, Priority: p})
	require.NoError(t, err)
	_, err = b.client.EnqueueContext(b.ctx, task, opts...)
	require.NoError(t, err)
}

// recv waits for an id on ch.
func recv(t *testing.T, ch <-chan string, within time.Duration, what string) string {
	t.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(within):
		t.Fatalf("%s: nothing within %s", what, within)
		return ""
	}
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

var discardLog = slog.New(slog.DiscardHandler)

type nopLogger struct{}

func (nopLogger) Debug(...any) {}
func (nopLogger) Info(...any)  {}
func (nopLogger) Warn(...any)  {}
func (nopLogger) Error(...any) {}
func (nopLogger) Fatal(...any) {}
