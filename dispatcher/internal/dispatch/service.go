// Package dispatch is the dispatcher's pipeline: validate, rate-limit, resolve the skill,
// govern, record the run, enqueue it on its named queue and answer — never executing
// anything itself. A job is either recorded and on its queue (or held for review), or
// refused with nothing written: never a 202 for work that will not run.
package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/governance"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/queueinfo"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/ratelimit"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/registry"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/ids"
	"github.com/switchyard-ai/switchyard/shared/netguard"
	"github.com/switchyard-ai/switchyard/shared/queue"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/span"
)

// Enqueuer puts tasks on Redis; *asynq.Client satisfies it.
type Enqueuer interface {
	EnqueueContext(ctx context.Context, task *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error)
}

// Tasks looks up and removes tasks; *asynq.Inspector satisfies it.
type Tasks interface {
	GetTaskInfo(queue, id string) (*asynq.TaskInfo, error)
	DeleteTask(queue, id string) error
}

// Service runs the dispatch pipeline.
type Service struct {
	DB        *pgxpool.Pool
	Queue     Enqueuer
	Tasks     Tasks
	Events    Publisher
	Registry  *registry.Cache
	Limiter   *ratelimit.Limiter
	Governor  *governance.Governor
	Queues    *queueinfo.Tracker
	Log       *slog.Logger
	Retention time.Duration
	// Window is the rate-limit window of the organisation's per-minute limits; default 1m.
	Window time.Duration
	// Resolver, when set, replaces DNS when callback URLs are checked (tests).
	Resolver netguard.Resolver
	// Redis, when set, lets enqueue register a queue again after Redis lost its data.
	Redis redis.UniversalClient

	group     committer
	snapshots snapshots
	backlog   backlogs
}

// Publisher sends journaled events to live subscribers: event.Publisher, or event.Background
// to keep the Pub/Sub round trip off the request's path.
type Publisher interface {
	Publish(ctx context.Context, envs ...event.Envelope) error
}

// Close stops the group committer once what it holds is written; call it after the HTTP
// server has stopped.
func (s *Service) Close() { s.group.stop() }

// checkCallback refuses a callback URL that resolves to a private, loopback or metadata
// address the organisation has not allowlisted.
func (s *Service) checkCallback(ctx context.Context, org store.Org, raw string) error {
	g, err := netguard.New(netguard.Config{Allow: org.CallbackAllowlist, Resolver: s.Resolver})
	if err != nil {
		return apierr.Internal(err)
	}
	err = g.CheckURL(ctx, raw)
	if err == nil {
		return nil
	}
	var blocked *netguard.BlockedError
	if errors.As(err, &blocked) {
		return apierr.New(http.StatusBadRequest, "CALLBACK_URL_FORBIDDEN",
			"The callback URL points at an address callbacks may not reach ("+string(blocked.Reason)+").",
			"Use a public URL, or ask an admin to add the host to the organisation's callbackAllowlist.").
			With("field", "callback_url", "reason", string(blocked.Reason))
	}
	return apierr.New(http.StatusBadRequest, "CALLBACK_URL_FORBIDDEN", "The callback URL cannot be used: its host does not resolve.",
		"Check the host name of callback_url.").With("field", "callback_url")
}

