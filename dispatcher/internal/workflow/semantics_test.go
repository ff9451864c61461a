package workflow

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/chain"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// The semantics of a workflow run, on the chain engine with recording hooks: what is
// dispatched with which payload, what is skipped or cancelled, how the run ends.

type hooks struct {
	n        int
	byRun    map[string]chain.Dispatch
	order    []string // step ids in dispatch order
	running  map[string]bool
	stopped  []string
	finished run.Status
	output   json.RawMessage
	errBody  json.RawMessage
}

func (h *hooks) Dispatch(d chain.Dispatch) (chain.Sent, error) {
	h.n++
	id := fmt.Sprintf("run-%d", h.n)
	h.byRun[id] = d
	h.order = append(h.order, d.StepID)
	return chain.Sent{RunID: id, SpanID: "span-" + id}, nil
}

func (h *hooks) Stop(runID string) (bool, error) {
	h.stopped = append(h.stopped, runID)
	return !h.running[runID], nil
}

func (h *hooks) Event(string, map[string]any) {}

func (h *hooks) Finish(st run.Status, out, errBody json.RawMessage) error {
	h.finished, h.output, h.errBody = st, out, errBody
	return nil
}

func (h *hooks) runOf(t *testing.T, stepID string) string {
	t.Helper()
	for id, d := range h.byRun {
		if d.StepID == stepID {
			return id
		}
	}
	t.Fatalf("step %s was never dispatched; dispatched: %v", stepID, h.order)
	return ""
}

func (h *hooks) payload(t *testing.T, stepID string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(h.byRun[h.runOf(t, stepID)].Payload, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

type harness struct {
	t *testing.T
	e *chain.Engine
	h *hooks
}

func start(t *testing.T, w *Workflow, input string) *harness {
	t.Helper()
	def, errs := Compile(w, json.RawMessage(input))
	if errs != nil {
		t.Fatalf("compile: %v", errs)
	}
	raw, _ := json.Marshal(def)
	def, errs = chain.Parse(raw, nil) // as the coordinator reads it back
	if errs != nil {
		t.Fatalf("the compiled definition does not parse: %v", errs)
	}
	rules, err := NewRules(def)
	if err != nil {
		t.Fatal(err)
	}
	h := &hooks{byRun: map[string]chain.Dispatch{}, running: map[string]bool{}}
	e := &chain.Engine{S: &chain.State{ID: "c1", Status: apitypes.ChainRunning, Def: def, Input: json.RawMessage(input)},
		Hooks: h, Rules: rules}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, e: e, h: h}
}

// end ends a step's run; output "" is none.
func (x *harness) end(stepID string, st run.Status, output string) {
	x.t.Helper()
	end := chain.RunEnd{RunID: x.h.runOf(x.t, stepID), Status: st, CostUSD: 0.01}
	if output != "" {
		end.Output = json.RawMessage(output)
	}
	if st == run.TimedOut {
		end.Error = json.RawMessage(`{"code":"TIMED_OUT","message":"out of time"}`)
	}
	if err := x.e.Ended(end); err != nil {
		x.t.Fatal(err)
	}
}

func (x *harness) status(stepID string) string {
	for _, r := range x.e.S.Steps {
		if r.StepID == stepID && r.Instance == chain.Whole {
			return r.Status + reasonSuffix(r.Reason)
		}
	}
	return "none"
}

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return "(" + r + ")"
}

func (x *harness) dispatched() []string { return slices.Clone(x.h.order) }

func (x *harness) result() map[string]any {
	x.t.Helper()
	var m map[string]any
	if err := json.Unmarshal(x.h.output, &m); err != nil {
		x.t.Fatalf("output %s: %v", x.h.output, err)
	}
	return m
}

func step(id, jobType string, with map[string]any) *Step {
	return &Step{ID: id, JobType: jobType, Uses: "./skills/" + jobType, With: with}
}

