// Package runner executes one run: it claims the run, re-resolves its skill, hands it to
// its tier, and records the outcome — status, output, billing, spans and events — so that
// Postgres always says where the run is. Retries, resumption from the journal and
// cancellation are decided here, not in the tiers.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/executor/internal/metrics"
	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
	"github.com/switchyard-ai/switchyard/executor/internal/tier"
	"github.com/switchyard-ai/switchyard/executor/internal/toolcall"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/aichat"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/span"
)

// Router is what the runner needs of the router client.
type Router interface {
	Chat(ctx context.Context, job routerclient.Job, req openai.ChatCompletionRequest) (*routerclient.Answer, error)
	Price(ctx context.Context, job routerclient.Job) (aichat.Quote, error)
}

// Runner handles run tasks.
type Runner struct {
	DB     *pgxpool.Pool
	Events *event.Publisher
	Router Router
	Log    *slog.Logger
	// Tooling performs tool calls; required for tool_using skills.
	Tooling *toolcall.Invoker
	// Queue reports chain steps' ends to the coordinator queue; required for chain steps.
	Queue *queue.Client
	// GPU, when set, samples GPU telemetry, sent as job:gpu_metrics while a run executes
	// (executor-gpu with a visible GPU).
	GPU func(ctx context.Context) (any, error)
	// GPUInterval is how often GPU telemetry is sampled during a run; default 10s.
	GPUInterval time.Duration
	// CapacityWait is how long an LLM call may hold its worker waiting in the router for
	// rate-limit capacity; a call that would wait longer parks its run (park.go). Default
	// DefaultCapacityWait; negative: calls wait up to the attempt's deadline.
	CapacityWait time.Duration
	// MaxQueueTime bounds how long a run may wait for capacity for one call, parked or not;
	// past it the run ends timed_out (RATE_LIMIT_QUEUE_TIMEOUT). Default DefaultMaxQueueTime.
	MaxQueueTime time.Duration
	// Metrics, when set, receives the executor's series.
	Metrics *metrics.Metrics

	// delivery returns how many times the task was retried and asynq's maximum for it; nil:
	// read from the handler's context, as asynq sets it. A field so that in-package tests
	// can hand the handler any delivery (asynq keeps the constructor of that context internal).
	delivery func(ctx context.Context) (retried, maxRetry int)

	// inflight counts the handlers still running. asynq's Shutdown returns after its timeout
	// while handlers may still be ending, and what they write last (journal, status, events)
	// needs the Postgres pool and Redis client the process closes next: Wait.
	inflight sync.WaitGroup
}

// Wait returns once every HandleRun has returned, or when ctx ends, with ctx's error. The
// executor calls it after stopping its worker and before closing Postgres and Redis.
func (r *Runner) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { r.inflight.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// taskDelivery returns how many times the task was retried and asynq's maximum for it.
func (r *Runner) taskDelivery(ctx context.Context) (retried, maxRetry int) {
	if r.delivery != nil {
		return r.delivery(ctx)
	}
	retried, _ = asynq.GetRetryCount(ctx)
	maxRetry, _ = asynq.GetMaxRetry(ctx)
	return retried, maxRetry
}

// HandleRun is the asynq handler of queue.TypeRun tasks.
func (r *Runner) HandleRun(ctx context.Context, t *asynq.Task) error {
	r.inflight.Add(1)
	defer r.inflight.Done()
	started := time.Now()
	var task queue.RunTask
	if err := json.Unmarshal(t.Payload(), &task); err != nil {
		return fmt.Errorf("%w: decoding run task: %v", asynq.SkipRetry, err)
	}
	log := r.Log.With("job_id", task.RunID, "org_id", task.OrgID)
	rn, prev, claimed, err := r.runs().ClaimWork(ctx, task.RunID, started)
	if err != nil {
		return err
	}
	var queueWait time.Duration
	if claimed && rn.QueuedAt != nil {
		queueWait = started.Sub(*rn.QueuedAt)
	}
	queueName := rn.Queue
	if !claimed {
		// asynq's queue is the named queue's priority tier, <name>:<priority>.
		tierName, _ := asynq.GetQueueName(ctx)
		queueName, _, _ = strings.Cut(tierName, ":")
	}
	r.Metrics.Pickup(queueName, claimed, queueWait, time.Since(started))
	if !claimed {
		return r.unclaimed(ctx, log, task.RunID)
	}
	// The attempt's number: ClaimWork returns the count before its own.
	x := &execution{Runner: r, run: rn, log: log, resumed: prev == run.Running || rn.Attempts > 0, attempt: rn.Attempts + 1}
	if rn.StartedAt == nil {
		x.run.StartedAt = &started
	}
	if x.resumed {
		cause := metrics.ResumeRequeued
		switch {
		case prev == run.Running:
			cause = metrics.ResumeWorkerLost
		case rn.ParkedAt != nil:
			cause = metrics.ResumeParked
		}
		r.Metrics.Resumed(cause)
	}
	if rn.DeadlineAt != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, *rn.DeadlineAt)
		defer cancel()
	}
	return x.execute(ctx)
}

