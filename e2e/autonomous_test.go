package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/harness"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

// Autonomous runs (Tier 4) through the real processes: dispatcher, executor, router and a
// scripted sim-llm (docs/sim-llm.md, "Scripted answers"), on the test's own Postgres and
// Redis, with the demo tool endpoint's demo_weather and create_ticket. Each test installs a
// script under a name of its own and names it in the skill's system prompt; the agent labels
// its calls [call:plan|step|reflection|evaluate], and the step rules tell a step's calls
// apart by the step id in its prompt and by the last message's role.

// installScript posts a sim-llm script named name with rules (in order) and unmatched
// requests refused, so a call the test did not plan for fails the run.
func (b *execBundle) installScript(t *testing.T, name string, rules ...map[string]any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"name": name, "unmatched": "error", "rules": rules})
	require.NoError(t, err)
	resp, err := http.Post(b.SimURL+"/sim/scripts", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// served maps each rule of a script to the answers sim-llm served whole for it.
func (b *execBundle) served(t *testing.T, name string) map[string]int {
	t.Helper()
	resp, err := http.Get(b.SimURL + "/sim/scripts/" + name)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var st struct {
		Unmatched int `json:"unmatched"`
		Rules     []struct {
			Name   string `json:"name"`
			Served int    `json:"served"`
		} `json:"rules"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	require.Zero(t, st.Unmatched, "a call no rule expected")
	out := map[string]int{}
	for _, r := range st.Rules {
		out[r.Name] = r.Served
	}
	return out
}

// rule is a script rule taking calls of type call (and the extra match conditions) and
// answering answers in order; once they are used up, another call is an error.
func rule(name, call string, match map[string]any, answers ...map[string]any) map[string]any {
	m := map[string]any{"call": call}
	for k, v := range match {
		m[k] = v
	}
	return map[string]any{"name": name, "match": m, "answers": answers, "exhausted": "error"}
}

func jsonAnswer(v any) map[string]any { return map[string]any{"json": v} }

// planOf is a planner's answer: steps given as id, execution type and tools.
func planOf(steps ...[]string) map[string]any {
	var out []map[string]any
	for i, s := range steps {
		st := map[string]any{"step_id": s[0], "description": "do " + s[0], "execution_type": s[1],
			"tools": s[2:], "success_criteria": []string{s[0] + " is done"}, "depends_on": []string{}}
		if i > 0 {
			st["depends_on"] = []string{steps[i-1][0]}
		}
		out = append(out, st)
	}
	return jsonAnswer(map[string]any{"steps": out})
}

func verdictOf(v, why string) map[string]any {
	return jsonAnswer(map[string]any{"verdict": v, "reasoning": why, "summary": why})
}

// toolStep is the rule of the first call of a tool step (its prompt names one of stepIDs,
// an RE2 alternation): the given tool call, after latency when not empty.
func toolStep(name, stepIDs, tool string, args map[string]any, latency string) map[string]any {
	a := map[string]any{"tool_calls": []map[string]any{{"name": tool, "arguments": args}}}
	if latency != "" {
		a["latency"] = latency
	}
	r := rule(name, "step", map[string]any{"last_role": "user", "regex": `Your step \((` + stepIDs + `)\)`}, a)
	r["exhausted"] = "repeat"
	return r
}

// agentSkill is an autonomous skill on the sim-fast model, scripted by script.
func agentSkill(jobType, script string, tools []string, block string) skill.Skill {
	return skill.Skill{JobType: jobType, ExecutionType: "autonomous", RoutingHint: "fast", Tools: tools,
		MaxIterations: 3, MaxTokens: 256, SystemPrompt: "You are a careful agent. [sim-script:" + script + "]",
		Autonomous: json.RawMessage(block)}
}

// eventsOf returns the data of the run's events of type typ, in order.
func (b *execBundle) eventsOf(t *testing.T, runID, typ string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range b.events(t, runID) {
		if e["type"] == typ {
			out = append(out, e["data"].(map[string]any))
		}
	}
	return out
}

// announcements counts the run's announcements (job:plan_created, job:reflection,
// job:plan_adjusted, job:thinking) by "<type> <announces>", announces being the journal
// step key of the answer each announces.
func (b *execBundle) announcements(t *testing.T, runID string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, e := range b.events(t, runID) {
		switch e["type"] {
		case "job:plan_created", "job:reflection", "job:plan_adjusted", "job:thinking":
			step, _ := e["data"].(map[string]any)["announces"].(string)
			out[e["type"].(string)+" "+step]++
		}
	}
	return out
}

// requireAnnouncedOnce checks that every announcement of the run was written once and that
// the plans and reflections announced are those journaled (each of its answers once).
func (b *execBundle) requireAnnouncedOnce(t *testing.T, runID string, plans, reflections []string) {
	t.Helper()
	got := map[string][]string{}
	for k, n := range b.announcements(t, runID) {
		require.Equal(t, 1, n, "%s announced %d times", k, n)
		typ, step, _ := strings.Cut(k, " ")
		got[typ] = append(got[typ], step)
	}
	require.ElementsMatch(t, plans, got["job:plan_created"])
	require.ElementsMatch(t, reflections, got["job:reflection"])
}

// spanCounts counts the run's spans by type.
func (b *execBundle) spanCounts(t *testing.T, runID string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, s := range b.spans(t, runID) {
		out[s["type"].(string)]++
	}
	return out
}

// TestAutonomousReplanEndToEnd: the plan's first step (a tool step) is judged replan, a
// second plan is made and executed (a tool step and an llm_only step, both pass), and the
// goal evaluation completes the run. The plan, the reflections and the replan are in the
// journal's events and spans, and sim-llm served each kind of call exactly as often as the
// run needed.
func TestAutonomousReplanEndToEnd(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	script := "auto-replan-" + uuid.NewString()[:8]
	b.installScript(t, script,
		rule("plan", "plan", nil, planOf([]string{"s1", "tool_using", "demo_weather"}, []string{"s2", "llm_only"}),
			planOf([]string{"t1", "tool_using", "demo_weather"}, []string{"t2", "llm_only"})),
		toolStep("step-tool", "s1|t1", "demo_weather", map[string]any{"city": "Paris"}, ""),
		rule("step-after-tool", "step", map[string]any{"last_role": "tool"},
			map[string]any{"content": "It is mild in Paris."}, map[string]any{"content": "It is mild in Paris."}),
		rule("step-text", "step", map[string]any{"last_role": "user", "regex": `Your step \(t2\)`},
			map[string]any{"content": "Pack a light jacket."}),
		rule("reflection", "reflection", nil, verdictOf("replan", "the plan assumed the wrong city"),
			verdictOf("pass", "demo_weather returned the weather"), verdictOf("pass", "the advice is written")),
		rule("evaluate", "evaluate", nil, jsonAnswer(map[string]any{"goal_achieved": true,
			"reasoning": "the weather is known and the advice given", "answer": "Pack a light jacket."})),
	)
	b.putSkill(t, agentSkill("agent_replan", script, []string{"demo_weather"}, `{"max_steps":5}`))
	jobID := b.dispatch(t, "agent_replan", map[string]any{"prompt": "What should I wear in Paris today?"})

	r := b.WaitStatus(jobID, time.Minute, "completed", "completed_budget_exhausted", "failed", "pending_review")
	require.Equal(t, "completed", r["status"], "%v", r)
	out := r["output"].(map[string]any)
	require.Equal(t, "Pack a light jacket.", out["content"])
	require.Equal(t, true, out["goal_achieved"])
	require.Equal(t, 2.0, out["plans"])
	require.Equal(t, 1.0, out["replans"])
	require.Equal(t, 3.0, out["steps_executed"])

	plans := b.eventsOf(t, jobID, "job:plan_created")
	require.Len(t, plans, 2)
	require.Equal(t, false, plans[0]["replan"])
	require.Equal(t, true, plans[1]["replan"])
	var verdicts []string
	for _, e := range b.eventsOf(t, jobID, "job:reflection") {
		verdicts = append(verdicts, fmt.Sprintf("%s:%s", e["step_id"], e["verdict"]))
	}
	require.Equal(t, []string{"s1:replan", "t1:pass", "t2:pass"}, verdicts)
	adjusted := b.eventsOf(t, jobID, "job:plan_adjusted")
	require.Len(t, adjusted, 1)
	require.Equal(t, "replan", adjusted[0]["kind"])
	require.Equal(t, []any{"s2"}, adjusted[0]["removed"])
	require.Equal(t, []any{"t1", "t2"}, adjusted[0]["added"])

	spans := b.spanCounts(t, jobID)
	for typ, n := range map[string]int{"goal_decompose": 2, "reflection": 3, "plan_adjust": 1, "goal_evaluate": 1} {
		require.Equal(t, n, spans[typ], "%s spans: %v", typ, spans)
	}
	require.Equal(t, map[string]int{"plan": 2, "step-tool": 2, "step-after-tool": 2, "step-text": 1, "reflection": 3,
		"evaluate": 1}, b.served(t, script))
	require.Equal(t, 2, b.toolStats(t).Weather)
}

// TestAutonomousResumesAfterSIGKILL kills the executor once the plan and the first step
// (which filed a ticket) are journaled, while the second step's first call is in flight. The
// run resumes on a new executor from the agent's snapshot after step 1 and the journal's
// tail: sim-llm served every kind of call exactly as often as one uninterrupted run needs,
// and the ticket was filed once.
func TestAutonomousResumesAfterSIGKILL(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	script := "auto-kill-" + uuid.NewString()[:8]
	b.installScript(t, script,
		rule("plan", "plan", nil, planOf([]string{"s1", "tool_using", "create_ticket"},
			[]string{"s2", "tool_using", "demo_weather"}, []string{"s3", "llm_only"})),
		toolStep("step-ticket", "s1", "create_ticket", map[string]any{"title": "Printer on fire", "priority": "high"}, ""),
		// This answer takes 3 s: the kill lands while the call is in flight, and the router
		// finishes it for the resumed attempt.
		toolStep("step-weather", "s2", "demo_weather", map[string]any{"city": "Paris"}, "3s"),
		rule("step-after-tool", "step", map[string]any{"last_role": "tool"},
			map[string]any{"content": "Filed T-00001."}, map[string]any{"content": "It is mild in Paris."}),
		rule("step-text", "step", map[string]any{"last_role": "user", "regex": `Your step \(s3\)`},
			map[string]any{"content": "Ticket filed; the weather is mild."}),
		rule("reflection", "reflection", nil, verdictOf("pass", "create_ticket returned a ticket id"),
			verdictOf("pass", "demo_weather answered"), verdictOf("pass", "the report is written")),
		rule("evaluate", "evaluate", nil, jsonAnswer(map[string]any{"goal_achieved": true,
			"reasoning": "ticket filed and reported", "answer": "Ticket filed; the weather is mild."})),
	)
	b.putSkill(t, agentSkill("agent_kill", script, []string{"create_ticket", "demo_weather"}, `{}`))
	jobID := b.dispatch(t, "agent_kill", map[string]any{"prompt": "File a ticket about the printer, then check the weather."})

	// The snapshot after step 1 rides the write that precedes step 2's router call, so it is
	// in Postgres while that call is in flight: the resumed attempt starts from it.
	waitFor(t, time.Minute, "the plan and the first step journaled, and the snapshot after step 1", func() bool {
		return b.journaled(t, jobID, "plan/1/%") == 1 && b.journaled(t, jobID, "reflect/1/%") == 1 &&
			b.snapshotSeq(t, jobID) == 1
	})
	require.Equal(t, 1, b.toolStats(t).Tickets)
	require.Zero(t, b.journaled(t, jobID, "exec/2/iter/1/llm"), "killed before step 2's first answer was journaled")
	b.kill(t, harness.Executor, syscall.SIGKILL)
	b.StartExecutor()

	r := b.WaitStatus(jobID, 90*time.Second, "completed", "completed_budget_exhausted", "failed", "pending_review")
	require.Equal(t, "completed", r["status"], "%v", r)
	require.Equal(t, 2.0, r["attempts"])
	require.Equal(t, map[string]int{"plan": 1, "step-ticket": 1, "step-weather": 1, "step-after-tool": 2, "step-text": 1,
		"reflection": 3, "evaluate": 1}, b.served(t, script), "no journaled call asked twice")
	st := b.toolStats(t)
	require.Equal(t, 1, st.Tickets, "the side effect happened once: %+v", st)
	require.Zero(t, st.Duplicates)
	require.Equal(t, 1, st.Weather)
	// The resumed attempt starts from the snapshot after step 1 (and would not announce a
	// replayed answer again either): job:plan_created is the first attempt's alone.
	require.Len(t, b.eventsOf(t, jobID, "job:plan_created"), 1)
	require.Len(t, b.eventsOf(t, jobID, "job:reflection"), 3)
	b.requireAnnouncedOnce(t, jobID, []string{"plan/1/try/1"}, []string{"reflect/1/try/1", "reflect/2/try/1", "reflect/3/try/1"})
	require.Equal(t, 3, b.snapshotSeq(t, jobID), "the snapshot after the last step")
}

// snapshotSeq is the steps folded into the run's agent snapshot (run_snapshots), 0 without one.
func (b *execBundle) snapshotSeq(t *testing.T, runID string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT coalesce(max((state->>'seq')::int), 0)
		FROM run_snapshots WHERE run_id = $1 AND step_key = 'snapshot'`, runID).Scan(&n))
	return n
}

