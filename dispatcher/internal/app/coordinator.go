package app

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/chain"
	"github.com/switchyard-ai/switchyard/queue"
)

// coordinatorServer consumes the coordinator queue: an asynq server whose idle dequeues
// wait for a push (queue.Wakeup) instead of polling, so a step's end reaches the
// coordinator as soon as it is enqueued — the hand-off has no polling tick.
type coordinatorServer struct {
	opt         asynq.RedisConnOpt
	handler     *chain.Coordinator
	concurrency int
	log         *slog.Logger

	srv    *asynq.Server
	wake   *queue.Wakeup
	client redis.UniversalClient // the server's, carrying the wake-up hook
	sub    redis.UniversalClient // the wake-up's subscription
	cancel context.CancelFunc
	done   chan struct{}
}

func newCoordinatorServer(opt asynq.RedisConnOpt, h *chain.Coordinator, concurrency int, log *slog.Logger) *coordinatorServer {
	return &coordinatorServer{opt: opt, handler: h, concurrency: concurrency, log: log.With("component", "coordinator")}
}

func (c *coordinatorServer) start(ctx context.Context) error {
	client, ok := c.opt.MakeRedisClient().(redis.UniversalClient)
	sub, ok2 := c.opt.MakeRedisClient().(redis.UniversalClient)
	if !ok || !ok2 {
		return fmt.Errorf("unsupported Redis connection option %T", c.opt)
	}
	c.client, c.sub = client, sub
	c.wake = queue.NewWakeup(time.Second, c.log)
	c.wake.RegisterQueue(queue.Coordinator)
	client.AddHook(c.wake.Hook())
	ctx, c.cancel = context.WithCancel(ctx)
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		c.wake.Follow(ctx, sub)
	}()
	c.srv = asynq.NewServerFromRedisClient(client, asynq.Config{
		Concurrency: c.concurrency,
		Queues:      map[string]int{queue.Coordinator: 1},
		// Idle, the dequeue waits for an announced push (the wake-up); this is only the
		// pause after a look that found nothing, as the executor's.
		TaskCheckInterval:        5 * time.Millisecond,
		DelayedTaskCheckInterval: 500 * time.Millisecond,
		ShutdownTimeout:          10 * time.Second,
		RetryDelayFunc: func(n int, _ error, _ *asynq.Task) time.Duration {
			d := min(100*time.Millisecond<<min(n, 10), 30*time.Second)
			return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
		},
		Logger: queue.Logger(c.log),
		ErrorHandler: asynq.ErrorHandlerFunc(func(_ context.Context, t *asynq.Task, err error) {
			c.log.Warn("chain transition failed; it is retried", "task", t.Type(), "error", err)
		}),
	})
	return c.srv.Start(c.handler)
}

func (c *coordinatorServer) stop() {
	if c.srv == nil {
		return
	}
	c.wake.Close()
	c.srv.Shutdown()
	c.cancel()
	<-c.done
	_ = c.client.Close()
	_ = c.sub.Close()
}
