package chain

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// The statuses of a chain_steps row (seed 004 §5.2's state machine): pending until its
// parents have ended, dispatched while its run (or, for a for_each step, its instances)
// runs, then one of the four ends.
const (
	Pending    = "pending"
	Dispatched = "dispatched"
	Completed  = "completed"
	Failed     = "failed"
	Skipped    = "skipped"
	Cancelled  = "cancelled"
)

// Whole is the instance number of the row that stands for a step as a whole; a for_each
// step's instances are numbered from 0.
const Whole = -1

// StepRow is one row of chain_steps — a step, or one instance of a for_each step — as
// the run store reads and writes it (RunStatus, the live status of a dispatched step's run,
// is read, never written), and whether the engine changed it.
type StepRow struct {
	runstore.ChainStep
	// Changed marks a row the engine changed: the coordinator writes these.
	Changed bool
}

func (r *StepRow) ended() bool { return r.Status != Pending && r.Status != Dispatched }

// Label names a step row in events and spans: "step", or "step[i]" for an instance.
func (r *StepRow) Label() string {
	if r.Instance == Whole {
		return r.StepID
	}
	return r.StepID + "[" + strconv.Itoa(r.Instance) + "]"
}

// State is a chain as the coordinator loaded it under the chain's lock.
type State struct {
	ID, OrgID, ParentRunID, JobType string
	TraceID, UserID, Priority       string
	Status                          string
	Input                           json.RawMessage
	Def                             *Definition
	CreatedAt                       time.Time
	DeadlineAt                      *time.Time
	Output, Error                   json.RawMessage
	Steps                           []*StepRow
	// Changed is set when the chain's own row changed (its status, output, error, cost).
	Changed bool
}

// Dispatch asks the coordinator to dispatch one step (or instance) through the pipeline.
type Dispatch struct {
	StepID   string
	Instance int
	Attempt  int
	JobType  string
	Payload  json.RawMessage
	// TimeoutSeconds is the step's own timeout; 0: its skill's.
	TimeoutSeconds int
	// Queue is the queue or queue class the step runs on; "": its skill's.
	Queue string
}

// Sent is what a dispatch did: the run (held for review or queued) and its
// chain_step span, or the refusal that fails the step.
type Sent struct {
	RunID, SpanID string
	Held          bool
	Refused       json.RawMessage
}

// Hooks are what the engine needs of the coordinator while it decides: every call happens
// inside the chain's transaction, and an error rolls all of it back.
type Hooks interface {
	Dispatch(d Dispatch) (Sent, error)
	// Stop ends a dispatched run that has not started (ended true), or asks a running one
	// to stop at its next step (its end is reported later).
	Stop(runID string) (ended bool, err error)
	// Event journals a chain event on the parent run (the coordinator draws the chain's
	// spans from them).
	Event(typ string, data map[string]any)
	// Finish ends the parent run with the chain.
	Finish(status run.Status, output, errBody json.RawMessage) error
}

// Engine applies one transition to a chain: a start, a step's end, a cancellation.
type Engine struct {
	S     *State
	Hooks Hooks
	// Rules decide what a chain written in another language (a workflow) leaves to it;
	// nil for a chain skill's definition.
	Rules Rules
	Now   func() time.Time
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now().UTC()
}

// row returns the row of a step instance, nil when there is none.
func (e *Engine) row(stepID string, instance int) *StepRow {
	for _, r := range e.S.Steps {
		if r.StepID == stepID && r.Instance == instance {
			return r
		}
	}
	return nil
}

// whole returns the row of a step as a whole, adding a pending one if missing.
func (e *Engine) whole(stepID string) *StepRow {
	if r := e.row(stepID, Whole); r != nil {
		return r
	}
	r := &StepRow{ChainStep: runstore.ChainStep{StepID: stepID, Instance: Whole, Status: Pending}, Changed: true}
	e.S.Steps = append(e.S.Steps, r)
	return r
}