// TestAutonomousApprovalGateSurvivesRestarts: the plan's first step wants create_ticket,
// which the skill holds for a reviewer. The run goes pending_review with job:pending_review
// carrying the proposed call and the step; every process (dispatcher, executor, router) is
// restarted while it waits; the approval resumes it at that call, which is made once, and
// the run completes without asking any journaled call again. A second run is rejected with
// a reason: the agent reads the reason as the call's result, files nothing and goes on.
func TestAutonomousApprovalGateSurvivesRestarts(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	script := "auto-gate-" + uuid.NewString()[:8]
	b.installScript(t, script,
		rule("plan", "plan", nil, planOf([]string{"s1", "tool_using", "create_ticket"}, []string{"s2", "llm_only"}),
			planOf([]string{"s1", "tool_using", "create_ticket"}, []string{"s2", "llm_only"})),
		toolStep("step-ticket", "s1", "create_ticket", map[string]any{"title": "Printer on fire", "priority": "high"}, ""),
		rule("step-rejected", "step", map[string]any{"last_role": "tool", "in": "last",
			"regex": `reviewer's reason: no tickets on Fridays`}, map[string]any{"content": "Not filed: no tickets on Fridays."}),
		rule("step-after-tool", "step", map[string]any{"last_role": "tool"}, map[string]any{"content": "Filed T-00001."}),
		rule("step-text", "step", map[string]any{"last_role": "user", "regex": `Your step \(s2\)`},
			map[string]any{"content": "Reported."}, map[string]any{"content": "Reported."}),
		rule("reflection", "reflection", nil, verdictOf("pass", "create_ticket returned a ticket id"),
			verdictOf("pass", "reported"), verdictOf("pass", "the reviewer refused; reported instead"),
			verdictOf("pass", "reported")),
		rule("evaluate", "evaluate", nil, jsonAnswer(map[string]any{"goal_achieved": true, "reasoning": "done",
			"answer": "Ticket filed."}), jsonAnswer(map[string]any{"goal_achieved": false,
			"reasoning": "the reviewer refused the ticket", "answer": "No ticket filed."})),
	)
	b.putSkill(t, agentSkill("agent_gate", script, []string{"create_ticket"}, `{"require_approval_for":["create_ticket"]}`))

	jobID := b.dispatch(t, "agent_gate", map[string]any{"prompt": "File a ticket about the printer."})
	var review []map[string]any
	waitFor(t, time.Minute, "job:pending_review", func() bool {
		review = b.eventsOf(t, jobID, "job:pending_review")
		return len(review) == 1
	})
	r := b.WaitStatus(jobID, 10*time.Second, "pending_review")
	require.Equal(t, "pending_review", r["status"], "%v", r)
	require.Equal(t, "s1", review[0]["step_id"])
	require.Equal(t, 1.0, review[0]["agent_step"])
	proposed := review[0]["tools"].([]any)[0].(map[string]any)
	require.Equal(t, "create_ticket", proposed["tool"])
	require.Equal(t, map[string]any{"title": "Printer on fire", "priority": "high"}, proposed["arguments"])
	require.Zero(t, b.toolStats(t).Tickets, "nothing filed before the approval")

	// Every process of the platform restarts while the run waits; the pause is in Postgres.
	for _, bin := range []string{harness.Dispatcher, harness.Executor, harness.Router} {
		b.kill(t, bin, syscall.SIGTERM)
	}
	for _, bin := range []string{harness.Router, harness.Executor, harness.Dispatcher} {
		b.start(bin)
	}
	require.Equal(t, "pending_review", b.WaitStatus(jobID, 10*time.Second, "pending_review")["status"])

	code, res := b.Do(http.MethodPost, "/api/v1/dispatch/"+jobID+"/approve", map[string]any{"reason": "fine"})
	require.Equal(t, http.StatusOK, code, "%v", res)
	r = b.WaitStatus(jobID, time.Minute, "completed", "completed_budget_exhausted", "failed", "rejected")
	require.Equal(t, "completed", r["status"], "%v", r)
	require.Equal(t, "Ticket filed.", r["output"].(map[string]any)["content"])
	require.Equal(t, 1, b.toolStats(t).Tickets, "the approved call was made once")
	require.Equal(t, map[string]int{"plan": 1, "step-ticket": 1, "step-rejected": 0, "step-after-tool": 1, "step-text": 1,
		"reflection": 2, "evaluate": 1}, b.served(t, script), "the resumed run asked no journaled call again")

	// Rejected with a reason: the run goes on, the agent told why.
	jobID = b.dispatch(t, "agent_gate", map[string]any{"prompt": "File a ticket about the printer, again."})
	waitFor(t, time.Minute, "the second run's job:pending_review", func() bool {
		return len(b.eventsOf(t, jobID, "job:pending_review")) == 1
	})
	code, res = b.Do(http.MethodPost, "/api/v1/dispatch/"+jobID+"/reject", map[string]any{"reason": "no tickets on Fridays"})
	require.Equal(t, http.StatusOK, code, "%v", res)
	require.Equal(t, "queued", res["status"], "an autonomous run goes back to work: %v", res)
	r = b.WaitStatus(jobID, time.Minute, "completed", "completed_budget_exhausted", "failed", "rejected")
	require.Equal(t, "completed", r["status"], "%v", r)
	out := r["output"].(map[string]any)
	require.Equal(t, false, out["goal_achieved"])
	require.Equal(t, 1, b.toolStats(t).Tickets, "the rejected call was not made")
	require.Equal(t, 1, b.served(t, script)["step-rejected"], "the model read the reviewer's reason as the result")
	require.True(t, strings.Contains(fmt.Sprint(b.eventsOf(t, jobID, "job:rejected")), "no tickets on Fridays"))
}