// Result is the answer for an accepted job.
type Result struct {
	JobID             string     `json:"jobId"`
	TraceID           string     `json:"traceId"`
	Status            run.Status `json:"status"`
	Queue             string     `json:"queue"`
	WSChannel         string     `json:"wsChannel"`
	Consumers         *int       `json:"consumers,omitempty"`
	EstimatedPosition *int64     `json:"estimatedPosition,omitempty"`
	// EstimatedStartAt guesses when the job starts, from the work ahead of it and how fast
	// its queue has been worked off lately; absent while the queue has no measured rate.
	EstimatedStartAt *time.Time          `json:"estimatedStartAt,omitempty"`
	HoldReasons      []governance.Reason `json:"holdReasons"`
	AuditFlagged     bool                `json:"auditFlagged"`
	// Duplicate is true when the idempotency key matched an earlier job, which is returned.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Options adjust one dispatch.
type Options struct {
	// BatchID links the run to a batch.
	BatchID string
	// SkipRateLimit is set when the caller has already charged the rate limit (batches).
	SkipRateLimit bool
}

// Dispatch accepts one job for the principal's organisation.
func (s *Service) Dispatch(ctx context.Context, p auth.Principal, req Request, opts Options) (Result, error) {
	started := time.Now().UTC()
	if err := s.checkRequest(ctx, p.OrgID, req); err != nil {
		return Result{}, err
	}
	if req.IdempotencyKey != "" {
		if res, ok, err := s.existing(ctx, p.OrgID, req.IdempotencyKey); err != nil || ok {
			return res, err
		}
	}
	org, err := s.Registry.Org(ctx, p.OrgID)
	if err != nil {
		return Result{}, dbError(err)
	}
	if req.CallbackURL != "" {
		if err := s.checkCallback(ctx, org, req.CallbackURL); err != nil {
			return Result{}, err
		}
	}
	if !opts.SkipRateLimit {
		if err := s.RateLimit(ctx, org, req.UserID, 1); err != nil {
			return Result{}, err
		}
	}
	sk, snap, err := s.Registry.Skill(ctx, p.OrgID, req.JobType)
	if errors.Is(err, skill.ErrNotFound) || (err == nil && !sk.Enabled) {
		return Result{}, skillNotFound(req.JobType, err == nil)
	}
	if err != nil {
		return Result{}, dbError(err)
	}
	q, err := s.Registry.Queue(ctx, sk.Queue)
	if err != nil {
		return Result{}, dbError(fmt.Errorf("queue %q of skill %q: %w", sk.Queue, sk.JobType, err))
	}
	verdict, err := s.Governor.Evaluate(ctx, org, sk, req.Payload)
	if err != nil {
		var ae *apierr.Error
		if errors.As(err, &ae) {
			s.Log.Warn("dispatch refused by governance", "org_id", p.OrgID, "job_type", req.JobType, "code", ae.Code)
			return Result{}, ae
		}
		return Result{}, dbError(err)
	}

	priority := run.Priority(req.Priority)
	if priority == "" {
		priority = run.PriorityNormal
	}
	status := run.Queued
	if verdict.Hold {
		status = run.HeldForReview
	}
	if status == run.Queued {
		if err := s.backlog.admit(ctx, s.DB, org, 1); err != nil {
			return Result{}, err
		}
	}
	rec, err := s.record(ctx, p, req, sk, snap, priority, status, verdict, opts, started)
	if errors.Is(err, store.ErrDuplicate) {
		// A concurrent request with the same idempotency key won the insert.
		res, _, err := s.existing(ctx, p.OrgID, req.IdempotencyKey)
		return res, err
	}
	if err != nil {
		return Result{}, dbError(err)
	}
	res := Result{
		JobID: rec.runID, TraceID: rec.traceID, Status: status, Queue: sk.Queue, WSChannel: wsChannel(rec.runID),
		HoldReasons: verdict.Reasons, AuditFlagged: verdict.AuditFlagged,
	}
	if res.HoldReasons == nil {
		res.HoldReasons = []governance.Reason{}
	}
	if status == run.Queued {
		timeout := time.Duration(q.Timeout) * time.Second
		if sk.TimeoutSeconds != nil {
			timeout = time.Duration(*sk.TimeoutSeconds) * time.Second
		}
		if err := s.enqueue(ctx, p.OrgID, rec.runID, sk.Queue, priority, timeout, *sk.MaxRetries); err != nil {
			// The client is told the job will not run, so it must not: take the run back.
			if derr := store.DeleteRun(context.WithoutCancel(ctx), s.DB, p.OrgID, rec.runID); derr != nil {
				s.Log.Error("removing run that could not be enqueued", "job_id", rec.runID, "error", derr)
			}
			return Result{}, queueUnavailable(err)
		}
		if s.Queues != nil {
			n := s.Queues.Consumers(sk.Queue)
			res.Consumers = &n
			if pos, err := s.Queues.Position(ctx, sk.Queue, priority); err == nil {
				res.EstimatedPosition = &pos
				if at, ok := s.Queues.EstimatedStart(sk.Queue, pos); ok {
					res.EstimatedStartAt = &at
				}
			}
		}
	}
	if err := s.Events.Publish(ctx, rec.events...); err != nil {
		s.Log.Warn("publishing dispatch events", "job_id", rec.runID, "error", err)
	}
	return res, nil
}

// RateLimit charges n dispatches to the organisation's and the user's windows.
func (s *Service) RateLimit(ctx context.Context, org store.Org, userID string, n int) error {
	window := s.Window
	if window == 0 {
		window = time.Minute
	}
	d, err := s.Limiter.Allow(ctx, ratelimit.Request{OrgID: org.ID, UserID: userID, OrgLimit: org.OrgRPM,
		UserLimit: org.UserRPM, Window: window, Cost: n})
	if errors.Is(err, ratelimit.ErrCostExceedsLimit) {
		return apierr.New(http.StatusTooManyRequests, "RATE_LIMITED",
			fmt.Sprintf("This request counts as %d dispatches, more than the limit allows in one window.", n),
			"Split the batch into smaller ones.").With("cost", n, "org_limit", org.OrgRPM, "user_limit", org.UserRPM)
	}
	if err != nil {
		return queueUnavailable(err)
	}
	if d.Allowed {
		return nil
	}
	retry := max(int((d.RetryAfter+time.Second-1)/time.Second), 1)
	return apierr.New(http.StatusTooManyRequests, "RATE_LIMITED",
		fmt.Sprintf("The %s dispatch rate limit of %d per %s is reached.", d.Scope, d.Limit, d.Window),
		"Retry after the number of seconds in the Retry-After header.",
		"An admin can raise the organisation's orgRpm and userRpm.").
		With("limit_scope", string(d.Scope), "limit", d.Limit, "count", d.Count, "window", d.Window.String(),
			"reset_at", d.ResetAt.UTC(), "retry_after_seconds", retry).
		SetHeader("Retry-After", strconv.Itoa(retry))
}

type recorded struct {
	runID, traceID string
	events         []event.Envelope
}

// record writes the run, its dispatch and governance spans and its first event in one
// transaction and one round trip. The run references the skill's snapshot, which is stored
// first (once per version and process).
func (s *Service) record(ctx context.Context, p auth.Principal, req Request, sk skill.Skill, snap store.Snapshot,
	priority run.Priority, status run.Status, verdict governance.Result, opts Options, started time.Time) (recorded, error) {
	rec := recorded{runID: ids.New(), traceID: ids.New()}
	if err := s.snapshots.ensure(ctx, s.DB, snap); err != nil {
		return rec, err
	}
	var metadata json.RawMessage
	if req.Metadata != nil {
		metadata, _ = json.Marshal(req.Metadata)
	}
	var reasons json.RawMessage
	if len(verdict.Reasons) > 0 {
		reasons, _ = json.Marshal(verdict.Reasons)
	}
	// The dispatch span is the root of the run's tree and has the run's id, so every later
	// span can name it as parent without looking it up.
	root := span.Start(rec.runID, p.OrgID, rec.traceID, "", span.Dispatch, "dispatch "+req.JobType)
	root.ID = rec.runID
	root.StartedAt = started
	root.Set("job_type", req.JobType).Set("skill_version", sk.Version).Set("queue", sk.Queue).
		Set("priority", string(priority)).Set("caller", p.Actor())
	if opts.BatchID != "" {
		root.Set("batch_id", opts.BatchID)
	}

	var w rows
	w.runs.Add(store.NewRun{
		ID: rec.runID, OrgID: p.OrgID, TraceID: rec.traceID, JobType: req.JobType, SkillID: sk.ID,
		SkillVersion: sk.Version, SkillSnapshotDigest: snap.Digest, ExecutionType: sk.ExecutionType,
		Queue: sk.Queue, Priority: string(priority), Status: string(status), UserID: req.UserID,
		Payload: req.Payload, Metadata: metadata, CallbackURL: req.CallbackURL,
		IdempotencyKey: req.IdempotencyKey, CostCeilingUSD: sk.CostCeilingUSD, HoldReasons: reasons,
		AuditFlagged: verdict.AuditFlagged, BatchID: opts.BatchID,
	})
	if err := w.spans.Add(root.End(span.OK)); err != nil {
		return rec, err
	}
	// One governance_check span records the whole decision, each check an entry of its
	// attributes: one row instead of one per check keeps the dispatch to a single round trip
	// of small writes.
	if len(verdict.Checks) > 0 {
		gs := span.Start(rec.runID, p.OrgID, rec.traceID, rec.runID, span.GovernanceCheck, "governance")
		gs.StartedAt = started
		checks := make([]map[string]any, 0, len(verdict.Checks))
		outcome := "pass"
		for _, c := range verdict.Checks {
			entry := map[string]any{"check": c.Name, "outcome": c.Outcome}
			for k, v := range c.Attrs {
				entry[k] = v
			}
			checks = append(checks, entry)
			if c.Outcome == "hold" || (c.Outcome == "flag" && outcome == "pass") {
				outcome = c.Outcome
			}
		}
		gs.Set("checks", checks).Set("outcome", outcome)
		st := span.OK
		if outcome == "hold" {
			st = span.Error
		}
		if err := w.spans.Add(gs.End(st)); err != nil {
			return rec, err
		}
	}
	typ, data := event.JobQueued, map[string]any{"job_type": req.JobType, "queue": sk.Queue,
		"priority": priority, "trace_id": rec.traceID, "audit_flagged": verdict.AuditFlagged}
	if status == run.HeldForReview {
		typ, data = event.JobHeld, map[string]any{"job_type": req.JobType, "queue": sk.Queue,
			"priority": priority, "trace_id": rec.traceID, "reasons": verdict.Reasons}
	}
	env, err := w.events.Add(rec.runID, p.OrgID, typ, data)
	if err != nil {
		return rec, err
	}
	// Without an idempotency key (which may conflict, by design) the rows share a transaction
	// with those of other dispatches arriving at the same moment.
	if req.IdempotencyKey == "" {
		err = s.group.commit(ctx, s.DB, &w)
	} else if err = w.write(ctx, s.DB); w.runs.Inserted() == 0 {
		return rec, store.ErrDuplicate
	}
	if store.IsMissingSnapshot(err) {
		s.snapshots.forget(snap.Digest)
	}
	if err != nil {
		return rec, err
	}
	rec.events = []event.Envelope{*env}
	return rec, nil
}

// enqueue puts a run's task on its queue. The task id is the run id, so a second enqueue
// of the same run (a retried approval, the reconciler) never creates a second task.
func (s *Service) enqueue(ctx context.Context, orgID, runID, queueName string, priority run.Priority,
	timeout time.Duration, maxRetry int) error {
	task, err := queue.NewRunTask(queue.Enqueue{
		RunID: runID, OrgID: orgID, Queue: queueName, Priority: priority,
		Timeout: timeout, MaxRetry: maxRetry, Retention: s.Retention,
	})
	if err != nil {
		return err
	}
	_, err = s.Queue.EnqueueContext(ctx, task)
	if !errors.Is(err, asynq.ErrTaskIDConflict) {
		return err
	}
	// The run's id is taken. A task that is pending, active, scheduled or retrying is this
	// run's live task: nothing to do. A finished one (kept for inspection, or archived) is
	// an earlier attempt of a run that is runnable again — a resumed review, a repair —
	// and must make way for the new task.
	tier := queue.Tier(queueName, priority)
	info, err := s.Tasks.GetTaskInfo(tier, runID)
	if errors.Is(err, asynq.ErrQueueNotFound) && s.Redis != nil {
		// The task exists (its id conflicted) but its queue is not registered: Redis lost
		// its data after this process's asynq client had registered the queue.
		if err := queue.Register(ctx, s.Redis, tier); err != nil {
			return fmt.Errorf("registering queue %s: %w", tier, err)
		}
		info, err = s.Tasks.GetTaskInfo(tier, runID)
	}
	if err != nil {
		return fmt.Errorf("inspecting task of run %s: %w", runID, err)
	}
	if info.State != asynq.TaskStateCompleted && info.State != asynq.TaskStateArchived {
		return nil
	}
	if err := s.Tasks.DeleteTask(tier, runID); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
		return fmt.Errorf("removing finished task of run %s: %w", runID, err)
	}
	_, err = s.Queue.EnqueueContext(ctx, task)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil
	}
	return err
}

