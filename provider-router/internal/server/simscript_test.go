package server_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/sim"
)

// TestSimScriptThroughRouter: what an executor sends through the router reaches sim-llm's
// scripts — the markers in the messages and the body's metadata (the router forwards no
// header upstream) — and a scripted 5xx is retried by the router like any provider's,
// consuming the script's next answer.
func TestSimScriptThroughRouter(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	content := func(s string) *string { return &s }
	require.NoError(t, b.sim.SetScript("router-test", sim.Script{Unmatched: "error", Rules: []sim.Rule{
		{Name: "plan", Match: sim.Match{Call: "plan"}, Answers: []sim.Answer{
			{Error: &sim.ErrorAnswer{Status: http.StatusServiceUnavailable}}, {Content: content("the plan")}}},
		{Name: "judge", Match: sim.Match{Call: "judge"}, Answers: []sim.Answer{{JSON: map[string]any{"best": 1}}}},
	}}))

	code, out := b.chat(b.headers(), `{"model":"","messages":[
		{"role":"system","content":"Skill prompt. [sim-script:router-test]"},
		{"role":"user","content":"[call:plan] Decompose the goal."}]}`)
	require.Equal(t, http.StatusOK, code, "%v", out)
	msg := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	require.Equal(t, "the plan", msg["content"])

	code, out = b.chat(b.headers(), `{"model":"","metadata":{"sim_script":"router-test","sim_call":"judge"},
		"messages":[{"role":"user","content":"Pick the best."}]}`)
	require.Equal(t, http.StatusOK, code, "%v", out)
	msg = out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	require.JSONEq(t, `{"best":1}`, msg["content"].(string))

	st, ok := b.sim.ScriptState("router-test")
	require.True(t, ok)
	require.EqualValues(t, 2, st.Rules[0].Calls, "the router retried the scripted 503")
	require.EqualValues(t, 1, st.Rules[0].Served)
	require.EqualValues(t, 1, st.Rules[1].Served)
	require.Zero(t, st.Unmatched)
}