// unclaimed handles a task whose run ClaimWork would not claim: missing, finished, held,
// or with a cancellation pending.
func (r *Runner) unclaimed(ctx context.Context, log *slog.Logger, id string) error {
	rn, err := r.runs().LoadWork(ctx, id)
	if errors.Is(err, runstore.ErrNotFound) {
		log.Warn("task for a run that does not exist; dropped")
		return nil
	}
	if err != nil {
		return err
	}
	if rn.Status.Terminal() && rn.ChainID != "" {
		// A re-delivered task of a finished chain step: report again in case the first
		// report was lost (the coordinator task id makes a duplicate a no-op).
		return r.reportStep(ctx, log, rn)
	}
	if rn.Status.Terminal() || rn.Status == run.HeldForReview || rn.Status == run.PendingReview {
		// A duplicate or stale task: Postgres says the run is not ours to execute.
		log.Info("task for a run that is not runnable; dropped", "status", rn.Status)
		return nil
	}
	if rn.CancelRequested {
		return r.finish(ctx, log, rn, run.Cancelled, nil, codedError(apierr.CodeCancelled, "the run was cancelled before it started"))
	}
	if rn.Status != run.Queued && rn.Status != run.Running {
		log.Info("run no longer runnable; dropped", "status", rn.Status)
		return nil
	}
	// Runnable now: its status changed between the two reads. Let asynq deliver it again.
	return fmt.Errorf("run %s changed status while being picked up (%s); retrying", id, rn.Status)
}

// execution is one attempt at one run; it implements tier.Env.
type execution struct {
	*Runner
	run     Run
	log     *slog.Logger
	resumed bool
	// attempt is this attempt's number (1 for the first); every span it makes carries it.
	attempt int
	skill   skill.Skill
	buf     writeBuffer
	spans   stepSpans
	// announced is what the attempt read of its run's announcements (Announced).
	announced announced
}

