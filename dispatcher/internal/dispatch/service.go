// Package dispatch is the dispatcher's pipeline: validate, resolve the skill, record the
// run, enqueue it on its named queue and answer — never executing anything itself.
package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/queue"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/span"
)

// Enqueuer puts tasks on Redis; *asynq.Client satisfies it.
type Enqueuer interface {
	EnqueueContext(ctx context.Context, task *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error)
}

// Service runs the dispatch pipeline.
type Service struct {
	DB        *pgxpool.Pool
	Queue     Enqueuer
	Events    *event.Publisher
	Log       *slog.Logger
	Retention time.Duration
}

// Result is the 202 answer of an accepted job.
type Result struct {
	JobID       string          `json:"jobId"`
	TraceID     string          `json:"traceId"`
	Status      run.Status      `json:"status"`
	Queue       string          `json:"queue"`
	WSChannel   string          `json:"wsChannel"`
	HoldReasons json.RawMessage `json:"holdReasons,omitempty"`
	// Duplicate is true when the idempotency key matched an earlier job, which is returned.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Dispatch accepts one job for the principal's organisation.
func (s *Service) Dispatch(ctx context.Context, p auth.Principal, req Request) (Result, error) {
	if !IsObject(req.Payload) {
		return Result{}, ValidationFailed([]FieldError{{Field: "payload", Rule: "type", Message: "must be an object"}})
	}
	if req.IdempotencyKey != "" {
		if res, ok, err := s.existing(ctx, p.OrgID, req.IdempotencyKey); err != nil || ok {
			return res, err
		}
	}
	sk, err := skill.Get(ctx, s.DB, p.OrgID, req.JobType)
	if errors.Is(err, skill.ErrNotFound) || (err == nil && !sk.Enabled) {
		return Result{}, skillNotFound(req.JobType, err == nil)
	}
	if err != nil {
		return Result{}, dbError(err)
	}
	q, err := store.GetQueue(ctx, s.DB, sk.Queue)
	if err != nil {
		return Result{}, dbError(err)
	}

	runID := uuid.NewString()
	traceID := uuid.NewString()
	priority := run.Priority(req.Priority)
	if priority == "" {
		priority = run.PriorityNormal
	}
	timeout := time.Duration(q.Timeout) * time.Second
	if sk.TimeoutSeconds != nil {
		timeout = time.Duration(*sk.TimeoutSeconds) * time.Second
	}
	snapshot, err := json.Marshal(sk)
	if err != nil {
		return Result{}, apierr.Internal(err)
	}
	var metadata json.RawMessage
	if req.Metadata != nil {
		metadata, _ = json.Marshal(req.Metadata)
	}

	// The dispatch span is the root of the run's tree and has the run's id, so every later
	// span can name it as parent without looking it up.
	dispatchSpan := span.Start(runID, p.OrgID, traceID, "", span.Dispatch, "dispatch "+req.JobType)
	dispatchSpan.ID = runID
	dispatchSpan.
		Set("job_type", req.JobType).Set("skill_version", sk.Version).Set("queue", sk.Queue).
		Set("priority", string(priority)).Set("caller", p.Actor())

	var envs []event.Envelope
	err = pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
		inserted, err := store.InsertRun(ctx, tx, store.NewRun{
			ID: runID, OrgID: p.OrgID, TraceID: traceID, JobType: req.JobType, SkillID: sk.ID,
			SkillVersion: sk.Version, SkillSnapshot: snapshot, ExecutionType: sk.ExecutionType,
			Queue: sk.Queue, Priority: string(priority), Status: string(run.Queued), UserID: req.UserID,
			Payload: req.Payload, Metadata: metadata, CallbackURL: req.CallbackURL,
			IdempotencyKey: req.IdempotencyKey, CostCeilingUSD: sk.CostCeilingUSD,
		})
		if err != nil {
			return err
		}
		if !inserted {
			return errDuplicate
		}
		if err := span.Save(ctx, tx, dispatchSpan.End(span.OK)); err != nil {
			return err
		}
		env, err := event.Record(ctx, tx, runID, p.OrgID, event.JobQueued, map[string]any{
			"job_type": req.JobType, "queue": sk.Queue, "priority": priority, "trace_id": traceID,
		})
		envs = append(envs, env)
		return err
	})
	if errors.Is(err, errDuplicate) {
		// A concurrent request with the same idempotency key won the insert.
		res, _, err := s.existing(ctx, p.OrgID, req.IdempotencyKey)
		return res, err
	}
	if err != nil {
		return Result{}, dbError(err)
	}

	task, err := queue.NewRunTask(queue.Enqueue{
		RunID: runID, OrgID: p.OrgID, Queue: sk.Queue, Priority: priority,
		Timeout: timeout, MaxRetry: *sk.MaxRetries, Retention: s.Retention,
	})
	if err == nil {
		_, err = s.Queue.EnqueueContext(ctx, task)
		if errors.Is(err, asynq.ErrTaskIDConflict) {
			err = nil
		}
	}
	if err != nil {
		// The client is told the job will not run, so it must not: take the run back.
		if derr := store.DeleteRun(context.WithoutCancel(ctx), s.DB, p.OrgID, runID); derr != nil {
			s.Log.Error("removing run that could not be enqueued", "job_id", runID, "error", derr)
		}
		return Result{}, queueUnavailable(err)
	}
	if err := s.Events.Publish(ctx, envs...); err != nil {
		s.Log.Warn("publishing dispatch events", "job_id", runID, "error", err)
	}
	return Result{
		JobID: runID, TraceID: traceID, Status: run.Queued, Queue: sk.Queue,
		WSChannel: wsChannel(runID),
	}, nil
}

var errDuplicate = errors.New("duplicate idempotency key")

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
	return Result{
		JobID: r.JobID, TraceID: r.TraceID, Status: run.Status(r.Status), Queue: r.Queue,
		WSChannel: wsChannel(r.JobID), HoldReasons: r.HoldReasons, Duplicate: true,
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

// dbError turns a Postgres failure into DATABASE_UNAVAILABLE.
func dbError(err error) *apierr.Error {
	var ae *apierr.Error
	if errors.As(err, &ae) {
		return ae
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
