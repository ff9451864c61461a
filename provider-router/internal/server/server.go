// Package server is the provider router's HTTP surface: the three locks every caller must
// pass (mutual TLS, the service key, the caller allowlist) and POST /internal/ai/chat,
// which routes an OpenAI-form request to the organisation's provider, checks residency,
// cost ceilings and the token quota, waits for rate-limit capacity, calls the provider
// with retries behind a circuit breaker, prices the answer and records it in the usage
// ledger before answering. A call naming its run's step (X-Step-Key) is made once: a
// repeated or racing call of the same (job, step) pair gets the first call's answer.
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
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchyard-ai/switchyard/provider-router/internal/breaker"
	"github.com/switchyard-ai/switchyard/provider-router/internal/budget"
	"github.com/switchyard-ai/switchyard/provider-router/internal/credential"
	"github.com/switchyard-ai/switchyard/provider-router/internal/estimate"
	"github.com/switchyard-ai/switchyard/provider-router/internal/handoff"
	"github.com/switchyard-ai/switchyard/provider-router/internal/ledger"
	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
	"github.com/switchyard-ai/switchyard/provider-router/internal/mtls"
	"github.com/switchyard-ai/switchyard/provider-router/internal/pricing"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
	"github.com/switchyard-ai/switchyard/shared/aichat"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// Retry is the policy for provider failures that another attempt may fix (429, 5xx,
// network). Every attempt passes the rate limiter and the breaker again, and none starts
// when its wait would pass the call's deadline.
type Retry struct {
	// Attempts is the most provider calls per request; default 4.
	Attempts int
	// Backoff is the first pause after a failure, doubled per attempt with jitter; a
	// provider's Retry-After wins when longer. Default 200 ms.
	Backoff time.Duration
	// MaxBackoff caps the pause; default 5 s.
	MaxBackoff time.Duration
}

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
	Estimator      *estimate.Estimator
	Breakers       *breaker.Set
	Budget         *budget.Guard
	Ledger         *ledger.Writer
	Handoff        *handoff.Store
	HTTPClient     *http.Client
	Log            *slog.Logger
	Metrics        *Metrics
	Retry          Retry
	// MaxWait bounds a call's wait for rate-limit capacity when it carries no X-Deadline;
	// default 2 min.
	MaxWait time.Duration
	// DefaultMaxTokens caps the completion of a call under a cost ceiling that sets no
	// max_tokens, so its worst case is finite; default 4096.
	DefaultMaxTokens int

	mu       sync.Mutex
	adapters map[string]cachedAdapter
	// after tracks post-answer bookkeeping (reconcile, release, settle) run after the
	// answer was written; Wait drains it at shutdown.
	after sync.WaitGroup
}

type cachedAdapter struct {
	adapter provider.Adapter
	version time.Time
	credVer time.Time
}

// Wait blocks until the bookkeeping of answered calls is done. Call it after the HTTP
// server has shut down and before closing Redis or the ledger.
func (s *Server) Wait() { s.after.Wait() }

func (s *Server) maxWait() time.Duration { return cmp.Or(s.MaxWait, 2*time.Minute) }

// Handler builds the echo instance.
func (s *Server) Handler() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = apierr.Handler(s.Log)
	e.Use(middleware.Recover())
	e.Use(middleware.BodyLimit("8M"))
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	if s.Metrics != nil {
		e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.Metrics.gatherer, promhttp.HandlerOpts{})))
	}
	e.POST(aichat.Path, s.chat, s.mtlsLock, s.serviceKeyLock, s.callerLock)
	return e
}

// lockFailed is the one answer of every lock: 403 naming the lock and nothing more, so a
// prober learns which lock stopped it but not why.
func lockFailed(lock string) *apierr.Error {
	return apierr.New(http.StatusForbidden, "FORBIDDEN", "The call did not pass the router's "+lock+" lock.",
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
			s.Metrics.refused("FORBIDDEN_MTLS")
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
			s.Metrics.refused("FORBIDDEN_SERVICE_KEY")
			return lockFailed("service_key")
		}
		return next(c)
	}
}

// callerLock admits only allowlisted X-Caller-Service values.
func (s *Server) callerLock(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !slices.Contains(s.AllowedCallers, c.Request().Header.Get(aichat.HeaderCallerService)) {
			s.Metrics.refused("FORBIDDEN_CALLER")
			return lockFailed("caller_service")
		}
		return next(c)
	}
}

// NewBreakers returns the breaker set wired to m's breaker-state gauge.
func NewBreakers(opts breaker.Options, m *Metrics) *breaker.Set {
	prev := opts.OnStateChange
	opts.OnStateChange = func(endpoint string, from, to breaker.State) {
		m.breakerState(endpoint, to)
		if prev != nil {
			prev(endpoint, from, to)
		}
	}
	return breaker.New(opts)
}

// Registry is the Prometheus registry type the router's metrics use.
type Registry = prometheus.Registry
