package chain

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// hooks records what the engine asked for; runs it dispatched are "queued" and stop at
// once unless listed in running.
type hooks struct {
	n          int
	dispatched []Dispatch
	byRun      map[string]Dispatch
	running    map[string]bool
	refuse     map[string]bool // job types refused by governance
	stopped    []string
	events     []string
	finished   run.Status
	output     json.RawMessage
}

func (h *hooks) Dispatch(d Dispatch) (Sent, error) {
	if h.refuse[d.JobType] {
		return Sent{Refused: errJSON("RESIDENCY_VIOLATION", "refused", nil)}, nil
	}
	h.n++
	id := fmt.Sprintf("run-%d", h.n)
	h.dispatched = append(h.dispatched, d)
	if h.byRun == nil {
		h.byRun = map[string]Dispatch{}
	}
	h.byRun[id] = d
	return Sent{RunID: id, SpanID: "span-" + id}, nil
}

func (h *hooks) Stop(runID string) (bool, error) {
	h.stopped = append(h.stopped, runID)
	return !h.running[runID], nil
}

func (h *hooks) Event(typ string, data map[string]any) {
	b, _ := json.Marshal(data)
	h.events = append(h.events, typ+" "+string(b))
}

func (h *hooks) Finish(st run.Status, out, _ json.RawMessage) error {
	h.finished, h.output = st, out
	return nil
}

// runOf returns the run id dispatched for a step label ("a", "fan[1]"), the latest.
func (h *hooks) runOf(t *testing.T, label string) string {
	t.Helper()
	id := ""
	for i := 1; i <= h.n; i++ {
		r := fmt.Sprintf("run-%d", i)
		d := h.byRun[r]
		l := d.StepID
		if d.Instance != Whole {
			l = fmt.Sprintf("%s[%d]", d.StepID, d.Instance)
		}
		if l == label {
			id = r
		}
	}
	if id == "" {
		t.Fatalf("step %s was never dispatched; dispatched: %v", label, h.labels())
	}
	return id
}

func (h *hooks) labels() []string {
	var out []string
	for _, d := range h.dispatched {
		l := d.StepID
		if d.Instance != Whole {
			l = fmt.Sprintf("%s[%d]", d.StepID, d.Instance)
		}
		out = append(out, l)
	}
	return out
}

func (h *hooks) has(prefix string) bool {
	return slices.ContainsFunc(h.events, func(e string) bool { return strings.HasPrefix(e, prefix) })
}

func newEngine(t *testing.T, def string, input string) (*Engine, *hooks) {
	t.Helper()
	d, errs := Parse(json.RawMessage(def), nil)
	if errs != nil {
		t.Fatalf("definition: %v", errs)
	}
	h := &hooks{running: map[string]bool{}, refuse: map[string]bool{}}
	e := &Engine{S: &State{ID: "c1", Status: apitypes.ChainRunning, Def: d, Input: json.RawMessage(input)}, Hooks: h}
	return e, h
}

func end(t *testing.T, e *Engine, runID string, st run.Status, output string) {
	t.Helper()
	var out json.RawMessage
	if output != "" {
		out = json.RawMessage(output)
	}
	if err := e.Ended(RunEnd{RunID: runID, Status: st, Output: out, CostUSD: 0.01}); err != nil {
		t.Fatal(err)
	}
}

func stepStatus(e *Engine, id string) string { return e.whole(id).Status }

func TestLinearChainMapsOutputsAndEnds(t *testing.T) {
	e, h := newEngine(t, `{"steps":[
		{"step_id":"a","job_type":"j","payload":{"q":"{{input.topic}}","note":"about {{input.topic}}"}},
		{"step_id":"b","job_type":"j","depends_on":["a"],"output_mapping":{"a.output.content.title":"payload.title"}}]}`,
		`{"topic":"otters"}`)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	if got := h.labels(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("dispatched at start %v, want [a]", got)
	}
	if got := string(h.dispatched[0].Payload); got != `{"note":"about otters","q":"otters"}` {
		t.Fatalf("a's payload %s", got)
	}
	end(t, e, h.runOf(t, "a"), run.Completed, `{"content":"{\"title\":\"Otters\"}"}`)
	if got := string(h.dispatched[1].Payload); got != `{"title":"Otters","topic":"otters"}` {
		t.Fatalf("b's payload %s: want the chain input with a's title mapped in", got)
	}
	end(t, e, h.runOf(t, "a"), run.Completed, `{}`) // the same report again
	if len(h.dispatched) != 2 {
		t.Fatalf("a repeated report dispatched again: %v", h.labels())
	}
	end(t, e, h.runOf(t, "b"), run.Completed, `{"content":"done"}`)
	if e.S.Status != apitypes.ChainCompleted || h.finished != run.Completed {
		t.Fatalf("chain %s, parent %s; want completed", e.S.Status, h.finished)
	}
	if !strings.Contains(string(h.output), `"b":{"content":"done"}`) {
		t.Fatalf("parent output %s", h.output)
	}
	if got := e.Cost(); got < 0.0199 || got > 0.0201 {
		t.Fatalf("cost %v, want 0.02", got)
	}
}

