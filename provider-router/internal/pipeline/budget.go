package pipeline

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/switchyard-ai/switchyard/provider-router/internal/budget"
	"github.com/switchyard-ai/switchyard/provider-router/internal/estimate"
	"github.com/switchyard-ai/switchyard/provider-router/internal/pricing"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// Budget prices the call and keeps it under its run's (X-Cost-Ceiling-USD) and chain's
// (chains.cost_ceiling_usd) cost ceilings: it reserves the call's worst case before the
// call may even wait for capacity, releases it if the call fails, and charges the actual
// cost after the answer. The price (call.Price) is looked up with or without a ceiling:
// the ledger charges every answer with it. Without a Guard there are no ceilings.
type Budget struct {
	Next   Chatter
	Guard  *budget.Guard
	Prices *pricing.Table
	// DefaultMaxTokens caps the completion of a call under a ceiling that sets no
	// max_tokens, so its worst case is finite; default 4096.
	DefaultMaxTokens int
	Log              *slog.Logger
}

// Chat reserves the call's worst case under its ceilings and calls on.
func (l *Budget) Chat(ctx context.Context, call *Call) (*Result, error) {
	ceilings, err := l.ceilings(ctx, call)
	if err != nil {
		return nil, err
	}
	price, priceErr := l.Prices.Lookup(ctx, call.OrgID, string(call.Route.Kind), call.Route.Model)
	if priceErr != nil && !errors.Is(priceErr, pricing.ErrUnknown) {
		return nil, dependencyError(apierr.CodeDatabaseUnavailable, "The router could not read the price table.", priceErr)
	}
	call.Price, call.Priced = price, priceErr == nil
	if len(ceilings) > 0 && estimate.MaxTokens(call.Req) == 0 {
		call.Req.MaxCompletionTokens = cmp.Or(l.DefaultMaxTokens, 4096)
	}
	call.PromptTokens = estimate.PromptTokens(call.Req)
	if len(ceilings) == 0 {
		return l.Next.Chat(ctx, call)
	}
	if !call.Priced {
		return nil, apierr.New(http.StatusUnprocessableEntity, apierr.CodePriceUnknown,
			"The model has no price, so a cost ceiling cannot be enforced.",
			"Set the model's price (`yard providers price set`, PUT /api/v1/admin/prices/{kind}/{model}) or remove the ceiling.").
			With("provider_kind", string(call.Route.Kind), "model", call.Route.Model)
	}
	worst := price.WorstCase(worstPrompt(call.PromptTokens), int64(estimate.MaxTokens(call.Req)))
	hold, err := l.Guard.Reserve(ctx, ceilings, worst)
	if err != nil {
		if be, ok := errors.AsType[*budget.ExceededError](err); ok {
			return nil, apierr.New(http.StatusPaymentRequired, apierr.CodeBudgetExceeded,
				"The call's worst-case cost does not fit under the "+string(be.Ceiling.Scope)+"'s cost ceiling.",
				"Raise the ceiling, lower max_tokens, or shorten the prompt.").
				With("scope", string(be.Ceiling.Scope), "ceiling_usd", be.Ceiling.LimitUSD,
					"spent_usd", be.SpentUSD, "worst_case_usd", be.WorstCase)
		}
		return nil, dependencyError(apierr.CodeBudgetUnavailable, "The router could not check the cost ceiling.", err)
	}
	res, err := l.Next.Chat(ctx, call)
	if err != nil {
		l.settle(context.WithoutCancel(ctx), call, hold, 0)
		return nil, err
	}
	res.Then(func(ctx context.Context) { l.settle(ctx, call, hold, res.CostUSD) })
	return res, nil
}

// ceilings are the call's run and chain ceilings; none without a Guard.
func (l *Budget) ceilings(ctx context.Context, call *Call) ([]budget.Ceiling, error) {
	if l.Guard == nil {
		return nil, nil
	}
	var ceilings []budget.Ceiling
	if call.RunCeiling != nil {
		ceilings = append(ceilings, budget.Ceiling{Scope: budget.ScopeRun, ID: call.JobID, LimitUSD: *call.RunCeiling})
	}
	if call.ChainID != "" {
		limit, ok, err := l.Guard.ChainCeiling(ctx, call.ChainID)
		if err != nil {
			return nil, dependencyError(apierr.CodeDatabaseUnavailable, "The router could not read the chain's cost ceiling.", err)
		}
		if ok {
			ceilings = append(ceilings, budget.Ceiling{Scope: budget.ScopeChain, ID: call.ChainID, LimitUSD: limit})
		}
	}
	return ceilings, nil
}

// settle releases the worst case and charges cost.
func (l *Budget) settle(ctx context.Context, call *Call, hold *budget.Hold, cost float64) {
	if err := hold.Settle(ctx, cost); err != nil {
		l.Log.Warn("settling cost ceiling", "org_id", call.OrgID, "job_id", call.JobID, "error", err)
	}
}

// worstPrompt pads the router's own prompt count: providers count with their own
// tokenizers (sim-llm: characters/4), which can exceed a BPE count by a few tens of
// percent, and a ceiling must hold against the provider's count.
func worstPrompt(n int) int64 { return int64(n)*5/4 + 8 }

// dependencyError is a store the router could not reach: 503 with code, or 499 CANCELLED
// when the caller went away meanwhile.
func dependencyError(code, msg string, err error) error {
	if errors.Is(err, context.Canceled) {
		return apierr.New(499, apierr.CodeCancelled, "The caller went away.")
	}
	return apierr.New(http.StatusServiceUnavailable, code, msg, "Retry; operators: check PostgreSQL and Redis.").Wrap(err)
}
