package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/chain"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/workflow"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/ids"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// Chains (Tier 3) in the pipeline. A chain skill's dispatch is checked like any other —
// the request, the rate limit, the chain skill's own governance and the backlog — and its
// definition is validated again against the organisation's skills; every root step is
// governed too, so a chain whose first steps would be refused is refused now, with nothing
// written. Then one transaction records the chain and its parent run, and the chain's
// start goes to the coordinator's queue. The coordinator (package chain) dispatches each
// step through PrepareStep: the same governance, build and rows as a dispatch of its own.

// ChainControl is what the job controls need of the coordinator when the job is a chain's
// parent run: cancelling it cancels the chain.
type ChainControl interface {
	Cancel(ctx context.Context, orgID, chainID, by string) (string, error)
}

// rerun is a chain's dispatch that re-runs an earlier one.
type rerun struct {
	of     runstore.ChainView
	reused []runstore.ChainStep
}

// dispatchChain records a governed chain skill's dispatch and hands its start to the
// coordinator.
func (s *Service) dispatchChain(ctx context.Context, p auth.Principal, org store.Org, j *job, again *rerun) (Result, error) {
	known := func(jobType string) bool {
		sk, _, err := s.Registry.Skill(ctx, p.OrgID, jobType)
		return err == nil && sk.Callable()
	}
	raw := j.sk.Chain
	switch {
	case again != nil:
		raw = again.of.Definition
	case j.sk.Workflow != "":
		var err error
		if raw, err = s.workflowDefinition(ctx, p.OrgID, j.sk, j.req.Payload, known); err != nil {
			return Result{}, err
		}
	}
	def, errs := chain.Parse(raw, known)
	if errs != nil {
		return Result{}, apierr.New(http.StatusBadRequest, apierr.CodeValidationFailed,
			fmt.Sprintf("The chain skill %q cannot run as defined: %s", j.req.JobType, errs[0].Message),
			"Fix the skill's chain block (`yard skills apply` or PUT /api/v1/skills/{job_type}) — a step's skill may have been disabled or removed since it was saved.").
			With("fields", errs, "job_type", j.req.JobType)
	}
	reusedSteps := map[string]bool{}
	if again != nil {
		for _, st := range again.reused {
			reusedSteps[st.StepID] = true
		}
	}
	var rules chain.Rules
	if def.Workflow != nil {
		r, err := workflow.NewRules(def)
		if err != nil {
			return Result{}, apierr.Internal(err)
		}
		rules = r
	}
	roots, err := chain.RootPayloads(def, j.req.Payload, reusedSteps, rules)
	if err != nil {
		return Result{}, apierr.Internal(err)
	}
	for _, st := range def.Steps {
		payload, ok := roots[st.StepID]
		if !ok {
			continue
		}
		if _, err := s.governStep(ctx, org, chain.StepRequest{OrgID: p.OrgID, JobType: st.JobType,
			Payload: payload, UserID: j.req.UserID}); err != nil {
			var ae *apierr.Error
			if errors.As(err, &ae) && ae.Status < 500 {
				return Result{}, ae.With("chain_step", st.StepID)
			}
			return Result{}, err
		}
	}
	if j.status == run.Queued {
		if err := s.backlog.admit(ctx, s.runs(), org, 1); err != nil {
			return Result{}, err
		}
	}
	j.chainID = ids.New()
	if err := j.build(); err != nil {
		return Result{}, apierr.Internal(err)
	}
	nc := runstore.NewChain{ID: j.chainID, OrgID: p.OrgID, TraceID: j.traceID, JobType: j.req.JobType,
		Definition: raw, Input: j.req.Payload, UserID: j.req.UserID, Priority: string(j.priority),
		CostCeilingUSD: def.CostCeilingUSD, ParentRunID: j.runID}
	if def.TimeoutSeconds > 0 {
		nc.Deadline = new(time.Now().Add(time.Duration(def.TimeoutSeconds) * time.Second))
	}
	if again != nil {
		nc.RerunOf = again.of.ID
	}
	if err := s.snapshots.ensure(ctx, s.DB, j.snap); err != nil {
		return Result{}, dbError(err)
	}
	err = runstore.New(s.DB).InTx(ctx, func(tx *runstore.Store) error {
		b := &pgx.Batch{}
		runstore.QueueChain(b, nc)
		j.rows.queue(b)
		if err := tx.SendBatch(ctx, b); err != nil {
			return err
		}
		if j.rows.runs.Inserted() == 0 {
			return runstore.ErrDuplicate
		}
		if again == nil {
			return nil
		}
		for i := range again.reused {
			again.reused[i].RunID, again.reused[i].SpanID = "", ""
		}
		return tx.SaveChainSteps(ctx, j.chainID, again.reused)
	})
	if errors.Is(err, runstore.ErrDuplicate) {
		return s.taken(ctx, p.OrgID, j.req.IdempotencyKey)
	}
	if err != nil {
		if store.IsMissingSnapshot(err) {
			s.snapshots.forget(j.snap.Digest)
		}
		return Result{}, dbError(err)
	}
	if j.status == run.Queued {
		if err := s.startChain(ctx, j.chainID); err != nil {
			s.takeBackChain(ctx, p.OrgID, j.chainID)
			return Result{}, queueUnavailable(err)
		}
	}
	if nc.Deadline != nil {
		if task, err := queue.NewChainTimeoutTask(j.chainID, *nc.Deadline); err == nil {
			if _, err := s.Queue.EnqueueContext(ctx, task); err != nil {
				// The reconciler times out a running chain past its deadline all the same.
				s.Log.Warn("scheduling chain timeout", "chain_id", j.chainID, "error", err)
			}
		}
	}
	res := s.answer(ctx, j)
	res.ChainID = j.chainID
	if err := s.Events.Publish(ctx, *j.event); err != nil {
		s.Log.Warn("publishing dispatch events", "job_id", j.runID, "error", err)
	}
	return res, nil
}