func (e *Engine) instances(stepID string) []*StepRow {
	var out []*StepRow
	for _, r := range e.S.Steps {
		if r.StepID == stepID && r.Instance != Whole {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *StepRow) int { return a.Instance - b.Instance })
	return out
}

func (e *Engine) step(id string) *Step {
	for i := range e.S.Def.Steps {
		if e.S.Def.Steps[i].StepID == id {
			return &e.S.Def.Steps[i]
		}
	}
	return nil
}

// Start dispatches every pending step whose parents have all ended: the roots of a new
// chain, and for a rerun also the steps after the outputs it reused.
func (e *Engine) Start() error {
	for _, s := range e.S.Def.Steps {
		e.whole(s.StepID)
	}
	if err := e.advance(""); err != nil {
		return err
	}
	return e.settle()
}

// RunEnd is how a step's run ended, as Postgres has it.
type RunEnd struct {
	RunID   string
	Status  run.Status
	Output  json.RawMessage
	Error   json.RawMessage
	CostUSD float64
}

// Ended applies the end of a step's run. A run the chain does not know as a dispatched
// step's current run — a report repeated, or of an attempt since replaced — changes
// nothing: reports are idempotent.
func (e *Engine) Ended(end RunEnd) error {
	var r *StepRow
	for _, c := range e.S.Steps {
		if c.RunID == end.RunID && c.Status == Dispatched {
			r = c
		}
	}
	if r == nil || !end.Status.Terminal() {
		return nil
	}
	r.CostUSD += end.CostUSD
	r.Changed = true
	outcome := Completed
	switch end.Status {
	case run.Completed, run.CompletedMaxIterations, run.CompletedBudgetExhausted:
	case run.Skipped:
		outcome = Skipped
	case run.Cancelled:
		outcome = Cancelled
	default: // failed, timed_out, rejected
		outcome = Failed
	}
	if e.S.Status != apitypes.ChainRunning {
		// The chain ended (cancelled, aborted, timed out) while this run was stopping.
		e.end(r, outcome, end.Output, end.Error, "")
		e.rollUp(r.StepID)
		return nil
	}
	retriable := end.Status == run.Failed || end.Status == run.TimedOut
	if outcome == Failed && retriable && r.Attempt <= e.S.Def.MaxStepRetries {
		return e.dispatch(r, r.Attempt+1, end.Error, nil)
	}
	e.end(r, outcome, end.Output, end.Error, "")
	if r.Instance != Whole {
		if outcome != Completed && e.S.Def.OnFailure == "abort" {
			return e.abort(apitypes.ChainFailed, stepFailed(r))
		}
		if !e.rollUp(r.StepID) {
			return nil
		}
		r = e.whole(r.StepID)
	}
	if err := e.afterEnd(r); err != nil {
		return err
	}
	return e.settle()
}

// rollUp ends a for_each step once all its instances have: completed when all completed,
// failed otherwise, its output the instances' outputs in order. It reports whether the
// step ended now.
func (e *Engine) rollUp(stepID string) bool {
	w := e.whole(stepID)
	insts := e.instances(stepID)
	if w.ended() || len(insts) == 0 {
		return false
	}
	outs := make([]json.RawMessage, len(insts))
	status := Completed
	var cost float64
	for i, in := range insts {
		if !in.ended() {
			return false
		}
		outs[i] = in.Output
		if outs[i] == nil {
			outs[i] = json.RawMessage("null")
		}
		cost += in.CostUSD
		if in.Status == Failed || in.Status == Cancelled {
			status = Failed
		}
	}
	out, _ := json.Marshal(outs)
	var errBody json.RawMessage
	if status == Failed {
		errBody = errJSON(apierr.CodeChainStepFailed, fmt.Sprintf("an instance of for_each step %q did not complete", stepID), nil)
	}
	w.CostUSD = cost
	e.end(w, status, out, errBody, "")
	return true
}

