package dispatch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/governance"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/ids"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/span"
)

// The phases of the pipeline, shared by Dispatch (one job) and DispatchBatch (every item of
// a batch through each phase together):
//
//	check the request → idempotency key → callback URL → rate limit → govern → backlog → build → write
//	→ enqueue → answer
//
// Each phase is one function here, so a batch item passes exactly the checks a single
// dispatch does; the rate limit, the backlog, the write and the enqueue are done once per
// batch.

// job is one dispatch that governance let through, on its way to being written, enqueued and
// answered.
type job struct {
	req      Request
	orgID    string
	caller   string // who dispatched, as the dispatch span names them
	batchID  string
	started  time.Time
	sk       skill.Skill
	snap     store.Snapshot
	timeout  time.Duration
	priority run.Priority
	status   run.Status
	verdict  governance.Result

	runID, traceID string
	// chainID and chainStep make the run a chain's (its parent: no step); parentSpan is
	// the chain_step span its tree hangs under.
	chainID, chainStep, parentSpan string
	rows                           rows
	event                          *event.Envelope
}

// govern resolves the job's skill and queue and runs the governance checks (residency,
// quota, risk and PII): what the job will be, or why it is refused. Nothing is written.
func (s *Service) govern(ctx context.Context, p auth.Principal, org store.Org, req Request) (*job, error) {
	sk, snap, err := s.Registry.Skill(ctx, p.OrgID, req.JobType)
	if errors.Is(err, skill.ErrNotFound) || (err == nil && !sk.Enabled) {
		return nil, skillNotFound(req.JobType, err == nil)
	}
	if err != nil {
		return nil, dbError(err)
	}
	return s.governSkill(ctx, p, org, req, sk, snap)
}

// governSkill governs a job of a skill resolved already (or, for an ad hoc workflow, made
// for the one run).
func (s *Service) governSkill(ctx context.Context, p auth.Principal, org store.Org, req Request, sk skill.Skill, snap store.Snapshot) (*job, error) {
	if et := run.ExecutionType(sk.ExecutionType); !et.Runnable() && et != run.Chain {
		return nil, apierr.New(http.StatusUnprocessableEntity, apierr.CodeUnsupportedExecutionType,
			fmt.Sprintf("The skill bound to %q has execution type %q, which this version of the platform does not run yet; nothing was accepted.",
				req.JobType, sk.ExecutionType),
			"Bind the job type to an llm_only, tool_using, autonomous or chain skill.").
			With("job_type", req.JobType, "execution_type", sk.ExecutionType)
	}
	q, err := s.Registry.Queue(ctx, sk.Queue)
	if err != nil {
		return nil, dbError(fmt.Errorf("queue %q of skill %q: %w", sk.Queue, sk.JobType, err))
	}
	verdict, err := s.Governor.Evaluate(ctx, org, sk, req.Payload)
	if err != nil {
		var ae *apierr.Error
		if errors.As(err, &ae) {
			s.Log.Warn("dispatch refused by governance", "org_id", p.OrgID, "job_type", req.JobType, "code", ae.Code)
			return nil, ae
		}
		return nil, dbError(err)
	}
	j := &job{req: req, orgID: p.OrgID, caller: p.Actor(), sk: sk, snap: snap, verdict: verdict,
		priority: run.Priority(req.Priority), status: run.Queued, timeout: time.Duration(q.TimeoutSeconds) * time.Second}
	if j.priority == "" {
		j.priority = run.PriorityNormal
	}
	if verdict.Hold {
		j.status = run.HeldForReview
	}
	if sk.TimeoutSeconds != nil {
		j.timeout = time.Duration(*sk.TimeoutSeconds) * time.Second
	}
	return j, nil
}

