package tier

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/span"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// The built-in system prompts of the agent's phases; a skill's autonomous block may replace
// each one (planner_prompt, reflector_prompt, evaluator_prompt).
const (
	defaultPlannerPrompt = "You are the planner of an autonomous agent. Decompose the goal into a short list of " +
		"concrete steps that together achieve it. Each step is either llm_only (reasoning or writing, no tools) " +
		"or tool_using (it calls some of the available tools, which it lists). Give each step a step_id, a " +
		"description, success criteria that can be checked from the step's result, and the step_ids it " +
		"depends on. Use only the tools listed. Answer with the JSON object asked for and nothing else."
	defaultReflectorPrompt = "You are the reflector of an autonomous agent. Judge the step just executed against " +
		"its success criteria, using the tool results shown — the evidence, not the step's opinion of itself. " +
		"Answer with a verdict: pass (the criteria are met, go on), adjust (go on, but the remaining steps " +
		"must change: give the new remaining steps in steps), replan (the plan rests on a wrong assumption " +
		"and the goal must be decomposed again) or fail (the goal cannot be achieved). Give your reasoning, " +
		"and a one- or two-sentence summary of what the step achieved for the later steps."
	defaultEvaluatorPrompt = "You are the evaluator of an autonomous agent. Given the goal and what each step " +
		"achieved, decide whether the goal is achieved, explain why, and give the final answer to the goal " +
		"from the steps' results."
	// agentParseTries is how often the agent asks for a plan (and a reflection or an
	// evaluation) before a malformed answer fails the run.
	agentParseTries = 3
	// memoryChars and evidenceChars cut what earlier steps and tool results add to a prompt.
	// callPlan … callEvaluate label the agent's calls: each phase's user message ends with
	// "[call:TYPE]" (callMarker), harmless text for a model that a scripted sim-llm reads to
	// pick the answer for that kind of call (docs/sim-llm.md, "Scripted answers").
	memoryChars   = 1500
	evidenceChars = 2000

	callPlan       = "plan"
	callStep       = "step"
	callReflection = "reflection"
	callEvaluate   = "evaluate"
)

// callMarker is the label that ends the user message of a call of type call. It comes last,
// so it is the one a scripted sim-llm reads even when the goal quotes another.
func callMarker(call string) string { return "\n[call:" + call + "]" }

// Autonomous runs tier 4 (autonomous), pattern execute: one agent plans the goal (the
// payload's prompt or messages) as steps, executes them in order — llm_only steps as one
// LLM call, tool_using steps as a ReAct loop over the step's tools — reflects after each
// step (pass, adjust, replan, fail), and evaluates the goal at the end. The skill's
// autonomous block bounds it: max_steps executed steps in all (then
// completed_budget_exhausted), max_replans re-decompositions, require_approval_for tools
// held for a reviewer (a rejection's reason becomes the call's result).
//
// Every LLM answer, tool result and decision is journaled by the Env under a key derived
// from the run's progress — "plan/<g>/try/<k>" for the g-th plan, "exec/<n>/…" for the n-th
// executed step, "reflect/<n>/try/<k>", "eval/try/<k>" — and the agent's state (the plan,
// the steps done, the counters) is a function of those answers only, so a resumed run
// walks the same path by replaying them and asks nothing twice. n never repeats across
// adjustments and replans, and g only grows, so no key is ever reused. After each
// reflection the state is also saved as a snapshot (snapshot.go) when the Env keeps them: a
// resumed run starts from the newest one and replays only the answers after it. The block's
// other agent patterns run several such agents (runPattern, patterns.go).
func Autonomous(ctx context.Context, env Env, job Job) (Outcome, error) {
	cfg, problems := skill.ParseAutonomous(job.Skill.Autonomous, job.Skill.Tools)
	if len(problems) > 0 {
		return Outcome{}, Permanent(apierr.CodeValidationFailed, "the skill's autonomous block: %s %s",
			problems[0].Field, problems[0].Message)
	}
	if cfg.AgentPattern != skill.PatternExecute {
		return runPattern(ctx, env, job, cfg)
	}
	a, err := newAgent(ctx, &scoped{Env: env}, job, cfg)
	if err != nil {
		return Outcome{}, err
	}
	return a.run(ctx)
}

