package tier

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/span"
)

// The built-in system prompts of the patterns' own calls; the skill's autonomous block may
// replace each (judge_prompt, critic_prompt, coordinator_prompt).
const (
	defaultJudgePrompt = "You are the judge of several agents that worked on the same goal independently. " +
		"Pick the answer that best achieves the goal: correct, complete, grounded in what the agents found. " +
		"Answer with the number of the agent you pick and your reasoning."
	defaultCriticPrompt = "You are a demanding critic. Read the goal and the draft answer; find what is wrong, " +
		"missing or unsupported. Approve the draft only when there is nothing left worth revising; otherwise " +
		"give a critique the author can act on."
	defaultCoordinatorPrompt = "You are the coordinator of a team of specialists who worked on parts of one goal " +
		"in parallel. Synthesise their results into one answer to the goal; resolve their disagreements and say " +
		"what is still missing. Give your reasoning and the answer."

	callJudge     = "judge"
	callCritique  = "critique"
	callSynthesis = "synthesis"
)

// agentRun is one agent of a pattern: what it was and what it answered.
type agentRun struct {
	Agent        int        `json:"agent"`
	Role         string     `json:"role"`
	Content      string     `json:"content"`
	GoalAchieved bool       `json:"goal_achieved"`
	Status       run.Status `json:"status,omitempty"`
	// Error is a failed agent's error ("CODE: message"); the pattern goes on without it.
	Error       string   `json:"error,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	Round       int      `json:"round,omitempty"`

	out    Outcome
	failed error
}

// agentSpec says how to start an agent: its role, its job (the skill with its
// temperature, instructions and tools; the payload with its goal) and, for the span, its
// temperature and round.
type agentSpec struct {
	role        string
	job         Job
	temperature *float64
	round       int
}

// pattern is one run of a multi-agent pattern.
type pattern struct {
	env Env
	job Job
	cfg skill.Autonomous
}

// runPattern runs the autonomous block's agent_pattern other than execute. Each agent is
// the execute pattern's agent — plan, steps, reflection, evaluation — under an agent span
// (type agent, child of the run's root, step "agent/<i>") with its journal keys under
// "agent/<i>/"; agents of compete, self_consistent and collaborate run in goroutines of
// this worker and share the run's cost ceiling and the router's in-flight signal, as any
// calls of one run do. The pattern's own calls (judge, critique, synthesis) are journaled
// like the agents'. An agent that reaches an approval gate stops there; the others run to
// their end or their own gate, and then the run pauses with every held call: one review
// decides them all, and on resume every agent replays its journal up to where it stood.
func runPattern(ctx context.Context, env Env, job Job, cfg skill.Autonomous) (Outcome, error) {
	p := &pattern{env: env, job: job, cfg: cfg}
	goal, err := Messages(job.Skill, job.Payload)
	if err != nil {
		return Outcome{}, err
	}
	if err := p.checkEstimate(ctx, goal); err != nil {
		return Outcome{}, err
	}
	switch cfg.AgentPattern {
	case skill.PatternCompete:
		return p.compete(ctx)
	case skill.PatternSelfConsistent:
		return p.selfConsistent(ctx)
	case skill.PatternCritic:
		return p.critic(ctx)
	case skill.PatternCollaborate:
		return p.collaborate(ctx)
	}
	return Outcome{}, Permanent(apierr.CodeValidationFailed, "the skill's autonomous block: agent_pattern %q is not known", cfg.AgentPattern)
}

// variant is the job of an agent whose instructions gain extra and whose temperature is
// temperature (nil: the skill's).
func (p *pattern) variant(extra string, temperature *float64) Job {
	j := p.job
	if extra != "" {
		j.Skill.SystemPrompt = strings.TrimSpace(j.Skill.SystemPrompt + "\n\n" + extra)
	}
	if temperature != nil {
		j.Skill.Temperature = temperature
	}
	return j
}

// runAgent runs the i-th agent. A permanent failure of the agent is its result (failed),
// not an error: the pattern decides what it means; any other error ends the pattern.
func (p *pattern) runAgent(ctx context.Context, i int, spec agentSpec) (agentRun, error) {
	attrs := map[string]any{"agent": i, "role": spec.role, "pattern": p.cfg.AgentPattern}
	if spec.temperature != nil {
		attrs["temperature"] = *spec.temperature
	}
	if spec.round > 0 {
		attrs["round"] = spec.round
	}
	sp := p.env.StepSpan(ctx, p.job.RootSpanID, span.Agent, fmt.Sprintf("agent %d: %s", i, spec.role),
		fmt.Sprintf("agent/%d", i), attrs)
	res := agentRun{Agent: i, Role: spec.role, Temperature: spec.temperature, Round: spec.round}
	j := spec.job
	j.RootSpanID = sp.ID
	a, err := newAgent(ctx, &scoped{Env: p.env, prefix: fmt.Sprintf("agent/%d/", i), agent: i}, j, p.cfg)
	var out Outcome
	if err == nil {
		out, err = a.run(ctx)
	}
	if err != nil {
		p.env.EndSpan(context.WithoutCancel(ctx), sp.Set("error", errorText(err)), span.Error)
		if pe, ok := errors.AsType[*PermanentError](err); ok {
			res.Status, res.Error, res.failed = run.Failed, pe.Code+": "+pe.Message, err
			return res, nil
		}
		return res, err
	}
	res.out, res.Status = out, out.Status
	if out.Status == run.PendingReview {
		p.env.EndSpan(ctx, sp.Set("paused_for_approval", true), span.OK)
		return res, nil
	}
	res.Content, _ = out.Output["content"].(string)
	res.GoalAchieved, _ = out.Output["goal_achieved"].(bool)
	p.env.EndSpan(ctx, sp.Set("goal_achieved", res.GoalAchieved).Set("status", string(out.Status)), span.OK)
	return res, nil
}

func errorText(err error) string {
	if pe, ok := errors.AsType[*PermanentError](err); ok {
		return pe.Code
	}
	return err.Error()
}

// parallel runs the agents of specs (agent i+1 for specs[i]) concurrently. The first
// error cancels the others and is returned.
func (p *pattern) parallel(ctx context.Context, specs []agentSpec) ([]agentRun, error) {
	runs := make([]agentRun, len(specs))
	g, gctx := errgroup.WithContext(ctx)
	for i, spec := range specs {
		g.Go(func() error {
			var err error
			runs[i], err = p.runAgent(gctx, i+1, spec)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return runs, nil
}

// gather runs the agents of specs in parallel and returns them and those of them that did
// not fail (with none, the first failure); pause is the run's outcome instead when any
// agent reached an approval gate.
func (p *pattern) gather(ctx context.Context, specs []agentSpec) (runs, ok []agentRun, pause *Outcome, err error) {
	if runs, err = p.parallel(ctx, specs); err != nil {
		return nil, nil, nil, err
	}
	if out, waits := paused(runs); waits {
		return runs, nil, &out, nil
	}
	ok, err = finished(runs)
	return runs, ok, nil, err
}

// paused is the run's pause when any agent of runs reached an approval gate: every held
// call of every paused agent, the first paused agent's reasons, and which agents wait.
func paused(runs []agentRun) (Outcome, bool) {
	var out Outcome
	var waiting []int
	for _, r := range runs {
		if r.Status != run.PendingReview {
			continue
		}
		if len(waiting) == 0 {
			out = Outcome{Status: run.PendingReview, Output: map[string]any{}}
			for k, v := range r.out.Output {
				out.Output[k] = v
			}
			out.Output["agent"] = r.Agent
		}
		waiting = append(waiting, r.Agent)
		out.Held = append(out.Held, r.out.Held...)
	}
	if len(waiting) == 0 {
		return Outcome{}, false
	}
	out.Output["agents_paused"] = waiting
	return out, true
}

// finished are the agents of runs that did not fail; with none, the first failure is the
// pattern's.
func finished(runs []agentRun) ([]agentRun, error) {
	var ok []agentRun
	for _, r := range runs {
		if r.failed == nil {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return nil, runs[0].failed
	}
	return ok, nil
}

func (p *pattern) compete(ctx context.Context) (Outcome, error) {
	specs := make([]agentSpec, p.cfg.Agents)
	for i := range specs {
		specs[i] = agentSpec{role: "agent", job: p.variant(pick(p.cfg.Prompts, i), nil)}
	}
	runs, ok, pause, err := p.gather(ctx, specs)
	if err != nil {
		return Outcome{}, err
	}
	if pause != nil {
		return *pause, nil
	}
	chosen, reasoning, err := p.judge(ctx, ok, map[string]any{})
	if err != nil {
		return Outcome{}, err
	}
	return p.outcome(runs, chosen, reasoning), nil
}

func (p *pattern) selfConsistent(ctx context.Context) (Outcome, error) {
	specs := make([]agentSpec, p.cfg.Agents)
	for i := range specs {
		t := temperatureOf(p.cfg, i)
		specs[i] = agentSpec{role: "agent", job: p.variant(pick(p.cfg.Prompts, i), &t), temperature: &t}
	}
	runs, ok, pause, err := p.gather(ctx, specs)
	if err != nil {
		return Outcome{}, err
	}
	if pause != nil {
		return *pause, nil
	}
	votes := map[string][]int{}
	for _, r := range ok {
		k := normalise(r.Content)
		votes[k] = append(votes[k], r.Agent)
	}
	top := 0
	for _, v := range votes {
		top = max(top, len(v))
	}
	var leaders []agentRun // the first agent of each answer with the most votes
	for _, r := range ok {
		if v := votes[normalise(r.Content)]; len(v) == top && v[0] == r.Agent {
			leaders = append(leaders, r)
		}
	}
	attrs := map[string]any{"votes": votes, "tie": len(leaders) > 1}
	if len(leaders) == 1 {
		reasoning := fmt.Sprintf("majority vote: %d of %d agents gave this answer", top, len(ok))
		p.judgeSpan(ctx, leaders[0].Agent, reasoning, attrs)
		return p.outcome(runs, leaders[0].Agent, reasoning), nil
	}
	chosen, reasoning, err := p.judge(ctx, leaders, attrs)
	if err != nil {
		return Outcome{}, err
	}
	return p.outcome(runs, chosen, reasoning), nil
}

// critic runs a generator, then up to Rounds rounds of a critic's critique (one call, its
// own prompt) and a reviser that revises the draft with it; a critic that approves the
// draft ends the rounds. Agent numbers: 1 the generator, 2r the critic of round r, 2r+1
// its reviser.
func (p *pattern) critic(ctx context.Context) (Outcome, error) {
	first, err := p.runAgent(ctx, 1, agentSpec{role: "generator", job: p.job})
	if err != nil {
		return Outcome{}, err
	}
	runs := []agentRun{first}
	if first.failed != nil {
		return Outcome{}, first.failed
	}
	if first.Status == run.PendingReview {
		out, _ := paused(runs)
		return out, nil
	}
	draft, reasoning := first, ""
	for r := 1; r <= p.cfg.Rounds; r++ {
		crit, approved, critique, err := p.critique(ctx, 2*r, r, draft)
		if err != nil {
			return Outcome{}, err
		}
		runs = append(runs, crit)
		reasoning = critique
		if approved {
			break
		}
		rev, err := p.runAgent(ctx, 2*r+1, agentSpec{role: "reviser", round: r, job: p.revision(draft.Content, critique)})
		if err != nil {
			return Outcome{}, err
		}
		runs = append(runs, rev)
		if rev.failed != nil {
			return Outcome{}, rev.failed
		}
		if rev.Status == run.PendingReview {
			out, _ := paused(runs)
			return out, nil
		}
		draft = rev
	}
	return p.outcome(runs, draft.Agent, reasoning), nil
}

// revision is the reviser's job: the goal, the draft and the critique.
func (p *pattern) revision(draft, critique string) Job {
	j := p.job
	b, _ := json.Marshal(map[string]string{"prompt": fmt.Sprintf("%s\n\nA draft answer to this goal:\n%s\n\n"+
		"A critic's critique of the draft:\n%s\n\nRevise the draft so that it meets the critique, and answer with the "+
		"revised answer to the goal.", p.goalText(), cut(draft, 4*evidenceChars), cut(critique, evidenceChars))})
	j.Payload = b
	return j
}

// critique is the critic of round r (agent i): one call under its agent span.
func (p *pattern) critique(ctx context.Context, i, r int, draft agentRun) (agentRun, bool, string, error) {
	sp := p.env.StepSpan(ctx, p.job.RootSpanID, span.Agent, fmt.Sprintf("agent %d: critic", i), fmt.Sprintf("agent/%d", i),
		map[string]any{"agent": i, "role": "critic", "pattern": p.cfg.AgentPattern, "round": r})
	a := &agent{env: &scoped{Env: p.env, prefix: fmt.Sprintf("agent/%d/", i), agent: i}, job: p.job}
	user := fmt.Sprintf("Goal:\n%s\n\nThe draft answer (agent %d):\n%s\n\nAnswer with a JSON object: "+
		"{\"approved\": true|false, \"critique\"}.", p.goalText(), draft.Agent, cut(draft.Content, 4*evidenceChars))
	var c struct {
		Approved bool   `json:"approved"`
		Critique string `json:"critique"`
	}
	err := p.ask(ctx, a, sp, "critique", cmp.Or(p.cfg.CriticPrompt, defaultCriticPrompt), user, "critique",
		callCritique, critiqueSchema, critiqueExample, func(content string) []string {
			c.Approved, c.Critique = false, ""
			if err := decodeAnswer(content, &c); err != nil {
				return []string{err.Error()}
			}
			if strings.TrimSpace(c.Critique) == "" {
				return []string{"critique is empty"}
			}
			return nil
		})
	if err != nil {
		return agentRun{}, false, "", err
	}
	p.env.EndSpan(ctx, sp.Set("approved", c.Approved).Set("critique", c.Critique), span.OK)
	a.think(ctx, "critique", 0, c.Critique)
	return agentRun{Agent: i, Role: "critic", Round: r, Content: c.Critique, GoalAchieved: c.Approved,
		Status: run.Completed}, c.Approved, c.Critique, nil
}

func (p *pattern) collaborate(ctx context.Context) (Outcome, error) {
	specs := make([]agentSpec, len(p.cfg.Specialists))
	for i, s := range p.cfg.Specialists {
		j := p.variant(fmt.Sprintf("Your role in the team: %s.\n%s", s.Role, s.Prompt), nil)
		j.Skill.Tools = s.Tools
		specs[i] = agentSpec{role: s.Role, job: j}
	}
	runs, _, pause, err := p.gather(ctx, specs)
	if err != nil {
		return Outcome{}, err
	}
	if pause != nil {
		return *pause, nil
	}
	sp := p.env.StepSpan(ctx, p.job.RootSpanID, span.Judge, "coordinator", "judge",
		map[string]any{"pattern": p.cfg.AgentPattern})
	var user strings.Builder
	fmt.Fprintf(&user, "Goal:\n%s\n\nThe specialists' results:\n", p.goalText())
	for _, r := range runs {
		if r.failed != nil {
			fmt.Fprintf(&user, "\n%d. %s — failed: %s\n", r.Agent, r.Role, r.Error)
			continue
		}
		fmt.Fprintf(&user, "\n%d. %s:\n%s\n", r.Agent, r.Role, cut(r.Content, 2*evidenceChars))
	}
	user.WriteString("\nAnswer with a JSON object: {\"reasoning\", \"answer\"}.")
	var syn struct {
		Reasoning string `json:"reasoning"`
		Answer    string `json:"answer"`
	}
	a := &agent{env: &scoped{Env: p.env}, job: p.job}
	err = p.ask(ctx, a, sp, "judge", cmp.Or(p.cfg.CoordinatorPrompt, defaultCoordinatorPrompt), user.String(),
		"synthesis", callSynthesis, synthesisSchema, synthesisExample, func(content string) []string {
			syn.Reasoning, syn.Answer = "", ""
			if err := decodeAnswer(content, &syn); err != nil {
				return []string{err.Error()}
			}
			if strings.TrimSpace(syn.Answer) == "" {
				return []string{"answer is empty"}
			}
			return nil
		})
	if err != nil {
		return Outcome{}, err
	}
	p.env.EndSpan(ctx, sp.Set("reasoning", syn.Reasoning), span.OK)
	a.think(ctx, "synthesis", 0, syn.Reasoning)
	out := p.outcome(runs, 0, syn.Reasoning)
	out.Output["content"] = syn.Answer
	delete(out.Output, "chosen")
	return out, nil
}

// judge picks one of candidates: the only one without a call, otherwise by a judge call
// (journal key "judge/try/<k>"). attrs go on the judge span.
func (p *pattern) judge(ctx context.Context, candidates []agentRun, attrs map[string]any) (int, string, error) {
	if len(candidates) == 1 {
		reasoning := "the only agent that finished"
		p.judgeSpan(ctx, candidates[0].Agent, reasoning, attrs)
		return candidates[0].Agent, reasoning, nil
	}
	attrs["pattern"] = p.cfg.AgentPattern
	sp := p.env.StepSpan(ctx, p.job.RootSpanID, span.Judge, "judge", "judge", attrs)
	var user strings.Builder
	fmt.Fprintf(&user, "Goal:\n%s\n\nThe agents' answers:\n", p.goalText())
	ids := make([]int, len(candidates))
	for i, r := range candidates {
		ids[i] = r.Agent
		fmt.Fprintf(&user, "\nAgent %d (its own evaluation: goal achieved %t):\n%s\n", r.Agent, r.GoalAchieved,
			cut(r.Content, 2*evidenceChars))
	}
	fmt.Fprintf(&user, "\nAnswer with a JSON object: {\"chosen\": one of %v, \"reasoning\"}.", ids)
	var v struct {
		Chosen    int    `json:"chosen"`
		Reasoning string `json:"reasoning"`
	}
	a := &agent{env: &scoped{Env: p.env}, job: p.job}
	err := p.ask(ctx, a, sp, "judge", cmp.Or(p.cfg.JudgePrompt, defaultJudgePrompt), user.String(), "judgement",
		callJudge, judgeSchema, judgeExample, func(content string) []string {
			v.Chosen, v.Reasoning = 0, ""
			if err := decodeAnswer(content, &v); err != nil {
				return []string{err.Error()}
			}
			if !slices.Contains(ids, v.Chosen) {
				return []string{fmt.Sprintf("chosen must be one of %v, not %d", ids, v.Chosen)}
			}
			if strings.TrimSpace(v.Reasoning) == "" {
				return []string{"reasoning is empty"}
			}
			return nil
		})
	if err != nil {
		return 0, "", err
	}
	p.env.EndSpan(ctx, sp.Set("chosen", v.Chosen).Set("reasoning", v.Reasoning), span.OK)
	a.think(ctx, "judge", 0, v.Reasoning)
	return v.Chosen, v.Reasoning, nil
}

// ask makes one of the pattern's own calls (judge, critique, synthesis) as a asks it,
// under the span sp and the journal key "<key>/try/<k>"; a failure ends sp.
func (p *pattern) ask(ctx context.Context, a *agent, sp *span.Span, key, system, user, what, call string,
	schema json.RawMessage, example string, parse func(content string) []string) error {
	tries, err := a.askJSON(ctx, key, sp.ID, system, user, what, call, schema, example, parse)
	sp.Set("tries", tries)
	if err != nil {
		p.env.EndSpan(context.WithoutCancel(ctx), sp, span.Error)
	}
	return err
}

// judgeSpan records a choice made without a judge call (a majority, a single finisher).
func (p *pattern) judgeSpan(ctx context.Context, chosen int, reasoning string, attrs map[string]any) {
	attrs["pattern"] = p.cfg.AgentPattern
	sp := p.env.StepSpan(ctx, p.job.RootSpanID, span.Judge, "judge", "judge", attrs)
	p.env.EndSpan(ctx, sp.Set("chosen", chosen).Set("reasoning", reasoning), span.OK)
}

// outcome is the pattern's result: the chosen agent's answer (chosen 0: none), every
// agent's, and the judge's reasoning. The run is completed; an agent that failed, and a
// chosen agent that ended on its budget or without achieving the goal, are warnings.
func (p *pattern) outcome(runs []agentRun, chosen int, reasoning string) Outcome {
	out := Outcome{Status: run.Completed, Output: map[string]any{"pattern": p.cfg.AgentPattern, "agents": runs,
		"chosen": chosen, "judge_reasoning": reasoning}}
	for _, r := range runs {
		switch {
		case r.failed != nil:
			out.Warnings = append(out.Warnings, fmt.Sprintf("agent %d (%s) failed: %s", r.Agent, r.Role, r.Error))
		case r.Agent == chosen:
			out.Output["content"] = r.Content
			out.Output["goal_achieved"] = r.GoalAchieved
			out.Warnings = append(out.Warnings, r.out.Warnings...)
		}
	}
	return out
}

// goalText renders the payload's conversation as the agents read it.
func (p *pattern) goalText() string {
	msgs, _ := Messages(p.job.Skill, p.job.Payload)
	a := &agent{}
	for _, m := range msgs {
		if m.Role != "system" {
			a.goal = append(a.goal, m)
		}
	}
	return a.goalText()
}

// pick is the i-th of xs, cycled; "" when there are none.
func pick(xs []string, i int) string {
	if len(xs) == 0 {
		return ""
	}
	return xs[i%len(xs)]
}

// temperatureOf is the self_consistent agent i's temperature: the block's i-th (cycled),
// or spread evenly from 0.2 to 1.0.
func temperatureOf(cfg skill.Autonomous, i int) float64 {
	if len(cfg.Temperatures) > 0 {
		return cfg.Temperatures[i%len(cfg.Temperatures)]
	}
	if cfg.Agents < 2 {
		return 0.7
	}
	t := 0.2 + 0.8*float64(i)/float64(cfg.Agents-1)
	return float64(int(t*100+0.5)) / 100
}

// normalise is an answer as the vote compares it: lower case, single spaces, without
// surrounding quotes and final punctuation.
func normalise(s string) string {
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	return strings.Trim(s, "\"'`.!;:, ")
}

var (
	judgeSchema = json.RawMessage(`{"type":"object","properties":{"chosen":{"type":"integer"},` +
		`"reasoning":{"type":"string"}},"required":["chosen","reasoning"]}`)
	critiqueSchema = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},` +
		`"critique":{"type":"string"}},"required":["approved","critique"]}`)
	synthesisSchema = json.RawMessage(`{"type":"object","properties":{"reasoning":{"type":"string"},` +
		`"answer":{"type":"string"}},"required":["reasoning","answer"]}`)
)

const (
	judgeExample     = `{"chosen":2,"reasoning":"agent 2 cites the tool's figures; agent 1 guesses"}`
	critiqueExample  = `{"approved":false,"critique":"the second paragraph gives no source for the price"}`
	synthesisExample = `{"reasoning":"the researcher found the price, the writer phrased it","answer":"The price is 42 EUR."}`
)
