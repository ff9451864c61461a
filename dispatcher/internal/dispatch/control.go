package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/span"
)

// Canceller removes queued tasks and wakes executors; *asynq.Inspector satisfies it.
type Canceller interface {
	DeleteTask(queue, id string) error
	CancelProcessing(id string) error
}

// ControlResult is the answer of approve, reject and cancel.
type ControlResult struct {
	JobID  string     `json:"jobId"`
	Status run.Status `json:"status"`
	// CancelRequested is true when a running job was asked to stop at its next step.
	CancelRequested bool `json:"cancelRequested,omitempty"`
}

// JobNotFound is the 404 of a job that does not exist in the caller's organisation.
func JobNotFound(id string) *apierr.Error {
	return apierr.New(http.StatusNotFound, apierr.CodeJobNotFound, "No job with this id exists in your organisation.",
		"Check the jobId returned by POST /api/v1/dispatch, and that you use a key of the same organisation.").
		With("job_id", id)
}

func conflict(code, msg string, r runstore.Run) *apierr.Error {
	return apierr.New(http.StatusConflict, code, msg,
		"GET /api/v1/dispatch/{id} shows the job's current status.").With("job_id", r.JobID, "status", r.Status)
}

// Approve lets a held job run, or resumes a job paused for review. The reviewer and reason
// are recorded as a review and a governance_review span.
func (s *Service) Approve(ctx context.Context, p auth.Principal, id, reason string) (ControlResult, error) {
	return s.review(ctx, p, id, "approve", reason)
}

// Reject ends a held or paused job as rejected — except an autonomous run paused on a tool
// call: it goes back to its queue, and the agent reads the rejection (and its reason) as the
// call's result and must find another way.
func (s *Service) Reject(ctx context.Context, p auth.Principal, id, reason string) (ControlResult, error) {
	return s.review(ctx, p, id, "reject", reason)
}

func (s *Service) review(ctx context.Context, p auth.Principal, id, decision, reason string) (ControlResult, error) {
	// Approving puts work on a queue: a suspended organisation's is refused like a dispatch.
	if decision == "approve" {
		if _, err := s.activeOrg(ctx, p.OrgID); err != nil {
			return ControlResult{}, err
		}
	}
	r, err := s.runs().GetRun(ctx, p.OrgID, id)
	if errors.Is(err, runstore.ErrNotFound) {
		return ControlResult{}, JobNotFound(id)
	}
	if err != nil {
		return ControlResult{}, dbError(err)
	}
	from := run.Status(r.Status)
	if from != run.HeldForReview && from != run.PendingReview {
		return ControlResult{}, conflict(apierr.CodeJobNotReviewable, "Only held or paused jobs can be approved or rejected.", r)
	}
	to, typ := run.Queued, event.JobApproved
	if decision == "reject" {
		to, typ = run.Rejected, event.JobRejected
		if from == run.PendingReview && r.ExecutionType == string(run.Autonomous) {
			to = run.Queued
		}
	}
	var envs []event.Envelope
	var expired []runstore.Expired
	err = pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
		rs := runstore.New(tx)
		// A decision that comes after the run's approval deadline loses to it: the run ends
		// timed_out here, as the reconciler's sweep would have ended it, and the decision is
		// refused as for any finished run.
		if from == run.PendingReview {
			var err error
			if expired, err = rs.ExpireApprovals(ctx, s.now(), id); err != nil || len(expired) > 0 {
				return err
			}
		}
		// Only a held or paused run is reviewed: one that moved on since it was read (another
		// reviewer, a resumed attempt, the approval deadline) is refused, not moved again.
		if _, err := rs.Transition(ctx, id, []run.Status{run.HeldForReview, run.PendingReview}, to, runstore.Change{}); err != nil {
			return err
		}
		if err := store.InsertReview(ctx, tx, id, p.OrgID, decision, p.Actor(), reason); err != nil {
			return err
		}
		sp := span.Start(id, p.OrgID, r.TraceID, id, span.GovernanceReview, decision+" by "+p.KeyName).
			Set("decision", decision).Set("reviewer", p.Actor()).Set("reason", reason).Set("from_status", string(from))
		if err := rs.SaveSpan(ctx, sp.End(span.OK)); err != nil {
			return err
		}
		spanEnv, err := rs.RecordEvent(ctx, id, p.OrgID, event.JobSpan, sp)
		if err != nil {
			return err
		}
		env, err := rs.RecordEvent(ctx, id, p.OrgID, typ, map[string]any{
			"reviewer": p.Actor(), "reason": reason, "from_status": from, "status": to})
		envs = append(envs, spanEnv, env)
		return err
	})
	var te *runstore.TransitionError
	if errors.As(err, &te) {
		return ControlResult{}, conflict(apierr.CodeJobNotReviewable, "The job changed status meanwhile; it can no longer be reviewed.", r)
	}
	if de := DataError(err, "reason"); de != nil {
		return ControlResult{}, de // the reason is the only text of the caller's in the review
	}
	if err != nil {
		return ControlResult{}, dbError(err)
	}
	if len(expired) > 0 {
		if err := s.Events.Publish(ctx, expired[0].Event); err != nil {
			s.Log.Warn("publishing the approval timeout's event", "job_id", id, "error", err)
		}
		r.Status = apitypes.StatusTimedOut
		s.chainRunEnded(ctx, r)
		return ControlResult{}, conflict(apierr.CodeJobNotReviewable,
			"The job's approval deadline (its skill's autonomous.approval_timeout) passed before the decision; it timed out.", r)
	}
	if to == run.Queued {
		// Should this enqueue fail, the run is queued in Postgres and the reconciler puts
		// it on its queue: the approval is not lost.
		if err := s.Requeue(ctx, id); err != nil {
			s.Log.Warn("enqueueing approved run; the reconciler will retry", "job_id", id, "error", err)
		}
	} else {
		s.chainRunEnded(ctx, r)
	}
	if err := s.Events.Publish(ctx, envs...); err != nil {
		s.Log.Warn("publishing review events", "job_id", id, "error", err)
	}
	return ControlResult{JobID: id, Status: to}, nil
}

