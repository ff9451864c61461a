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

// coordinatorServer consumes the coordinator's queues with two asynq servers: one applies
// step ends and deadlines (queue.Coordinator) with the coordinator's full concurrency, the
// other starts chains (queue.CoordinatorStarts) a few at a time. Under load the chains
// already running move on first and new ones wait to start, where nothing has begun yet:
// the hand-off between steps stays short and each started chain finishes sooner, as the
// router's fewest-in-flight order does for calls (docs/chains.md "Admission").
//
// Idle dequeues wait for a push (queue.Wakeup) instead of polling, so a step's end reaches
// the coordinator as soon as it is enqueued — the hand-off has no polling tick.
type coordinatorServer struct {
	opt                 asynq.RedisConnOpt
	handler             *chain.Coordinator
	concurrency, starts int
	log                 *slog.Logger

	gate    *admission
	srvs    []*asynq.Server
	clients []redis.UniversalClient // the servers', each carrying the wake-up hook
	wake    *queue.Wakeup
	sub     redis.UniversalClient // the wake-up's subscription
	cancel  context.CancelFunc
	done    chan struct{}
}

func newCoordinatorServer(opt asynq.RedisConnOpt, h *chain.Coordinator, concurrency, starts int, log *slog.Logger) *coordinatorServer {
	return &coordinatorServer{opt: opt, handler: h, concurrency: concurrency, starts: starts,
		log: log.With("component", "coordinator")}
}

func (c *coordinatorServer) start(ctx context.Context) error {
	sub, ok := c.opt.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return fmt.Errorf("unsupported Redis connection option %T", c.opt)
	}
	c.sub = sub
	c.wake = queue.NewWakeup(time.Second, c.log)
	c.wake.RegisterQueues(queue.Coordinator)
	c.wake.RegisterQueues(queue.CoordinatorStarts)
	ctx, c.cancel = context.WithCancel(ctx)
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		c.wake.Follow(ctx, sub)
	}()
	c.gate = newAdmission(c.starts)
	for _, s := range []struct {
		queue       string
		concurrency int
		handler     asynq.Handler
	}{{queue.Coordinator, c.concurrency, c.gate.steps(c.handler)}, {queue.CoordinatorStarts, c.starts, c.gate.starts(c.handler)}} {
		client, ok := c.opt.MakeRedisClient().(redis.UniversalClient)
		if !ok {
			return fmt.Errorf("unsupported Redis connection option %T", c.opt)
		}
		client.AddHook(c.wake.Hook())
		c.clients = append(c.clients, client)
		srv := asynq.NewServerFromRedisClient(client, c.config(s.queue, s.concurrency))
		if err := srv.Start(s.handler); err != nil {
			return err
		}
		c.srvs = append(c.srvs, srv)
	}
	return nil
}

func (c *coordinatorServer) config(q string, concurrency int) asynq.Config {
	return asynq.Config{
		Concurrency: concurrency,
		Queues:      map[string]int{q: 1},
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
	}
}

func (c *coordinatorServer) stop() {
	if c.wake == nil {
		return
	}
	c.wake.Close()
	for _, s := range c.srvs {
		s.Shutdown()
	}
	c.cancel()
	<-c.done
	for _, cl := range c.clients {
		_ = cl.Close()
	}
	_ = c.sub.Close()
}
