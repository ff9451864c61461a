package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
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

// parkable says whether a failed router call means "not now" rather than a failure of the
// run, why, and when to come back:
//   - RATE_LIMIT_WAIT: the provider's rate limit has no capacity within SWITCHYARD_CAPACITY_WAIT;
//     the router gave a return slot;
//   - PROVIDER_CIRCUIT_OPEN: the provider failed repeatedly and the router stopped sending it
//     calls for a while (Retry-After);
//   - ROUTER_UNREACHABLE: the router is down or restarting; the wait grows with the outage.
//
// waited is how long the run has been waiting for its current call.
func parkable(err error, waited time.Duration) (reason string, delay time.Duration, ok bool) {
	re, isRouter := errors.AsType[*routerclient.Error](err)
	if !isRouter {
		return "", 0, false
	}
	switch re.Code {
	case apierr.CodeRateLimitWait:
		return ReasonCapacity, re.RetryAfter, true
	case apierr.CodeProviderCircuitOpen:
		return ReasonProviderDown, cmp.Or(re.RetryAfter, 5*time.Second), true
	case apierr.CodeRouterUnreachable:
		return ReasonRouterDown, min(max(waited/2, time.Second), 30*time.Second), true
	}
	return "", 0, false
}

// Why a run was parked (job:waiting's reason, the queue_wait span's).
const (
	ReasonCapacity     = "provider_capacity"
	ReasonProviderDown = "provider_unavailable"
	ReasonRouterDown   = "router_unreachable"
)

// timeoutCode is the run's error when it waited for one call longer than MaxQueueTime.
var timeoutCode = map[string]string{ReasonCapacity: apierr.CodeRateLimitQueueTimeout,
	ReasonProviderDown: apierr.CodeProviderUnavailable, ReasonRouterDown: apierr.CodeRouterUnreachable}

// park answers a router call that says "not now" (parkable): waiting for the platform —
// provider capacity, a provider's recovery, the router's restart — is buffering, not
// execution. The run goes back to queued, its worker is freed at once, and its task comes
// back after the delay (queue.Parked: asynq retries it then without counting a failure).
// The next attempt resumes from the journal, so nothing answered before is asked again, and
// gets a fresh execution timeout. The wait for one call is bounded by MaxQueueTime from its
// first park, and by the run's deadline.
func (x *execution) park(ctx context.Context, reason string, delay time.Duration, re *routerclient.Error) error {
	ctx = context.WithoutCancel(ctx)
	rn := x.run
	delay = max(delay, minPark)
	now := time.Now()
	until := now.Add(delay)
	since := now
	if rn.WaitingSince != nil {
		since = *rn.WaitingSince
	}
	if limit := x.maxQueueTime(); until.Sub(since) > limit {
		st := run.TimedOut
		if reason != ReasonCapacity {
			st = run.Failed
		}
		return x.finish(ctx, x.log, rn, st, nil, codedError(timeoutCode[reason],
			fmt.Sprintf("the run waited longer than the maximum queue time (%s) for one call (%s); "+
				"check the provider and the router, lower the load, or raise SWITCHYARD_MAX_QUEUE_TIME", limit, reason)))
	}
	if rn.DeadlineAt != nil && until.After(*rn.DeadlineAt) {
		return x.finish(ctx, x.log, rn, run.TimedOut, nil, codedError(apierr.CodeTimedOut,
			fmt.Sprintf("the run cannot go on before its deadline (%s)", reason)))
	}

	data := map[string]any{"reason": reason, "retry_at": until.UTC(), "waiting_since": since.UTC(), "code": re.Code}
	for _, k := range []string{"provider", "model", "ahead"} {
		if v, ok := re.Body.Context[k]; ok {
			data[k] = v
		}
	}
	waiting, err := event.NewDraft(event.JobWaiting, data)
	if err != nil {
		return err
	}
	// The park, its event and what the attempt still buffers go in one round trip.
	x.buf.writing.Lock()
	defer x.buf.writing.Unlock()
	x.buf.mu.Lock()
	spans, drafts := x.buf.spans, x.buf.events
	x.buf.spans, x.buf.events = runstore.SpanBatch{}, nil
	x.buf.mu.Unlock()
	b := &pgx.Batch{}
	spans.Queue(b)
	out, err := runstore.QueueTransition(b, rn.ID, nil, run.Queued, runstore.Change{ParkedUntil: &until, ParkReason: reason},
		append(slices.Clip(drafts), waiting))
	if err == nil {
		err = x.runs().SendBatch(ctx, b)
	}
	if err != nil {
		// Not parked: a failed attempt, retried with backoff like any other.
		return fmt.Errorf("parking run (%s): %w", reason, err)
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
	x.log.Info("run parked", "reason", reason, "delay", delay.String(), "code", re.Code)
	x.Metrics.Parked(reason)
	return &queue.Parked{Delay: delay, Reason: reason}
}

// parkedSpan draws the park that this pickup ends: a queue_wait span from the park to now.
func (x *execution) parkedSpan(ctx context.Context, parkedAt time.Time, reason string) {
	rn := x.run
	sp := span.Start(rn.ID, rn.OrgID, rn.TraceID, rn.ID, span.QueueWait, "parked: "+strings.ReplaceAll(reason, "_", " "))
	sp.ChainID, sp.Attempt = rn.ChainID, x.attempt
	sp.StartedAt = parkedAt.UTC()
	x.saveSpan(ctx, sp.Set("queue", rn.Queue).Set("reason", reason).End(span.OK))
}

// waited is how long the run has been waiting for its current call (0 if it was not
// parked since its last answer).
func (x *execution) waited() time.Duration {
	if x.run.WaitingSince == nil {
		return 0
	}
	return time.Since(*x.run.WaitingSince)
}
