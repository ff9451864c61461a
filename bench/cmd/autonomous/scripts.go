package main

import (
	"fmt"
	"strings"
)

// The phases' job types; each is also the name of its sim-llm script.
const (
	stepSkill   = "bench_agent_step"
	labSkill    = "bench_agent_lab"
	pausedSkill = "bench_agent_paused"
	plainSkill  = "bench_plain"
)

// phaseScript is a sim-llm script and the skill that names it.
type phaseScript struct {
	name          string
	script, skill map[string]any
}

// quick is the latency of the step and paused phases' answers: the LLM out of the way.
const quick = "1ms"

func answer(a map[string]any, latency string) map[string]any {
	if latency != "" {
		a["latency"] = latency
	}
	return a
}

func rule(name string, match map[string]any, a map[string]any) map[string]any {
	return map[string]any{"name": name, "match": match, "answers": []any{a}, "exhausted": "repeat"}
}

// planStep is a plan's step; a tool_using step calls the tool it names.
func planStep(id, typ string, tools ...string) map[string]any {
	if tools == nil {
		tools = []string{}
	}
	return map[string]any{"step_id": id, "description": "do " + id, "execution_type": typ, "tools": tools,
		"success_criteria": []string{id + " is done"}, "depends_on": []string{}}
}

// agentRules are the rules every phase shares after its plan and its tool calls: a step's
// text, a passing reflection and an achieved goal.
func agentRules(latency string) []any {
	return []any{
		rule("step", map[string]any{"call": "step"}, answer(map[string]any{"content": "The step is done: it found what the goal needs."}, latency)),
		rule("reflect", map[string]any{"call": "reflection"}, answer(map[string]any{"json": map[string]any{
			"verdict": "pass", "reasoning": "the result meets the step's criteria", "summary": "done"}}, latency)),
		rule("evaluate", map[string]any{"call": "evaluate"}, answer(map[string]any{"json": map[string]any{
			"goal_achieved": true, "reasoning": "every step passed", "answer": "the goal is reached"}}, latency)),
	}
}

func agentSkill(name string, tools []string, block map[string]any) map[string]any {
	return map[string]any{"job_type": name, "enabled": true, "execution_type": "autonomous", "routing_hint": "fast",
		"system_prompt": "You are a benchmark agent. [sim-script:" + name + "]", "tools": tools,
		"max_iterations": 3, "max_tokens": 4096, "queue": queueName, "timeout_seconds": 3600, "autonomous": block}
}

func (b *bench) scripts() []phaseScript {
	// step: odd steps tool_using (one demo_weather call, then the answer), even ones llm_only.
	var steps []any
	for i := 1; i <= b.o.steps; i++ {
		if i%2 == 1 {
			steps = append(steps, planStep(fmt.Sprintf("tool%d", i), "tool_using", "demo_weather"))
		} else {
			steps = append(steps, planStep(fmt.Sprintf("think%d", i), "llm_only"))
		}
	}
	stepRules := append([]any{
		rule("plan", map[string]any{"call": "plan"}, answer(map[string]any{"json": map[string]any{"steps": steps}}, quick)),
		rule("tool-call", map[string]any{"call": "step", "last_role": "user", "regex": `Your step \(tool\d+\)`},
			answer(map[string]any{"tool_calls": []any{map[string]any{"name": "demo_weather",
				"arguments": map[string]any{"city": "Paris"}}}}, quick)),
	}, agentRules(quick)...)

	var lab []any
	for i := 1; i <= b.o.labSteps; i++ {
		lab = append(lab, planStep(fmt.Sprintf("s%d", i), "llm_only"))
	}
	labRules := append([]any{
		rule("plan", map[string]any{"call": "plan"}, map[string]any{"json": map[string]any{"steps": lab}}),
	}, agentRules("")...)

	pausedRules := append([]any{
		rule("plan", map[string]any{"call": "plan"}, answer(map[string]any{"json": map[string]any{"steps": []any{
			planStep("file", "tool_using", "create_ticket"), planStep("report", "llm_only")}}}, quick)),
		rule("ticket", map[string]any{"call": "step", "last_role": "user", "regex": `Your step \(file\)`},
			answer(map[string]any{"tool_calls": []any{map[string]any{"name": "create_ticket",
				"arguments": map[string]any{"title": "Benchmark ticket", "priority": "low"}}}}, quick)),
	}, agentRules(quick)...)

	script := func(name string, rules []any) map[string]any {
		return map[string]any{"name": name, "unmatched": "error", "rules": rules}
	}
	return []phaseScript{
		{name: stepSkill, script: script(stepSkill, stepRules),
			skill: agentSkill(stepSkill, []string{"demo_weather"}, map[string]any{"max_steps": b.o.steps})},
		{name: labSkill, script: script(labSkill, labRules),
			skill: agentSkill(labSkill, nil, map[string]any{"max_steps": b.o.labSteps})},
		{name: pausedSkill, script: script(pausedSkill, pausedRules),
			skill: agentSkill(pausedSkill, []string{"create_ticket"}, map[string]any{
				"require_approval_for": []string{"create_ticket"}, "approval_timeout": "720h"})},
		{name: plainSkill, script: script(plainSkill, []any{rule("any", map[string]any{},
			answer(map[string]any{"content": "ok"}, quick))}),
			skill: map[string]any{"job_type": plainSkill, "enabled": true, "execution_type": "llm_only",
				"routing_hint": "fast", "system_prompt": "Answer briefly. [sim-script:" + plainSkill + "]",
				"max_tokens": 16, "queue": queueName, "timeout_seconds": 60}},
	}
}

// goal is agent i's payload: a prompt of its own.
func goal(i int) map[string]any {
	return map[string]any{"prompt": strings.TrimSpace(fmt.Sprintf("Benchmark goal %d: reach it step by step.", i))}
}
