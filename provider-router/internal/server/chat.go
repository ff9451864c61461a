package server

import (
	"cmp"
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/provider-router/internal/budget"
	"github.com/switchyard-ai/switchyard/provider-router/internal/estimate"
	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
	"github.com/switchyard-ai/switchyard/provider-router/internal/pricing"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider/adapters"
	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
	"github.com/switchyard-ai/switchyard/shared/aichat"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// HeaderUserPreference names the provider the user prefers; consulted only for the
// default routing hint (see routing.Resolver.Resolve).
const HeaderUserPreference = "X-User-Preference"

// answer is the router's response body.
type answer struct {
	openai.ChatCompletionResponse
	aichat.Billing
}

var priorities = map[string]int{"": limiter.PriorityNormal, "critical": limiter.PriorityCritical,
	"high": limiter.PriorityHigh, "normal": limiter.PriorityNormal, "low": limiter.PriorityLow}

func invalid(msg, fix, header string) *apierr.Error {
	return apierr.New(http.StatusBadRequest, "VALIDATION_FAILED", msg, fix).With("header", header)
}

func (s *Server) chat(c echo.Context) (err error) {
	started := time.Now()
	ctx := c.Request().Context()
	h := c.Request().Header
	providerLabel, modelLabel := "", ""
	defer func() {
		outcome := "ok"
		if err != nil {
			outcome = apierr.As(err).Code
			s.Metrics.refused(outcome)
		}
		s.Metrics.observe(providerLabel, modelLabel, outcome, time.Since(started))
	}()

	orgID := h.Get(aichat.HeaderOrgID)
	if orgID == "" {
		return invalid("X-Org-ID is required.", "Send the job's organisation in X-Org-ID.", aichat.HeaderOrgID)
	}
	var req openai.ChatCompletionRequest
	if err := c.Bind(&req); err != nil {
		return apierr.New(http.StatusBadRequest, "VALIDATION_FAILED", "The body is not an OpenAI chat completion request.",
			"Send a Chat Completions JSON body.")
	}
	if len(req.Messages) == 0 {
		return apierr.New(http.StatusBadRequest, "VALIDATION_FAILED", "messages must not be empty.",
			"Send at least one message.").With("field", "messages")
	}
	prio, ok := priorities[h.Get(aichat.HeaderPriority)]
	if !ok {
		return invalid("Unknown priority.", "Use critical, high, normal or low.", aichat.HeaderPriority)
	}
	deadline := started.Add(s.maxWait())
	if v := h.Get(aichat.HeaderDeadline); v != "" {
		d, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return invalid("X-Deadline is not an RFC 3339 time.", "Send e.g. 2026-01-02T15:04:05.000Z.", aichat.HeaderDeadline)
		}
		deadline = d
	}
	var maxWait time.Duration
	if v := h.Get(aichat.HeaderCapacityWait); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return invalid("X-Capacity-Wait-MS is not a positive number of milliseconds.",
				"Send how long the caller will wait for capacity, e.g. 10000.", aichat.HeaderCapacityWait)
		}
		maxWait = time.Duration(ms) * time.Millisecond
	}
	var runCeiling *float64
	if v := h.Get(aichat.HeaderCostCeiling); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return invalid("X-Cost-Ceiling-USD is not a non-negative number.", "Send the run's ceiling in USD, e.g. 0.50.", aichat.HeaderCostCeiling)
		}
		if h.Get(aichat.HeaderJobID) == "" {
			return invalid("A cost ceiling needs the run's X-Job-ID.", "Send X-Job-ID with X-Cost-Ceiling-USD.", aichat.HeaderJobID)
		}
		runCeiling = &f
	}
	if err := checkIdentity(h); err != nil {
		return err
	}

	// A step's call is made once: a repeated call gets the first one's answer, and the
	// first runs to its end even when its caller goes away (the answer is handed over).
	prior, err := s.beginStep(ctx, h, deadline)
	if err != nil {
		return err
	}
	if prior.Answer != nil {
		return replay(c, prior.Answer)
	}
	step := prior.Call
	defer step.Close(context.WithoutCancel(ctx))
	ctx, detached := step.Detach(ctx, deadline)
	defer detached()

	route, err := s.Routes.Resolve(ctx, orgID, h.Get(aichat.HeaderRoutingHint),
		cmp.Or(h.Get(aichat.HeaderModelOverride), req.Model), h.Get(HeaderUserPreference))
	if err != nil {
		return err
	}
	providerLabel, modelLabel = route.ProviderName, route.Model
	if err := routing.CheckResidency(route, h.Get(aichat.HeaderResidency)); err != nil {
		return err
	}
	req.Model = route.Model
	req.Stream = false
	req.StreamOptions = nil

	// Money first: a call that could break a ceiling must not even wait for capacity.
	var ceilings []budget.Ceiling
	if s.Budget != nil {
		if runCeiling != nil {
			ceilings = append(ceilings, budget.Ceiling{Scope: budget.ScopeRun, ID: h.Get(aichat.HeaderJobID), LimitUSD: *runCeiling})
		}
		if chainID := h.Get(aichat.HeaderChainID); chainID != "" {
			limit, ok, err := s.Budget.ChainCeiling(ctx, chainID)
			if err != nil {
				return dependencyError("DATABASE_UNAVAILABLE", "The router could not read the chain's cost ceiling.", err)
			}
			if ok {
				ceilings = append(ceilings, budget.Ceiling{Scope: budget.ScopeChain, ID: chainID, LimitUSD: limit})
			}
		}
	}
	price, priceErr := s.Prices.Lookup(ctx, string(route.Kind), route.Model)
	if priceErr != nil && !errors.Is(priceErr, pricing.ErrUnknown) {
		return dependencyError("DATABASE_UNAVAILABLE", "The router could not read the price table.", priceErr)
	}
	if len(ceilings) > 0 && estimate.MaxTokens(req) == 0 {
		req.MaxCompletionTokens = cmp.Or(s.DefaultMaxTokens, 4096)
	}
	promptTokens := estimate.PromptTokens(req)
	var hold *budget.Hold
	if len(ceilings) > 0 {
		if priceErr != nil {
			return apierr.New(http.StatusUnprocessableEntity, "PRICE_UNKNOWN",
				"The model has no price, so a cost ceiling cannot be enforced.",
				"Add the model's price to the price table (prices) or remove the ceiling.").
				With("provider_kind", string(route.Kind), "model", route.Model)
		}
		worst := price.WorstCase(worstPrompt(promptTokens), int64(estimate.MaxTokens(req)))
		hold, err = s.Budget.Reserve(ctx, ceilings, worst)
		if err != nil {
			if be, ok := errors.AsType[*budget.ExceededError](err); ok {
				return apierr.New(http.StatusPaymentRequired, "BUDGET_EXCEEDED",
					"The call's worst-case cost does not fit under the "+string(be.Ceiling.Scope)+"'s cost ceiling.",
					"Raise the ceiling, lower max_tokens, or shorten the prompt.").
					With("scope", string(be.Ceiling.Scope), "ceiling_usd", be.Ceiling.LimitUSD,
						"spent_usd", be.SpentUSD, "worst_case_usd", be.WorstCase)
			}
			return dependencyError("BUDGET_UNAVAILABLE", "The router could not check the cost ceiling.", err)
		}
	}
	skill := cmp.Or(h.Get(aichat.HeaderJobType), "_")
	expected := estimate.MaxTokens(req)
	if s.Estimator != nil {
		expected, _ = s.Estimator.Output(ctx, skill, route.Model, estimate.MaxTokens(req)) // falls back to the prior
	} else if expected == 0 {
		expected = 512
	}
	tokens := promptTokens + expected
	var qhold *budget.QuotaHold
	if s.Budget != nil {
		qhold, err = s.Budget.ReserveTokens(ctx, orgID, int64(tokens))
		if err != nil {
			_ = hold.Settle(context.WithoutCancel(ctx), 0)
			if qe, ok := errors.AsType[*budget.QuotaError](err); ok {
				return apierr.New(http.StatusTooManyRequests, "QUOTA_EXCEEDED",
					"The organisation's monthly token quota is exhausted.",
					"Wait for the next calendar month (UTC) or ask an admin to raise the quota.").
					With("quota", qe.Quota, "used", qe.Used, "tokens", qe.Tokens, "month", qe.Month)
			}
			return dependencyError("BUDGET_UNAVAILABLE", "The router could not check the token quota.", err)
		}
	}
	release := func(cost float64, used int64) {
		bctx := context.WithoutCancel(ctx)
		if err := hold.Settle(bctx, cost); err != nil {
			s.Log.Warn("settling cost ceiling", "org_id", orgID, "job_id", h.Get(aichat.HeaderJobID), "error", err)
		}
		if err := qhold.Reconcile(bctx, used); err != nil {
			s.Log.Warn("reconciling token quota", "org_id", orgID, "error", err)
		}
	}

	adapter, err := s.adapter(ctx, route)
	if err != nil {
		release(0, 0)
		return err
	}
	lreq := limiter.Request{
		Key:    limiter.BucketKey{Credential: route.ProviderID, Model: route.Model},
		Tokens: tokens, Priority: prio, Group: cmp.Or(h.Get(aichat.HeaderChainID), h.Get(aichat.HeaderJobID)),
		Deadline: deadline, MaxWait: maxWait,
	}
	out, err := s.call(ctx, route, adapter, req, lreq)
	if err != nil {
		release(0, 0)
		return err
	}
	resp := out.resp
	if resp.Model == "" {
		resp.Model = route.Model
	}
	cached := int64(0)
	if d := resp.Usage.PromptTokensDetails; d != nil {
		cached = int64(d.CachedTokens)
	}
	in, outTok := int64(resp.Usage.PromptTokens), int64(resp.Usage.CompletionTokens)
	var cost float64
	if priceErr == nil {
		cost = price.Cost(in, outTok, cached)
	}
	err = s.answerPaid(ctx, c, route, answer{ChatCompletionResponse: resp.ChatCompletionResponse,
		Billing: aichat.Billing{Provider: route.ProviderName, CostUSD: cost}},
		paid{in: in, out: outTok, cached: cached, cost: cost}, out, step)

	// Bookkeeping after the answer: each step only returns capacity or corrects an
	// estimate, and holding a reservation a few milliseconds longer errs on the safe side.
	s.Metrics.billed(route.ProviderName, route.Model, in, outTok, cached, cost)
	s.after.Go(func() {
		bctx := context.WithoutCancel(ctx)
		if s.Limiter != nil {
			if _, err := s.Limiter.Observe(bctx, lreq.Key, resp.RateLimit); err != nil {
				s.Log.Warn("observing rate-limit headers", "bucket", lreq.Key.String(), "error", err)
			}
		}
		if out.res != nil {
			if err := out.res.Finish(bctx, int(in+outTok)); err != nil {
				s.Log.Warn("settling rate limit", "bucket", lreq.Key.String(), "error", err)
			}
		}
		if s.Estimator != nil {
			if err := s.Estimator.Defer(bctx, skill, route.Model, int(outTok)); err != nil {
				s.Log.Warn("recording output estimate", "error", err)
			}
		}
		release(cost, in+outTok)
	})
	return err
}

