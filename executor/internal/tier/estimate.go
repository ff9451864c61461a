package tier

import (
	"context"
	"fmt"
	"math"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

// The figures of a pattern's cost estimate (docs/executor.md, "Money up front").
const (
	// agentCalls is the shortest complete path of one agent: a plan, one step, its
	// reflection and the goal evaluation.
	agentCalls = 4
	// phaseTokens is what a phase's instructions, memory and JSON format add to the goal's
	// tokens in one call's prompt.
	phaseTokens = 1000
	// defaultMaxTokens is the completion the router allows a call under a ceiling that
	// sets no max_tokens (SWITCHYARD_ROUTER_DEFAULT_MAX_TOKENS, default 4096).
	defaultMaxTokens = 4096
)

// Estimate is a pattern's worst case before it starts.
type Estimate struct {
	Calls int
	USD   float64
}

// estimate is the worst case of the calls a pattern cannot avoid: every agent it starts
// on its shortest complete path (agentCalls), and the pattern's own calls (a judge, the
// critiques of every round, a coordinator), each at the router's worst case for a call —
// every prompt token at the input price and max_tokens of output. Prompts are estimated
// from the goal (characters / 4) plus phaseTokens; a call that reads the agents' answers
// (judge, coordinator, reviser) adds max_tokens per answer it reads.
func estimate(cfg skill.Autonomous, sk skill.Skill, goal []openai.ChatCompletionMessage, price Price) Estimate {
	out := sk.MaxTokens
	if out <= 0 {
		out = defaultMaxTokens
	}
	base := phaseTokens
	for _, m := range goal {
		base += (len(m.Content)+3)/4 + 4
	}
	call := func(answersRead int) float64 {
		prompt := float64(base + answersRead*out)
		return (prompt*price.InputPerMTok + float64(out)*price.OutputPerMTok) / 1e6
	}
	var e Estimate
	add := func(n, answersRead int) {
		e.Calls += n
		e.USD += float64(n) * call(answersRead)
	}
	switch cfg.AgentPattern {
	case skill.PatternCompete, skill.PatternSelfConsistent:
		add(cfg.Agents*agentCalls, 0)
		add(1, cfg.Agents) // the judge (self_consistent: when the vote ties)
	case skill.PatternCritic:
		add(agentCalls, 0)
		add(cfg.Rounds, 1)            // the critiques read the draft
		add(cfg.Rounds*agentCalls, 2) // the revisers read the draft and its critique
	case skill.PatternCollaborate:
		add(len(cfg.Specialists)*agentCalls, 0)
		add(1, len(cfg.Specialists))
	default:
		add(agentCalls, 0)
	}
	e.USD = math.Ceil(e.USD*1e6) / 1e6
	return e
}

// checkEstimate refuses, before any LLM call, a pattern whose estimate does not fit the
// run's cost ceiling (COST_ESTIMATE_EXCEEDS_CEILING, with the figures in its context). A
// run without a ceiling, or whose models have no price, is not checked here (the router
// refuses a call under a ceiling without a price, PRICE_UNKNOWN).
func (p *pattern) checkEstimate(ctx context.Context, goal []openai.ChatCompletionMessage) error {
	if p.job.CostCeilingUSD == nil {
		return nil
	}
	price, ok, err := p.env.CallPrice(ctx)
	if err != nil || !ok {
		return err
	}
	e := estimate(p.cfg, p.job.Skill, goal, price)
	ceiling := *p.job.CostCeilingUSD
	if e.USD <= ceiling {
		return nil
	}
	return &PermanentError{Code: apierr.CodeCostEstimateExceeded,
		Message: fmt.Sprintf("the %s pattern's %d agent(s) need at least %d calls, whose worst case is %.6f USD; "+
			"the run's cost ceiling is %.6f USD", p.cfg.AgentPattern, p.cfg.AgentCount(), e.Calls, e.USD, ceiling),
		Troubleshooting: []string{
			"Raise the skill's cost_ceiling_usd to at least the estimate (context.estimate_usd).",
			"Or run fewer agents (autonomous.agents, rounds or specialists), or lower the skill's max_tokens.",
		},
		Context: map[string]any{"pattern": p.cfg.AgentPattern, "agents": p.cfg.AgentCount(), "calls": e.Calls,
			"estimate_usd": e.USD, "ceiling_usd": ceiling, "input_per_mtok": price.InputPerMTok,
			"output_per_mtok": price.OutputPerMTok},
	}
}
