// Package server is the provider router's HTTP surface: the locks every caller must pass
// and POST /internal/ai/chat, which routes an OpenAI-form request to the organisation's
// provider, prices the answer and records it in the usage ledger.
package server

import (
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/provider-router/internal/ledger"
	"github.com/switchyard-ai/switchyard/provider-router/internal/pricing"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider/adapters"
	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
	"github.com/switchyard-ai/switchyard/shared/aichat"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// Server holds what the handlers need.
type Server struct {
	DB             *pgxpool.Pool
	ServiceKey     string
	AllowedCallers []string
	Routes         *routing.Resolver
	Prices         *pricing.Table
	Ledger         *ledger.Writer
	HTTPClient     *http.Client
	Log            *slog.Logger

	mu       sync.Mutex
	adapters map[string]cachedAdapter
}

type cachedAdapter struct {
	adapter provider.Adapter
	version time.Time
}

// Handler builds the echo instance.
func (s *Server) Handler() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = apierr.Handler(s.Log)
	e.Use(middleware.Recover())
	e.Use(middleware.BodyLimit("8M"))
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.POST(aichat.Path, s.chat, s.serviceKeyLock, s.callerLock)
	return e
}

func lockFailed(lock string) *apierr.Error {
	return apierr.New(http.StatusForbidden, "FORBIDDEN", "The call did not pass the router's "+lock+" lock.",
		"Only the executor may call the router; see docs/operations.md.").With("lock", lock)
}

// serviceKeyLock compares X-Service-Key with the configured key in constant time.
func (s *Server) serviceKeyLock(next echo.HandlerFunc) echo.HandlerFunc {
	want := []byte(s.ServiceKey)
	return func(c echo.Context) error {
		got := []byte(c.Request().Header.Get(aichat.HeaderServiceKey))
		if len(want) == 0 || subtle.ConstantTimeCompare(got, want) != 1 {
			return lockFailed("service_key")
		}
		return next(c)
	}
}

// callerLock admits only allowlisted X-Caller-Service values.
func (s *Server) callerLock(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !slices.Contains(s.AllowedCallers, c.Request().Header.Get(aichat.HeaderCallerService)) {
			return lockFailed("caller_service")
		}
		return next(c)
	}
}

// answer is the router's response body.
type answer struct {
	openai.ChatCompletionResponse
	aichat.Billing
}

func (s *Server) chat(c echo.Context) error {
	ctx := c.Request().Context()
	h := c.Request().Header
	orgID := h.Get(aichat.HeaderOrgID)
	if orgID == "" {
		return apierr.New(http.StatusBadRequest, "VALIDATION_FAILED", "X-Org-ID is required.",
			"Send the job's organisation in X-Org-ID.").With("header", aichat.HeaderOrgID)
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
	route, err := s.Routes.Resolve(ctx, orgID, h.Get(aichat.HeaderRoutingHint), firstNonEmpty(h.Get(aichat.HeaderModelOverride), req.Model))
	if err != nil {
		return err
	}
	adapter, err := s.adapter(route)
	if err != nil {
		return apierr.Internal(err)
	}
	req.Model = route.Model
	req.Stream = false
	started := time.Now()
	resp, err := adapter.Chat(ctx, req)
	latency := time.Since(started)
	if err != nil {
		return providerError(route, err)
	}
	if resp.Model == "" {
		resp.Model = route.Model
	}
	cached := int64(0)
	if d := resp.Usage.PromptTokensDetails; d != nil {
		cached = int64(d.CachedTokens)
	}
	in, out := int64(resp.Usage.PromptTokens), int64(resp.Usage.CompletionTokens)
	var cost float64
	if price, err := s.Prices.Lookup(ctx, string(route.Kind), route.Model); err == nil {
		cost = price.Cost(in, out, cached)
	} else if !errors.Is(err, pricing.ErrUnknown) {
		s.Log.Warn("reading prices", "error", err)
	}
	queueWait, _ := strconv.ParseInt(h.Get(aichat.HeaderQueueWaitMS), 10, 64)
	s.Ledger.Record(ctx, ledger.Entry{
		OrgID: orgID, UserID: h.Get(aichat.HeaderUserID), RunID: h.Get(aichat.HeaderJobID),
		ChainID: h.Get(aichat.HeaderChainID), JobType: h.Get(aichat.HeaderJobType),
		Provider: route.ProviderName, Model: route.Model, TokensIn: in, TokensOut: out, TokensCached: cached,
		CostUSD: cost, Latency: latency, QueueWait: time.Duration(queueWait) * time.Millisecond,
	})
	return c.JSON(http.StatusOK, answer{ChatCompletionResponse: resp.ChatCompletionResponse,
		Billing: aichat.Billing{Provider: route.ProviderName, CostUSD: cost}})
}

// adapter returns the adapter of a provider config, rebuilt when the config changed.
func (s *Server) adapter(route routing.Route) (provider.Adapter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.adapters[route.ProviderID]; ok && a.version.Equal(route.UpdatedAt) {
		return a.adapter, nil
	}
	a, err := adapters.New(provider.Config{Kind: route.Kind, BaseURL: route.BaseURL, HTTPClient: s.HTTPClient})
	if err != nil {
		return nil, err
	}
	if s.adapters == nil {
		s.adapters = map[string]cachedAdapter{}
	}
	s.adapters[route.ProviderID] = cachedAdapter{adapter: a, version: route.UpdatedAt}
	return a, nil
}

// providerError maps an adapter failure to the router's answer. Retryable failures are
// 502/503/429 so the executor retries; the rest are PROVIDER_REJECTED.
func providerError(route routing.Route, err error) error {
	var pe *provider.Error
	if !errors.As(err, &pe) {
		return apierr.New(http.StatusBadGateway, "PROVIDER_UNAVAILABLE", "The provider could not be reached.",
			"The executor retries with backoff; check the provider's status.").
			With("provider", route.ProviderName).Wrap(err)
	}
	ctx := []any{"provider", route.ProviderName, "model", route.Model, "provider_status", pe.Status, "provider_code", pe.Code}
	switch {
	case pe.Status == http.StatusTooManyRequests:
		e := apierr.New(http.StatusTooManyRequests, "PROVIDER_RATE_LIMITED", "The provider refused the call for its rate limit.",
			"The executor retries after the delay in Retry-After.").With(ctx...).Wrap(err)
		if pe.RetryAfter > 0 {
			e.SetHeader("Retry-After", strconv.Itoa(int(pe.RetryAfter.Seconds()+0.999)))
		}
		return e
	case pe.Retryable:
		return apierr.New(http.StatusBadGateway, "PROVIDER_UNAVAILABLE", "The provider failed to answer.",
			"The executor retries with backoff; check the provider's status.").With(ctx...).Wrap(err)
	}
	return apierr.New(http.StatusBadGateway, "PROVIDER_REJECTED", "The provider rejected the request: "+pe.Message,
		"Check the skill's model and prompt; retrying will not help.").With(ctx...).Wrap(err)
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