// now is the service's clock (Now, default time.Now).
func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Requeue puts a queued run's task (back) on its queue.
func (s *Service) Requeue(ctx context.Context, id string) error {
	e, err := s.runs().GetEnqueueInfo(ctx, id)
	if err != nil {
		return err
	}
	if e.ExecutionType == string(run.Chain) {
		// A chain's parent run has no task of its own: the coordinator starts the chain.
		return s.startChain(ctx, e.ChainID)
	}
	return s.enqueue(ctx, s.Queue, e.OrgID, e.ID, e.Queue, run.Priority(e.Priority),
		time.Duration(e.TimeoutSeconds)*time.Second, e.MaxRetries)
}

// Cancel stops a job: a queued job is removed from its queue, a held or paused one is
// cancelled, and a running one is asked to stop at its next step (the executor is woken).
func (s *Service) Cancel(ctx context.Context, p auth.Principal, id string, c Canceller) (ControlResult, error) {
	r, err := s.runs().GetRun(ctx, p.OrgID, id)
	if errors.Is(err, runstore.ErrNotFound) {
		return ControlResult{}, JobNotFound(id)
	}
	if err != nil {
		return ControlResult{}, dbError(err)
	}
	switch st := run.Status(r.Status); {
	case st.Terminal():
		return ControlResult{}, conflict(apierr.CodeJobAlreadyFinished, "The job has already finished.", r)
	case isChainParent(r) && s.Chains != nil:
		status, err := s.Chains.Cancel(ctx, p.OrgID, r.ChainID, p.Actor())
		if err != nil {
			return ControlResult{}, err
		}
		return ControlResult{JobID: id, Status: run.Status(status)}, nil
	case st == run.Running:
		ok, err := s.runs().RequestCancel(ctx, p.OrgID, id)
		if err != nil {
			return ControlResult{}, dbError(err)
		}
		if ok {
			// Fire-and-forget wake-up: the state in Postgres is what the executor obeys.
			if err := c.CancelProcessing(id); err != nil {
				s.Log.Warn("waking executor for cancellation", "job_id", id, "error", err)
			}
			return ControlResult{JobID: id, Status: run.Running, CancelRequested: true}, nil
		}
		// It stopped running meanwhile: fall through to whatever it is now.
		return s.Cancel(ctx, p, id, c)
	}
	data := map[string]any{"by": p.Actor(), "from_status": r.Status}
	var env event.Envelope
	err = pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
		// Not from running: a run claimed since it was read is cancelled as a running one.
		rs := runstore.New(tx)
		if _, err := rs.Transition(ctx, id, []run.Status{run.HeldForReview, run.Queued, run.PendingReview}, run.Cancelled, runstore.Change{
			Error: fmt.Appendf(nil, `{"code":%q,"message":"cancelled by %s"}`, apierr.CodeCancelled, p.Actor())}); err != nil {
			return err
		}
		var err error
		env, err = rs.RecordEvent(ctx, id, p.OrgID, event.JobCancelled, data)
		return err
	})
	var te *runstore.TransitionError
	if errors.As(err, &te) {
		// The executor claimed it meanwhile: cancel it as a running job.
		return s.Cancel(ctx, p, id, c)
	}
	if err != nil {
		return ControlResult{}, dbError(err)
	}
	if run.Status(r.Status) == run.Queued {
		err := c.DeleteTask(queue.Tier(r.Queue, run.Priority(r.Priority)), id)
		if err != nil && !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
			// The executor drops tasks of cancelled runs, so a task left behind does no harm.
			s.Log.Info("removing cancelled task from its queue", "job_id", id, "error", err)
		}
	}
	if err := s.Events.Publish(ctx, env); err != nil {
		s.Log.Warn("publishing cancel event", "job_id", id, "error", err)
	}
	s.chainRunEnded(ctx, r)
	return ControlResult{JobID: id, Status: run.Cancelled}, nil
}

// chainRunEnded tells the coordinator that a chain's run ended here rather than in an
// executor: a step rejected or cancelled while held or queued (its end is reported), or a
// chain's parent run (the chain is cancelled). A lost report is repaired by the reconciler.
func (s *Service) chainRunEnded(ctx context.Context, r runstore.Run) {
	ctx = context.WithoutCancel(ctx)
	switch {
	case r.ChainID == "":
	case isChainParent(r):
		if s.Chains == nil {
			return
		}
		if _, err := s.Chains.Cancel(ctx, r.OrgID, r.ChainID, "its parent run's end"); err != nil {
			var ae *apierr.Error
			if !errors.As(err, &ae) || ae.Code != apierr.CodeChainAlreadyFinished {
				s.Log.Warn("cancelling the chain of an ended parent run; the reconciler will retry", "chain_id", r.ChainID, "error", err)
			}
		}
	default:
		task, err := queue.NewStepDoneTask(queue.StepDone{ChainID: r.ChainID, Step: r.ChainStep, RunID: r.JobID, OrgID: r.OrgID})
		if err == nil {
			_, err = s.Queue.EnqueueContext(ctx, task)
		}
		if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
			s.Log.Warn("reporting a chain step's end; the reconciler will retry", "job_id", r.JobID, "error", err)
		}
	}
}
