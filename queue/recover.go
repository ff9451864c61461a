package queue

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Fast recovery of a dead worker's tasks.
//
// asynq gives every active task a lease of LeaseDuration that the worker's heartbeat
// extends every Heartbeat (to now + LeaseDuration). When a worker dies without shutting down
// (SIGKILL, OOM, lost machine), asynq's own recoverer finds its tasks only after the lease
// has expired and the recoverer has run (once a minute, with 30 s of slack): one to two
// minutes. RecoverOrphans, run every few seconds by every executor, finds the active tasks
// whose lease has not been extended for two heartbeats — their worker is gone — and pushes
// them back to the front of their pending list, where the next free worker picks them up.
//
// A live but partitioned worker whose heartbeats stop reaching Redis looks dead too, and its
// task may then run twice at once; the executor's journal and tool-call ledger keep that from
// repeating an LLM call or a side effect, as they do for asynq's own recovery.

// LeaseDuration and Heartbeat are asynq's (internal/rdb.LeaseDuration and the heartbeater's
// interval in server.go, v0.26); the contract test checks them against the pinned asynq.
const (
	LeaseDuration = 30 * time.Second
	Heartbeat     = 5 * time.Second
	// StaleAfter is how long a lease may go without extension before its worker is taken
	// for dead: two missed heartbeats plus slack for the one-second lease resolution.
	StaleAfter = 2*Heartbeat + 2*time.Second
)

// recoverScript moves the active tasks of one asynq queue whose lease expires before
// ARGV[1] back to the front of the queue's pending list, and announces the push on the
// queue's wake channel (wake.go) when it moved any.
//
//	KEYS[1] asynq:{<q>}:lease    sorted set: task id -> lease expiry (unix seconds)
//	KEYS[2] asynq:{<q>}:active   list of active task ids
//	KEYS[3] asynq:{<q>}:pending  list of pending task ids (dequeued from the right)
//	ARGV[1] cutoff, unix seconds
//	ARGV[2] task key prefix asynq:{<q>}:t:
//	ARGV[3] wake channel of the queue
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
if #moved > 0 then
  redis.call("PUBLISH", ARGV[3], "")
end
return moved`)

// RecoverOrphans requeues the orphaned tasks of the named queues (every priority tier of
// each) as of now and returns their ids.
func RecoverOrphans(ctx context.Context, rdb redis.UniversalClient, names []string, now time.Time) ([]string, error) {
	cutoff := now.Add(LeaseDuration - StaleAfter).Unix()
	var all []string
	for _, name := range names {
		for tier := range Tiers(name) {
			ids, err := recoverScript.Run(ctx, rdb,
				[]string{leaseKey(tier), activeKey(tier), PendingKey(tier)}, cutoff, taskPrefix(tier), wakeChannel(tier)).StringSlice()
			if err != nil && !errors.Is(err, redis.Nil) {
				return all, err
			}
			all = append(all, ids...)
		}
	}
	return all, nil
}
