package queue

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-ai/switchyard/shared/run"
)

// Pending returns the length of the pending list of every priority tier of a named queue, in
// run.Priorities order (highest first), in one round trip.
func Pending(ctx context.Context, rdb redis.UniversalClient, name string) ([]int64, error) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(run.Priorities))
	for i, p := range run.Priorities {
		cmds[i] = pipe.LLen(ctx, PendingKey(Tier(name, p)))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	counts := make([]int64, len(cmds))
	for i, c := range cmds {
		counts[i] = c.Val()
	}
	return counts, nil
}