func (x *execution) execute(ctx context.Context) error {
	// Whatever is still buffered when the attempt ends (a retry's events) is written.
	defer x.flush(context.WithoutCancel(ctx))
	rn := x.run
	if !x.resumed {
		x.Event(ctx, event.JobStarted, map[string]any{"attempt": x.attempt, "queue": rn.Queue})
		if rn.QueuedAt != nil {
			qw := span.Start(rn.ID, rn.OrgID, rn.TraceID, rn.ID, span.QueueWait, "queue "+rn.Queue)
			qw.StartedAt, qw.Attempt, qw.ChainID = rn.QueuedAt.UTC(), x.attempt, rn.ChainID
			x.saveSpan(ctx, qw.Set("queue", rn.Queue).End(span.OK))
		}
	} else {
		x.Event(ctx, event.JobStarted, map[string]any{"attempt": x.attempt, "queue": rn.Queue, "resumed": true})
		if err := x.resume(ctx); err != nil {
			return x.retryOrFail(ctx, err)
		}
	}
	if rn.ParkedAt != nil {
		x.parkedSpan(ctx, *rn.ParkedAt, rn.ParkReason)
	}
	if x.GPU != nil {
		stop := x.gpuTelemetry(ctx)
		defer stop()
	}

	resolve := x.StartSpan(ctx, rn.ID, span.SkillResolve, "resolve "+rn.JobType, nil)
	sk, err := skill.Get(ctx, x.DB, rn.OrgID, rn.JobType)
	if errors.Is(err, skill.ErrNotFound) || (err == nil && !sk.Enabled) {
		x.EndSpan(ctx, resolve.Set("enabled", false), span.Error)
		return x.finish(ctx, x.log, rn, run.Failed, nil, codedError(apierr.CodeSkillDisabledAfterDispatch,
			fmt.Sprintf("the skill for %q was disabled or removed after the job was dispatched", rn.JobType)))
	}
	if err != nil {
		x.EndSpan(ctx, resolve, span.Error)
		return x.retryOrFail(ctx, err)
	}
	x.skill = sk
	resolve.Set("skill_version", sk.Version).Set("dispatched_version", rn.SkillVersion).
		Set("execution_type", sk.ExecutionType)
	x.EndSpan(ctx, resolve, span.OK)
	x.Event(ctx, event.JobSkillResolved, map[string]any{"job_type": sk.JobType, "version": sk.Version,
		"execution_type": sk.ExecutionType})

	job := tier.Job{RunID: rn.ID, OrgID: rn.OrgID, TraceID: rn.TraceID, JobType: rn.JobType, UserID: rn.UserID,
		Skill: sk, Payload: rn.Payload, RootSpanID: rn.ID, CostCeilingUSD: rn.CostCeilingUSD}
	var out tier.Outcome
	switch run.ExecutionType(sk.ExecutionType) {
	case run.LLMOnly:
		out, err = tier.LLMOnly(ctx, x, job)
	case run.ToolUsing:
		out, err = tier.React(ctx, x, job)
	case run.Autonomous:
		out, err = tier.Autonomous(ctx, x, job)
	default:
		err = tier.Permanent(apierr.CodeUnsupportedExecutionType,
			"execution type %q is not supported by this executor version", sk.ExecutionType)
	}
	if err != nil {
		return x.retryOrFail(ctx, err)
	}
	switch out.Status {
	case run.PendingReview:
		return x.pause(ctx, out.Held, out.Output)
	case run.Rejected:
		return x.finish(ctx, x.log, rn, run.Rejected, nil, codedError(apierr.CodeRejected, out.Reason))
	}
	return x.finish(ctx, x.log, rn, out.Status, out.Output, nil, out.Warnings...)
}

// pause moves the run to pending_review, holding no worker: the task ends here, and the
// dispatcher's approve endpoint re-enqueues the run, which then replays its journal up to
// the held calls and asks for the review's decision.
func (x *execution) pause(ctx context.Context, held []tier.Held, why map[string]any) error {
	ctx = context.WithoutCancel(ctx)
	x.flush(ctx)
	reasons := make([]map[string]any, 0, len(held))
	for _, h := range held {
		reasons = append(reasons, map[string]any{"code": apierr.CodeToolRequiresApproval, "tool": h.Tool,
			"call_id": h.CallID, "arguments": h.Arguments})
	}
	// The status, the reasons and the deadline change together: a reviewer never sees a
	// paused run without knowing why, and no pause of a skill with an approval_timeout
	// lacks its deadline (kept in Postgres; the dispatcher's reconciler ends the run
	// timed_out once it passes). The skill was checked when it was saved: an invalid block
	// never got this far, and a missing one has no timeout.
	cfg, _ := skill.ParseAutonomous(x.skill.Autonomous, x.skill.Tools)
	pause := runstore.Change{ApprovalTimeout: cfg.ApprovalTimeoutDuration()}
	// The events that tell reviewers and the UI are written in the same transaction: a
	// reader who sees the run pending_review finds its job:held, and no crash leaves the
	// pause unannounced.
	review := map[string]any{"status": run.PendingReview, "tools": held}
	for k, v := range why {
		review[k] = v
	}
	var drafts []event.Draft
	for _, e := range []struct {
		typ  string
		data any
	}{{event.JobHeld, map[string]any{"status": run.PendingReview, "reason": apierr.CodeToolRequiresApproval,
		"tools": held}}, {event.JobPendingReview, review}} {
		d, err := event.NewDraft(e.typ, e.data)
		if err != nil {
			return fmt.Errorf("pausing run for approval: %w", err)
		}
		drafts = append(drafts, d)
	}
	var envs []event.Envelope
	x.buf.writing.Lock()
	err := x.runs().InTx(ctx, func(tx *runstore.Store) error {
		if _, err := tx.Transition(ctx, x.run.ID, []run.Status{run.Running}, run.PendingReview, pause); err != nil {
			return err
		}
		if err := tx.AddHoldReasons(ctx, x.run.ID, reasons); err != nil {
			return err
		}
		b := &pgx.Batch{}
		envs = runstore.QueueEvents(b, x.run.ID, x.run.OrgID, drafts)
		return tx.SendBatch(ctx, b)
	})
	x.buf.writing.Unlock()
	if err != nil {
		return fmt.Errorf("pausing run for approval: %w", err)
	}
	if err := x.Events.Publish(ctx, envs...); err != nil {
		x.log.Warn("publishing events", "error", err)
	}
	x.flush(ctx)
	x.Metrics.Paused(x.run.ExecutionType)
	x.log.Info("run paused for approval of tool calls", "tools", len(held))
	return nil
}