func TestForkConditionAndJoin(t *testing.T) {
	e, h := newEngine(t, `{"steps":[
		{"step_id":"plan","job_type":"j"},
		{"step_id":"x","job_type":"j","depends_on":["plan"]},
		{"step_id":"y","job_type":"j","depends_on":["plan"],"condition":{"field":"plan.output.deep","operator":"eq","value":true}},
		{"step_id":"z","job_type":"j","depends_on":["plan"]},
		{"step_id":"synth","job_type":"j","depends_on":["x","y","z"],"output_mapping":{"y.output.content":"payload.y","x.output.content":"payload.x"}}]}`, `{}`)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	end(t, e, h.runOf(t, "plan"), run.Completed, `{"deep":false}`)
	if got := h.labels(); !slices.Equal(got, []string{"plan", "x", "z"}) {
		t.Fatalf("dispatched %v, want plan x z (y's condition does not hold)", got)
	}
	if stepStatus(e, "y") != Skipped || !h.has(`chain:fork {"forked":["x","z"]`) {
		t.Fatalf("y %s; events %v", stepStatus(e, "y"), h.events)
	}
	end(t, e, h.runOf(t, "x"), run.Completed, `{"content":"X"}`)
	if slices.Contains(h.labels(), "synth") {
		t.Fatal("synth dispatched before z ended")
	}
	end(t, e, h.runOf(t, "z"), run.Completed, `{"content":"Z"}`)
	if got := string(h.dispatched[len(h.dispatched)-1].Payload); got != `{"x":"X","y":null}` {
		t.Fatalf("synth payload %s: a skipped parent maps null", got)
	}
	if !h.has(`chain:join {"completedPredecessors":["x","y","z"],"joinStepId":"synth"}`) {
		t.Fatalf("no join event: %v", h.events)
	}
	end(t, e, h.runOf(t, "synth"), run.Completed, `{}`)
	if e.S.Status != apitypes.ChainCompleted {
		t.Fatalf("chain %s: a step skipped by its condition is not a failure", e.S.Status)
	}
}

func TestAbortStopsEverythingNotEnded(t *testing.T) {
	e, h := newEngine(t, `{"steps":[{"step_id":"a","job_type":"j"},{"step_id":"b","job_type":"j"},
		{"step_id":"c","job_type":"j"},{"step_id":"d","job_type":"j","depends_on":["a"]}]}`, `{}`)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	h.running[h.runOf(t, "c")] = true
	end(t, e, h.runOf(t, "a"), run.Failed, "")
	if e.S.Status != apitypes.ChainFailed || h.finished != run.Failed {
		t.Fatalf("chain %s parent %s, want failed", e.S.Status, h.finished)
	}
	if stepStatus(e, "b") != Cancelled || stepStatus(e, "d") != Cancelled || stepStatus(e, "c") != Dispatched {
		t.Fatalf("b %s d %s c %s: want the queued and pending cancelled, the running one asked to stop",
			stepStatus(e, "b"), stepStatus(e, "d"), stepStatus(e, "c"))
	}
	end(t, e, h.runOf(t, "c"), run.Cancelled, "")
	if stepStatus(e, "c") != Cancelled || len(h.dispatched) != 3 {
		t.Fatalf("c %s, dispatched %v", stepStatus(e, "c"), h.labels())
	}
}

func TestSkipDependentsAndContinue(t *testing.T) {
	def := `{"on_failure":"%s","steps":[{"step_id":"a","job_type":"j"},{"step_id":"b","job_type":"j"},
		{"step_id":"a2","job_type":"j","depends_on":["a"],"output_mapping":{"a.output.v":"payload.v"}},
		{"step_id":"a3","job_type":"j","depends_on":["a2"]}]}`
	e, h := newEngine(t, fmt.Sprintf(def, "skip_dependents"), `{}`)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	end(t, e, h.runOf(t, "a"), run.Failed, "")
	if stepStatus(e, "a2") != Skipped || stepStatus(e, "a3") != Skipped || stepStatus(e, "b") != Dispatched {
		t.Fatalf("a2 %s a3 %s b %s", stepStatus(e, "a2"), stepStatus(e, "a3"), stepStatus(e, "b"))
	}
	end(t, e, h.runOf(t, "b"), run.Completed, `{}`)
	if e.S.Status != apitypes.ChainFailed {
		t.Fatalf("chain %s: a failed step fails the chain once the rest has run", e.S.Status)
	}

	e, h = newEngine(t, fmt.Sprintf(def, "continue"), `{}`)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	end(t, e, h.runOf(t, "a"), run.Failed, "")
	if got := string(h.dispatched[len(h.dispatched)-1].Payload); got != `{"v":null}` {
		t.Fatalf("under continue a2 runs with null for its failed parent; payload %s (dispatched %v)", got, h.labels())
	}
}

