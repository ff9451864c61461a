package apierr

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
)

// Handler returns an echo HTTPErrorHandler that answers every error with the structured
// body. 5xx are logged at error, 4xx at warn; echo's own errors (unknown route, wrong
// method, body too large) get codes too.
func Handler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		e := fromEcho(err)
		attrs := []any{"code", e.Code, "status", e.Status, "method", c.Request().Method,
			"path", c.Path(), "error", err.Error()}
		switch {
		case e.Status >= 500:
			log.Error("request failed", attrs...)
		case e.expected:
			log.Debug("request answered with an expected error", attrs...)
		default:
			log.Warn("request refused", attrs...)
		}
		for k, vs := range e.Header {
			for _, v := range vs {
				c.Response().Header().Add(k, v)
			}
		}
		if c.Request().Method == http.MethodHead {
			_ = c.NoContent(e.Status)
			return
		}
		_ = c.JSON(e.Status, e.Body())
	}
}

func fromEcho(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var he *echo.HTTPError
	if !errors.As(err, &he) {
		return Internal(err)
	}
	switch he.Code {
	case http.StatusNotFound:
		return New(http.StatusNotFound, CodeRouteNotFound, "No such route.",
			"Check the path against the API reference in docs/api.md.")
	case http.StatusMethodNotAllowed:
		return New(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "This route does not accept that method.",
			"Check the method against the API reference in docs/api.md.")
	case http.StatusRequestEntityTooLarge:
		return New(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "The request body is too large.",
			"Send a smaller body; the service's limit is in its documentation.")
	case http.StatusUnauthorized:
		return New(http.StatusUnauthorized, CodeUnauthenticated, "Missing or invalid credentials.",
			"Send 'Authorization: Bearer <api key>'.")
	}
	if he.Code >= 500 {
		return Internal(err)
	}
	return New(he.Code, CodeBadRequest, http.StatusText(he.Code), "Check the request against docs/api.md.")
}