// build gives the job its run and trace ids and lays out its rows: the run, its dispatch and
// governance_check spans and its first event. The run references the skill's snapshot, which
// write stores first (once per version and process).
func (j *job) build() error {
	req, sk, verdict := j.req, j.sk, j.verdict
	j.runID = ids.New()
	if j.traceID == "" {
		j.traceID = ids.New()
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
	root := span.Start(j.runID, j.orgID, j.traceID, j.parentSpan, span.Dispatch, "dispatch "+req.JobType)
	root.ID, root.ChainID = j.runID, j.chainID
	root.StartedAt = j.started
	root.Set("job_type", req.JobType).Set("skill_version", sk.Version).Set("queue", sk.Queue).
		Set("priority", string(j.priority)).Set("caller", j.caller)
	if j.batchID != "" {
		root.Set("batch_id", j.batchID)
	}

	w := &j.rows
	w.runs.Add(runstore.NewRun{
		ID: j.runID, OrgID: j.orgID, TraceID: j.traceID, JobType: req.JobType, SkillID: sk.ID,
		SkillVersion: sk.Version, SkillSnapshotDigest: j.snap.Digest, ExecutionType: sk.ExecutionType,
		Queue: sk.Queue, Priority: string(j.priority), Status: string(j.status), UserID: req.UserID,
		Payload: req.Payload, Metadata: metadata, CallbackURL: req.CallbackURL,
		IdempotencyKey: req.IdempotencyKey, CostCeilingUSD: sk.CostCeilingUSD, HoldReasons: reasons,
		AuditFlagged: verdict.AuditFlagged, BatchID: j.batchID, ChainID: j.chainID, ChainStep: j.chainStep,
	})
	if j.chainStep != "" {
		root.Set("chain_id", j.chainID).Set("chain_step", j.chainStep)
	}
	if err := w.spans.Add(root.End(span.OK)); err != nil {
		return err
	}
	// One governance_check span records the whole decision, each check an entry of its
	// attributes: one row instead of one per check keeps the dispatch to a single round trip
	// of small writes.
	if len(verdict.Checks) > 0 {
		gs := span.Start(j.runID, j.orgID, j.traceID, j.runID, span.GovernanceCheck, "governance")
		gs.ChainID = j.chainID
		gs.StartedAt = j.started
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
			return err
		}
	}
	typ, data := event.JobQueued, map[string]any{"job_type": req.JobType, "queue": sk.Queue,
		"priority": j.priority, "trace_id": j.traceID, "audit_flagged": verdict.AuditFlagged}
	if j.status == run.HeldForReview {
		typ, data = event.JobHeld, map[string]any{"job_type": req.JobType, "queue": sk.Queue,
			"priority": j.priority, "trace_id": j.traceID, "reasons": verdict.Reasons}
	}
	env, err := w.events.Add(j.runID, j.orgID, typ, data)
	if err != nil {
		return err
	}
	j.event = env
	return nil
}

// write stores one job's rows after its skill snapshot. Without an idempotency key the rows
// share a transaction with those of other dispatches arriving at the same moment (the group
// committer); with one they are written on their own, since the key may be taken: then
// nothing is written and the error is runstore.ErrDuplicate.
func (s *Service) write(ctx context.Context, j *job) error {
	if err := s.snapshots.ensure(ctx, s.DB, j.snap); err != nil {
		return err
	}
	var err error
	if j.req.IdempotencyKey == "" {
		err = s.group.commit(ctx, s.DB, &j.rows)
	} else if err = j.rows.write(ctx, s.DB); j.rows.runs.Inserted() == 0 {
		return runstore.ErrDuplicate
	}
	if store.IsMissingSnapshot(err) {
		s.snapshots.forget(j.snap.Digest)
	}
	return err
}

// enqueueJob puts a written, queued job's task on its queue through q.
func (s *Service) enqueueJob(ctx context.Context, q Enqueuer, j *job) error {
	return s.enqueue(ctx, q, j.orgID, j.runID, j.sk.Queue, j.priority, j.timeout, *j.sk.MaxRetries)
}

// enqueueAll enqueues every job at once and returns each one's error. asynq's client sends
// one task per call (v0.26 has no batch enqueue), so the calls are made concurrently through
// BatchQueue, whose autopipeliner sends what is waiting as one pipeline: a batch of 500
// leaves in a few round trips instead of 500 (docs/PERFORMANCE.md).
func (s *Service) enqueueAll(ctx context.Context, jobs []*job) []error {
	q := cmp.Or[Enqueuer](s.BatchQueue, s.Queue)
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() { errs[i] = s.enqueueJob(ctx, q, j) })
	}
	wg.Wait()
	return errs
}

// takeBack removes runs whose enqueue failed: the client is told they will not run, so they
// must not.
func (s *Service) takeBack(ctx context.Context, orgID string, runIDs ...string) {
	if err := s.runs().DeleteRuns(context.WithoutCancel(ctx), orgID, runIDs); err != nil {
		s.Log.Error("removing runs that could not be enqueued", "org_id", orgID, "job_ids", runIDs, "error", err)
	}
}

// answer is the 202 of a job that is written and, unless held, enqueued.
func (s *Service) answer(ctx context.Context, j *job) Result {
	res := Result{
		JobID: j.runID, TraceID: j.traceID, Status: j.status, Queue: j.sk.Queue, WSChannel: wsChannel(j.runID),
		HoldReasons: j.verdict.Reasons, AuditFlagged: j.verdict.AuditFlagged,
	}
	if res.HoldReasons == nil {
		res.HoldReasons = []governance.Reason{}
	}
	if j.status == run.Queued && s.Queues != nil {
		n := s.Queues.Consumers(j.sk.Queue)
		res.Consumers = &n
		if pos, err := s.Queues.Position(ctx, j.sk.Queue, j.priority); err == nil {
			res.EstimatedPosition = &pos
			if at, ok := s.Queues.EstimatedStart(j.sk.Queue, pos); ok {
				res.EstimatedStartAt = &at
			}
		}
	}
	return res
}
