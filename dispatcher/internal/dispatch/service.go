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
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/netguard"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/skill"
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
	// Chains cancels a chain when its parent run is cancelled or rejected (the coordinator).
	Chains ChainControl
	// BatchQueue enqueues the tasks of batches, many at once: an asynq client over go-redis's
	// autopipeliner, so that the concurrent enqueues of a batch share round trips. Default
	// Queue.
	BatchQueue Enqueuer
	// Now is the clock a review of a run paused for approval is judged by against the run's
	// approval deadline; default time.Now (tests pass a time after the deadline).
	Now func() time.Time

	group     committer
	snapshots snapshots
	backlog   backlogs
	workflows workflows
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
// address the organisation has not allowlisted. An empty URL passes.
func (s *Service) checkCallback(ctx context.Context, org store.Org, raw string) error {
	if raw == "" {
		return nil
	}
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
		return apierr.New(http.StatusBadRequest, apierr.CodeCallbackURLForbidden,
			"The callback URL points at an address callbacks may not reach ("+string(blocked.Reason)+").",
			"Use a public URL, or ask an admin to add the host to the organisation's callbackAllowlist.").
			With("field", "callback_url", "reason", string(blocked.Reason))
	}
	return apierr.New(http.StatusBadRequest, apierr.CodeCallbackURLForbidden, "The callback URL cannot be used: its host does not resolve.",
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
	// ChainID is set when the job type is a chain skill: JobID is then the chain's parent run.
	ChainID string `json:"chainId,omitempty"`
}

// Options adjust one dispatch.
type Options struct {
	// BatchID links the run to a batch.
	BatchID string
	// SkipRateLimit is set when the caller has already charged the rate limit.
	SkipRateLimit bool
	// AdHoc is the skill of an ad hoc workflow (POST /api/v1/workflows/run): made for this
	// run, not looked up by job type.
	AdHoc *skill.Skill
}