// afterEnd applies what a step's end means for the rest: its failure policy, then
// whatever it unblocked.
func (e *Engine) afterEnd(r *StepRow) error {
	if r.Status == Failed || r.Status == Cancelled {
		switch e.S.Def.OnFailure {
		case "abort":
			return e.abort(apitypes.ChainFailed, stepFailed(r))
		case "skip_dependents":
			e.skipDescendants(r.StepID)
		}
	}
	if err := e.rulesEnded(r); err != nil {
		return err
	}
	return e.advance(r.StepID)
}

// rulesEnded cancels what the Rules say a step's end cancels: pending steps end
// cancelled, dispatched runs are stopped (those that had started report their end later).
func (e *Engine) rulesEnded(r *StepRow) error {
	if e.Rules == nil {
		return nil
	}
	for _, id := range e.Rules.Ended(e.S, r) {
		w := e.whole(id)
		switch {
		case w.Status == Pending:
			e.end(w, Cancelled, nil, nil, "cancelled_by:"+r.StepID)
		case w.Status == Dispatched && w.RunID != "":
			ended, err := e.Hooks.Stop(w.RunID)
			if err != nil {
				return err
			}
			if ended {
				e.end(w, Cancelled, nil, nil, "cancelled_by:"+r.StepID)
			}
		}
	}
	return nil
}

// skipDescendants marks every step that depends on stepID, transitively, skipped.
func (e *Engine) skipDescendants(stepID string) {
	for _, s := range e.S.Def.Steps {
		if !slices.Contains(s.DependsOn, stepID) {
			continue
		}
		if w := e.whole(s.StepID); w.Status == Pending {
			e.end(w, Skipped, nil, nil, "parent_failed:"+stepID)
			e.skipDescendants(s.StepID)
		}
	}
}

// advance dispatches, skips or fans out every pending step whose parents have all ended,
// until nothing more moves. trigger is the step whose end started it ("" at the start).
func (e *Engine) advance(trigger string) error {
	var forked []string
	for moved := true; moved; {
		moved = false
		for i := range e.S.Def.Steps {
			if e.S.Status != apitypes.ChainRunning {
				return nil // a step's failure aborted the chain
			}
			s := &e.S.Def.Steps[i]
			w := e.whole(s.StepID)
			if w.Status != Pending || !e.parentsEnded(s) || (e.Rules != nil && !e.Rules.Ready(e.S, s)) {
				continue
			}
			moved = true
			started, err := e.begin(s, w)
			if err != nil {
				return err
			}
			forked = append(forked, started...)
		}
	}
	if trigger != "" && len(forked) > 1 {
		e.Hooks.Event(event.ChainFork, map[string]any{"trigger": trigger, "forked": forked})
	}
	return nil
}

func (e *Engine) parentsEnded(s *Step) bool {
	for _, p := range s.DependsOn {
		if !e.whole(p).ended() {
			return false
		}
	}
	return true
}