// newAgent prepares an agent for job: its goal is the payload's conversation, its tools
// those of job.Skill.Tools that the run is offered.
func newAgent(ctx context.Context, env Env, job Job, cfg skill.Autonomous) (*agent, error) {
	msgs, err := Messages(job.Skill, job.Payload)
	if err != nil {
		return nil, err
	}
	var tools []tool.Tool
	if len(job.Skill.Tools) > 0 {
		if tools, err = env.Tools(ctx); err != nil {
			return nil, err
		}
	}
	a := &agent{env: env, job: job, cfg: cfg, byName: map[string]tool.Tool{}}
	for _, t := range tools {
		if slices.Contains(job.Skill.Tools, t.Name) {
			a.byName[t.Name] = t
			a.toolNames = append(a.toolNames, t.Name)
		}
	}
	for _, m := range msgs {
		if m.Role != openai.ChatMessageRoleSystem {
			a.goal = append(a.goal, m)
		}
	}
	return a, nil
}

// agent is one autonomous run's state, rebuilt from the journal's answers on resume.
type agent struct {
	env       Env
	job       Job
	cfg       skill.Autonomous
	byName    map[string]tool.Tool
	toolNames []string
	goal      []openai.ChatCompletionMessage

	plans, replans int        // plans made, of them re-decompositions
	remaining      []planStep // the current plan's steps not yet executed
	done           []doneStep
	warnings       []string
}

// doneStep is an executed step as the agent remembers it.
type doneStep struct {
	N         int    `json:"n"`
	StepID    string `json:"step_id"`
	Desc      string `json:"description"`
	Verdict   string `json:"verdict"`
	Reasoning string `json:"reasoning"`
	Summary   string `json:"summary"`
	output    string
}

// reflection is the reflector's answer.
type reflection struct {
	Verdict   string     `json:"verdict"`
	Reasoning string     `json:"reasoning"`
	Summary   string     `json:"summary"`
	Steps     []planStep `json:"steps"`
}

// evaluation is the evaluator's answer.
type evaluation struct {
	Achieved  bool   `json:"goal_achieved"`
	Reasoning string `json:"reasoning"`
	Answer    string `json:"answer"`
}

func (a *agent) run(ctx context.Context) (Outcome, error) {
	if !a.restore(ctx) {
		steps, err := a.plan(ctx, a.job.RootSpanID, "")
		if err != nil {
			return Outcome{}, err
		}
		a.remaining = steps
	}
	exhausted := ""
	for len(a.remaining) > 0 {
		if len(a.done) >= a.cfg.MaxSteps {
			exhausted = fmt.Sprintf("max_steps (%d) reached with %d step(s) of the plan not executed",
				a.cfg.MaxSteps, len(a.remaining))
			break
		}
		if err := a.env.CheckCancel(ctx); err != nil {
			return Outcome{}, err
		}
		st := a.remaining[0]
		n := len(a.done) + 1
		sp := a.env.StepSpan(ctx, a.job.RootSpanID, span.ChainStep, fmt.Sprintf("step %d: %s", n, st.StepID),
			fmt.Sprintf("exec/%d", n), map[string]any{"agent_step": n, "step_id": st.StepID,
				"execution_type": st.ExecutionType, "description": st.Description})
		out, results, err := a.execute(ctx, sp, n, st)
		if err != nil {
			a.env.EndSpan(context.WithoutCancel(ctx), sp, span.Error)
			return Outcome{}, err
		}
		if out.Status == run.PendingReview {
			out.Output["agent_step"], out.Output["step_id"], out.Output["step"] = n, st.StepID, st.Description
			sp.Set("paused_for_approval", true)
			a.env.EndSpan(ctx, sp, span.OK)
			return out, nil
		}
		content, _ := out.Output["content"].(string)
		rf, err := a.reflect(ctx, sp, n, st, content, results)
		if err != nil {
			a.env.EndSpan(context.WithoutCancel(ctx), sp, span.Error)
			return Outcome{}, err
		}
		a.env.EndSpan(ctx, sp, span.OK)
		a.done = append(a.done, doneStep{N: n, StepID: st.StepID, Desc: st.Description, Verdict: rf.Verdict,
			Reasoning: rf.Reasoning, Summary: cmpSummary(rf.Summary, content), output: content})
		a.remaining = a.remaining[1:]

		switch rf.Verdict {
		case "fail":
			return Outcome{}, Permanent(apierr.CodeAgentStepFailed, "step %d (%s): %s", n, st.StepID, rf.Reasoning)
		case "adjust":
			a.adjust(ctx, n, rf)
		case "replan":
			if a.replans >= a.cfg.Replans() {
				exhausted = fmt.Sprintf("max_replans (%d) reached: step %d asked for another plan (%s)",
					a.cfg.Replans(), n, rf.Reasoning)
			} else if err := a.replan(ctx, n, rf); err != nil {
				return Outcome{}, err
			}
		}
		if exhausted != "" {
			break
		}
		a.snapshot(ctx)
	}
	return a.evaluate(ctx, exhausted)
}

