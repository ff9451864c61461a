package api

import (
	"cmp"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/dispatch"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/stream"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// WebDirEnv names the directory of the built web UI (web/dist, from `npm run build` in
// web/); default ./web/dist, which is right for `make run` (run from the repository root)
// and for the container image (WORKDIR /app, UI in /app/web/dist).
const WebDirEnv = "SWITCHYARD_WEB_DIR"

// live is the state of the live surfaces: the WebSocket hub and the metrics registry.
type live struct {
	hub     *stream.Hub
	metrics *metrics
	webDir  string
}

// registerLive adds the live surfaces: the WebSocket event stream, the web UI at /ui and
// /metrics.
func (s *Server) registerLive(e *echo.Echo, v1 *echo.Group) {
	s.live = &live{
		hub:    &stream.Hub{Redis: s.Redis, Store: store.Live{DB: s.DB}, Log: s.Log},
		webDir: cmp.Or(os.Getenv(WebDirEnv), filepath.Join("web", "dist")),
	}
	s.live.metrics = newMetrics(s)
	// Echo applies e.Use middleware to every route, whenever it was registered.
	e.Use(s.live.metrics.middleware)
	e.GET("/metrics", echo.WrapHandler(s.live.metrics.handler()))

	v1.GET("/stream", s.stream, require(auth.RoleDispatch, auth.RoleViewer, auth.RoleApprove))

	e.GET("/", func(c echo.Context) error { return c.Redirect(http.StatusFound, "/ui/") })
	e.GET("/ui", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/ui/") })
	e.GET("/ui/*", s.ui)
}

// CloseLive closes every WebSocket client with 1001 (going away). Call it after the HTTP
// server has stopped accepting: http.Server.Shutdown does not close hijacked connections.
func (s *Server) CloseLive() {
	if s.live != nil {
		s.live.hub.Close()
	}
}

// stream upgrades to the WebSocket event stream (docs/streaming.md). Subscriptions given in
// the query are checked here, so a bad one answers with an HTTP error before the upgrade.
func (s *Server) stream(c echo.Context) error {
	p := principal(c)
	q := c.QueryParams()
	var subs []stream.Subscribe
	var fields []dispatch.FieldError
	jobID, chainID, scope := q.Get("job_id"), q.Get("chain_id"), q.Get("scope")
	var after int64
	if v := q.Get("after_seq"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			fields = append(fields, dispatch.FieldError{Field: "after_seq", Rule: "min", Message: "must be a whole number ≥ 0"})
		}
		after = n
		if jobID == "" {
			fields = append(fields, dispatch.FieldError{Field: "after_seq", Rule: "required_with", Message: "needs job_id"})
		}
	}
	if jobID != "" {
		if _, err := uuid.Parse(jobID); err != nil {
			fields = append(fields, dispatch.FieldError{Field: "job_id", Rule: "uuid", Message: "must be a UUID"})
		}
	}
	if chainID != "" {
		if _, err := uuid.Parse(chainID); err != nil {
			fields = append(fields, dispatch.FieldError{Field: "chain_id", Rule: "uuid", Message: "must be a UUID"})
		}
	}
	if scope != "" && scope != "org" {
		fields = append(fields, dispatch.FieldError{Field: "scope", Rule: "oneof", Message: "must be one of: org"})
	}
	if len(fields) > 0 {
		return dispatch.ValidationFailed(fields)
	}
	if !websocket.IsWebSocketUpgrade(c.Request()) {
		return apierr.New(http.StatusBadRequest, apierr.CodeWebSocketRequired, "This endpoint speaks WebSocket only.",
			"Connect with a WebSocket client (Upgrade: websocket); see docs/streaming.md.")
	}
	ctx := c.Request().Context()
	lookup := store.Live{DB: s.DB}
	if jobID != "" {
		if _, err := lookup.RunChain(ctx, p.OrgID, jobID); err != nil {
			return lookupError(err, apierr.CodeJobNotFound, "No job with that id in your organisation.")
		}
		subs = append(subs, stream.Subscribe{JobID: jobID, AfterSeq: after})
	}
	if chainID != "" {
		if _, err := lookup.ChainRuns(ctx, p.OrgID, chainID); err != nil {
			return lookupError(err, apierr.CodeChainNotFound, "No chain with that id in your organisation.")
		}
		subs = append(subs, stream.Subscribe{ChainID: chainID})
	}
	if scope == "org" {
		if !p.Has(auth.RoleViewer) {
			return apierr.New(http.StatusForbidden, apierr.CodeForbidden, "The organisation stream needs the viewer role.",
				"Use a key with the viewer or admin role, or subscribe to one job_id or chain_id.").
				With("required_roles", []string{string(auth.RoleViewer)})
		}
		subs = append(subs, stream.Subscribe{Scope: "org"})
	}
	err := s.live.hub.Serve(c.Response(), c.Request(),
		stream.Client{OrgID: p.OrgID, MayStreamOrg: p.Has(auth.RoleViewer)}, subs)
	if errors.Is(err, stream.ErrClosed) {
		return apierr.New(http.StatusServiceUnavailable, apierr.CodeShuttingDown, "This dispatcher is shutting down.",
			"Reconnect (with after_seq): another dispatcher will serve you.")
	}
	return err
}

func lookupError(err error, code, msg string) error {
	if errors.Is(err, store.ErrNotFound) {
		return apierr.New(http.StatusNotFound, code, msg, "Check the id and the key's organisation.")
	}
	return dispatchDBError(err)
}

// ui serves the built single-page app; paths that are not files get index.html, so the
// app's own routes survive a reload.
func (s *Server) ui(c echo.Context) error {
	dir := s.live.webDir
	index := filepath.Join(dir, "index.html")
	if _, err := os.Stat(index); err != nil {
		return apierr.New(http.StatusServiceUnavailable, apierr.CodeUINotBuilt, "The web UI has not been built.",
			"Run `make build` (or `cd web && npm ci && npm run build`), or point "+WebDirEnv+" at web/dist.").
			With("web_dir", dir)
	}
	rel := strings.TrimPrefix(c.Param("*"), "/")
	h := c.Response().Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
	if rel != "" {
		// filepath.Join cleans "..": the path cannot leave dir.
		p := filepath.Join(dir, filepath.FromSlash(filepath.Clean("/"+rel)))
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			if strings.HasPrefix(rel, "assets/") { // content-hashed names
				h.Set("Cache-Control", "public, max-age=31536000, immutable")
			}
			return c.File(p)
		}
	}
	h.Set("Cache-Control", "no-cache")
	return c.File(index)
}