// startChain puts a chain's start on the coordinator's queue.
func (s *Service) startChain(ctx context.Context, chainID string) error {
	task, err := queue.NewChainStartTask(chainID)
	if err != nil {
		return err
	}
	if _, err := s.Queue.EnqueueContext(ctx, task); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return err
	}
	return nil
}

// takeBackChain removes a chain whose start could not be enqueued, with its runs.
func (s *Service) takeBackChain(ctx context.Context, orgID, chainID string) {
	if err := runstore.New(s.DB).DeleteChain(context.WithoutCancel(ctx), orgID, chainID); err != nil {
		s.Log.Error("removing a chain that could not be started", "org_id", orgID, "chain_id", chainID, "error", err)
	}
}

// governStep resolves and governs a chain step's job: what it will be, or why it is
// refused (an *apierr.Error with a 4xx status).
func (s *Service) governStep(ctx context.Context, org store.Org, r chain.StepRequest) (*job, error) {
	req := Request{JobType: r.JobType, Payload: r.Payload, UserID: r.UserID, Priority: r.Priority}
	if err := s.checkRequest(ctx, r.OrgID, req); err != nil {
		return nil, err
	}
	p := auth.Principal{OrgID: r.OrgID, KeyName: "chain"}
	j, err := s.govern(ctx, p, org, req)
	if err != nil {
		return nil, err
	}
	if j.sk.ExecutionType == string(run.Chain) {
		return nil, apierr.New(http.StatusUnprocessableEntity, apierr.CodeUnsupportedExecutionType,
			fmt.Sprintf("Step job type %q is itself a chain; a chain's steps are llm_only, tool_using or autonomous skills.", r.JobType),
			"Inline the inner chain's steps into this chain.").With("job_type", r.JobType)
	}
	if r.Queue != "" {
		if err := s.runOn(ctx, j, r.Queue); err != nil {
			return nil, err
		}
	}
	return j, nil
}

// runOn moves a step's run to the queue a workflow's runs-on names: a queue by name, or a
// queue class (cpu, gpu) — the skill's own queue when it is of that class, else the first
// queue of the class by name. A label that names neither is a refusal.
func (s *Service) runOn(ctx context.Context, j *job, label string) error {
	if q, err := s.Registry.Queue(ctx, label); err == nil {
		j.sk.Queue = q.Name
		if j.sk.TimeoutSeconds == nil {
			j.timeout = time.Duration(q.TimeoutSeconds) * time.Second
		}
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return dbError(err)
	}
	qs, err := s.Registry.Queues(ctx)
	if err != nil {
		return dbError(err)
	}
	var pick *store.Queue
	for i, q := range qs {
		if q.Class != label {
			continue
		}
		if q.Name == j.sk.Queue || pick == nil {
			pick = &qs[i]
		}
	}
	if pick == nil {
		names := make([]string, len(qs))
		for i, q := range qs {
			names[i] = q.Name
		}
		return apierr.New(http.StatusBadRequest, apierr.CodeValidationFailed,
			fmt.Sprintf("runs-on %q names no queue and no queue class.", label),
			"Use a queue ("+strings.Join(names, ", ")+") or a class (cpu, gpu) in the job's runs-on.").With("runs_on", label)
	}
	if pick.Name != j.sk.Queue {
		j.sk.Queue = pick.Name
		if j.sk.TimeoutSeconds == nil {
			j.timeout = time.Duration(pick.TimeoutSeconds) * time.Second
		}
	}
	return nil
}