func TestStepsOfAJobRunInOrderWithTemplatesAndOutputs(t *testing.T) {
	w := &Workflow{Name: "pipeline",
		Inputs:  []Input{{Name: "topic", Type: "string", Required: true}, {Name: "depth", Type: "number", Default: 2.0}},
		Env:     map[string]string{"TONE": "dry"},
		Outputs: []Output{{Name: "summary", Value: "${{ jobs.write.outputs.text }}"}},
		Jobs: []*Job{
			{ID: "research", Outputs: map[string]string{"notes": "${{ steps.gather.outputs.result }}"},
				Steps: []*Step{
					step("gather", "demo_llm", map[string]any{"prompt": "Notes on ${{ inputs.topic }} (${{ env.TONE }})", "depth": "${{ inputs.depth }}", "n": 3.0}),
					step("check", "demo_llm", map[string]any{"prompt": "Check: ${{ steps.gather.outputs.result }}"}),
				}},
			{ID: "write", Needs: []string{"research"}, Outputs: map[string]string{"text": "${{ steps.draft.outputs.result }}"},
				Steps: []*Step{step("draft", "demo_llm", map[string]any{"prompt": "Write from ${{ needs.research.outputs.notes }}"})}},
		}}
	x := start(t, w, `{"topic":"otters"}`)
	if got := x.dispatched(); !slices.Equal(got, []string{"research/gather"}) {
		t.Fatalf("dispatched %v at start: want the first step only", got)
	}
	p := x.h.payload(t, "research/gather")
	if p["prompt"] != "Notes on otters (dry)" || p["depth"] != 2.0 || p["n"] != 3.0 {
		t.Fatalf("payload %v: want the template filled, a lone expression typed, a YAML number kept", p)
	}
	x.end("research/gather", run.Completed, `{"content":"they hold hands"}`)
	if p := x.h.payload(t, "research/check"); p["prompt"] != "Check: they hold hands" {
		t.Fatalf("check's payload %v: a text answer is steps.<id>.outputs.result", p)
	}
	x.end("research/check", run.Completed, `{"content":"ok"}`)
	if p := x.h.payload(t, "write/draft"); p["prompt"] != "Write from they hold hands" {
		t.Fatalf("draft's payload %v: needs.<job>.outputs come from the job's outputs", p)
	}
	x.end("write/draft", run.Completed, `{"content":"Otters hold hands."}`)
	if x.e.S.Status != apitypes.ChainCompleted || x.h.finished != run.Completed {
		t.Fatalf("workflow %s, parent %s", x.e.S.Status, x.h.finished)
	}
	out := x.result()
	if got := out["outputs"].(map[string]any)["summary"]; got != "Otters hold hands." {
		t.Fatalf("outputs %v: want the workflow_call output from the job's", out["outputs"])
	}
	if got := out["jobs"].(map[string]any)["research"].(map[string]any)["result"]; got != "success" {
		t.Fatalf("jobs %v", out["jobs"])
	}
}

func TestAFailedJobSkipsItsDependentsUnlessTheirIfSaysOtherwise(t *testing.T) {
	w := &Workflow{Jobs: []*Job{
		{ID: "build", Steps: []*Step{step("compile", "j", nil), step("after", "j", nil),
			{ID: "cleanup", JobType: "j", If: "always()"}, {ID: "report", JobType: "j", If: "failure()"}}},
		{ID: "deploy", Needs: []string{"build"}, Steps: []*Step{step("ship", "j", nil)}},
		{ID: "notify", Needs: []string{"build"}, If: "failure()", Steps: []*Step{step("page", "j", nil)}},
		{ID: "always", Needs: []string{"deploy"}, If: "${{ always() && needs.deploy.result == 'skipped' }}", Steps: []*Step{step("log", "j", nil)}},
	}}
	x := start(t, w, `{}`)
	x.end("build/compile", run.Failed, "")
	for stepID, want := range map[string]string{"build/after": "skipped(if)", "build/cleanup": "dispatched", "build/report": "pending"} {
		if got := x.status(stepID); got != want {
			t.Fatalf("%s %s, want %s", stepID, got, want)
		}
	}
	x.end("build/cleanup", run.Completed, `{}`)
	x.end("build/report", run.Completed, `{}`)
	if got := x.status("deploy/ship"); got != "skipped(job_if)" {
		t.Fatalf("deploy/ship %s: a failed need skips the job by default", got)
	}
	if got := x.status("notify/page"); got != "dispatched" {
		t.Fatalf("notify/page %s: if: failure() runs after a failed need", got)
	}
	if got := x.status("always/log"); got != "dispatched" {
		t.Fatalf("always/log %s: always() runs after a skipped need", got)
	}
	x.end("notify/page", run.Completed, `{}`)
	x.end("always/log", run.Completed, `{}`)
	if x.e.S.Status != apitypes.ChainFailed || !strings.Contains(string(x.h.errBody), "WORKFLOW_FAILED") ||
		!strings.Contains(string(x.h.errBody), `"build"`) {
		t.Fatalf("workflow %s, error %s: want failed naming build", x.e.S.Status, x.h.errBody)
	}
	jobs := x.result()["jobs"].(map[string]any)
	for job, want := range map[string]string{"build": "failure", "deploy": "skipped", "notify": "success", "always": "success"} {
		if got := jobs[job].(map[string]any)["result"]; got != want {
			t.Fatalf("%s result %v, want %s", job, got, want)
		}
	}
}

