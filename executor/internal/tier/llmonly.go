package tier

import (
	"context"
)

// LLMOnly runs tier 1: one call through the router, its answer is the output.
func LLMOnly(ctx context.Context, env Env, job Job) (Outcome, error) {
	msgs, err := Messages(job.Skill, job.Payload)
	if err != nil {
		return Outcome{}, err
	}
	ans, err := env.Chat(ctx, "llm/1", job.RootSpanID, baseRequest(job.Skill, msgs))
	if err != nil {
		return Outcome{}, err
	}
	out := map[string]any{"provider": ans.Provider, "model": ans.Model}
	if len(ans.Choices) > 0 {
		out["content"] = ans.Choices[0].Message.Content
		out["finish_reason"] = ans.Choices[0].FinishReason
	}
	return Outcome{Status: "completed", Output: out}, nil
}