// Dispatch accepts one job for the principal's organisation.
func (s *Service) Dispatch(ctx context.Context, p auth.Principal, req Request, opts Options) (Result, error) {
	started := time.Now().UTC()
	org, err := s.activeOrg(ctx, p.OrgID)
	if err != nil {
		return Result{}, err
	}
	if err := s.checkRequest(ctx, p.OrgID, req); err != nil {
		return Result{}, err
	}
	if req.IdempotencyKey != "" {
		if res, ok, err := s.existing(ctx, p.OrgID, req.IdempotencyKey); err != nil || ok {
			return res, err
		}
	}
	if err := s.checkCallback(ctx, org, req.CallbackURL); err != nil {
		return Result{}, err
	}
	if !opts.SkipRateLimit {
		if err := s.RateLimit(ctx, org, req.UserID, 1); err != nil {
			return Result{}, err
		}
	}
	var j *job
	if opts.AdHoc != nil {
		snap, err := store.NewSnapshot(p.OrgID, *opts.AdHoc)
		if err != nil {
			return Result{}, apierr.Internal(err)
		}
		j, err = s.governSkill(ctx, p, org, req, *opts.AdHoc, snap)
		if err != nil {
			return Result{}, err
		}
	} else if j, err = s.govern(ctx, p, org, req); err != nil {
		return Result{}, err
	}
	if j.sk.ExecutionType == string(run.Chain) {
		j.batchID, j.started = opts.BatchID, started
		return s.dispatchChain(ctx, p, org, j, nil)
	}
	if j.status == run.Queued {
		if err := s.backlog.admit(ctx, s.runs(), org, 1); err != nil {
			return Result{}, err
		}
	}
	j.batchID, j.started = opts.BatchID, started
	if err := j.build(); err != nil {
		return Result{}, apierr.Internal(err)
	}
	err = s.write(ctx, j)
	if errors.Is(err, runstore.ErrDuplicate) {
		return s.taken(ctx, p.OrgID, req.IdempotencyKey)
	}
	if err != nil {
		return Result{}, dbError(err)
	}
	if j.status == run.Queued {
		if err := s.enqueueJob(ctx, s.Queue, j); err != nil {
			s.takeBack(ctx, p.OrgID, j.runID)
			return Result{}, queueUnavailable(err)
		}
	}
	res := s.answer(ctx, j)
	if err := s.Events.Publish(ctx, *j.event); err != nil {
		s.Log.Warn("publishing dispatch events", "job_id", j.runID, "error", err)
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
		return apierr.New(http.StatusTooManyRequests, apierr.CodeRateLimited,
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
	return apierr.New(http.StatusTooManyRequests, apierr.CodeRateLimited,
		fmt.Sprintf("The %s dispatch rate limit of %d per %s is reached.", d.Scope, d.Limit, d.Window),
		"Retry after the number of seconds in the Retry-After header.",
		"An admin can raise the organisation's orgRpm and userRpm.").
		With("limit_scope", string(d.Scope), "limit", d.Limit, "count", d.Count, "window", d.Window.String(),
			"reset_at", d.ResetAt.UTC(), "retry_after_seconds", retry).
		SetHeader("Retry-After", strconv.Itoa(retry))
}

// enqueue puts a run's task on its queue through q. The task id is the run id, so a second
// enqueue of the same run (a retried approval, the reconciler) never creates a second task.
func (s *Service) enqueue(ctx context.Context, q Enqueuer, orgID, runID, queueName string, priority run.Priority,
	timeout time.Duration, maxRetry int) error {
	task, err := queue.NewRunTask(queue.Enqueue{
		RunID: runID, OrgID: orgID, Queue: queueName, Priority: priority,
		Timeout: timeout, MaxRetry: maxRetry, Retention: s.Retention,
	})
	if err != nil {
		return err
	}
	_, err = q.EnqueueContext(ctx, task)
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
	_, err = q.EnqueueContext(ctx, task)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil
	}
	return err
}

// existing returns the run an idempotency key already created, if any.
func (s *Service) existing(ctx context.Context, orgID, key string) (Result, bool, error) {
	found, err := s.existingKeys(ctx, orgID, []string{key})
	if err != nil {
		return Result{}, false, err
	}
	res, ok := found[key]
	return res, ok, nil
}

// taken answers a dispatch whose idempotency key a concurrent request took while its rows
// were being written: with that request's job.
func (s *Service) taken(ctx context.Context, orgID, key string) (Result, error) {
	res, ok, err := s.existing(ctx, orgID, key)
	if err == nil && !ok {
		// The other request's run has been taken back since: its enqueue failed.
		err = queueUnavailable(errors.New("the run holding the idempotency key was taken back"))
	}
	return res, err
}

// existingKeys returns, by key, the runs any of keys already created: the answers of
// repeated dispatches.
func (s *Service) existingKeys(ctx context.Context, orgID string, keys []string) (map[string]Result, error) {
	runs, err := s.runs().RunsByIdempotencyKeys(ctx, orgID, keys)
	if err != nil {
		return nil, dbError(err)
	}
	out := make(map[string]Result, len(runs))
	for key, r := range runs {
		var reasons []governance.Reason
		_ = json.Unmarshal(r.HoldReasons, &reasons)
		if reasons == nil {
			reasons = []governance.Reason{}
		}
		out[key] = Result{
			JobID: r.ID, TraceID: r.TraceID, Status: run.Status(r.Status), Queue: r.Queue,
			WSChannel: wsChannel(r.ID), HoldReasons: reasons, AuditFlagged: r.AuditFlagged, Duplicate: true,
			ChainID: r.ChainID,
		}
	}
	return out, nil
}

func wsChannel(runID string) string { return "/api/v1/stream?job_id=" + runID }

func skillNotFound(jobType string, disabled bool) *apierr.Error {
	msg := fmt.Sprintf("No skill is bound to job type %q in your organisation.", jobType)
	if disabled {
		msg = fmt.Sprintf("The skill bound to job type %q is disabled.", jobType)
	}
	return apierr.New(http.StatusNotFound, apierr.CodeSkillNotFound, msg,
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
	return apierr.New(http.StatusServiceUnavailable, apierr.CodeDatabaseUnavailable,
		"The registry database could not be reached; nothing was recorded.",
		"Retry with the same idempotency_key; it is safe.",
		"Operators: check PostgreSQL and the dispatcher's /readyz.").Wrap(err)
}

func queueUnavailable(err error) *apierr.Error {
	return apierr.New(http.StatusServiceUnavailable, apierr.CodeQueueUnavailable,
		"The job could not be put on its queue; it was not accepted and will not run.",
		"Retry with the same idempotency_key; it is safe.",
		"Operators: check Redis and the dispatcher's /readyz.").Wrap(err).SetHeader("Retry-After", "1")
}
