package chain

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// fakeRules: at most one of the steps in limit runs at once; steps in skip are skipped;
// every payload names its step; a failure of "a1" cancels "a2"; the outcome is failed
// when any step failed, its output a marker.
type fakeRules struct {
	limit  []string
	skip   map[string]bool
	cancel map[string][]string
}

func (f *fakeRules) Ready(s *State, step *Step) bool {
	if !slices.Contains(f.limit, step.StepID) {
		return true
	}
	for _, r := range s.Steps {
		if slices.Contains(f.limit, r.StepID) && r.Status == Dispatched {
			return false
		}
	}
	return true
}

func (f *fakeRules) Begin(_ *State, step *Step) (Decision, error) {
	if f.skip[step.StepID] {
		return Decision{Skip: "if"}, nil
	}
	return Decision{Payload: json.RawMessage(`{"step":"` + step.StepID + `"}`), TimeoutSeconds: 7, Queue: "gpu"}, nil
}

func (f *fakeRules) Ended(_ *State, r *StepRow) []string {
	if r.Status == Failed {
		return f.cancel[r.StepID]
	}
	return nil
}

func (f *fakeRules) Outcome(s *State) (string, json.RawMessage, json.RawMessage, error) {
	for _, r := range s.Steps {
		if r.Status == Failed {
			return apitypes.ChainFailed, json.RawMessage(`{"outputs":{}}`), errJSON("WORKFLOW_FAILED", "x", nil), nil
		}
	}
	return apitypes.ChainCompleted, json.RawMessage(`{"outputs":{"ok":"yes"}}`), nil, nil
}

// TestRulesDecideWhatAChainSkillsBlockWould: with Rules the engine asks them whether a
// step may begin (max-parallel), whether it runs and with what (if, with, timeout), what a
// failure cancels (fail-fast) and how the chain ends — and keeps the rest: the DAG, rows,
// dispatch, stopping.
func TestRulesDecideWhatAChainSkillsBlockWould(t *testing.T) {
	e, h := newEngine(t, `{"on_failure":"continue","workflow":{},"steps":[
		{"step_id":"m/0/a","job_type":"j","job":"m","matrix":0},
		{"step_id":"m/1/a","job_type":"j","job":"m","matrix":1},
		{"step_id":"m/2/a","job_type":"j","job":"m","matrix":2},
		{"step_id":"n/b","job_type":"j","depends_on":["m/0/a","m/1/a","m/2/a"]},
		{"step_id":"n/c","job_type":"j","depends_on":["n/b"]}]}`, `{}`)
	rules := &fakeRules{limit: []string{"m/0/a", "m/1/a", "m/2/a"}, skip: map[string]bool{"n/c": true},
		cancel: map[string][]string{"m/0/a": {"m/1/a", "m/2/a"}}}
	e.Rules = rules
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	if got := h.labels(); !slices.Equal(got, []string{"m/0/a"}) {
		t.Fatalf("dispatched %v: max-parallel 1 should start one instance", got)
	}
	if d := h.dispatched[0]; string(d.Payload) != `{"step":"m/0/a"}` || d.TimeoutSeconds != 7 || d.Queue != "gpu" {
		t.Fatalf("dispatch %+v: want the Rules' payload and timeout", d)
	}
	end(t, e, h.runOf(t, "m/0/a"), run.Completed, `{}`)
	if got := h.labels(); !slices.Equal(got, []string{"m/0/a", "m/1/a"}) {
		t.Fatalf("dispatched %v: the next instance should start when one ends", got)
	}
	h.running[h.runOf(t, "m/1/a")] = true
	rules.cancel = map[string][]string{"m/1/a": {"m/0/a", "m/2/a"}}
	end(t, e, h.runOf(t, "m/1/a"), run.Failed, "")
	if stepStatus(e, "m/2/a") != Cancelled || stepStatus(e, "m/0/a") != Completed {
		t.Fatalf("m/2/a %s, m/0/a %s: a failure cancels the pending instance, not an ended one",
			stepStatus(e, "m/2/a"), stepStatus(e, "m/0/a"))
	}
	// on_failure continue: the dependent runs when the Rules let it (here: always).
	if got := h.labels(); !slices.Equal(got, []string{"m/0/a", "m/1/a", "n/b"}) {
		t.Fatalf("dispatched %v", got)
	}
	end(t, e, h.runOf(t, "n/b"), run.Completed, `{}`)
	if stepStatus(e, "n/c") != Skipped || e.whole("n/c").Reason != "if" {
		t.Fatalf("n/c %s (%s): want skipped by the Rules", stepStatus(e, "n/c"), e.whole("n/c").Reason)
	}
	if e.S.Status != apitypes.ChainFailed || h.finished != run.Failed || string(h.output) != `{"outputs":{}}` {
		t.Fatalf("chain %s, parent %s %s: want the Rules' outcome", e.S.Status, h.finished, h.output)
	}
}

// TestRootPayloadsAskTheRules: the roots governed before a workflow is written get the
// Rules' payloads, and a root the Rules skip is not governed.
func TestRootPayloadsAskTheRules(t *testing.T) {
	d, errs := Parse(json.RawMessage(`{"on_failure":"continue","workflow":{},"steps":[
		{"step_id":"a/x","job_type":"j"},{"step_id":"b/y","job_type":"j"},{"step_id":"c/z","job_type":"j","depends_on":["a/x"]}]}`), nil)
	if errs != nil {
		t.Fatal(errs)
	}
	got, err := RootPayloads(d, json.RawMessage(`{}`), nil, &fakeRules{skip: map[string]bool{"b/y": true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got["a/x"]) != `{"step":"a/x"}` {
		t.Fatalf("root payloads %v: want only a/x's, from the Rules", got)
	}
}
