package e2e

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/harness"
)

// Multi-agent patterns of autonomous skills (docs/executor.md, "Multi-agent patterns")
// through the real processes with a scripted sim-llm. The agents of one run call in
// parallel, so the scripts tell them apart by their instructions (prompts, roles) rather
// than by the order of their calls.

// installFile posts the script file scripts/sim/<name>.json.
func (b *execBundle) installFile(t *testing.T, name string) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("..", "scripts", "sim", name+".json"))
	require.NoError(t, err)
	resp, err := http.Post(b.SimURL+"/sim/scripts", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// agentsOf returns the attribute k of the run's agent spans, by agent number.
func (b *execBundle) agentsOf(t *testing.T, runID, k string) map[int]any {
	t.Helper()
	out := map[int]any{}
	for _, s := range b.spans(t, runID) {
		if s["type"] == "agent" {
			attrs := s["attributes"].(map[string]any)
			out[int(attrs["agent"].(float64))] = attrs[k]
		}
	}
	return out
}

// TestPatternCatalogueDemos runs the README's demo_compete and demo_critic with their
// scripts: three agents compete and the judge picks agent 1; a draft is critiqued,
// revised and approved in the second round.
func TestPatternCatalogueDemos(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	b.installFile(t, "demo_compete")
	b.installFile(t, "demo_critic")

	compete := b.dispatch(t, "demo_compete", map[string]any{"prompt": "What is the capital of Australia? [sim-script:demo_compete]"})
	critic := b.dispatch(t, "demo_critic", map[string]any{"prompt": "Announce the new opening hours. [sim-script:demo_critic]"})

	r := b.WaitStatus(compete, time.Minute, "completed", "failed", "completed_budget_exhausted")
	require.Equal(t, "completed", r["status"], "%v", r)
	out := r["output"].(map[string]any)
	require.Equal(t, "compete", out["pattern"])
	require.Equal(t, 1.0, out["chosen"])
	require.Equal(t, "Canberra is the capital of Australia (Australian Government, 1913).", out["content"])
	require.Contains(t, out["judge_reasoning"], "cites its source")
	require.Len(t, out["agents"], 3)
	counts := b.spanCounts(t, compete)
	require.Equal(t, 3, counts["agent"])
	require.Equal(t, 1, counts["judge"])
	require.Equal(t, 3, counts["goal_decompose"])
	require.Equal(t, map[int]any{1: "agent", 2: "agent", 3: "agent"}, b.agentsOf(t, compete, "role"))
	require.Equal(t, map[string]int{"plan": 3, "step-analyst": 1, "step-guide": 1, "step-sceptic": 1, "reflection": 3,
		"evaluate-analyst": 1, "evaluate-guide": 1, "evaluate-sceptic": 1, "judge": 1}, b.served(t, "demo_compete"))
	thinking := b.eventsOf(t, compete, "job:thinking")
	require.NotEmpty(t, thinking)
	require.Equal(t, compete, thinking[0]["jobId"])

	r = b.WaitStatus(critic, time.Minute, "completed", "failed", "completed_budget_exhausted")
	require.Equal(t, "completed", r["status"], "%v", r)
	out = r["output"].(map[string]any)
	require.Equal(t, 3.0, out["chosen"], "the reviser of round 1")
	require.Contains(t, out["content"], "From 1 December")
	require.Equal(t, "Clear: the date, the new hours and what to do instead.", out["judge_reasoning"])
	require.Equal(t, map[int]any{1: "generator", 2: "critic", 3: "reviser", 4: "critic"}, b.agentsOf(t, critic, "role"))
	require.Equal(t, map[string]int{"plan": 2, "step-revise": 1, "step-draft": 1, "reflection": 2, "evaluate-revise": 1,
		"evaluate-draft": 1, "critique": 2}, b.served(t, "demo_critic"))
}

// TestPatternSelfConsistentAndCollaborate: three self_consistent agents vote (two agree
// once normalised: no judge call); two collaborate specialists, each with its own tools,
// run in parallel and the coordinator synthesises.
func TestPatternSelfConsistentAndCollaborate(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	script := "pat-vote-" + uuid.NewString()[:8]
	styles := []string{"Style A", "Style B", "Style C"}
	answers := []string{"Paris", "paris.", "Lyon"}
	// The collaborate run's specialists plan with their own rules, which come first; the
	// vote's agents share the plan and reflection rules and are told apart by their style.
	rules := []map[string]any{
		rule("plan-researcher", "plan", map[string]any{"regex": "role in the team: researcher", "in": "system"},
			planOf([]string{"look", "tool_using", "demo_weather"})),
		rule("plan-writer", "plan", map[string]any{"regex": "role in the team: writer", "in": "system"},
			planOf([]string{"write", "llm_only"})),
		rule("plan", "plan", nil, planOf([]string{"s1", "llm_only"})),
		rule("reflection", "reflection", nil, verdictOf("pass", "written")),
		toolStep("step-look", "look", "demo_weather", map[string]any{"city": "Paris"}, ""),
		rule("step-look-after", "step", map[string]any{"last_role": "tool"}, map[string]any{"content": "Mild in Paris."}),
		rule("step-write", "step", map[string]any{"regex": `Your step \(write\)`}, map[string]any{"content": "A fine day."}),
		rule("evaluate-researcher", "evaluate", map[string]any{"regex": "role in the team: researcher", "in": "system"},
			jsonAnswer(map[string]any{"goal_achieved": true, "reasoning": "found", "answer": "Mild in Paris."})),
		rule("evaluate-writer", "evaluate", map[string]any{"regex": "role in the team: writer", "in": "system"},
			jsonAnswer(map[string]any{"goal_achieved": true, "reasoning": "written", "answer": "A fine day."})),
		rule("synthesis", "synthesis", nil, jsonAnswer(map[string]any{"reasoning": "the facts, in prose",
			"answer": "A fine, mild day in Paris."})),
	}
	rules[2]["exhausted"], rules[3]["exhausted"] = "repeat", "repeat"
	for i, s := range styles {
		rules = append(rules, rule("step-"+s, "step", map[string]any{"regex": s, "in": "system"}, map[string]any{"content": answers[i]}),
			rule("evaluate-"+s, "evaluate", map[string]any{"regex": s, "in": "system"},
				jsonAnswer(map[string]any{"goal_achieved": true, "reasoning": "answered", "answer": answers[i]})))
	}
	b.installScript(t, script, rules...)
	b.putSkill(t, agentSkill("agent_vote", script, nil, `{"agent_pattern":"self_consistent",
		"prompts":["Style A","Style B","Style C"]}`))
	b.putSkill(t, agentSkill("agent_team", script, []string{"demo_weather"}, `{"agent_pattern":"collaborate","specialists":[
		{"role":"researcher","prompt":"Find the facts.","tools":["demo_weather"]},{"role":"writer","prompt":"Write."}]}`))

	vote := b.dispatch(t, "agent_vote", map[string]any{"prompt": "What is the capital of France?"})
	team := b.dispatch(t, "agent_team", map[string]any{"prompt": "Describe the weather in Paris."})

	r := b.WaitStatus(vote, time.Minute, "completed", "failed", "completed_budget_exhausted")
	require.Equal(t, "completed", r["status"], "%v", r)
	out := r["output"].(map[string]any)
	require.Equal(t, 1.0, out["chosen"])
	require.Equal(t, "Paris", out["content"])
	var judge map[string]any
	for _, s := range b.spans(t, vote) {
		if s["type"] == "judge" {
			judge = s["attributes"].(map[string]any)
		}
	}
	require.Equal(t, map[string]any{"paris": []any{1.0, 2.0}, "lyon": []any{3.0}}, judge["votes"])
	require.Equal(t, false, judge["tie"])
	require.Equal(t, map[int]any{1: 0.2, 2: 0.6, 3: 1.0}, b.agentsOf(t, vote, "temperature"))

	r = b.WaitStatus(team, time.Minute, "completed", "failed", "completed_budget_exhausted")
	require.Equal(t, "completed", r["status"], "%v", r)
	out = r["output"].(map[string]any)
	require.Equal(t, "A fine, mild day in Paris.", out["content"])
	require.NotContains(t, out, "chosen")
	require.Equal(t, map[int]any{1: "researcher", 2: "writer"}, b.agentsOf(t, team, "role"))
	require.Equal(t, 1, b.toolStats(t).Weather)
	served := b.served(t, script)
	require.Equal(t, 3, served["plan"], "the vote's agents; the team's planned with their own rules")
	require.Equal(t, 1, served["plan-researcher"])
	require.Equal(t, 1, served["synthesis"])
}

// TestPatternGateAndSIGKILL: two compete agents, the first of which wants create_ticket
// behind the skill's gate. The executor is SIGKILLed while the second agent's step call is
// in flight; the resumed run reaches the gate, pauses the whole run, is approved and
// completes. sim-llm served every call once, and the ticket was filed once.
func TestPatternGateAndSIGKILL(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	script := "pat-kill-" + uuid.NewString()[:8]
	b.installScript(t, script,
		rule("plan-a", "plan", map[string]any{"regex": "Style A", "in": "system"},
			planOf([]string{"s1", "llm_only"}, []string{"t1", "tool_using", "create_ticket"})),
		rule("plan-b", "plan", map[string]any{"regex": "Style B", "in": "system"}, planOf([]string{"s1", "llm_only"})),
		// Agent B's step takes 5 s: the kill lands while it is in flight.
		rule("step-b", "step", map[string]any{"regex": "Style B", "in": "system"},
			map[string]any{"content": "B's answer", "latency": "5s"}),
		rule("step-a", "step", map[string]any{"last_role": "user", "regex": `Your step \(s1\)`}, map[string]any{"content": "A's draft"}),
		toolStep("step-ticket", "t1", "create_ticket", map[string]any{"title": "Printer on fire", "priority": "high"}, ""),
		rule("step-after-tool", "step", map[string]any{"last_role": "tool"}, map[string]any{"content": "Filed."}),
		rule("reflection", "reflection", nil, verdictOf("pass", "ok"), verdictOf("pass", "ok"), verdictOf("pass", "ok")),
		rule("evaluate-a", "evaluate", map[string]any{"regex": "Style A", "in": "system"},
			jsonAnswer(map[string]any{"goal_achieved": true, "reasoning": "filed", "answer": "A: filed"})),
		rule("evaluate-b", "evaluate", map[string]any{"regex": "Style B", "in": "system"},
			jsonAnswer(map[string]any{"goal_achieved": false, "reasoning": "no ticket", "answer": "B: talked"})),
		rule("judge", "judge", nil, jsonAnswer(map[string]any{"chosen": 1, "reasoning": "A filed the ticket"})),
	)
	b.putSkill(t, agentSkill("agent_pair", script, []string{"create_ticket"}, `{"agent_pattern":"compete","agents":2,
		"prompts":["Style A","Style B"],"require_approval_for":["create_ticket"]}`))
	jobID := b.dispatch(t, "agent_pair", map[string]any{"prompt": "Deal with the broken printer."})

	waitFor(t, time.Minute, "both plans journaled and agent A at its gate", func() bool {
		return b.journaled(t, jobID, "agent/1/plan/1/%") == 1 && b.journaled(t, jobID, "agent/2/plan/1/%") == 1 &&
			b.journaled(t, jobID, "agent/1/exec/2/iter/1/approval") == 1
	})
	require.Zero(t, b.journaled(t, jobID, "agent/2/exec/1/llm"), "killed before agent B's step was journaled")
	b.kill(t, harness.Executor, syscall.SIGKILL)
	b.StartExecutor()

	r := b.WaitStatus(jobID, 90*time.Second, "pending_review", "completed", "failed")
	require.Equal(t, "pending_review", r["status"], "%v", r)
	require.NotZero(t, b.journaled(t, jobID, "agent/2/eval/try/1"), "agent B ran to its end before the run paused")
	review := b.eventsOf(t, jobID, "job:pending_review")
	require.Len(t, review, 1)
	require.Equal(t, 1.0, review[0]["agent"])
	require.Zero(t, b.toolStats(t).Tickets)

	code, res := b.Do(http.MethodPost, "/api/v1/dispatch/"+jobID+"/approve", map[string]any{"reason": "fine"})
	require.Equal(t, http.StatusOK, code, "%v", res)
	r = b.WaitStatus(jobID, time.Minute, "completed", "failed", "completed_budget_exhausted")
	require.Equal(t, "completed", r["status"], "%v", r)
	require.Equal(t, "A: filed", r["output"].(map[string]any)["content"])
	require.Equal(t, 1, b.toolStats(t).Tickets, "filed once")
	require.Equal(t, map[string]int{"plan-a": 1, "plan-b": 1, "step-b": 1, "step-a": 1, "step-ticket": 1, "step-after-tool": 1,
		"reflection": 3, "evaluate-a": 1, "evaluate-b": 1, "judge": 1}, b.served(t, script), "no journaled call asked twice")
	require.Len(t, b.eventsOf(t, jobID, "job:plan_created"), 2, "each agent's plan announced once, across attempts")
	b.requireAnnouncedOnce(t, jobID, []string{"agent/1/plan/1/try/1", "agent/2/plan/1/try/1"},
		[]string{"agent/1/reflect/1/try/1", "agent/1/reflect/2/try/1", "agent/2/reflect/1/try/1"})
}

// TestPatternRefusedUpFront: a compete run whose worst case cannot fit its skill's cost
// ceiling fails before any LLM call with the estimate and the ceiling, priced at the model
// the router routes the skill to.
func TestPatternRefusedUpFront(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	script := "pat-cost-" + uuid.NewString()[:8]
	b.installScript(t, script, rule("plan", "plan", nil, planOf([]string{"s1", "llm_only"})))
	sk := agentSkill("agent_costly", script, nil, `{"agent_pattern":"compete","agents":5}`)
	ceiling := 0.001
	sk.CostCeilingUSD = &ceiling
	b.putSkill(t, sk)
	jobID := b.dispatch(t, "agent_costly", map[string]any{"prompt": "Anything."})
	r := b.WaitStatus(jobID, time.Minute, "failed", "completed")
	require.Equal(t, "failed", r["status"], "%v", r)
	e := r["error"].(map[string]any)
	require.Equal(t, "COST_ESTIMATE_EXCEEDS_CEILING", e["code"])
	ctx := e["context"].(map[string]any)
	require.Equal(t, 0.001, ctx["ceiling_usd"])
	require.Greater(t, ctx["estimate_usd"], 0.001)
	require.Equal(t, 21.0, ctx["calls"])
	require.Equal(t, 0.15, ctx["input_per_mtok"], "the price of the model the fast hint routes to (sim-fast), quoted by the router")
	require.Equal(t, map[string]int{"plan": 0}, b.served(t, script), "no LLM call")
}