// begin starts one unblocked step: skipped when its condition does not hold, fanned out
// for for_each, dispatched otherwise. It returns the labels of what it dispatched.
func (e *Engine) begin(s *Step, w *StepRow) ([]string, error) {
	if len(s.DependsOn) > 1 {
		e.Hooks.Event(event.ChainJoin, map[string]any{"joinStepId": s.StepID, "completedPredecessors": s.DependsOn})
	}
	if e.Rules != nil {
		d, err := e.Rules.Begin(e.S, s)
		var failure *StepFailure
		if errors.As(err, &failure) {
			e.end(w, Failed, nil, failure.Body, "rules")
			return nil, e.afterFailure(w)
		}
		if err != nil {
			return nil, err
		}
		if d.Skip != "" {
			e.end(w, Skipped, nil, nil, d.Skip)
			return nil, nil
		}
		if err := e.dispatch(w, 1, nil, &d); err != nil {
			return nil, err
		}
		return []string{w.Label()}, nil
	}
	if c := s.Condition; c != nil {
		parent, path := field(c.Field)
		p := e.whole(parent)
		found, ok := any(nil), false
		if p.Status == Completed {
			out, _ := decode(p.Output)
			found, ok = lookup(out, path)
		}
		if !holds(c.Operator, found, ok, c.Value) {
			e.end(w, Skipped, nil, nil, "condition")
			return nil, nil
		}
	}
	if s.ForEach == "" {
		if err := e.dispatch(w, 1, nil, nil); err != nil {
			return nil, err
		}
		return []string{w.Label()}, nil
	}
	list, ok := e.forEachList(s)
	if !ok {
		e.end(w, Failed, nil, errJSON(apierr.CodeChainForEachInvalid,
			fmt.Sprintf("for_each %q is not a list", s.ForEach), map[string]any{"for_each": s.ForEach}), "")
		return nil, e.afterFailure(w)
	}
	if len(list) > s.MaxItems {
		e.end(w, Failed, nil, errJSON(apierr.CodeChainForEachInvalid,
			fmt.Sprintf("for_each %q has %d items; the step allows at most max_items %d", s.ForEach, len(list), s.MaxItems),
			map[string]any{"for_each": s.ForEach, "items": len(list), "max_items": s.MaxItems}), "")
		return nil, e.afterFailure(w)
	}
	n := len(list)
	w.Instances, w.Changed = &n, true
	if n == 0 {
		e.end(w, Completed, json.RawMessage("[]"), nil, "no_items")
		return nil, nil
	}
	w.Status, w.StartedAt = Dispatched, ptr(e.now())
	labels := make([]string, 0, n)
	for i := range list {
		in := &StepRow{ChainStep: runstore.ChainStep{StepID: s.StepID, Instance: i, Status: Pending}, Changed: true}
		e.S.Steps = append(e.S.Steps, in)
		if err := e.dispatch(in, 1, nil, nil); err != nil {
			return nil, err
		}
		labels = append(labels, in.Label())
	}
	e.Hooks.Event(event.ChainFork, map[string]any{"trigger": s.StepID, "forked": labels, "forEach": s.ForEach})
	return labels, nil
}

// forEachList reads the list a for_each step fans out over: from the chain's input
// ("input.<path>") or a parent's output ("<parent>.output.<path>"; a parent that did not
// complete gives an empty list). ok is false when the value there is not a list.
func (e *Engine) forEachList(s *Step) (list []any, ok bool) {
	var v any
	if path, fromInput := strings.CutPrefix(s.ForEach, "input."); fromInput {
		in, _ := decode(e.S.Input)
		v, _ = lookup(in, path)
	} else {
		parent, path := field(s.ForEach)
		p := e.whole(parent)
		if p.Status != Completed {
			return nil, true
		}
		out, _ := decode(p.Output)
		v, _ = lookup(out, path)
	}
	list, ok = v.([]any)
	return list, ok
}

// afterFailure applies the failure policy to a step that failed before it ran. The
// steps it unblocks are picked up by the advance loop that is running.
func (e *Engine) afterFailure(w *StepRow) error {
	switch e.S.Def.OnFailure {
	case "abort":
		return e.abort(apitypes.ChainFailed, stepFailed(w))
	case "skip_dependents":
		e.skipDescendants(w.StepID)
	}
	return e.rulesEnded(w)
}

