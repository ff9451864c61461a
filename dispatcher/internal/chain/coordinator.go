package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/span"
)

// The coordinator runs chains. It consumes the durable coordinator queue — a chain's start
// (from a dispatch, an approval or the reconciler), a step's end (from the executor, or the
// dispatcher when a held step is rejected or cancelled) and a chain's deadline — and applies
// each as one transition: one Postgres transaction that takes the chain's advisory lock,
// reads the chain and its steps, lets the Engine decide, and writes every consequence (step
// rows, new step runs with their spans and first events, the chain's events and spans, the
// parent run's end) before it commits. Only then are new runs enqueued and events
// published. A transition that finds nothing to do — a report repeated or out of date —
// writes nothing, and a crash between commit and enqueue is repaired when the task is
// handed out again (its step runs are enqueued by id, so never twice) or by the reconciler.

// Pipeline is what the coordinator needs of the dispatch pipeline (dispatch.Service).
type Pipeline interface {
	// PrepareStep governs a step and lays out its run; an *apierr.Error with a 4xx status
	// is a refusal.
	PrepareStep(ctx context.Context, r StepRequest) (Prepared, error)
	// EnqueueStep puts a written, queued step run on its queue.
	EnqueueStep(ctx context.Context, p Prepared) error
	// Requeue puts a queued run on its queue again (by id: never a second task).
	Requeue(ctx context.Context, runID string) error
}

// Prepared is a step's run governed and laid out, not yet written.
type Prepared interface {
	RunID() string
	Held() bool
	// Queue adds the run's rows (run, dispatch spans, first event) to a batch.
	Queue(b *pgx.Batch)
	// Event is the run's first event, numbered once its batch has run.
	Event() *event.Envelope
}

// Publisher sends journaled events to live subscribers.
type Publisher interface {
	Publish(ctx context.Context, envs ...event.Envelope) error
}

// Canceller removes a cancelled run's task and wakes the executor of a running one;
// *asynq.Inspector satisfies it.
type Canceller interface {
	DeleteTask(queue, id string) error
	CancelProcessing(id string) error
}

// Coordinator applies chain transitions.
type Coordinator struct {
	DB        *pgxpool.Pool
	Pipeline  Pipeline
	Events    Publisher
	Canceller Canceller
	// Rules gives a definition compiled from a workflow its Rules (package workflow).
	Rules RulesFunc
	Log   *slog.Logger

	decoded decodedCache // each chain's definition and Rules, decoded once (decoded.go)
}

// ProcessTask handles one coordinator task; an error hands it back to asynq to retry. A
// task for a chain that does not exist (taken back after its start failed) is dropped.
func (c *Coordinator) ProcessTask(ctx context.Context, t *asynq.Task) error {
	err := c.process(ctx, t)
	if errors.Is(err, runstore.ErrChainNotFound) {
		c.Log.Warn("coordinator task for a chain that does not exist; dropped", "task", t.Type())
		return nil
	}
	return err
}

func (c *Coordinator) process(ctx context.Context, t *asynq.Task) error {
	switch t.Type() {
	case queue.TypeStepDone:
		var d queue.StepDone
		if err := json.Unmarshal(t.Payload(), &d); err != nil {
			c.Log.Error("dropping an unreadable step report", "error", err)
			return nil
		}
		return c.stepDone(ctx, d.ChainID, d.RunID)
	case queue.TypeChainStart, queue.TypeChainTimeout:
		var d queue.ChainTask
		if err := json.Unmarshal(t.Payload(), &d); err != nil {
			c.Log.Error("dropping an unreadable chain task", "type", t.Type(), "error", err)
			return nil
		}
		if t.Type() == queue.TypeChainStart {
			return c.Start(ctx, d.ChainID)
		}
		return c.Timeout(ctx, d.ChainID)
	}
	c.Log.Error("dropping a coordinator task of unknown type", "type", t.Type())
	return nil
}

