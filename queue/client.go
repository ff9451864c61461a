package queue

import (
	"context"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Client enqueues tasks through asynq and announces each push onto a pending list on the
// queue's wake channel, so that an idle executor waiting on that queue (Wakeup) starts it at
// once. Everything that enqueues for an executor goes through a Client.
//
// A Client opened by NewClient sends the announcement in the same round trip as asynq's
// enqueue script (a go-redis hook pipelines the PUBLISH behind it), so announcing costs the
// enqueue nothing in latency and the executor learns of the task as soon as Redis has it —
// as soon as keyspace events would tell it. Where the hook did not recognise the script (a
// Client on a connection it does not own, or an asynq whose script differs; the contract test
// catches the latter), the announcement follows the enqueue in a round trip of its own.
type Client struct {
	aq  *asynq.Client
	rdb redis.UniversalClient
	own bool // rdb was opened by NewClient and is closed with the Client
}

// NewClient opens a Client on its own Redis connection, as asynq.NewClient does; Close
// closes it. opt is one of asynq's RedisClientOpt, RedisFailoverClientOpt and
// RedisClusterOpt, which all make a redis.UniversalClient.
func NewClient(opt asynq.RedisConnOpt) *Client {
	rdb := opt.MakeRedisClient().(redis.UniversalClient)
	rdb.AddHook(announceHook{rdb})
	return &Client{aq: asynq.NewClientFromRedisClient(rdb), rdb: rdb, own: true}
}

// NewClientFromRedis returns a Client on rdb, which the caller keeps and closes; its
// announcements take a round trip after each enqueue.
func NewClientFromRedis(rdb redis.UniversalClient) *Client {
	return &Client{aq: asynq.NewClientFromRedisClient(rdb), rdb: rdb}
}

// announcedKey marks an enqueue's context; the hook sets the flag once it has sent the
// announcement with the enqueue script.
type announcedKey struct{}

// EnqueueContext enqueues task as asynq.Client.EnqueueContext does. When the task is pending
// — not scheduled for later; asynq's forwarder announces those when it makes them pending —
// the push is announced. An announcement that fails is not an enqueue that failed: the task
// is on its queue, and an idle executor finds it within its idle wait.
func (c *Client) EnqueueContext(ctx context.Context, task *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error) {
	announced := new(bool)
	info, err := c.aq.EnqueueContext(context.WithValue(ctx, announcedKey{}, announced), task, opts...)
	if err != nil {
		return nil, err
	}
	if info.State == asynq.TaskStatePending && !*announced {
		_ = Announce(ctx, c.rdb, info.Queue)
	}
	return info, nil
}

// Close closes the asynq client, and the Redis connection when NewClient opened it.
func (c *Client) Close() error {
	if !c.own {
		return nil // asynq's client does not close a connection it was handed
	}
	return c.rdb.Close()
}

// announceHook sends asynq's enqueue script and the announcement of its push in one
// pipeline: Redis runs the PUBLISH right after the script, in the same round trip.
type announceHook struct{ rdb redis.UniversalClient }

func (h announceHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h announceHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h announceHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		announced, _ := ctx.Value(announcedKey{}).(*bool)
		q, ok := enqueueQueue(cmd.Args())
		if announced == nil || !ok {
			return next(ctx, cmd)
		}
		_, _ = h.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			_ = p.Process(ctx, cmd)
			p.Publish(ctx, wakeChannel(q), "")
			return nil
		})
		// A task id that is taken (the script answers 0) or a script Redis does not hold
		// yet (NOSCRIPT; go-redis sends it again) announced a push that did not happen: an
		// idle executor looks once for nothing.
		*announced = cmd.Err() == nil
		return cmd.Err()
	}
}

// enqueueQueue recognises asynq's enqueue script by its two keys — the task's hash and the
// queue's pending list — and returns the queue's name.
func enqueueQueue(args []any) (string, bool) {
	keys, ok := scriptKeys(args)
	if !ok || len(keys) != 2 {
		return "", false
	}
	q, ok := queueOfKey(keys[1], "pending")
	if !ok || len(keys[0]) <= len(taskPrefix(q)) || keys[0][:len(taskPrefix(q))] != taskPrefix(q) {
		return "", false
	}
	return q, true
}
