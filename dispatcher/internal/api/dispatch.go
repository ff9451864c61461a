package api

import (
	"errors"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/dispatch"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/span"
)

func (s *Server) dispatch(c echo.Context) error {
	var req dispatch.Request
	if err := dispatch.Decode(c.Request().Body, s.Validator, &req); err != nil {
		return err
	}
	res, err := s.Dispatch.Dispatch(c.Request().Context(), principal(c), req, dispatch.Options{})
	if err != nil {
		return err
	}
	return accepted(c, res)
}

// accepted answers an accepted dispatch: 202, or 200 for a repeated idempotency key.
func accepted(c echo.Context, res dispatch.Result) error {
	status := http.StatusAccepted
	if res.Duplicate {
		status = http.StatusOK
	}
	return c.JSON(status, res)
}

func jobNotFound(id string) error { return dispatch.JobNotFound(id) }

// runFor loads a run of the caller's organisation, or answers 404 exactly as for a
// missing one.
func (s *Server) runFor(c echo.Context) (runstore.Run, error) {
	id := c.Param("id")
	if _, err := uuid.Parse(id); err != nil {
		return runstore.Run{}, jobNotFound(id)
	}
	r, err := s.runs().GetRun(c.Request().Context(), principal(c).OrgID, id)
	if errors.Is(err, runstore.ErrNotFound) {
		return runstore.Run{}, jobNotFound(id)
	}
	if err != nil {
		return runstore.Run{}, dispatchDBError(err)
	}
	return r, nil
}

func (s *Server) getRun(c echo.Context) error {
	r, err := s.runFor(c)
	if err != nil {
		return err
	}
	r.Payload = nil
	return c.JSON(http.StatusOK, r)
}

func (s *Server) getSpans(c echo.Context) error {
	r, err := s.runFor(c)
	if err != nil {
		return err
	}
	spans, err := s.runs().ListSpans(c.Request().Context(), r.OrgID, r.JobID)
	if err != nil {
		return dispatchDBError(err)
	}
	return c.JSON(http.StatusOK, map[string]any{
		"jobId": r.JobID, "traceId": r.TraceID, "status": r.Status,
		"spans": spans, "tree": span.Tree(spans),
	})
}