// Start starts a chain whose parent run is queued: the parent runs, the roots (and, for a
// rerun, what follows the reused steps) are dispatched. A chain started already, or whose
// parent was rejected or cancelled meanwhile, is left as it is (the latter ends).
func (c *Coordinator) Start(ctx context.Context, chainID string) error {
	return c.transition(ctx, chainID, func(tx *tx) error {
		parent, err := tx.rs.StepRunEnd(ctx, tx.e.S.ParentRunID)
		if err != nil {
			return err
		}
		switch st := run.Status(parent.Status); {
		case st == run.Queued:
			if _, err := tx.rs.Transition(ctx, tx.e.S.ParentRunID, []run.Status{run.Queued}, run.Running, runstore.Change{CountAttempt: true}); err != nil {
				return err
			}
			tx.parentEvent(event.JobStarted, map[string]any{"chainId": chainID})
			return tx.e.Start()
		case st.Terminal() && tx.e.S.Status == apitypes.ChainRunning:
			// Rejected or cancelled while held: the chain ends without running.
			return tx.e.Cancel(apitypes.ChainCancelled, "the parent run's "+parent.Status)
		}
		return nil
	})
}

// StepDone applies the end of a chain step's run, as Postgres has it: a report is only a
// nudge, so a repeated, late or early one changes nothing it should not.
func (c *Coordinator) StepDone(ctx context.Context, runID string) error {
	return c.stepDone(ctx, "", runID)
}

// stepDone is StepDone for a report that may name the run's chain (the executor's do):
// then the run is read once, under the chain's lock.
func (c *Coordinator) stepDone(ctx context.Context, chainID, runID string) error {
	if chainID != "" {
		return c.transition(ctx, chainID, func(tx *tx) error { return tx.ended(runID) })
	}
	end, err := runstore.New(c.DB).StepRunEnd(ctx, runID)
	if errors.Is(err, runstore.ErrNotFound) {
		c.Log.Warn("step report for a run that does not exist; dropped", "job_id", runID)
		return nil
	}
	if err != nil {
		return err
	}
	if end.ChainID == "" || !run.Status(end.Status).Terminal() {
		return nil
	}
	return c.transition(ctx, end.ChainID, func(tx *tx) error { return tx.ended(runID) })
}

// ended applies a step run's end as Postgres has it under the chain's lock. A run of
// another chain (a report naming the wrong one) changes nothing.
func (t *tx) ended(runID string) error {
	end, err := t.rs.StepRunEnd(t.ctx, runID)
	if errors.Is(err, runstore.ErrNotFound) || (err == nil && end.ChainID != t.e.S.ID) {
		return nil
	}
	if err != nil {
		return err
	}
	return t.e.Ended(RunEnd{RunID: runID, Status: run.Status(end.Status), Output: end.Output,
		Error: end.Error, CostUSD: end.CostUSD})
}

// Timeout ends a running chain whose deadline has passed.
func (c *Coordinator) Timeout(ctx context.Context, chainID string) error {
	return c.transition(ctx, chainID, func(tx *tx) error {
		d := tx.e.S.DeadlineAt
		if tx.e.S.Status != apitypes.ChainRunning || d == nil || time.Now().Before(*d) {
			return nil
		}
		return tx.e.Cancel(apitypes.ChainTimedOut, "its deadline")
	})
}

// Cancel cancels a running chain of the organisation: pending, queued and held steps are
// cancelled, running ones asked to stop. It returns the chain's status; CHAIN_NOT_FOUND
// and CHAIN_ALREADY_FINISHED are *apierr.Error.
func (c *Coordinator) Cancel(ctx context.Context, orgID, chainID, by string) (string, error) {
	var status string
	err := c.transition(ctx, chainID, func(tx *tx) error {
		if tx.e.S.OrgID != orgID {
			return runstore.ErrChainNotFound
		}
		status = tx.e.S.Status
		if status != apitypes.ChainRunning {
			return apierr.New(http.StatusConflict, apierr.CodeChainAlreadyFinished, "The chain has already ended.",
				"POST /api/v1/chains/{chainId}/rerun runs its failed, cancelled and skipped steps again.").
				With("chain_id", chainID, "status", status)
		}
		if err := tx.e.Cancel(apitypes.ChainCancelled, by); err != nil {
			return err
		}
		status = tx.e.S.Status
		return nil
	})
	if errors.Is(err, runstore.ErrChainNotFound) {
		return "", apierr.New(http.StatusNotFound, apierr.CodeChainNotFound, "No chain with this id exists in your organisation.",
			"Check the chainId returned by POST /api/v1/dispatch, and that you use a key of the same organisation.").
			With("chain_id", chainID)
	}
	return status, err
}

