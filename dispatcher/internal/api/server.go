// Package api is the dispatcher's HTTP surface: routes, authentication middleware and the
// handlers that turn requests into calls on the pipeline and the store.
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/dispatch"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/session"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/providerstore"
)

// MaxBodyBytes bounds every request body (1 MiB); larger bodies answer 413 PAYLOAD_TOO_LARGE
// with the limit in context.limit_bytes.
const MaxBodyBytes int64 = 1 << 20

// Server holds what the handlers need.
type Server struct {
	DB        *pgxpool.Pool
	Redis     redis.UniversalClient
	Inspector *asynq.Inspector
	Dispatch  *dispatch.Service
	Validator *dispatch.Validator
	Sessions  *session.Store
	Log       *slog.Logger
	// Sealer seals provider API keys to the router's public key; nil: keys cannot be set.
	Sealer *providerstore.Sealer

	live *live // the WebSocket hub, /metrics and /ui (live.go)
}

// Handler builds the echo instance with every route.
func (s *Server) Handler() *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = apierr.Handler(s.Log)
	e.Use(middleware.Recover())
	e.Use(limitBody(MaxBodyBytes))

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)

	e.POST("/api/v1/session", s.createSession)
	v1 := e.Group("/api/v1", s.authenticate)
	v1.GET("/session", s.getSession)
	v1.DELETE("/session", s.deleteSession)

	readers := require(auth.RoleDispatch, auth.RoleViewer, auth.RoleApprove)
	v1.POST("/dispatch", s.dispatch, require(auth.RoleDispatch))
	v1.POST("/dispatch/batch", s.dispatchBatch, require(auth.RoleDispatch))
	v1.GET("/dispatch", s.listRuns, readers)
	v1.GET("/dispatch/:id", s.getRun, readers)
	v1.GET("/dispatch/:id/spans", s.getSpans, readers)
	v1.GET("/dispatch/:id/events", s.runEvents, readers)
	v1.POST("/dispatch/:id/cancel", s.cancel, require(auth.RoleDispatch))
	v1.POST("/dispatch/:id/approve", s.approve, require(auth.RoleApprove))
	v1.POST("/dispatch/:id/reject", s.reject, require(auth.RoleApprove))
	v1.GET("/reviews", s.reviews, require(auth.RoleApprove))
	v1.GET("/chains", s.listChains, readers)
	v1.GET("/chains/:id", s.getChain, readers)
	v1.POST("/chains/:id/cancel", s.cancelChain, require(auth.RoleDispatch))
	v1.POST("/chains/:id/rerun", s.rerunChain, require(auth.RoleDispatch))
	v1.POST("/workflows/validate", s.validateWorkflow, require(auth.RoleDispatch, auth.RoleSkillsAdmin))
	v1.POST("/workflows/run", s.runWorkflow, require(auth.RoleDispatch))

	anyRole := require(auth.AllRoles...)
	v1.GET("/skills", s.listSkills, anyRole)
	v1.GET("/skills/:job_type", s.getSkill, anyRole)
	v1.GET("/skills/:job_type/history", s.skillHistory, anyRole)
	v1.PUT("/skills/:job_type", s.putSkill, require(auth.RoleSkillsAdmin))
	v1.POST("/skills/:job_type/enable", s.setSkillEnabled(true), require(auth.RoleSkillsAdmin))
	v1.POST("/skills/:job_type/disable", s.setSkillEnabled(false), require(auth.RoleSkillsAdmin))

	admin := v1.Group("/admin", require(auth.RoleAdmin))
	admin.GET("/org", s.getOrg)
	admin.PATCH("/org", s.patchOrg)
	admin.GET("/keys", s.listKeys)
	admin.POST("/keys", s.createKey)
	admin.DELETE("/keys/:id", s.revokeKey)
	admin.GET("/queues", s.listQueues)
	admin.PUT("/queues/:name", s.putQueue)
	admin.GET("/usage", s.usage)
	admin.GET("/audit", s.audit)
	s.registerOperator(v1)
	s.registerProviders(admin)
	s.registerLive(e, v1)
	s.registerOpenAPI(e)
	return e
}

