package api

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openAPI is the OpenAPI 3.1 document of the public API. It is written by hand beside the
// routes; TestOpenAPIMatchesRoutes fails when a registered route is missing from it or it
// lists one that is not registered.
//
//go:embed openapi.json
var openAPI []byte

// registerOpenAPI serves the document at GET /api/v1/openapi.json without authentication,
// so tools can read the contract before they hold a key. It is registered on the echo
// instance, not the authenticated /api/v1 group; echo's router prefers this static path to
// the group's catch-all.
func (s *Server) registerOpenAPI(e *echo.Echo) {
	e.GET("/api/v1/openapi.json", func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "public, max-age=300")
		return c.Blob(http.StatusOK, "application/json", openAPI)
	})
}