// plan asks the planner for a plan: the first one (why empty) or the next after a replan
// verdict (why the reflector's reasoning), under the span parent.
func (a *agent) plan(ctx context.Context, parent, why string) ([]planStep, error) {
	a.plans++
	g := a.plans
	sp := a.env.StepSpan(ctx, parent, span.GoalDecompose, fmt.Sprintf("plan %d", g), fmt.Sprintf("plan/%d", g),
		map[string]any{"plan": g})
	var user strings.Builder
	fmt.Fprintf(&user, "Goal:\n%s\n\n%s", a.goalText(), a.toolsText())
	if why != "" {
		fmt.Fprintf(&user, "\n%s\nThe previous plan was abandoned: %s\nPlan the rest of the goal afresh; "+
			"do not repeat what is done, and give the new steps new step_ids.\n", a.memoryText(), why)
	}
	user.WriteString("\nAnswer with a JSON object: {\"reasoning\", \"steps\": [{\"step_id\", \"description\", \"execution_type\", " +
		"\"tools\", \"success_criteria\", \"depends_on\"}]}.")
	var steps []planStep
	var reasoning string
	tries, err := a.askJSON(ctx, fmt.Sprintf("plan/%d", g), sp.ID, cmp.Or(a.cfg.PlannerPrompt, defaultPlannerPrompt),
		user.String(), "plan", callPlan, planSchema, planExample, func(content string) []string {
			var p planAnswer
			if err := decodeAnswer(content, &p); err != nil {
				return []string{err.Error()}
			}
			var problems []string
			steps, problems = checkSteps(p.Steps, a.doneIDs(), a.toolNames, false)
			reasoning = p.Reasoning
			return problems
		})
	sp.Set("tries", tries)
	if err != nil {
		a.env.EndSpan(context.WithoutCancel(ctx), sp, span.Error)
		return nil, err
	}
	sp.Set("steps", stepIDs(steps))
	a.env.EndSpan(ctx, sp, span.OK)
	a.env.Event(ctx, event.JobPlanCreated, map[string]any{"plan": g, "replan": g > 1, "steps": steps})
	a.think(ctx, "plan", 0, reasoning)
	return steps, nil
}

// execute runs step st as the run's n-th executed step under the step's span.
func (a *agent) execute(ctx context.Context, sp *span.Span, n int, st planStep) (Outcome, []toolResult, error) {
	msgs := a.stepMessages(st)
	if st.ExecutionType == "llm_only" {
		ans, err := a.env.Chat(ctx, fmt.Sprintf("exec/%d/llm", n), sp.ID, baseRequest(a.job.Skill, msgs))
		if err != nil {
			return Outcome{}, nil, err
		}
		if len(ans.Choices) == 0 {
			return Outcome{}, nil, Permanent(apierr.CodeLLMEmptyAnswer, "the LLM answered without a choice")
		}
		return Outcome{Status: run.Completed, Output: map[string]any{"content": ans.Choices[0].Message.Content}}, nil, nil
	}
	tools := make([]tool.Tool, 0, len(st.Tools))
	for _, name := range st.Tools {
		tools = append(tools, a.byName[name])
	}
	lp := newLoop(tools, a.job.Skill.MaxIterations)
	lp.prefix, lp.parent, lp.rejectAsResult = fmt.Sprintf("exec/%d/", n), sp.ID, true
	lp.gated = func(t tool.Tool) bool { return t.RequiresApproval || a.cfg.NeedsApproval(t.Name) }
	out, results, err := lp.run(ctx, a.env, a.job, msgs)
	if err == nil && out.Status == run.CompletedMaxIterations {
		sp.Set("max_iterations", true)
	}
	return out, results, err
}