// retryOrFail records a failed attempt. Permanent failures end the run; transient ones
// put it back to queued and return the error so asynq retries with backoff, until the last
// retry, which fails the run.
func (x *execution) retryOrFail(ctx context.Context, err error) error {
	rn := x.run
	if reason, delay, ok := parkable(err, x.waited()); ok && !errors.Is(ctx.Err(), context.Canceled) {
		re, _ := errors.AsType[*routerclient.Error](err)
		return x.park(ctx, reason, delay, re)
	}
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return x.finish(context.WithoutCancel(ctx), x.log, rn, run.TimedOut, nil,
			codedError(apierr.CodeTimedOut, "the run exceeded its skill's timeout"))
	}
	if errors.Is(err, tier.ErrCancelled) || ctx.Err() != nil {
		// asynq cancels the handler's context when the dispatcher asks it to
		// (CancelProcessing); cancellation itself is state in Postgres.
		requested, cerr := x.runs().CancelRequested(context.WithoutCancel(ctx), rn.ID)
		if cerr == nil && requested {
			return x.finish(context.WithoutCancel(ctx), x.log, rn, run.Cancelled, nil,
				codedError(apierr.CodeCancelled, "the run was cancelled while it was running"))
		}
		if ctx.Err() != nil {
			// Not a cancellation: the worker lost its lease or is going away. The run stays
			// running and the task's next delivery resumes it from the journal.
			x.log.Warn("attempt interrupted; the run resumes on the task's next delivery", "error", err)
			return err
		}
	}
	code, msg, permanent := classify(err)
	e := codedError(code, msg)
	if pe, ok := errors.AsType[*tier.PermanentError](err); ok && (pe.Context != nil || pe.Troubleshooting != nil) {
		e = structuredError(code, msg, pe.Troubleshooting, pe.Context)
	}
	retries, maxRetry := x.taskDelivery(ctx)
	maxRetry = queue.RetryBudget(maxRetry)
	if permanent || retries >= maxRetry {
		return x.finish(context.WithoutCancel(ctx), x.log, rn, run.Failed, nil, e)
	}
	if _, terr := x.runs().Transition(context.WithoutCancel(ctx), rn.ID, nil, run.Queued, runstore.Change{AttemptError: e}); terr != nil {
		x.log.Error("recording failed attempt", "error", terr)
	}
	x.Event(ctx, event.JobRetrying, map[string]any{"attempt": rn.Attempts + 1, "error": json.RawMessage(e)})
	x.log.Warn("attempt failed; will retry", "code", code, "retry", retries+1, "max_retry", maxRetry)
	return err
}

func classify(err error) (code, msg string, permanent bool) {
	var pe *tier.PermanentError
	var re *routerclient.Error
	switch {
	case errors.As(err, &pe):
		return pe.Code, pe.Message, true
	case errors.As(err, &re):
		return re.Code, re.Message, !re.Retryable
	}
	return apierr.CodeExecutionError, err.Error(), false
}

func codedError(code, msg string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"code": code, "message": msg, "at": time.Now().UTC()})
	return b
}

// structuredError is codedError with what to do about it and the figures behind it.
func structuredError(code, msg string, troubleshooting []string, context map[string]any) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"code": code, "message": msg, "troubleshooting": troubleshooting,
		"context": context, "at": time.Now().UTC()})
	return b
}

// finish moves the run to a terminal status with its output or error, emits the event and,
// for a chain step, reports to the coordinator. An error means the report could not be
// queued: the task is retried, and its next delivery reports again.
func (r *Runner) finish(ctx context.Context, log *slog.Logger, rn Run, st run.Status, output map[string]any,
	errBody json.RawMessage, warnings ...string) error {
	return r.conclude(ctx, log, rn, nil, nil, st, output, errBody, warnings...)
}