// PrepareStep governs a chain step and lays out its run's rows, for the coordinator to
// write in the chain's transaction. An *apierr.Error with a 4xx status is a refusal: the
// step fails with it.
func (s *Service) PrepareStep(ctx context.Context, r chain.StepRequest) (chain.Prepared, error) {
	org, err := s.activeOrg(ctx, r.OrgID)
	if err != nil {
		return nil, err
	}
	j, err := s.governStep(ctx, org, r)
	if err != nil {
		return nil, err
	}
	j.caller, j.started = "chain:"+r.ChainID, time.Now().UTC()
	j.traceID, j.parentSpan, j.chainID, j.chainStep = r.TraceID, r.ParentSpanID, r.ChainID, r.Label
	if r.TimeoutSeconds > 0 {
		j.timeout = time.Duration(r.TimeoutSeconds) * time.Second
	}
	if err := j.build(); err != nil {
		return nil, err
	}
	if err := s.snapshots.ensure(ctx, s.DB, j.snap); err != nil {
		return nil, err
	}
	return &preparedStep{j: j}, nil
}

// EnqueueStep puts a written, queued step's run on its queue.
func (s *Service) EnqueueStep(ctx context.Context, p chain.Prepared) error {
	return s.enqueueJob(ctx, s.Queue, p.(*preparedStep).j)
}

type preparedStep struct{ j *job }

func (p *preparedStep) RunID() string          { return p.j.runID }
func (p *preparedStep) Held() bool             { return p.j.status == run.HeldForReview }
func (p *preparedStep) Queue(b *pgx.Batch)     { p.j.rows.queue(b) }
func (p *preparedStep) Event() *event.Envelope { return p.j.event }

// Rerun starts a new chain from an ended one: the steps that completed keep their outputs
// (reused, not run again), the rest run again. The chain skill's current binding governs
// the new parent run; the old chain's definition is the one re-run.
func (s *Service) Rerun(ctx context.Context, p auth.Principal, chainID string) (Result, []string, error) {
	old, err := runstore.New(s.DB).GetChain(ctx, p.OrgID, chainID)
	if errors.Is(err, runstore.ErrChainNotFound) {
		return Result{}, nil, ChainNotFound(chainID)
	}
	if err != nil {
		return Result{}, nil, dbError(err)
	}
	if old.Status == "running" {
		return Result{}, nil, apierr.New(http.StatusConflict, apierr.CodeChainNotFinished,
			"The chain is still running; only an ended chain can be re-run.",
			"Cancel it with POST /api/v1/chains/{chainId}/cancel, or wait for it to end.").With("chain_id", chainID, "status", old.Status)
	}
	completed := map[string]bool{}
	for _, st := range old.Steps {
		if st.Instance == chain.Whole && st.Status == chain.Completed {
			completed[st.StepID] = true
		}
	}
	var reused []runstore.ChainStep
	var names []string
	for _, st := range old.Steps {
		if completed[st.StepID] {
			st.Reused = true
			reused = append(reused, st)
			if st.Instance == chain.Whole {
				names = append(names, st.StepID)
			}
		}
	}
	org, err := s.activeOrg(ctx, p.OrgID)
	if err != nil {
		return Result{}, nil, err
	}
	req := Request{JobType: old.JobType, Payload: old.Input}
	if err := s.RateLimit(ctx, org, "", 1); err != nil {
		return Result{}, nil, err
	}
	j, err := s.govern(ctx, p, org, req)
	if err != nil {
		return Result{}, nil, err
	}
	if j.sk.ExecutionType != string(run.Chain) {
		return Result{}, nil, apierr.New(http.StatusConflict, apierr.CodeUnsupportedExecutionType,
			fmt.Sprintf("Job type %q is no longer bound to a chain skill.", old.JobType),
			"Bind it to a chain skill again, or dispatch the new skill.").With("job_type", old.JobType)
	}
	j.started = time.Now().UTC()
	res, err := s.dispatchChain(ctx, p, org, j, &rerun{of: old, reused: reused})
	return res, names, err
}

// ChainNotFound is the 404 of a chain that does not exist in the caller's organisation.
func ChainNotFound(id string) *apierr.Error {
	return apierr.New(http.StatusNotFound, apierr.CodeChainNotFound, "No chain with this id exists in your organisation.",
		"Check the chainId returned by POST /api/v1/dispatch, and that you use a key of the same organisation.").
		With("chain_id", id)
}

// isChainParent reports whether a run is a chain's parent run.
func isChainParent(r runstore.Run) bool {
	return r.ExecutionType == string(run.Chain) && r.ChainID != "" && r.ChainStep == ""
}