// reflect asks the reflector for its verdict on step st, grounded in its tool results.
func (a *agent) reflect(ctx context.Context, parent *span.Span, n int, st planStep, content string,
	results []toolResult) (reflection, error) {
	sp := a.env.StepSpan(ctx, parent.ID, span.Reflection, fmt.Sprintf("reflection on step %d", n),
		fmt.Sprintf("reflect/%d", n), map[string]any{"agent_step": n, "step_id": st.StepID})
	var user strings.Builder
	fmt.Fprintf(&user, "Goal:\n%s\n\n%s\nThe step just executed (%s): %s\nIts success criteria:\n%s\n",
		a.goalText(), a.memoryText(), st.StepID, st.Description, bullets(st.SuccessCriteria))
	if len(results) > 0 {
		user.WriteString("\nIts tool calls and their results (the evidence):\n")
		for i, r := range results {
			fmt.Fprintf(&user, "%d. %s(%s) returned: %s\n", i+1, r.Tool, cut(string(r.Arguments), evidenceChars),
				cut(r.Result, evidenceChars))
		}
	} else if st.ExecutionType == "tool_using" {
		user.WriteString("\nThe step made no tool call.\n")
	}
	fmt.Fprintf(&user, "\nIts result:\n%s\n", cut(content, 2*evidenceChars))
	if len(a.remaining) > 1 {
		b, _ := json.Marshal(a.remaining[1:])
		fmt.Fprintf(&user, "\nThe remaining steps of the plan: %s\n", b)
	} else {
		user.WriteString("\nIt was the last step of the plan.\n")
	}
	fmt.Fprintf(&user, "\n%s\nAnswer with a JSON object: {\"verdict\": \"pass|adjust|replan|fail\", \"reasoning\", "+
		"\"summary\", \"steps\" (for adjust only: the new remaining steps, each {\"step_id\", \"description\", "+
		"\"execution_type\", \"tools\", \"success_criteria\", \"depends_on\"})}.", a.toolsText())
	var rf reflection
	tries, err := a.askJSON(ctx, fmt.Sprintf("reflect/%d", n), sp.ID, cmp.Or(a.cfg.ReflectorPrompt, defaultReflectorPrompt),
		user.String(), "reflection", callReflection, reflectionSchema, reflectionExample, func(content string) []string {
			rf = reflection{}
			if err := decodeAnswer(content, &rf); err != nil {
				return []string{err.Error()}
			}
			if !slices.Contains([]string{"pass", "adjust", "replan", "fail"}, rf.Verdict) {
				return []string{fmt.Sprintf("verdict must be pass, adjust, replan or fail, not %q", rf.Verdict)}
			}
			if strings.TrimSpace(rf.Reasoning) == "" {
				return []string{"reasoning is empty"}
			}
			if rf.Verdict != "adjust" {
				rf.Steps = nil
				return nil
			}
			steps, problems := checkSteps(rf.Steps, append(a.doneIDs(), st.StepID), a.toolNames, true)
			rf.Steps = steps
			return problems
		})
	sp.Set("tries", tries)
	if err != nil {
		a.env.EndSpan(context.WithoutCancel(ctx), sp, span.Error)
		return reflection{}, err
	}
	sp.Set("verdict", rf.Verdict).Set("reasoning", rf.Reasoning)
	a.env.EndSpan(ctx, sp, span.OK)
	a.env.Event(ctx, event.JobReflection, map[string]any{"agent_step": n, "step_id": st.StepID,
		"verdict": rf.Verdict, "reasoning": rf.Reasoning})
	a.think(ctx, "reflection", n, rf.Reasoning)
	return rf, nil
}

// adjust replaces the remaining steps with the reflection's after the n-th step.
func (a *agent) adjust(ctx context.Context, n int, rf reflection) {
	sp := a.env.StepSpan(ctx, a.job.RootSpanID, span.PlanAdjust, fmt.Sprintf("adjustment after step %d", n),
		fmt.Sprintf("adjust/%d", n), map[string]any{"kind": "adjust", "agent_step": n, "reasoning": rf.Reasoning})
	a.replace(ctx, sp, rf.Steps, map[string]any{"kind": "adjust", "agent_step": n, "reasoning": rf.Reasoning})
}