// existing returns the run an idempotency key already created, if any.
func (s *Service) existing(ctx context.Context, orgID, key string) (Result, bool, error) {
	id, err := store.RunIDByIdempotencyKey(ctx, s.DB, orgID, key)
	if errors.Is(err, store.ErrNotFound) {
		return Result{}, false, nil
	}
	if err != nil {
		return Result{}, false, dbError(err)
	}
	r, err := store.GetRun(ctx, s.DB, orgID, id)
	if err != nil {
		return Result{}, false, dbError(err)
	}
	var reasons []governance.Reason
	_ = json.Unmarshal(r.HoldReasons, &reasons)
	if reasons == nil {
		reasons = []governance.Reason{}
	}
	return Result{
		JobID: r.JobID, TraceID: r.TraceID, Status: run.Status(r.Status), Queue: r.Queue,
		WSChannel: wsChannel(r.JobID), HoldReasons: reasons, AuditFlagged: r.AuditFlagged, Duplicate: true,
	}, true, nil
}

func wsChannel(runID string) string { return "/api/v1/stream?job_id=" + runID }

func skillNotFound(jobType string, disabled bool) *apierr.Error {
	msg := fmt.Sprintf("No skill is bound to job type %q in your organisation.", jobType)
	if disabled {
		msg = fmt.Sprintf("The skill bound to job type %q is disabled.", jobType)
	}
	return apierr.New(http.StatusNotFound, "SKILL_NOT_FOUND", msg,
		"List the job types you can dispatch with `yard skills list` or GET /api/v1/skills.",
		"An admin can bind or enable it with `yard skills apply` or in the web UI under Skills.").
		With("job_type", jobType, "disabled", disabled)
}

// dbError turns a Postgres failure into DATABASE_UNAVAILABLE, or invalid data into a 400.
func dbError(err error) *apierr.Error {
	var ae *apierr.Error
	if errors.As(err, &ae) {
		return ae
	}
	if de := DataError(err, ""); de != nil {
		return de
	}
	return apierr.New(http.StatusServiceUnavailable, "DATABASE_UNAVAILABLE",
		"The registry database could not be reached; nothing was recorded.",
		"Retry with the same idempotency_key; it is safe.",
		"Operators: check PostgreSQL and the dispatcher's /readyz.").Wrap(err)
}

func queueUnavailable(err error) *apierr.Error {
	return apierr.New(http.StatusServiceUnavailable, "QUEUE_UNAVAILABLE",
		"The job could not be put on its queue; it was not accepted and will not run.",
		"Retry with the same idempotency_key; it is safe.",
		"Operators: check Redis and the dispatcher's /readyz.").Wrap(err).SetHeader("Retry-After", "1")
}
