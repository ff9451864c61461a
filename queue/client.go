package queue

import (
	"context"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Client enqueues tasks through asynq and announces each push onto a pending list on the
// queue's wake channel, so that an idle executor waiting on that queue (Wakeup) starts it at
// once. Everything that enqueues for an executor goes through a Client.
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
	return &Client{aq: asynq.NewClientFromRedisClient(rdb), rdb: rdb, own: true}
}

// NewClientFromRedis returns a Client on rdb, which the caller keeps and closes.
func NewClientFromRedis(rdb redis.UniversalClient) *Client {
	return &Client{aq: asynq.NewClientFromRedisClient(rdb), rdb: rdb}
}

// EnqueueContext enqueues task as asynq.Client.EnqueueContext does. When the task is pending
// — not scheduled for later; asynq's forwarder announces those when it makes them pending —
// the push is announced. An announcement that fails is not an enqueue that failed: the task
// is on its queue, and an idle executor finds it within its idle wait.
func (c *Client) EnqueueContext(ctx context.Context, task *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error) {
	info, err := c.aq.EnqueueContext(ctx, task, opts...)
	if err != nil {
		return nil, err
	}
	if info.State == asynq.TaskStatePending {
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