// worstPrompt pads the router's own prompt count: providers count with their own
// tokenizers (sim-llm: characters/4), which can exceed a BPE count by a few tens of
// percent, and a ceiling must hold against the provider's count.
func worstPrompt(n int) int64 { return int64(n)*5/4 + 8 }

func dependencyError(code, msg string, err error) error {
	if errors.Is(err, context.Canceled) {
		return apierr.New(499, "CANCELLED", "The caller went away.")
	}
	return apierr.New(http.StatusServiceUnavailable, code, msg, "Retry; operators: check PostgreSQL and Redis.").Wrap(err)
}

// adapter returns the adapter of a provider config with its current credential, rebuilt
// when the config or the credential changed.
func (s *Server) adapter(ctx context.Context, route routing.Route) (provider.Adapter, error) {
	var key string
	var credVer time.Time
	if s.Credentials != nil {
		secret, ver, found, err := s.Credentials.Get(ctx, route.ProviderID)
		if err != nil {
			return nil, apierr.New(http.StatusServiceUnavailable, "CREDENTIAL_UNAVAILABLE",
				"The router could not open the provider's credential.",
				"Operators: check the router's key ring (SWITCHYARD_ROUTER_KEYS_FILE) holds the key the credential was sealed with.").
				With("provider", route.ProviderName).Wrap(err)
		}
		if found {
			key, credVer = secret.Reveal(), ver
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.adapters[route.ProviderID]; ok && a.version.Equal(route.UpdatedAt) && a.credVer.Equal(credVer) {
		return a.adapter, nil
	}
	a, err := adapters.New(provider.Config{Kind: route.Kind, BaseURL: route.BaseURL, APIKey: key, HTTPClient: s.HTTPClient})
	if err != nil {
		return nil, apierr.Internal(err)
	}
	if s.adapters == nil {
		s.adapters = map[string]cachedAdapter{}
	}
	s.adapters[route.ProviderID] = cachedAdapter{adapter: a, version: route.UpdatedAt, credVer: credVer}
	return a, nil
}