func TestRetriesAStepThenIgnoresTheOldAttempt(t *testing.T) {
	e, h := newEngine(t, `{"max_step_retries":1,"steps":[{"step_id":"a","job_type":"j"}]}`, `{}`)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	first := h.runOf(t, "a")
	end(t, e, first, run.Failed, "")
	second := h.runOf(t, "a")
	if second == first || h.dispatched[1].Attempt != 2 {
		t.Fatalf("no second attempt: %v", h.dispatched)
	}
	end(t, e, first, run.Failed, "") // the first attempt reported again
	if len(h.dispatched) != 2 || e.S.Status != apitypes.ChainRunning {
		t.Fatalf("a stale report moved the chain: %v %s", h.labels(), e.S.Status)
	}
	end(t, e, second, run.Failed, "")
	if e.S.Status != apitypes.ChainFailed || len(h.dispatched) != 2 {
		t.Fatalf("chain %s after the last retry failed; dispatched %v", e.S.Status, h.labels())
	}
}

func TestForEachFansOutAndJoins(t *testing.T) {
	e, h := newEngine(t, `{"steps":[{"step_id":"list","job_type":"j"},
		{"step_id":"each","job_type":"j","depends_on":["list"],"for_each":"list.output.items","max_items":3,
		 "payload":{"topic":"{{item.name}}","n":"{{index}}"}},
		{"step_id":"sum","job_type":"j","depends_on":["each"],"output_mapping":{"each.output.1.v":"payload.second"}}]}`, `{}`)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	end(t, e, h.runOf(t, "list"), run.Completed, `{"items":[{"name":"a"},{"name":"b"}]}`)
	if got := h.labels(); !slices.Equal(got, []string{"list", "each[0]", "each[1]"}) {
		t.Fatalf("dispatched %v", got)
	}
	if got := string(h.dispatched[2].Payload); got != `{"n":1,"topic":"b"}` {
		t.Fatalf("instance 1 payload %s", got)
	}
	end(t, e, h.runOf(t, "each[1]"), run.Completed, `{"v":"B"}`)
	if slices.Contains(h.labels(), "sum") {
		t.Fatal("the join did not wait for every instance")
	}
	end(t, e, h.runOf(t, "each[0]"), run.Completed, `{"v":"A"}`)
	if got := string(h.dispatched[len(h.dispatched)-1].Payload); got != `{"second":"B"}` {
		t.Fatalf("sum payload %s: the fan-out's output is its instances' outputs in order", got)
	}
}

func TestForEachBeyondMaxItemsFailsTheStep(t *testing.T) {
	e, h := newEngine(t, `{"on_failure":"continue","steps":[{"step_id":"list","job_type":"j"},
		{"step_id":"each","job_type":"j","depends_on":["list"],"for_each":"list.output.items","max_items":2}]}`, `{}`)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	end(t, e, h.runOf(t, "list"), run.Completed, `{"items":[1,2,3]}`)
	w := e.whole("each")
	if w.Status != Failed || !strings.Contains(string(w.Error), "CHAIN_FOR_EACH_INVALID") || len(h.dispatched) != 1 {
		t.Fatalf("each %s %s, dispatched %v", w.Status, w.Error, h.labels())
	}
	if e.S.Status != apitypes.ChainFailed {
		t.Fatalf("chain %s", e.S.Status)
	}
}

func TestRefusedDispatchFailsTheStep(t *testing.T) {
	e, h := newEngine(t, `{"steps":[{"step_id":"a","job_type":"eu"}]}`, `{}`)
	h.refuse["eu"] = true
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	if e.S.Status != apitypes.ChainFailed || !strings.Contains(string(e.whole("a").Error), "RESIDENCY_VIOLATION") {
		t.Fatalf("chain %s, a's error %s", e.S.Status, e.whole("a").Error)
	}
}

func TestCancelAndProgress(t *testing.T) {
	e, h := newEngine(t, `{"steps":[{"step_id":"a","job_type":"j","timeout_seconds":100},
		{"step_id":"b","job_type":"j","depends_on":["a"],"timeout_seconds":300}]}`, `{}`)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	end(t, e, h.runOf(t, "a"), run.Completed, `{}`)
	if p := Progress(e.S, e.now()); p != 0.25 {
		t.Fatalf("progress %v, want 0.25 (a weighs 100 of 400)", p)
	}
	if err := e.Cancel(apitypes.ChainCancelled, "tester"); err != nil {
		t.Fatal(err)
	}
	if e.S.Status != apitypes.ChainCancelled || stepStatus(e, "b") != Cancelled || h.finished != run.Cancelled {
		t.Fatalf("chain %s b %s parent %s", e.S.Status, stepStatus(e, "b"), h.finished)
	}
	if !h.has(event.ChainProgress) {
		t.Fatal("no progress event")
	}
}