func TestContinueOnErrorKeepsTheRunGoingAndTellsTheTruth(t *testing.T) {
	w := &Workflow{Jobs: []*Job{
		{ID: "a", Steps: []*Step{{ID: "flaky", JobType: "j", ContinueOnError: true},
			step("next", "j", map[string]any{"o": "${{ steps.flaky.outcome }}/${{ steps.flaky.conclusion }}"})}},
		{ID: "b", ContinueOnError: true, Steps: []*Step{step("x", "j", nil)}},
		{ID: "c", Needs: []string{"a", "b"}, Steps: []*Step{
			step("y", "j", map[string]any{"a": "${{ needs.a.result }}", "b": "${{ needs.b.result }}"})}},
	}}
	x := start(t, w, `{}`)
	x.end("a/flaky", run.Failed, "")
	if p := x.h.payload(t, "a/next"); p["o"] != "failure/success" {
		t.Fatalf("next's payload %v: outcome failure, conclusion success", p)
	}
	x.end("a/next", run.Completed, `{}`)
	x.end("b/x", run.Failed, "")
	if p := x.h.payload(t, "c/y"); p["a"] != "success" || p["b"] != "success" {
		t.Fatalf("c/y's payload %v: continue-on-error makes a failed step's job, and a failed job, conclude success", p)
	}
	x.end("c/y", run.Completed, `{}`)
	if x.e.S.Status != apitypes.ChainCompleted {
		t.Fatalf("workflow %s (%s): continue-on-error jobs do not fail the run", x.e.S.Status, x.h.errBody)
	}
	view, err := View(x.e.S.Def, x.e.S)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range view.Jobs {
		want := map[string][2]string{"a": {"success", "success"}, "b": {"success", "failure"}, "c": {"success", "success"}}[j.ID]
		if j.Result != want[0] || j.Outcome != want[1] {
			t.Fatalf("job %s result %s outcome %s, want %v: the outcome tells the truth", j.ID, j.Result, j.Outcome, want)
		}
	}
}

func TestMatrixFailFastAndMaxParallel(t *testing.T) {
	w := &Workflow{Jobs: []*Job{
		{ID: "fan", Matrix: &Matrix{FailFast: true, MaxParallel: 2,
			Dimensions: []Dimension{{Name: "region", Values: []any{"eu", "us", "ap"}}}},
			Steps: []*Step{step("call", "j", map[string]any{"r": "${{ matrix.region }}", "i": "${{ strategy.job-index }}"}),
				step("after", "j", nil)}},
		{ID: "join", Needs: []string{"fan"}, If: "always()", Steps: []*Step{step("sum", "j", map[string]any{"r": "${{ needs.fan.result }}"})}},
	}}
	x := start(t, w, `{}`)
	if got := x.dispatched(); !slices.Equal(got, []string{"fan/0/call", "fan/1/call"}) {
		t.Fatalf("dispatched %v: max-parallel 2 starts two instances", got)
	}
	if p := x.h.payload(t, "fan/1/call"); p["r"] != "us" || p["i"] != 1.0 {
		t.Fatalf("instance 1's payload %v", p)
	}
	x.h.running[x.h.runOf(t, "fan/1/call")] = true
	x.end("fan/0/call", run.Failed, "")
	if got := x.status("fan/2/call"); got != "cancelled(cancelled_by:fan/0/call)" {
		t.Fatalf("fan/2/call %s: fail-fast cancels the instance not started", got)
	}
	if got := x.status("fan/2/after"); got != "skipped(if)" {
		t.Fatalf("fan/2/after %s: after a cancelled step the next is skipped", got)
	}
	if got := x.status("fan/1/after"); got != "pending" {
		t.Fatalf("fan/1/after %s: waits for the running step being stopped", got)
	}
	if got := x.status("join/sum"); got != "pending" {
		t.Fatalf("join/sum %s: the join waits for every instance to end", got)
	}
	if len(x.h.stopped) != 1 || x.h.stopped[0] != x.h.runOf(t, "fan/1/call") {
		t.Fatalf("stopped %v: fail-fast stops the running instance", x.h.stopped)
	}
	x.end("fan/1/call", run.Cancelled, "")
	if got := x.status("join/sum"); got != "dispatched" {
		t.Fatalf("join/sum %s", got)
	}
	if p := x.h.payload(t, "join/sum"); p["r"] != "failure" {
		t.Fatalf("join's payload %v: the matrix job failed", p)
	}
}

