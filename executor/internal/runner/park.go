package runner

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/queue"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/span"
)

// Defaults of Runner.CapacityWait and Runner.MaxQueueTime.
const (
	DefaultCapacityWait = 10 * time.Second
	DefaultMaxQueueTime = time.Hour
)

// minPark is the shortest park: a return slot closer than this is still a round trip
// through the queue.
const minPark = 100 * time.Millisecond

func (r *Runner) capacityWait() time.Duration {
	if r.CapacityWait < 0 {
		return 0
	}
	if r.CapacityWait == 0 {
		return DefaultCapacityWait
	}
	return r.CapacityWait
}

func (r *Runner) maxQueueTime() time.Duration {
	if r.MaxQueueTime <= 0 {
		return DefaultMaxQueueTime
	}
	return r.MaxQueueTime
}

// park answers the router's RATE_LIMIT_WAIT: waiting for provider capacity is buffering,
// not execution. The run goes back to queued, its worker is freed at once, and its task
// comes back at the return slot the router gave (queue.Parked: asynq retries it then
// without counting a failure). The next attempt resumes from the journal, so nothing
// answered before is asked again, and gets a fresh execution timeout. The wait for one
// call is bounded by MaxQueueTime from its first park, and by the run's deadline.
func (x *execution) park(ctx context.Context, re *routerclient.Error) error {
	ctx = context.WithoutCancel(ctx)
	rn := x.run
	delay := max(re.RetryAfter, minPark)
	now := time.Now()
	until := now.Add(delay)
	since := now
	if rn.WaitingSince != nil {
		since = *rn.WaitingSince
	}
	if limit := x.maxQueueTime(); until.Sub(since) > limit {
		return x.finish(ctx, x.log, rn, run.TimedOut, nil, codedError("RATE_LIMIT_QUEUE_TIMEOUT",
			fmt.Sprintf("the run waited for provider capacity longer than the maximum queue time (%s); "+
				"raise the provider's limits, lower the load, or raise SWITCHYARD_MAX_QUEUE_TIME", limit)))
	}
	if rn.DeadlineAt != nil && until.After(*rn.DeadlineAt) {
		return x.finish(ctx, x.log, rn, run.TimedOut, nil, codedError("TIMED_OUT",
			"the provider's rate limit leaves no capacity for this run before its deadline"))
	}

	waiting, err := event.NewDraft(event.JobWaiting, map[string]any{"reason": "provider_capacity",
		"retry_at": until.UTC(), "waiting_since": since.UTC(), "provider": re.Body.Context["provider"],
		"model": re.Body.Context["model"], "ahead": re.Body.Context["ahead"]})
	if err != nil {
		return err
	}
	// The park, its event and what the attempt still buffers go in one round trip.
	x.buf.mu.Lock()
	spans, drafts := x.buf.spans, x.buf.events
	x.buf.spans, x.buf.events = span.Batch{}, nil
	x.buf.mu.Unlock()
	b := &pgx.Batch{}
	spans.Queue(b)
	out, err := run.QueueTransition(b, rn.ID, run.Queued, run.Change{ParkedUntil: &until},
		append(slices.Clip(drafts), waiting))
	if err == nil {
		err = x.DB.SendBatch(ctx, b).Close()
	}
	if err != nil {
		// Not parked: a failed attempt, retried with backoff like any other.
		return fmt.Errorf("parking run to wait for provider capacity: %w", err)
	}
	if !out.Moved {
		// Cancelled (or finished) meanwhile: the run is no longer ours to park.
		x.log.Info("run not parked: it is no longer running")
		x.record(ctx, x.log, rn, drafts)
		return nil
	}
	if err := x.Events.Publish(ctx, out.Events...); err != nil {
		x.log.Warn("publishing events", "error", err)
	}
	x.log.Info("run parked to wait for provider capacity", "delay", delay.String(), "ahead", re.Body.Context["ahead"])
	return &queue.Parked{Delay: delay, Reason: "provider_capacity"}
}

// parkedSpan draws the park that this pickup ends: a queue_wait span from the park to now.
func (x *execution) parkedSpan(ctx context.Context, parkedAt time.Time) {
	rn := x.run
	sp := span.Start(rn.ID, rn.OrgID, rn.TraceID, rn.ID, span.QueueWait, "waiting for provider capacity")
	sp.ChainID, sp.Attempt = rn.ChainID, x.attempt
	sp.StartedAt = parkedAt.UTC()
	x.saveSpan(ctx, sp.Set("queue", rn.Queue).Set("reason", "provider_capacity").End(span.OK))
}
