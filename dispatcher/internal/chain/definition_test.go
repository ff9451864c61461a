package chain

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/client/apitypes"
)

func knownJobs(types ...string) func(string) bool {
	return func(t string) bool {
		for _, k := range types {
			if k == t {
				return true
			}
		}
		return false
	}
}

// research is seed 004's shape: plan, three parallel analyses (one conditional), synthesis.
const research = `{
  "steps": [
    {"step_id": "plan", "job_type": "demo_llm", "payload": {"messages": [{"role": "user", "content": "plan"}]}},
    {"step_id": "a", "job_type": "demo_llm", "depends_on": ["plan"],
     "output_mapping": {"plan.output.text": "payload.context"}},
    {"step_id": "b", "job_type": "demo_llm", "depends_on": ["plan"],
     "condition": {"field": "plan.output.needs_b", "operator": "eq", "value": true}},
    {"step_id": "each", "job_type": "demo_llm", "depends_on": ["plan"],
     "for_each": "plan.output.sources", "max_items": 20},
    {"step_id": "synth", "job_type": "demo_react", "depends_on": ["a", "b", "each"], "timeout_seconds": 120}
  ],
  "on_failure": "skip_dependents", "max_step_retries": 2, "cost_ceiling_usd": 1.5
}`

func TestParseAcceptsADAG(t *testing.T) {
	t.Parallel()
	d, errs := Parse(json.RawMessage(research), knownJobs("demo_llm", "demo_react"))
	require.Empty(t, errs)
	require.Len(t, d.Steps, 5)
	require.Equal(t, []string{"plan"}, d.Roots())
	require.Equal(t, "skip_dependents", d.OnFailure)

	d, errs = Parse(json.RawMessage(`{"steps": [{"step_id": "x", "job_type": "demo_llm"}]}`), nil)
	require.Empty(t, errs)
	require.Equal(t, "abort", d.OnFailure, "the default policy")
}