// authenticate resolves the Bearer API key — or, for browsers, the session cookie — to a
// principal, or answers 401.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header.Get(echo.HeaderAuthorization)
		key, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || key == "" {
			if cookie, err := c.Cookie(session.CookieName); err == nil && s.Sessions != nil {
				return s.authenticateSession(c, cookie.Value, next)
			}
			return unauthenticated("Missing 'Authorization: Bearer <api key>' header.")
		}
		p, err := s.Dispatch.Registry.Authenticate(c.Request().Context(), strings.TrimSpace(key))
		if errors.Is(err, auth.ErrUnknownKey) {
			return unauthenticated("The API key is unknown or revoked.")
		}
		if err != nil {
			return dispatchDBError(err)
		}
		c.Set("principal", p)
		return next(c)
	}
}

// limitBody answers 413 PAYLOAD_TOO_LARGE, naming the limit, for a body over limit bytes:
// at once when its Content-Length says so, else as soon as reading it passes the limit
// (dispatch.Decode turns the reader's http.MaxBytesError into the same answer).
func limitBody(limit int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			if req.ContentLength > limit {
				return dispatch.PayloadTooLarge(limit).With("content_length", req.ContentLength)
			}
			req.Body = http.MaxBytesReader(c.Response(), req.Body, limit)
			return next(c)
		}
	}
}

func principal(c echo.Context) auth.Principal {
	p, _ := c.Get("principal").(auth.Principal)
	return p
}

// require lets a request through when the principal holds any of the roles.
func require(roles ...auth.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p := principal(c)
			for _, r := range roles {
				if p.Has(r) {
					return next(c)
				}
			}
			names := make([]string, len(roles))
			for i, r := range roles {
				names[i] = string(r)
			}
			return apierr.New(http.StatusForbidden, apierr.CodeForbidden, "This API key may not do that.",
				"Use a key with one of the roles in context.required_roles; admins create keys with `yard keys create`.").
				With("required_roles", names)
		}
	}
}

func unauthenticated(msg string) *apierr.Error {
	return apierr.New(http.StatusUnauthorized, apierr.CodeUnauthenticated, msg,
		"Send 'Authorization: Bearer <api key>'. `make run` writes the dev admin key to .run/admin.key.")
}

// dispatchDBError answers a failed Postgres call: DATABASE_UNAVAILABLE, or a 400 for a
// value Postgres refused as invalid data (dispatch.DataError).
func dispatchDBError(err error) *apierr.Error {
	if de := dispatch.DataError(err, ""); de != nil {
		return de
	}
	return apierr.New(http.StatusServiceUnavailable, apierr.CodeDatabaseUnavailable,
		"The registry database could not be reached.",
		"Retry shortly; operators: check PostgreSQL and /readyz.").Wrap(err)
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"postgres": "ok", "redis": "ok"}
	ready := true
	if err := s.DB.Ping(ctx); err != nil {
		checks["postgres"], ready = "unreachable", false
	}
	if err := s.Redis.Ping(ctx).Err(); err != nil {
		checks["redis"], ready = "unreachable", false
	}
	if !ready {
		return apierr.New(http.StatusServiceUnavailable, apierr.CodeNotReady, "A dependency is unreachable.",
			"Check the services named in context.checks.").With("checks", checks)
	}
	return c.JSON(http.StatusOK, map[string]any{"status": "ready", "checks": checks})
}

func queueError(err error) *apierr.Error {
	return apierr.New(http.StatusServiceUnavailable, apierr.CodeQueueUnavailable, "Redis could not be reached.",
		"Retry shortly; operators: check Redis and /readyz.").Wrap(err)
}
