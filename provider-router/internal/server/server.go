// Package server is the provider router's HTTP surface: the three locks every caller must
// pass (mutual TLS, the service key, the caller allowlist) and POST /internal/ai/chat,
// which parses an OpenAI-form request and its job headers into a call and hands it to the
// chain of package pipeline — the step hand-off, routing, residency, cost ceilings, the
// token quota, rate limits, retries behind a circuit breaker, the usage ledger — then
// writes the answer.
package server

import (
	"cmp"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchyard-ai/switchyard/provider-router/internal/breaker"
	"github.com/switchyard-ai/switchyard/provider-router/internal/budget"
	"github.com/switchyard-ai/switchyard/provider-router/internal/credential"
	"github.com/switchyard-ai/switchyard/provider-router/internal/estimate"
	"github.com/switchyard-ai/switchyard/provider-router/internal/handoff"
	"github.com/switchyard-ai/switchyard/provider-router/internal/ledger"
	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
	"github.com/switchyard-ai/switchyard/provider-router/internal/mtls"
	"github.com/switchyard-ai/switchyard/provider-router/internal/pipeline"
	"github.com/switchyard-ai/switchyard/provider-router/internal/pricing"
	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
	"github.com/switchyard-ai/switchyard/shared/aichat"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// Retry is the policy for provider failures that another attempt may fix (see
// pipeline.Retry).
type Retry = pipeline.Retry

// Server holds what the handlers need. Zero-valued optional parts switch their feature
// off (for focused tests): no Verifier, no mTLS lock (only allowed on loopback plain
// HTTP, see cmd/provider-router); no Limiter, no rate limits; no Budget, no ceilings or
// quotas; no Credentials, no provider keys; no Handoff, X-Step-Key is not acted on. The
// Ledger is required.
type Server struct {
	DB             *pgxpool.Pool
	ServiceKey     string
	AllowedCallers []string
	MTLS           *mtls.Verifier
	Routes         *routing.Resolver
	Prices         *pricing.Table
	Credentials    *credential.Store
	Limiter        *limiter.Limiter
	// QueueOrder orders the Limiter's waiters of equal priority; zero: progress.
	QueueOrder pipeline.QueueOrder
	Estimator  *estimate.Estimator
	Breakers   *breaker.Set
	Budget     *budget.Guard
	Ledger     *ledger.Writer
	Handoff    *handoff.Store
	HTTPClient *http.Client
	Log        *slog.Logger
	Metrics    *pipeline.Metrics
	Retry      Retry
	// MaxWait bounds a call's wait for rate-limit capacity when it carries no X-Deadline;
	// default 2 min.
	MaxWait time.Duration
	// DefaultMaxTokens caps the completion of a call under a cost ceiling that sets no
	// max_tokens, so its worst case is finite; default 4096.
	DefaultMaxTokens int

	// chain is the call's way through the router's concerns, built by Handler.
	chain pipeline.Chatter
	// after tracks post-answer bookkeeping (reconcile, release, settle) run after the
	// answer was written; Wait drains it at shutdown.
	after sync.WaitGroup
}

// Wait blocks until the bookkeeping of answered calls is done. Call it after the HTTP
// server has shut down and before closing Redis or the ledger.
func (s *Server) Wait() { s.after.Wait() }

func (s *Server) maxWait() time.Duration { return cmp.Or(s.MaxWait, 2*time.Minute) }

// Handler builds the chain from the Server's parts and the echo instance.
func (s *Server) Handler() *echo.Echo {
	s.chain = pipeline.New(pipeline.Parts{
		Log: s.Log, Metrics: s.Metrics, Handoff: s.Handoff, Routes: s.Routes, Prices: s.Prices,
		Budget: s.Budget, DefaultMaxTokens: s.DefaultMaxTokens, Estimator: s.Estimator,
		Credentials: s.Credentials, HTTPClient: s.HTTPClient, Ledger: s.Ledger, Retry: s.Retry,
		Limiter: s.Limiter, QueueOrder: s.QueueOrder, Breakers: s.Breakers,
	})
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = apierr.Handler(s.Log)
	e.Use(middleware.Recover())
	e.Use(middleware.BodyLimit("8M"))
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	if s.Metrics != nil {
		e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.Metrics.Gatherer(), promhttp.HandlerOpts{})))
	}
	e.POST(aichat.Path, s.chat, s.mtlsLock, s.serviceKeyLock, s.callerLock)
	e.POST(aichat.PricePath, s.price, s.mtlsLock, s.serviceKeyLock, s.callerLock)
	return e
}

// lockFailed is the one answer of every lock: 403 naming the lock and nothing more, so a
// prober learns which lock stopped it but not why.
func lockFailed(lock string) *apierr.Error {
	return apierr.New(http.StatusForbidden, apierr.CodeForbidden, "The call did not pass the router's "+lock+" lock.",
		"Only the executor may call the router; see docs/router.md.").With("lock", lock)
}

// mtlsLock requires a client certificate from the trusted CA naming an allowlisted
// identity. Without a Verifier (plain HTTP on loopback) it is off.
func (s *Server) mtlsLock(next echo.HandlerFunc) echo.HandlerFunc {
	if s.MTLS == nil {
		return next
	}
	return func(c echo.Context) error {
		if _, err := s.MTLS.Identify(c.Request().TLS); err != nil {
			s.Metrics.Refused("FORBIDDEN_MTLS")
			return lockFailed("mtls").Wrap(err)
		}
		return next(c)
	}
}

// serviceKeyLock compares X-Service-Key with the configured key in constant time.
func (s *Server) serviceKeyLock(next echo.HandlerFunc) echo.HandlerFunc {
	want := []byte(s.ServiceKey)
	return func(c echo.Context) error {
		got := []byte(c.Request().Header.Get(aichat.HeaderServiceKey))
		if len(want) == 0 || subtle.ConstantTimeCompare(got, want) != 1 {
			s.Metrics.Refused("FORBIDDEN_SERVICE_KEY")
			return lockFailed("service_key")
		}
		return next(c)
	}
}

// callerLock admits only allowlisted X-Caller-Service values.
func (s *Server) callerLock(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !slices.Contains(s.AllowedCallers, c.Request().Header.Get(aichat.HeaderCallerService)) {
			s.Metrics.Refused("FORBIDDEN_CALLER")
			return lockFailed("caller_service")
		}
		return next(c)
	}
}