// TestParseNamesEveryProblem: each problem is a field error naming its field, and every
// problem of a definition is reported at once.
func TestParseNamesEveryProblem(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, chain string
		want        []apitypes.FieldError // Field and Rule; Message checked non-empty
	}{
		{"missing", ``, []apitypes.FieldError{{Field: "chain", Rule: "required"}}},
		{"null", `null`, []apitypes.FieldError{{Field: "chain", Rule: "required"}}},
		{"unknown member", `{"steps": [], "retries": 3}`, []apitypes.FieldError{{Field: "chain", Rule: "json"}}},
		{"no steps", `{"steps": []}`, []apitypes.FieldError{{Field: "chain.steps", Rule: "required"}}},
		{"chain-level", `{"steps": [{"step_id": "x", "job_type": "demo_llm"}], "on_failure": "retry",
			"max_step_retries": 11, "timeout_seconds": -1, "cost_ceiling_usd": -2}`, []apitypes.FieldError{
			{Field: "chain.on_failure", Rule: "oneof"}, {Field: "chain.max_step_retries", Rule: "range"},
			{Field: "chain.timeout_seconds", Rule: "range"}, {Field: "chain.cost_ceiling_usd", Rule: "min"}}},
		{"step ids", `{"steps": [{"step_id": "Bad Id", "job_type": "demo_llm"}, {"step_id": "x", "job_type": "demo_llm"},
			{"step_id": "x", "job_type": "demo_llm"}]}`, []apitypes.FieldError{
			{Field: "chain.steps[0].step_id", Rule: "step_id"}, {Field: "chain.steps[2].step_id", Rule: "unique"}}},
		{"job types", `{"steps": [{"step_id": "x"}, {"step_id": "y", "job_type": "nope"}]}`, []apitypes.FieldError{
			{Field: "chain.steps[0].job_type", Rule: "required"}, {Field: "chain.steps[1].job_type", Rule: "known"}}},
		{"references", `{"steps": [{"step_id": "x", "job_type": "demo_llm", "depends_on": ["x", "ghost"]},
			{"step_id": "y", "job_type": "demo_llm", "depends_on": ["x", "x"]}]}`, []apitypes.FieldError{
			{Field: "chain.steps[0].depends_on[0]", Rule: "self"}, {Field: "chain.steps[0].depends_on[1]", Rule: "step"},
			{Field: "chain.steps[1].depends_on[1]", Rule: "unique"}}},
		{"mapping and condition on a non-parent", `{"steps": [{"step_id": "a", "job_type": "demo_llm"},
			{"step_id": "b", "job_type": "demo_llm"},
			{"step_id": "c", "job_type": "demo_llm", "depends_on": ["a"],
			 "output_mapping": {"b.output.text": "payload.x", "a.output.text": "context", "a.text": "payload.y"},
			 "condition": {"field": "b.output.ok", "operator": "is", "value": 1}}]}`, []apitypes.FieldError{
			{Field: `chain.steps[2].output_mapping["a.output.text"]`, Rule: "target"},
			{Field: `chain.steps[2].output_mapping["a.text"]`, Rule: "reference"},
			{Field: `chain.steps[2].output_mapping["b.output.text"]`, Rule: "parent"},
			{Field: "chain.steps[2].condition.field", Rule: "parent"},
			{Field: "chain.steps[2].condition.operator", Rule: "oneof"}}},
		{"condition value", `{"steps": [{"step_id": "a", "job_type": "demo_llm"},
			{"step_id": "b", "job_type": "demo_llm", "depends_on": ["a"], "condition": {"field": "a.output.n", "operator": "gt"}},
			{"step_id": "c", "job_type": "demo_llm", "depends_on": ["a"], "condition": {"field": "a.output.n", "operator": "exists"}}]}`,
			[]apitypes.FieldError{{Field: "chain.steps[1].condition.value", Rule: "required"}}},
		{"fan-out", `{"steps": [{"step_id": "a", "job_type": "demo_llm"},
			{"step_id": "b", "job_type": "demo_llm", "depends_on": ["a"], "for_each": "a.output.items"},
			{"step_id": "c", "job_type": "demo_llm", "depends_on": ["a"], "for_each": "a.output.items", "max_items": 1001},
			{"step_id": "d", "job_type": "demo_llm", "max_items": 3},
			{"step_id": "e", "job_type": "demo_llm", "for_each": "a.output.items", "max_items": 3, "payload": [1],
			 "timeout_seconds": -5}]}`,
			[]apitypes.FieldError{{Field: "chain.steps[1].max_items", Rule: "range"}, {Field: "chain.steps[2].max_items", Rule: "range"},
				{Field: "chain.steps[3].max_items", Rule: "for_each"}, {Field: "chain.steps[4].payload", Rule: "object"},
				{Field: "chain.steps[4].for_each", Rule: "parent"}, {Field: "chain.steps[4].timeout_seconds", Rule: "range"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d, errs := Parse(json.RawMessage(c.chain), knownJobs("demo_llm"))
			require.Nil(t, d)
			got := make([]apitypes.FieldError, len(errs))
			for i, e := range errs {
				require.NotEmpty(t, e.Message, e.Field)
				got[i] = apitypes.FieldError{Field: e.Field, Rule: e.Rule}
			}
			require.ElementsMatch(t, c.want, got)
		})
	}
}

// TestParseNamesTheCycle: a cycle is refused with its path in the order the steps would
// have to run, at the depends_on that closes it.
func TestParseNamesTheCycle(t *testing.T) {
	t.Parallel()
	d, errs := Parse(json.RawMessage(`{"steps": [
		{"step_id": "start", "job_type": "demo_llm"},
		{"step_id": "a", "job_type": "demo_llm", "depends_on": ["start", "c"]},
		{"step_id": "b", "job_type": "demo_llm", "depends_on": ["a"]},
		{"step_id": "c", "job_type": "demo_llm", "depends_on": ["b"]}]}`), nil)
	require.Nil(t, d)
	require.Len(t, errs, 1)
	require.Equal(t, "chain.steps[2].depends_on", errs[0].Field, "where the cycle closes: b depends on a")
	require.Equal(t, "cycle", errs[0].Rule)
	require.Equal(t, "a cycle: a → b → c → a", errs[0].Message)
}