// TestAutonomousCatalogueDemo runs the README's "Run an autonomous agent": the catalogue's
// demo_autonomous, scripted by scripts/sim/demo_autonomous.json named in the goal, pauses
// before create_ticket, is approved and completes.
func TestAutonomousCatalogueDemo(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	b.installFile(t, "demo_autonomous")

	jobID := b.dispatch(t, "demo_autonomous", map[string]any{
		"prompt": "Check the weather in Paris and report the broken printer. [sim-script:demo_autonomous]"})
	r := b.WaitStatus(jobID, time.Minute, "pending_review", "completed", "failed")
	require.Equal(t, "pending_review", r["status"], "%v", r)
	waitFor(t, 10*time.Second, "job:pending_review", func() bool {
		return len(b.eventsOf(t, jobID, "job:pending_review")) == 1
	})
	require.Equal(t, "ticket", b.eventsOf(t, jobID, "job:pending_review")[0]["step_id"])
	code, res := b.Do(http.MethodPost, "/api/v1/dispatch/"+jobID+"/approve", map[string]any{"reason": "ok"})
	require.Equal(t, http.StatusOK, code, "%v", res)
	r = b.WaitStatus(jobID, time.Minute, "completed", "completed_budget_exhausted", "failed", "rejected")
	require.Equal(t, "completed", r["status"], "%v", r)
	require.Equal(t, "Weather checked and the printer ticket filed.", r["output"].(map[string]any)["content"])
	require.Equal(t, 3.0, r["output"].(map[string]any)["steps_executed"])
	st := b.toolStats(t)
	require.Equal(t, 1, st.Weather)
	require.Equal(t, 1, st.Tickets)
}