// tx is one transition in flight: the engine and what its hooks collected.
type tx struct {
	c     *Coordinator
	ctx   context.Context
	rs    *runstore.Store
	e     *Engine
	batch pgx.Batch
	spans runstore.SpanBatch
	// prepared are the step runs dispatched; drafts the parent run's events.
	prepared []Prepared
	drafts   []event.Draft
	envs     []event.Envelope
	// stopped: tasks to remove (queued runs cancelled) and executors to wake (running
	// runs asked to stop), after commit.
	removed, woken []stoppedRun
	err            error
}

type stoppedRun struct{ id, queue, priority string }

// transition runs fn on the chain under its lock in one transaction, writes what it
// decided, commits, then enqueues and publishes.
func (c *Coordinator) transition(ctx context.Context, chainID string, fn func(*tx) error) error {
	var t *tx
	err := runstore.New(c.DB).InTx(ctx, func(rs *runstore.Store) error {
		ch, rows, err := rs.LockChain(ctx, chainID)
		if err != nil {
			return err
		}
		def, rules, err := c.decode(ch)
		if err != nil {
			return err
		}
		t = &tx{c: c, ctx: ctx, rs: rs}
		t.e = &Engine{S: state(ch, def, rows), Hooks: t, Rules: rules}
		if err := fn(t); err != nil {
			return err
		}
		if t.err != nil {
			return t.err
		}
		return t.write()
	})
	if errors.Is(err, errUnreadable) {
		c.Log.Error("coordinator task for a chain whose stored definition does not parse; dropped", "chain_id", chainID, "error", err)
		return nil
	}
	if err != nil {
		return err
	}
	if t.e.S.Status != apitypes.ChainRunning {
		c.forget(chainID)
	}
	t.afterCommit()
	return nil
}

// errUnreadable marks a chain whose stored definition no longer parses: retrying cannot help.
var errUnreadable = errors.New("the stored chain definition does not parse")

// state turns the stored chain, its definition decoded, into the engine's.
func state(ch runstore.Chain, def *Definition, rows []runstore.ChainStep) *State {
	s := &State{ID: ch.ID, OrgID: ch.OrgID, ParentRunID: ch.ParentRunID, JobType: ch.JobType, Status: ch.Status,
		Input: ch.Input, Def: def, TraceID: ch.TraceID, UserID: ch.UserID, Priority: ch.Priority, CreatedAt: ch.CreatedAt, DeadlineAt: ch.DeadlineAt, Error: ch.Error}
	for _, r := range rows {
		s.Steps = append(s.Steps, &StepRow{ChainStep: r})
	}
	return s
}

// Dispatch governs a step and lays out its run under a new chain_step span.
func (t *tx) Dispatch(d Dispatch) (Sent, error) {
	traceID, userID, priority := t.e.S.TraceID, t.e.S.UserID, t.e.S.Priority
	label := d.StepID
	if d.Instance != Whole {
		label = fmt.Sprintf("%s[%d]", d.StepID, d.Instance)
	}
	sp := t.chainSpan(span.ChainStep, "step "+label, traceID).Set("step_id", d.StepID).Set("job_type", d.JobType).
		Set("attempt", d.Attempt)
	if d.Instance != Whole {
		sp.Set("instance", d.Instance)
	}
	p, err := t.c.Pipeline.PrepareStep(t.ctx, StepRequest{OrgID: t.e.S.OrgID, ChainID: t.e.S.ID, Label: label,
		TraceID: traceID, ParentSpanID: sp.ID, UserID: userID, Priority: priority, JobType: d.JobType,
		Payload: d.Payload, TimeoutSeconds: d.TimeoutSeconds, Queue: d.Queue})
	var ae *apierr.Error
	if errors.As(err, &ae) && ae.Status < 500 {
		body, _ := json.Marshal(map[string]any{"code": ae.Code, "message": ae.Message, "context": ae.Context})
		return Sent{Refused: body}, nil
	}
	if err != nil {
		return Sent{}, err
	}
	sp.Set("job_id", p.RunID())
	if err := t.spans.Add(sp); err != nil {
		return Sent{}, err
	}
	t.prepared = append(t.prepared, p)
	return Sent{RunID: p.RunID(), SpanID: sp.ID, Held: p.Held()}, nil
}