// replan re-decomposes the goal after the n-th step's replan verdict.
func (a *agent) replan(ctx context.Context, n int, rf reflection) error {
	a.replans++
	r := a.replans
	sp := a.env.StepSpan(ctx, a.job.RootSpanID, span.PlanAdjust, fmt.Sprintf("replan %d", r),
		fmt.Sprintf("replan/%d", r), map[string]any{"kind": "replan", "replan": r, "agent_step": n,
			"reasoning": rf.Reasoning})
	steps, err := a.plan(ctx, sp.ID, rf.Reasoning)
	if err != nil {
		a.env.EndSpan(context.WithoutCancel(ctx), sp, span.Error)
		return err
	}
	a.replace(ctx, sp, steps, map[string]any{"kind": "replan", "replan": r, "agent_step": n, "reasoning": rf.Reasoning})
	return nil
}

// replace makes steps the remaining ones, recording the diff on the plan_adjust span sp and
// in a job:plan_adjusted event with data.
func (a *agent) replace(ctx context.Context, sp *span.Span, steps []planStep, data map[string]any) {
	diff := planDiff(a.remaining, steps)
	for k, v := range diff {
		sp.Set(k, v)
	}
	a.env.EndSpan(ctx, sp, span.OK)
	a.remaining = steps
	data["removed"], data["added"], data["steps"] = diff["removed"], diff["added"], steps
	a.env.Event(ctx, event.JobPlanAdjusted, data)
}

// evaluate asks the evaluator whether the goal is achieved and builds the outcome;
// exhausted says which budget ended the run early ("" when the plan ran out).
func (a *agent) evaluate(ctx context.Context, exhausted string) (Outcome, error) {
	sp := a.env.StepSpan(ctx, a.job.RootSpanID, span.GoalEvaluate, "goal evaluation", "eval", nil)
	var user strings.Builder
	fmt.Fprintf(&user, "Goal:\n%s\n\n%s", a.goalText(), a.memoryText())
	if len(a.done) > 0 {
		last := a.done[len(a.done)-1]
		fmt.Fprintf(&user, "\nThe last step's full result:\n%s\n", cut(last.output, 4*evidenceChars))
	}
	if exhausted != "" {
		b, _ := json.Marshal(a.remaining)
		fmt.Fprintf(&user, "\nThe agent stopped early: %s. The steps not executed: %s\n", exhausted, b)
	}
	user.WriteString("\nAnswer with a JSON object: {\"goal_achieved\": true|false, \"reasoning\", \"answer\"}.")
	var ev evaluation
	tries, err := a.askJSON(ctx, "eval", sp.ID, cmp.Or(a.cfg.EvaluatorPrompt, defaultEvaluatorPrompt),
		user.String(), "evaluation", callEvaluate, evaluationSchema, evaluationExample, func(content string) []string {
			ev = evaluation{}
			if err := decodeAnswer(content, &ev); err != nil {
				return []string{err.Error()}
			}
			if strings.TrimSpace(ev.Reasoning) == "" {
				return []string{"reasoning is empty"}
			}
			return nil
		})
	sp.Set("tries", tries)
	if err != nil {
		a.env.EndSpan(context.WithoutCancel(ctx), sp, span.Error)
		return Outcome{}, err
	}
	sp.Set("goal_achieved", ev.Achieved).Set("reasoning", ev.Reasoning)
	a.env.EndSpan(ctx, sp, span.OK)
	a.think(ctx, "evaluation", 0, ev.Reasoning)

	done := a.done
	if done == nil {
		done = []doneStep{}
	}
	out := Outcome{Status: run.Completed, Output: map[string]any{
		"content": ev.Answer, "goal_achieved": ev.Achieved, "evaluation": ev.Reasoning,
		"steps": done, "steps_executed": len(a.done), "max_steps": a.cfg.MaxSteps,
		"plans": a.plans, "replans": a.replans,
	}}
	if exhausted != "" {
		out.Status = run.CompletedBudgetExhausted
		out.Output["remaining_steps"] = a.remaining
		out.Warnings = append(out.Warnings, "the agent's budget is exhausted: "+exhausted)
	} else if !ev.Achieved {
		out.Warnings = append(out.Warnings, "the goal evaluation found the goal not achieved: "+ev.Reasoning)
	}
	return out, nil
}