func TestMatrixWithoutFailFastRunsEveryInstance(t *testing.T) {
	w := &Workflow{Jobs: []*Job{{ID: "fan", Outputs: map[string]string{"last": "${{ steps.call.outputs.result }}"},
		Matrix: &Matrix{Dimensions: []Dimension{{Name: "n", Values: []any{1.0, 2.0}}}},
		Steps:  []*Step{step("call", "j", nil)}}},
		Outputs: []Output{{Name: "last", Value: "${{ jobs.fan.outputs.last }}"}}}
	x := start(t, w, `{}`)
	x.end("fan/0/call", run.Failed, "")
	if got := x.status("fan/1/call"); got != "dispatched" {
		t.Fatalf("fan/1/call %s: without fail-fast the other instances go on", got)
	}
	x.end("fan/1/call", run.Completed, `{"content":"two"}`)
	if x.e.S.Status != apitypes.ChainFailed {
		t.Fatalf("workflow %s: an instance failed", x.e.S.Status)
	}
	if got := x.result()["outputs"].(map[string]any)["last"]; got != "two" {
		t.Fatalf("output %v: a matrix job's outputs come from an instance that set them", got)
	}
}

func TestTimeoutsAreCancelled(t *testing.T) {
	w := &Workflow{Jobs: []*Job{
		{ID: "slow", TimeoutMinutes: 1, Steps: []*Step{{ID: "a", JobType: "j", TimeoutMinutes: 5}, step("b", "j", nil)}},
		{ID: "after", Needs: []string{"slow"}, If: "always()", Steps: []*Step{step("c", "j", map[string]any{"r": "${{ needs.slow.result }}"})}},
	}}
	def, _ := Compile(w, json.RawMessage(`{}`))
	raw, _ := json.Marshal(def)
	def, _ = chain.Parse(raw, nil)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	rules, err := newRules(def, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	h := &hooks{byRun: map[string]chain.Dispatch{}, running: map[string]bool{}}
	x := &harness{t: t, h: h, e: &chain.Engine{S: &chain.State{ID: "c1", Status: apitypes.ChainRunning, Def: def,
		Input: json.RawMessage(`{}`)}, Hooks: h, Rules: rules, Now: func() time.Time { return now }}}
	if err := x.e.Start(); err != nil {
		t.Fatal(err)
	}
	if d := h.byRun[h.runOf(t, "slow/a")]; d.TimeoutSeconds != 60 {
		t.Fatalf("slow/a timeout %d s: the job's 1 minute is the tighter bound", d.TimeoutSeconds)
	}
	now = now.Add(61 * time.Second)
	x.end("slow/a", run.Completed, `{}`)
	if got := x.status("slow/b"); got != "skipped(job_timeout)" {
		t.Fatalf("slow/b %s: the job is out of time", got)
	}
	if p := h.payload(t, "after/c"); p["r"] != "cancelled" {
		t.Fatalf("after/c's payload %v: a job out of time is cancelled", p)
	}
}

func TestAnExpressionThatFailsFailsTheStepNotTheTransition(t *testing.T) {
	w := &Workflow{Jobs: []*Job{{ID: "a", Steps: []*Step{
		step("bad", "j", map[string]any{"x": "${{ fromJSON('not json') }}"}), step("next", "j", nil)}}}}
	x := start(t, w, `{}`)
	if got := x.status("a/bad"); got != "failed(rules)" {
		t.Fatalf("a/bad %s", got)
	}
	if got := x.status("a/next"); got != "skipped(if)" {
		t.Fatalf("a/next %s: after a failure the next step is skipped", got)
	}
	if x.e.S.Status != apitypes.ChainFailed {
		t.Fatalf("workflow %s", x.e.S.Status)
	}
	for _, r := range x.e.S.Steps {
		if r.StepID == "a/bad" && !strings.Contains(string(r.Error), "WORKFLOW_EXPRESSION_FAILED") {
			t.Fatalf("a/bad's error %s", r.Error)
		}
	}
}

func TestInputsAreCheckedAndTyped(t *testing.T) {
	w := &Workflow{Inputs: []Input{{Name: "topic", Type: "string", Required: true},
		{Name: "deep", Type: "boolean"}, {Name: "n", Type: "number", Default: 3.0},
		{Name: "tone", Type: "choice", Options: []string{"dry", "warm"}, Default: "dry"}}}
	got, errs := Inputs(w, json.RawMessage(`{"topic":"x","deep":"true","n":"5"}`))
	if errs != nil || got["deep"] != true || got["n"] != 5.0 || got["tone"] != "dry" {
		t.Fatalf("inputs %v %v", got, errs)
	}
	_, errs = Inputs(w, json.RawMessage(`{"deep":"maybe","tone":"loud","extra":1}`))
	var fields []string
	for _, e := range errs {
		fields = append(fields, e.Field+":"+e.Rule)
	}
	want := []string{"payload.deep:type", "payload.extra:input", "payload.tone:type", "payload.topic:required"}
	if !slices.Equal(fields, want) {
		t.Fatalf("errors %v, want %v", fields, want)
	}
}

// TestAWideDAGIsWorkedOutOnceAJob: every job of a layer needs every job of the layer
// before and reads their outputs; working out the last job's context evaluates each
// job's outputs once, not once per path to it (3^11 paths here).
func TestAWideDAGIsWorkedOutOnceAJob(t *testing.T) {
	const layers, width = 12, 3
	w := &Workflow{}
	var prev []string
	for l := range layers {
		var cur []string
		for i := range width {
			id := fmt.Sprintf("j%d_%d", l, i)
			w.Jobs = append(w.Jobs, &Job{ID: id, Needs: prev, Outputs: map[string]string{"o": "${{ steps.s.outputs.result }}"},
				Steps: []*Step{step("s", "j", nil)}})
			cur = append(cur, id)
		}
		prev = cur
	}
	def, errs := Compile(w, json.RawMessage(`{}`))
	if errs != nil {
		t.Fatal(errs)
	}
	r, err := newRules(def, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &chain.State{Def: def}
	for _, st := range def.Steps {
		s.Steps = append(s.Steps, &chain.StepRow{ChainStep: runstoreStep(st.StepID, chain.Completed, `{"content":"x"}`)})
	}
	v := rowsOf(s)
	last := w.Jobs[len(w.Jobs)-1]
	if _, _, err := r.stepContext(v, stepRef{job: last, instance: -1}, true); err != nil {
		t.Fatal(err)
	}
	if v.outputsEvaluated != (layers-1)*width {
		t.Fatalf("outputs evaluated %d times for %d jobs before the last layer", v.outputsEvaluated, (layers-1)*width)
	}
}

func runstoreStep(id, status, output string) runstore.ChainStep {
	return runstore.ChainStep{StepID: id, Instance: chain.Whole, Status: status, Output: json.RawMessage(output)}
}

// BenchmarkContentPipelineRun: the coordinator's rules over a whole run of the catalogue's
// content-pipeline workflow (4 jobs, templates and outputs at every step) — every step
// begun and ended on the engine, as the coordinator does with one Rules per chain.
func BenchmarkContentPipelineRun(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "workflows", "content-pipeline.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	w, problems := Parse(src, Options{})
	if len(problems) > 0 {
		b.Fatal(problems)
	}
	const input = `{"source":"a text about otters"}`
	def, errs := Compile(w, json.RawMessage(input))
	if errs != nil {
		b.Fatal(errs)
	}
	raw, _ := json.Marshal(def)
	if def, errs = chain.Parse(raw, nil); errs != nil {
		b.Fatal(errs)
	}
	rules, err := NewRules(def)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		h := &hooks{byRun: map[string]chain.Dispatch{}, running: map[string]bool{}}
		e := &chain.Engine{S: &chain.State{ID: "c1", Status: apitypes.ChainRunning, Def: def, Input: json.RawMessage(input)},
			Hooks: h, Rules: rules}
		if err := e.Start(); err != nil {
			b.Fatal(err)
		}
		for n := 1; h.finished == ""; n++ {
			if n > h.n {
				b.Fatalf("run stalled after %d steps", h.n)
			}
			if err := e.Ended(chain.RunEnd{RunID: fmt.Sprintf("run-%d", n), Status: run.Completed,
				Output: json.RawMessage(`{"content":"an answer of a few words"}`)}); err != nil {
				b.Fatal(err)
			}
		}
		if h.finished != run.Completed {
			b.Fatalf("run ended %s: %s", h.finished, h.errBody)
		}
	}
}