func (t *tx) chainSpan(typ span.Type, name, traceID string) *span.Span {
	sp := span.Start(t.e.S.ParentRunID, t.e.S.OrgID, traceID, t.e.S.ParentRunID, typ, name)
	sp.ChainID = t.e.S.ID
	return sp
}

// Stop cancels a step run that has not started, or asks a running one to stop.
func (t *tx) Stop(runID string) (bool, error) {
	errBody := fmt.Appendf(nil, `{"code":%q,"message":"the chain ended (%s)"}`, apierr.CodeCancelled, t.e.S.Status)
	from, err := t.rs.Transition(t.ctx, runID, []run.Status{run.HeldForReview, run.Queued, run.PendingReview},
		run.Cancelled, runstore.Change{Error: errBody})
	var te *runstore.TransitionError
	switch {
	case err == nil:
		env, err := t.rs.RecordEvent(t.ctx, runID, t.e.S.OrgID, event.JobCancelled, map[string]any{"by": "chain:" + t.e.S.ID, "from_status": from})
		if err != nil {
			return false, err
		}
		t.envs = append(t.envs, env)
		if from == run.Queued {
			info, err := t.rs.GetEnqueueInfo(t.ctx, runID)
			if err == nil {
				t.removed = append(t.removed, stoppedRun{runID, info.Queue, info.Priority})
			}
		}
		return true, nil
	case errors.As(err, &te) && te.From == run.Running:
		ok, err := t.rs.RequestCancel(t.ctx, t.e.S.OrgID, runID)
		if err != nil {
			return false, err
		}
		if ok {
			t.woken = append(t.woken, stoppedRun{id: runID})
		}
		return false, nil
	case errors.As(err, &te):
		return false, nil // it ended meanwhile: its report records it
	}
	return false, err
}

// Event journals a chain event on the parent run and draws the spans it implies.
func (t *tx) Event(typ string, data map[string]any) {
	data["chainId"] = t.e.S.ID
	t.parentEvent(typ, data)
	var sp *span.Span
	traceID := t.e.S.TraceID
	switch typ {
	case event.ChainStepEnded:
		id, _ := data["spanId"].(string)
		label, _ := data["stepId"].(string)
		if i, ok := data["instance"].(int); ok {
			label = fmt.Sprintf("%s[%d]", label, i)
		}
		sp = t.chainSpan(span.ChainStep, "step "+label, traceID).Set("step_id", data["stepId"]).Set("outcome", data["status"])
		if id != "" {
			sp.ID = id
			for _, r := range t.e.S.Steps {
				if r.SpanID == id && r.StartedAt != nil {
					sp.StartedAt = *r.StartedAt
				}
			}
		}
		if reason, ok := data["reason"]; ok {
			sp.Set("reason", reason)
		}
		status := span.OK
		switch data["status"] {
		case Failed, Cancelled:
			status = span.Error
		case Skipped:
			status = span.Skipped
		}
		sp.End(status)
	case event.ChainFork:
		sp = t.chainSpan(span.ChainFork, fmt.Sprintf("fork after %v", data["trigger"]), traceID).
			Set("trigger", data["trigger"]).Set("forked", data["forked"]).End(span.OK)
	case event.ChainJoin:
		sp = t.chainSpan(span.ChainJoin, fmt.Sprintf("join into %v", data["joinStepId"]), traceID).
			Set("join_step_id", data["joinStepId"]).Set("predecessors", data["completedPredecessors"]).End(span.OK)
	}
	if sp != nil {
		if err := t.spans.Add(sp); err != nil {
			t.err = err
			return
		}
		t.parentEvent(event.JobSpan, sp)
	}
}

func (t *tx) parentEvent(typ string, data any) {
	d, err := event.NewDraft(typ, data)
	if err != nil {
		t.err = err
		return
	}
	t.drafts = append(t.drafts, d)
}