// conclude ends the run and writes what the attempt still holds — its spans and events —
// with it: one round trip, in which the run moves, the events (the terminal one last) take
// their numbers in that same update of the run row, and the spans are saved. When the run
// may not move (a cancellation or another attempt ended it first) the spans and the
// non-terminal events are written all the same and the refusal is logged.
func (r *Runner) conclude(ctx context.Context, log *slog.Logger, rn Run, spans *runstore.SpanBatch, drafts []event.Draft,
	st run.Status, output map[string]any, errBody json.RawMessage, warnings ...string) error {
	c := runstore.Change{Error: errBody}
	if errBody != nil {
		c.AttemptError = errBody
	}
	if output != nil {
		c.Output, _ = json.Marshal(output)
	}
	if len(warnings) > 0 {
		c.Warnings, _ = json.Marshal(warnings)
	}
	typ := event.JobCompleted
	switch st {
	case run.Failed, run.TimedOut:
		typ = event.JobFailed
	case run.Cancelled:
		typ = event.JobCancelled
	case run.Rejected:
		typ = event.JobRejected
	}
	data := map[string]any{"status": st}
	if output != nil {
		data["output"] = output
	}
	if errBody != nil {
		data["error"] = errBody
	}
	if len(warnings) > 0 {
		data["warnings"] = warnings
	}
	pending := drafts
	terminal, err := event.NewDraft(typ, data)
	if err != nil {
		log.Warn("emitting terminal event", "error", err)
	} else {
		drafts = append(slices.Clip(drafts), terminal)
	}

	b := &pgx.Batch{}
	if spans != nil {
		spans.Queue(b)
	}
	out, err := runstore.QueueTransition(b, rn.ID, nil, st, c, drafts)
	if err == nil {
		err = r.runs().SendBatch(ctx, b)
	}
	if err != nil {
		log.Error("recording run outcome", "status", st, "error", err)
		return nil
	}
	if !out.Moved {
		_, err = r.runs().Refused(ctx, rn.ID, st)
		log.Error("recording run outcome", "status", st, "error", err)
		r.record(ctx, log, rn, pending)
		return nil
	}
	if err := r.Events.Publish(ctx, out.Events...); err != nil {
		log.Warn("publishing events", "error", err)
	}
	var started time.Time
	if rn.StartedAt != nil {
		started = *rn.StartedAt
	}
	r.Metrics.RunEnded(rn.ExecutionType, string(st), started)
	log.Info("run finished", "status", st)
	if rn.ChainID != "" {
		rn.Status = st
		return r.reportStep(ctx, log, rn)
	}
	return nil
}

// record journals and publishes a run's drafted events.
func (r *Runner) record(ctx context.Context, log *slog.Logger, rn Run, drafts []event.Draft) {
	if len(drafts) == 0 {
		return
	}
	b := &pgx.Batch{}
	envs := runstore.QueueEvents(b, rn.ID, rn.OrgID, drafts)
	if err := r.runs().SendBatch(ctx, b); err != nil {
		log.Warn("writing events", "error", err)
		return
	}
	if err := r.Events.Publish(ctx, envs...); err != nil {
		log.Warn("publishing events", "error", err)
	}
}

// reportStep tells the coordinator, through its durable queue, that a chain step ended.
func (r *Runner) reportStep(ctx context.Context, log *slog.Logger, rn Run) error {
	if r.Queue == nil {
		log.Error("chain step finished but no coordinator queue client is configured")
		return nil
	}
	res, err := r.runs().Result(context.WithoutCancel(ctx), rn.ID)
	if err != nil {
		return fmt.Errorf("reading chain step %s: %w", rn.ID, err)
	}
	rn.Status = res.Status
	output, errBody := res.Output, res.Error
	task, err := queue.NewStepDoneTask(queue.StepDone{ChainID: rn.ChainID, Step: rn.ChainStep, RunID: rn.ID,
		OrgID: rn.OrgID, Status: rn.Status, Output: output, Error: errBody})
	if err != nil {
		return err
	}
	if _, err := r.Queue.EnqueueContext(context.WithoutCancel(ctx), task); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		log.Error("reporting chain step to the coordinator", "error", err)
		return fmt.Errorf("reporting chain step %s: %w", rn.ID, err)
	}
	log.Info("chain step reported", "chain_id", rn.ChainID, "step", rn.ChainStep, "status", rn.Status)
	return nil
}
