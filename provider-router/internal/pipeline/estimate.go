package pipeline

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/switchyard-ai/switchyard/provider-router/internal/estimate"
)

// Estimate sets call.Tokens — the prompt plus the output the call is expected to produce,
// learnt per skill (X-Job-Type) and model — which the quota and the rate limiter reserve
// before the provider reports the real count, and learns from each answer. Without an
// Estimator the expected output is max_tokens, else 512.
type Estimate struct {
	Next      Chatter
	Estimator *estimate.Estimator
	Log       *slog.Logger
}

// Chat estimates the call's tokens and calls on.
func (l *Estimate) Chat(ctx context.Context, call *Call) (*Result, error) {
	skill := cmp.Or(call.JobType, "_")
	expected := estimate.MaxTokens(call.Req)
	if l.Estimator != nil {
		expected, _ = l.Estimator.Output(ctx, skill, call.Route.Model, expected) // falls back to the prior
	} else if expected == 0 {
		expected = 512
	}
	call.Tokens = call.PromptTokens + expected
	res, err := l.Next.Chat(ctx, call)
	if err != nil || l.Estimator == nil {
		return res, err
	}
	model, out := call.Route.Model, res.Out
	res.Then(func(ctx context.Context) {
		if err := l.Estimator.Defer(ctx, skill, model, int(out)); err != nil {
			l.Log.Warn("recording output estimate", "error", err)
		}
	})
	return res, nil
}