// askJSON asks for a JSON answer of call type call under key/try/<k>, parse checking each and returning its
// problems, up to agentParseTries times: each retry shows the model its answer's problems
// and an example. tries is how many asks it took.
func (a *agent) askJSON(ctx context.Context, key, parent, system, user, what, call string, schema json.RawMessage,
	example string, parse func(content string) []string) (int, error) {
	var msgs []openai.ChatCompletionMessage
	if a.job.Skill.SystemPrompt != "" {
		system += "\n\nThe agent's instructions:\n" + a.job.Skill.SystemPrompt
	}
	msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: system},
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: user + callMarker(call)})
	var problems []string
	for k := 1; k <= agentParseTries; k++ {
		req := baseRequest(a.job.Skill, msgs)
		req.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: what, Schema: schema}}
		ans, err := a.env.Chat(ctx, fmt.Sprintf("%s/try/%d", key, k), parent, req)
		if err != nil {
			return k, err
		}
		content := ""
		if len(ans.Choices) > 0 {
			content = ans.Choices[0].Message.Content
		}
		if problems = parse(content); len(problems) == 0 {
			return k, nil
		}
		msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: content},
			openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: fmt.Sprintf(
				"That answer cannot be used:\n%s\nAnswer again with only one JSON object — no prose, no Markdown, "+
					"no code fence — of exactly this shape (the values are an example):\n%s", bullets(problems), example)})
	}
	return agentParseTries, Permanent(apierr.CodePlanParseFailed, "the %s was not usable after %d attempts: %s",
		what, agentParseTries, strings.Join(problems, "; "))
}

// stepMessages is the conversation a step starts with: its instructions, the goal, the
// memory of earlier steps and the step.
func (a *agent) stepMessages(st planStep) []openai.ChatCompletionMessage {
	system := "You are carrying out one step of a plan toward a goal. Do this step only, and answer with its result."
	if a.job.Skill.SystemPrompt != "" {
		system = a.job.Skill.SystemPrompt + "\n\n" + system
	}
	user := fmt.Sprintf("Goal:\n%s\n\n%s\nYour step (%s): %s\nIts success criteria:\n%s", a.goalText(),
		a.memoryText(), st.StepID, st.Description, bullets(st.SuccessCriteria))
	return []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: system},
		{Role: openai.ChatMessageRoleUser, Content: user + callMarker(callStep)}}
}

// goalText renders the payload's conversation (a prompt is one user message).
func (a *agent) goalText() string {
	if len(a.goal) == 1 {
		return a.goal[0].Content
	}
	var b strings.Builder
	for _, m := range a.goal {
		fmt.Fprintf(&b, "%s: %s\n", m.Role, m.Content)
	}
	return b.String()
}

// memoryText is what earlier steps achieved, one line each.
func (a *agent) memoryText() string {
	lines := make([]string, len(a.done))
	for i, d := range a.done {
		lines[i] = fmt.Sprintf("%d. (%s) %s — %s", d.N, d.StepID, d.Desc, d.Summary)
	}
	return section("What the steps executed so far achieved:", "No step has been executed yet.", lines)
}

func (a *agent) toolsText() string {
	lines := make([]string, len(a.toolNames))
	for i, n := range a.toolNames {
		lines[i] = fmt.Sprintf("- %s: %s", n, a.byName[n].Description)
	}
	return section("The available tools:", "No tools are available: every step must be llm_only.", lines)
}

// section is a prompt's paragraph: header and lines, or empty when there are none.
func section(header, empty string, lines []string) string {
	if len(lines) == 0 {
		return empty + "\n"
	}
	return header + "\n" + strings.Join(lines, "\n") + "\n"
}

func (a *agent) doneIDs() []string {
	ids := make([]string, len(a.done))
	for i, d := range a.done {
		ids[i] = d.StepID
	}
	return ids
}

// planDiff says which step ids an adjustment removed from the remaining steps and which it
// added.
func planDiff(before, after []planStep) map[string]any {
	b, a := stepIDs(before), stepIDs(after)
	return map[string]any{"removed": minus(b, a), "added": minus(a, b), "before": b, "after": a}
}

// minus lists the ids of x that are not in y.
func minus(x, y []string) []string {
	out := []string{}
	for _, id := range x {
		if !slices.Contains(y, id) {
			out = append(out, id)
		}
	}
	return out
}

func bullets(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	return b.String()
}

// cut shortens s to at most n bytes (at a rune boundary), marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + " …[cut]"
}

func cmpSummary(summary, content string) string {
	if strings.TrimSpace(summary) != "" {
		return cut(summary, memoryChars)
	}
	return cut(content, memoryChars)
}
