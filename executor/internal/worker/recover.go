package worker

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-ai/switchyard/shared/queue"
)

// Fast recovery of a dead worker's tasks.
//
// asynq gives every active task a 30 s lease that the worker's heartbeat extends every 5 s
// (to now + 30 s). When a worker dies without shutting down (SIGKILL, OOM, lost machine),
// asynq's own recoverer finds its tasks only after the lease has expired and the recoverer
// has run (once a minute, with 30 s of slack): one to two minutes. Here every executor
// looks every RecoverInterval for active tasks of its queues whose lease has not been
// extended for two heartbeats — their worker is gone — and pushes them back to the front
// of their pending list, where the next free worker picks them up within
// TaskCheckInterval. The run itself is still "running" in Postgres; run.Claim accepts
// that and the new attempt resumes from the journal.
//
// A live but partitioned worker whose heartbeats stop reaching Redis looks dead too, and
// its task may then run twice at once; the journal and the tool-call ledger keep that
// from repeating an LLM call or a side effect, as they do for asynq's own recovery.

// leaseDuration and heartbeat are asynq's (internal/rdb.LeaseDuration and the heartbeater's
// interval in server.go, v0.26).
const (
	leaseDuration = 30 * time.Second
	heartbeat     = 5 * time.Second
	// staleAfter is how long a lease may go without extension before its worker is taken
	// for dead: two missed heartbeats plus slack for the one-second lease resolution.
	staleAfter = 2*heartbeat + 2*time.Second
)

// recoverScript moves the active tasks of one asynq queue whose lease expires before
// ARGV[1] back to the front of the queue's pending list.
//
//	KEYS[1] asynq:{<q>}:lease    sorted set: task id -> lease expiry (unix seconds)
//	KEYS[2] asynq:{<q>}:active   list of active task ids
//	KEYS[3] asynq:{<q>}:pending  list of pending task ids (dequeued from the right)
//	ARGV[1] cutoff, unix seconds
//	ARGV[2] task key prefix asynq:{<q>}:t:
//	returns the ids moved
var recoverScript = redis.NewScript(`
local ids = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", "(" .. ARGV[1])
local moved = {}
for _, id in ipairs(ids) do
  if redis.call("LREM", KEYS[2], 0, id) > 0 then
    redis.call("ZREM", KEYS[1], id)
    redis.call("RPUSH", KEYS[3], id)
    redis.call("HSET", ARGV[2] .. id, "state", "pending")
    table.insert(moved, id)
  else
    redis.call("ZREM", KEYS[1], id)
  end
end
return moved`)

// asynq's key layout for one asynq queue (internal/base in asynq v0.26).
func leaseKey(q string) string   { return "asynq:{" + q + "}:lease" }
func activeKey(q string) string  { return "asynq:{" + q + "}:active" }
func pendingKey(q string) string { return "asynq:{" + q + "}:pending" }
func taskPrefix(q string) string { return "asynq:{" + q + "}:t:" }

// recoverOrphans requeues the orphaned tasks of the named queues and returns their ids.
func recoverOrphans(ctx context.Context, rdb redis.UniversalClient, names []string, now time.Time) ([]string, error) {
	cutoff := now.Add(leaseDuration - staleAfter).Unix()
	var all []string
	for _, name := range names {
		for tier := range queue.Tiers(name) {
			ids, err := recoverScript.Run(ctx, rdb,
				[]string{leaseKey(tier), activeKey(tier), pendingKey(tier)}, cutoff, taskPrefix(tier)).StringSlice()
			if err != nil && err != redis.Nil {
				return all, err
			}
			all = append(all, ids...)
		}
	}
	return all, nil
}

// recoverOnce requeues the tasks of dead workers; Start runs it every RecoverInterval.
func (w *Worker) recoverOnce(ctx context.Context) {
	ids, err := recoverOrphans(ctx, w.opts.Redis, w.Queues(), time.Now())
	if err != nil && ctx.Err() == nil {
		w.log.Warn("recovering orphaned tasks", "error", err)
	}
	for _, id := range ids {
		w.log.Warn("requeued the task of a dead worker", "task_id", id)
	}
}