// dispatch sends a step row's run (attempt n) through the pipeline, as the Rules decided
// it (nil: the chain's own payload, built here). A refusal fails the step at once with the
// refusal as its error (its policy applies as for any failure).
func (e *Engine) dispatch(r *StepRow, attempt int, lastErr json.RawMessage, decided *Decision) error {
	s := e.step(r.StepID)
	req := Dispatch{StepID: s.StepID, Instance: r.Instance, Attempt: attempt, JobType: s.JobType}
	if decided != nil {
		req.Payload, req.TimeoutSeconds, req.Queue = decided.Payload, decided.TimeoutSeconds, decided.Queue
	} else {
		payload, err := e.payload(s, r.Instance)
		if err != nil {
			return err
		}
		req.Payload, req.TimeoutSeconds = payload, s.TimeoutSeconds
	}
	d, err := e.Hooks.Dispatch(req)
	if err != nil {
		return err
	}
	r.Attempt, r.Changed = attempt, true
	if r.StartedAt == nil {
		r.StartedAt = ptr(e.now())
	}
	if d.Refused != nil {
		e.end(r, Failed, nil, d.Refused, "refused")
		if r.Instance != Whole {
			if e.S.Def.OnFailure == "abort" {
				return e.abort(apitypes.ChainFailed, stepFailed(r))
			}
			if e.rollUp(r.StepID) {
				return e.afterEnd(e.whole(r.StepID))
			}
			return nil
		}
		return e.afterFailure(r)
	}
	r.Status, r.RunID, r.SpanID, r.Error = Dispatched, d.RunID, d.SpanID, nil
	r.RunStatus = string(run.Queued)
	if d.Held {
		r.RunStatus = string(run.HeldForReview)
	}
	data := map[string]any{"stepId": s.StepID, "jobId": d.RunID, "jobType": s.JobType, "status": r.RunStatus,
		"dependsOn": nonNil(s.DependsOn), "attempt": attempt, "spanId": d.SpanID}
	if r.Instance != Whole {
		data["instance"] = r.Instance
	}
	if lastErr != nil {
		data["retryOf"] = json.RawMessage(lastErr)
	}
	e.Hooks.Event(event.ChainStepDispatched, data)
	return nil
}

