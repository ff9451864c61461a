package api

import "github.com/labstack/echo/v4"

// registerLive adds the live surfaces: the WebSocket event stream, the web UI at /ui and
// /metrics.
func (s *Server) registerLive(e *echo.Echo, v1 *echo.Group) {}
