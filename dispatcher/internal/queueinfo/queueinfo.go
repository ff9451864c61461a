// Package queueinfo tells the dispatcher what a 202 promises about a queue: how many
// consumers are live on it and roughly where a new job stands. Consumers come from asynq's
// server registry (Inspector.Servers, refreshed in the background, accurate within about
// 10 s); the position is the length of the pending lists of the job's priority tier and
// every tier above it.
package queueinfo

import (
	"cmp"
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/periodic"
	"github.com/switchyard-ai/switchyard/shared/queue"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// PendingKey is asynq's Redis list of a queue's pending tasks (what an autoscaler reads).
func PendingKey(asynqQueue string) string { return "asynq:{" + asynqQueue + "}:pending" }

// Tracker keeps the live consumer count per named queue.
type Tracker struct {
	Inspector *asynq.Inspector
	Redis     redis.UniversalClient
	Log       *slog.Logger
	Every     time.Duration // default 2s

	mu        sync.RWMutex
	consumers map[string]int
	loop      periodic.Loop
}

// Start refreshes the consumer counts until Stop.
func (t *Tracker) Start(ctx context.Context) {
	t.refresh(ctx)
	t.loop = periodic.Loop{Every: cmp.Or(t.Every, 2*time.Second), Run: t.refresh}
	t.loop.Start(ctx)
}

// Stop ends the refresh.
func (t *Tracker) Stop() { t.loop.Stop() }

func (t *Tracker) refresh(context.Context) {
	servers, err := t.Inspector.Servers()
	if err != nil {
		t.Log.Warn("reading queue consumers", "error", err)
		return
	}
	counts := map[string]int{}
	for _, s := range servers {
		if s.Status != "active" {
			continue
		}
		seen := map[string]bool{}
		for q := range s.Queues {
			name, _, _ := strings.Cut(q, ":")
			if !seen[name] {
				seen[name] = true
				counts[name]++
			}
		}
	}
	t.mu.Lock()
	t.consumers = counts
	t.mu.Unlock()
}

// Consumers returns how many live executor servers consume a named queue.
func (t *Tracker) Consumers(name string) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.consumers[name]
}

// Position estimates how many tasks are ahead of a new job: the pending tasks of its tier
// and of every higher tier of the named queue.
func (t *Tracker) Position(ctx context.Context, name string, p run.Priority) (int64, error) {
	pipe := t.Redis.Pipeline()
	var cmds []*redis.IntCmd
	for _, tier := range run.Priorities {
		cmds = append(cmds, pipe.LLen(ctx, PendingKey(queue.Tier(name, tier))))
		if tier == p {
			break
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}