// payload builds a step's payload: its own (or, without one, the chain's input) with its
// {{ }} references filled in, then its parents' outputs mapped in. A parent that did not
// complete maps null (seed 004 §5.3).
func (e *Engine) payload(s *Step, instance int) (json.RawMessage, error) {
	base := s.Payload
	if len(base) == 0 {
		base = e.S.Input
	}
	v, err := decode(base)
	if err != nil {
		return nil, fmt.Errorf("step %q payload: %w", s.StepID, err)
	}
	obj, _ := v.(map[string]any)
	if obj == nil {
		obj = map[string]any{}
	}
	input, _ := decode(e.S.Input)
	sc := scope{input: input}
	if instance != Whole {
		if list, _ := e.forEachList(s); instance < len(list) {
			sc.item = list[instance]
		}
		sc.index = &instance
	}
	obj = sc.fill(obj).(map[string]any)
	keys := make([]string, 0, len(s.OutputMapping))
	for k := range s.OutputMapping {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, from := range keys {
		parent, path := field(from)
		var val any
		if p := e.whole(parent); p.Status == Completed {
			out, _ := decode(p.Output)
			val, _ = lookup(out, path)
		}
		assign(obj, strings.TrimPrefix(s.OutputMapping[from], "payload."), val)
	}
	return json.Marshal(obj)
}

// end records a step row's end and announces it.
func (e *Engine) end(r *StepRow, status string, output, errBody json.RawMessage, reason string) {
	r.Status, r.Output, r.Error, r.Reason, r.Changed = status, output, errBody, reason, true
	r.FinishedAt = ptr(e.now())
	data := map[string]any{"stepId": r.StepID, "status": status, "costUsd": r.CostUSD}
	if r.Instance != Whole {
		data["instance"] = r.Instance
	}
	if r.RunID != "" {
		data["jobId"] = r.RunID
	}
	if r.SpanID != "" {
		data["spanId"] = r.SpanID
	}
	if reason != "" {
		data["reason"] = reason
	}
	if errBody != nil {
		data["error"] = errBody
	}
	e.Hooks.Event(event.ChainStepEnded, data)
}

// abort ends the chain with status: pending steps are cancelled, dispatched runs stopped.
func (e *Engine) abort(status string, errBody json.RawMessage) error {
	if e.S.Status != apitypes.ChainRunning {
		return nil
	}
	e.S.Status, e.S.Error, e.S.Changed = status, errBody, true
	for _, s := range e.S.Def.Steps {
		e.whole(s.StepID) // a chain ended before it started has no rows yet
	}
	for _, r := range slices.Clone(e.S.Steps) {
		switch {
		case r.Status == Pending:
			e.end(r, Cancelled, nil, nil, status)
		case r.Status == Dispatched && r.RunID != "":
			ended, err := e.Hooks.Stop(r.RunID)
			if err != nil {
				return err
			}
			if ended {
				e.end(r, Cancelled, nil, nil, status)
			}
		}
	}
	for _, r := range e.S.Steps {
		if r.Instance == Whole && r.Status == Dispatched && r.RunID == "" {
			e.rollUp(r.StepID) // a fan-out whose instances all stopped now
		}
	}
	return e.finish()
}

// Cancel ends a running chain as cancelled (a caller's request) or timed_out (its
// deadline passed). A chain that has ended already is left as it is.
func (e *Engine) Cancel(status, by string) error {
	code, msg := apierr.CodeCancelled, "the chain was cancelled by "+by
	if status == apitypes.ChainTimedOut {
		code, msg = apierr.CodeTimedOut, "the chain did not finish within its timeout_seconds"
	}
	if err := e.abort(status, errJSON(code, msg, nil)); err != nil {
		return err
	}
	e.progress()
	return nil
}

// settle ends the chain once every step has ended, and announces its progress.
func (e *Engine) settle() error {
	if e.S.Status == apitypes.ChainRunning {
		var failed []string
		for _, s := range e.S.Def.Steps {
			w := e.whole(s.StepID)
			if !w.ended() {
				e.progress()
				return nil
			}
			if w.Status == Failed || w.Status == Cancelled {
				failed = append(failed, s.StepID)
			}
		}
		e.S.Status, e.S.Changed = apitypes.ChainCompleted, true
		if len(failed) > 0 {
			e.S.Status = apitypes.ChainFailed
			e.S.Error = errJSON(apierr.CodeChainStepFailed,
				fmt.Sprintf("step(s) %s did not complete", strings.Join(failed, ", ")), map[string]any{"failed_steps": failed})
		}
		var out json.RawMessage
		if e.Rules != nil {
			status, output, errBody, err := e.Rules.Outcome(e.S)
			if err != nil {
				return err
			}
			e.S.Status, e.S.Error, out = status, errBody, output
		}
		if err := e.finishWith(out); err != nil {
			return err
		}
	}
	e.progress()
	return nil
}

// finish ends the parent run: its output maps each completed step to its output.
func (e *Engine) finish() error { return e.finishWith(nil) }

// finishWith ends the parent run with output, or when nil the chain's own: each completed
// step mapped to its output.
func (e *Engine) finishWith(output json.RawMessage) error {
	if output != nil {
		e.S.Output = output
		return e.Hooks.Finish(run.Status(e.S.Status), output, e.S.Error)
	}
	outs := map[string]json.RawMessage{}
	for _, s := range e.S.Def.Steps {
		if w := e.whole(s.StepID); w.Status == Completed {
			outs[s.StepID] = w.Output
		}
	}
	out, _ := json.Marshal(map[string]any{"chainId": e.S.ID, "steps": outs})
	e.S.Output = out
	st := run.Status(e.S.Status)
	return e.Hooks.Finish(st, out, e.S.Error)
}

// progress announces the chain's weighted progress.
func (e *Engine) progress() {
	done, total := 0, len(e.S.Def.Steps)
	for _, s := range e.S.Def.Steps {
		if e.whole(s.StepID).ended() {
			done++
		}
	}
	e.Hooks.Event(event.ChainProgress, map[string]any{"progress": Progress(e.S, e.now()), "completed": done,
		"total": total, "costUsd": e.Cost(), "status": e.S.Status})
}

// Cost is what the chain's steps have cost so far.
func (e *Engine) Cost() float64 {
	var c float64
	for _, r := range e.S.Steps {
		if r.Instance != Whole || e.row(r.StepID, 0) == nil {
			c += r.CostUSD
		}
	}
	return c
}

// DefaultStepWeight is the weight, in seconds, of a step without its own timeout_seconds.
const DefaultStepWeight = 300

// Progress is the chain's progress from 0 to 1, each step weighted by its timeout (seed
// 004 §5.4): ended steps count whole, running ones by the share of their timeout elapsed
// (at most 95 %), a fan-out by the share of its instances ended.
func Progress(s *State, now time.Time) float64 {
	if s.Status != apitypes.ChainRunning {
		return 1
	}
	var total, done float64
	for _, st := range s.Def.Steps {
		weight := float64(st.TimeoutSeconds)
		if weight == 0 {
			weight = DefaultStepWeight
		}
		total += weight
		var w *StepRow
		var insts []*StepRow
		for _, r := range s.Steps {
			switch {
			case r.StepID != st.StepID:
			case r.Instance == Whole:
				w = r
			default:
				insts = append(insts, r)
			}
		}
		switch {
		case w == nil || w.Status == Pending:
		case w.ended():
			done += weight
		case len(insts) > 0:
			n := 0
			for _, in := range insts {
				if in.ended() {
					n++
				}
			}
			done += weight * float64(n) / float64(len(insts))
		case w.RunStatus == string(run.Running) && w.StartedAt != nil:
			done += weight * min(now.Sub(*w.StartedAt).Seconds()/weight, 0.95)
		}
	}
	if total == 0 {
		return 0
	}
	return float64(int(done/total*1000)) / 1000
}

func stepFailed(r *StepRow) json.RawMessage {
	return errJSON(apierr.CodeChainStepFailed, fmt.Sprintf("step %s did not complete", r.Label()),
		map[string]any{"step_id": r.StepID, "step_error": r.Error})
}

func errJSON(code, msg string, ctx map[string]any) json.RawMessage {
	body := map[string]any{"code": code, "message": msg}
	if ctx != nil {
		body["context"] = ctx
	}
	b, _ := json.Marshal(body)
	return b
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// StepRequest is a step's dispatch as the coordinator asks the pipeline for it.
type StepRequest struct {
	OrgID, ChainID string
	// Label is the run's chain_step: "step", or "step[i]" for a for_each instance.
	Label, TraceID, ParentSpanID string
	UserID, Priority             string
	JobType                      string
	Payload                      json.RawMessage
	TimeoutSeconds               int
	// Queue is the queue or queue class to run on instead of the skill's ("": the skill's).
	Queue string
}

// RootPayloads returns the payload each root step (of the steps not in skip) would be
// dispatched with — for a for_each root, its first instance's; none when its list is
// empty — so that a dispatch can govern the roots before anything is written.
func RootPayloads(def *Definition, input json.RawMessage, skip map[string]bool, rules Rules) (map[string]json.RawMessage, error) {
	e := &Engine{S: &State{Def: def, Input: input, Status: apitypes.ChainRunning}, Rules: rules}
	out := map[string]json.RawMessage{}
	for i := range def.Steps {
		s := &def.Steps[i]
		if len(s.DependsOn) > 0 || skip[s.StepID] {
			continue
		}
		if rules != nil {
			e.whole(s.StepID)
			d, err := rules.Begin(e.S, s)
			var failure *StepFailure
			if errors.As(err, &failure) {
				continue // fails when the chain starts, before it is governed
			}
			if err != nil {
				return nil, err
			}
			if d.Skip == "" {
				out[s.StepID] = d.Payload
			}
			continue
		}
		instance := Whole
		if s.ForEach != "" {
			if list, _ := e.forEachList(s); len(list) == 0 {
				continue
			}
			instance = 0
		}
		p, err := e.payload(s, instance)
		if err != nil {
			return nil, err
		}
		out[s.StepID] = p
	}
	return out, nil
}
