// Package queueinfo tells the dispatcher what a 202 promises about a queue: how many
// consumers are live on it and roughly where a new job stands. Consumers come from asynq's
// server registry (Inspector.Servers, refreshed in the background, accurate within about
// 10 s); the position is the length of the pending lists of the job's priority tier and
// every tier above it, read in the background every BacklogEvery (250 ms) so that a
// dispatch never pays a Redis round trip for an estimate.
package queueinfo

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/shared/periodic"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// Tracker keeps the live consumer count per named queue.
type Tracker struct {
	Inspector *asynq.Inspector
	Redis     redis.UniversalClient
	Log       *slog.Logger
	Every     time.Duration // default 2s
	// BacklogEvery is how often the pending lists of the queues dispatched to are read;
	// default 250ms.
	BacklogEvery time.Duration

	mu        sync.RWMutex
	consumers map[string]int
	backlog   map[string][]int64 // named queue -> pending per tier, in run.Priorities order
	drains    map[string]*drain  // named queue -> how fast it is being worked off
	loop      periodic.Loop
	backLoop  periodic.Loop
}

// drain is a queue's rate of processed tasks, from asynq's processed counters, smoothed;
// and its tasks waiting to come back (retries, parked runs).
type drain struct {
	total   int64
	at      time.Time
	perSec  float64
	waiting int64
}

// Start refreshes the consumer counts until Stop.
func (t *Tracker) Start(ctx context.Context) {
	t.refresh(ctx)
	t.loop = periodic.Loop{Every: cmp.Or(t.Every, 2*time.Second), Run: t.refresh}
	t.loop.Start(ctx)
	t.backLoop = periodic.Loop{Every: cmp.Or(t.BacklogEvery, 250*time.Millisecond), Run: t.refreshBacklog}
	t.backLoop.Start(ctx)
}

// Stop ends the refresh.
func (t *Tracker) Stop() {
	t.backLoop.Stop()
	t.loop.Stop()
}

// refreshBacklog reads the pending lists of every queue dispatched to so far.
func (t *Tracker) refreshBacklog(ctx context.Context) {
	t.mu.RLock()
	names := make([]string, 0, len(t.backlog))
	for n := range t.backlog {
		names = append(names, n)
	}
	t.mu.RUnlock()
	for _, n := range names {
		counts, err := t.readBacklog(ctx, n)
		if err != nil {
			t.Log.Warn("reading queue backlog", "queue", n, "error", err)
			return
		}
		t.mu.Lock()
		t.backlog[n] = counts
		t.mu.Unlock()
	}
}

func (t *Tracker) readBacklog(ctx context.Context, name string) ([]int64, error) {
	return queue.Pending(ctx, t.Redis, name)
}

func (t *Tracker) refresh(ctx context.Context) {
	t.refreshDrains()
	servers, err := t.Inspector.Servers()
	if err != nil {
		t.Log.Warn("reading queue consumers", "error", err)
		return
	}
	// An executor serves a queue of high concurrency with several asynq servers (see the
	// executor's worker package): consumers are processes, so count each host and PID once.
	type consumer struct {
		queue, host string
		pid         int
	}
	seen := map[consumer]bool{}
	counts := map[string]int{}
	for _, s := range servers {
		if s.Status != "active" {
			continue
		}
		for q := range s.Queues {
			name := queue.NamedQueue(q)
			if c := (consumer{name, s.Host, s.PID}); !seen[c] {
				seen[c] = true
				counts[name]++
			}
		}
	}
	t.mu.Lock()
	t.consumers = counts
	t.mu.Unlock()
}

// refreshDrains reads asynq's processed counters of every queue dispatched to so far and
// updates each one's drain rate (an EWMA over the refresh interval). Parked runs and
// retries are not processed tasks, so they do not inflate it.
func (t *Tracker) refreshDrains() {
	t.mu.RLock()
	names := make([]string, 0, len(t.backlog))
	for n := range t.backlog {
		names = append(names, n)
	}
	t.mu.RUnlock()
	for _, n := range names {
		var total, waiting int64
		for _, tier := range run.Priorities {
			info, err := t.Inspector.GetQueueInfo(queue.Tier(n, tier))
			if err != nil {
				continue // a tier nobody has used yet has no queue
			}
			total += int64(info.ProcessedTotal)
			waiting += int64(info.Retry + info.Scheduled)
		}
		now := time.Now()
		t.mu.Lock()
		if t.drains == nil {
			t.drains = map[string]*drain{}
		}
		d, ok := t.drains[n]
		if !ok {
			t.drains[n] = &drain{total: total, at: now, waiting: waiting}
		} else if el := now.Sub(d.at).Seconds(); el > 0 {
			rate := float64(max(total-d.total, 0)) / el
			d.perSec = 0.7*d.perSec + 0.3*rate
			d.total, d.at, d.waiting = total, now, waiting
		}
		t.mu.Unlock()
	}
}

// EstimatedStart guesses when a new job of priority p on a named queue starts: the tasks
// ahead of it (Position) and those waiting to come back (retries, parked runs) at the
// queue's recent drain rate. ok is false while the queue has no measured rate (idle, or
// nobody consumes it).
func (t *Tracker) EstimatedStart(name string, position int64) (at time.Time, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	d := t.drains[name]
	if d == nil || d.perSec < 0.01 {
		return time.Time{}, false
	}
	wait := float64(position+d.waiting) / d.perSec
	return time.Now().Add(time.Duration(wait * float64(time.Second))).UTC().Truncate(time.Second), true
}

// Consumers returns how many live executor processes consume a named queue.
func (t *Tracker) Consumers(name string) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.consumers[name]
}

// Position estimates how many tasks are ahead of a new job: the pending tasks of its tier
// and of every higher tier of the named queue, as last read (at most BacklogEvery ago). The
// first job of a queue reads the lists itself.
func (t *Tracker) Position(ctx context.Context, name string, p run.Priority) (int64, error) {
	t.mu.RLock()
	counts, ok := t.backlog[name]
	t.mu.RUnlock()
	if !ok {
		var err error
		if counts, err = t.readBacklog(ctx, name); err != nil {
			return 0, err
		}
		t.mu.Lock()
		if t.backlog == nil {
			t.backlog = map[string][]int64{}
		}
		t.backlog[name] = counts
		t.mu.Unlock()
	}
	var n int64
	for i, tier := range run.Priorities {
		n += counts[i]
		if tier == p {
			break
		}
	}
	return n, nil
}