// Finish ends the parent run with the chain's status, output and error.
func (t *tx) Finish(status run.Status, output, errBody json.RawMessage) error {
	typ := map[run.Status]string{run.Completed: event.JobCompleted, run.Failed: event.JobFailed,
		run.Cancelled: event.JobCancelled, run.TimedOut: event.JobFailed}[status]
	data := map[string]any{"chainId": t.e.S.ID, "status": status, "costUsd": t.e.Cost()}
	if errBody != nil {
		data["error"] = errBody
	}
	_, err := t.rs.Transition(t.ctx, t.e.S.ParentRunID, nil, status, runstore.Change{Output: output, Error: errBody})
	var te *runstore.TransitionError
	if errors.As(err, &te) && !te.Illegal {
		return nil // the parent ended already (rejected or cancelled while held)
	}
	if err != nil {
		return err
	}
	t.parentEvent(typ, data)
	return nil
}

// write stores what the engine decided: new step runs, step rows, the chain row, spans
// and the parent's events, in the transaction.
func (t *tx) write() error {
	for _, p := range t.prepared {
		p.Queue(&t.batch)
	}
	if t.spans.Len() > 0 {
		t.spans.Queue(&t.batch)
	}
	var parentEnvs []event.Envelope
	if len(t.drafts) > 0 {
		parentEnvs = runstore.QueueEvents(&t.batch, t.e.S.ParentRunID, t.e.S.OrgID, t.drafts)
	}
	var changed []runstore.ChainStep
	for _, r := range t.e.S.Steps {
		if r.Changed {
			changed = append(changed, r.ChainStep)
		}
	}
	runstore.QueueChainSteps(&t.batch, t.e.S.ID, changed)
	if len(changed) > 0 || t.e.S.Changed {
		runstore.QueueUpdateChain(&t.batch, t.e.S.ID, t.e.S.Status, t.e.S.Error, t.e.Cost())
	}
	if t.batch.Len() > 0 {
		// Everything the transition writes, in one round trip.
		if err := t.rs.SendBatch(t.ctx, &t.batch); err != nil {
			return err
		}
	}
	t.envs = append(t.envs, parentEnvs...)
	return nil
}

// unchanged reports whether the transition changed nothing: a repeated task.
func (t *tx) unchanged() bool {
	if t.e.S.Changed {
		return false
	}
	for _, r := range t.e.S.Steps {
		if r.Changed {
			return false
		}
	}
	return true
}

// afterCommit enqueues the new step runs, removes and wakes what was stopped, and
// publishes the events. A transition that changed nothing re-enqueues the chain's queued
// step runs (by id, so never twice): the task may be a repeat of one whose process died
// after its commit. Other transitions do not, so a fan-out's instance ends do not each
// enqueue every sibling again.
func (t *tx) afterCommit() {
	ctx := context.WithoutCancel(t.ctx)
	for _, p := range t.prepared {
		if p.Held() {
			continue
		}
		if err := t.c.Pipeline.EnqueueStep(ctx, p); err != nil {
			// The run is queued in Postgres: the reconciler puts it on its queue.
			t.c.Log.Warn("enqueueing chain step; the reconciler will retry", "job_id", p.RunID(), "error", err)
		}
	}
	if t.unchanged() {
		for _, r := range t.e.S.Steps {
			if r.Status == Dispatched && r.RunStatus == string(run.Queued) && r.RunID != "" {
				if err := t.c.Pipeline.Requeue(ctx, r.RunID); err != nil {
					t.c.Log.Warn("re-enqueueing chain step", "job_id", r.RunID, "error", err)
				}
			}
		}
	}
	for _, s := range t.removed {
		err := t.c.Canceller.DeleteTask(queue.Tier(s.queue, run.Priority(s.priority)), s.id)
		if err != nil && !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
			t.c.Log.Info("removing a cancelled step's task", "job_id", s.id, "error", err)
		}
	}
	for _, s := range t.woken {
		if err := t.c.Canceller.CancelProcessing(s.id); err != nil {
			t.c.Log.Warn("waking executor for a cancelled step", "job_id", s.id, "error", err)
		}
	}
	envs := t.envs
	for _, p := range t.prepared {
		if e := p.Event(); e != nil {
			envs = append(envs, *e)
		}
	}
	if err := t.c.Events.Publish(ctx, envs...); err != nil {
		t.c.Log.Warn("publishing chain events", "chain_id", t.e.S.ID, "error", err)
	}
}
