package api

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/dispatch"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
)

func (s *Server) dispatchBatch(c echo.Context) error {
	var req dispatch.BatchRequest
	if err := dispatch.DecodeBatch(c.Request().Body, s.Validator, &req); err != nil {
		return err
	}
	res, err := s.Dispatch.DispatchBatch(c.Request().Context(), principal(c), s.Validator, req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusMultiStatus, res)
}

func badQuery(param, msg string) *apierr.Error {
	return dispatch.ValidationFailed([]dispatch.FieldError{{Field: "query." + param, Rule: "invalid", Message: msg}})
}

func (s *Server) listRuns(c echo.Context) error {
	f := runstore.ListFilter{Limit: 50, JobType: c.QueryParam("job_type"), Queue: c.QueryParam("queue")}
	if st := c.QueryParam("status"); st != "" {
		for _, v := range strings.Split(st, ",") {
			if !run.Status(v).Valid() {
				return badQuery("status", "unknown status "+strconv.Quote(v))
			}
			f.Statuses = append(f.Statuses, v)
		}
	}
	for _, p := range []struct {
		name string
		dst  **time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := c.QueryParam(p.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return badQuery(p.name, "must be an RFC 3339 time")
			}
			*p.dst = &t
		}
	}
	var err error
	if f.Limit, f.AfterCreated, f.AfterID, err = page(c, f.Limit); err != nil {
		return err
	}
	runs, err := s.runs().ListRuns(c.Request().Context(), principal(c).OrgID, f)
	if err != nil {
		return dispatchDBError(err)
	}
	out := map[string]any{"items": runs, "nextCursor": nil}
	for i := range runs {
		runs[i].Payload = nil
	}
	if len(runs) == f.Limit {
		last := runs[len(runs)-1]
		out["nextCursor"] = encodeCursor(last.Timings.CreatedAt, last.JobID)
	}
	return c.JSON(http.StatusOK, out)
}

// page reads a list's limit (1 to 200, default def) and keyset cursor.
func page(c echo.Context, def int) (limit int, afterCreated *time.Time, afterID string, err error) {
	limit = def
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			return 0, nil, "", badQuery("limit", "must be 1 to 200")
		}
		limit = n
	}
	if v := c.QueryParam("cursor"); v != "" {
		t, id, ok := decodeCursor(v)
		if !ok {
			return 0, nil, "", badQuery("cursor", "is not a cursor returned by this API")
		}
		afterCreated, afterID = &t, id
	}
	return limit, afterCreated, afterID, nil
}

func encodeCursor(t time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(t.UTC().Format(time.RFC3339Nano) + "|" + id))
}

func decodeCursor(v string) (time.Time, string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return time.Time{}, "", false
	}
	ts, id, ok := strings.Cut(string(b), "|")
	t, err := time.Parse(time.RFC3339Nano, ts)
	if !ok || err != nil || uuid.Validate(id) != nil {
		return time.Time{}, "", false
	}
	return t, id, true
}

func (s *Server) runEvents(c echo.Context) error {
	r, err := s.runFor(c)
	if err != nil {
		return err
	}
	after := int64(0)
	if v := c.QueryParam("after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			return badQuery("after", "must be a sequence number ≥ 0")
		}
	}
	events, err := s.runs().Replay(c.Request().Context(), r.OrgID, r.JobID, after)
	if err != nil {
		return dispatchDBError(err)
	}
	if events == nil {
		events = []event.Envelope{}
	}
	return c.JSON(http.StatusOK, map[string]any{"jobId": r.JobID, "status": r.Status, "events": events})
}

type reviewRequest struct {
	Reason string `json:"reason" validate:"max=2000"`
}

func (s *Server) decodeReview(c echo.Context, required bool) (string, error) {
	var req reviewRequest
	if c.Request().ContentLength != 0 {
		if err := dispatch.Decode(c.Request().Body, s.Validator, &req); err != nil {
			return "", err
		}
	}
	if required && strings.TrimSpace(req.Reason) == "" {
		return "", dispatch.ValidationFailed([]dispatch.FieldError{{Field: "reason", Rule: "required",
			Message: "is required when rejecting"}})
	}
	return req.Reason, nil
}

func (s *Server) jobID(c echo.Context) (string, error) {
	id := c.Param("id")
	if uuid.Validate(id) != nil {
		return "", dispatch.JobNotFound(id)
	}
	return id, nil
}

func (s *Server) approve(c echo.Context) error {
	id, err := s.jobID(c)
	if err != nil {
		return err
	}
	reason, err := s.decodeReview(c, false)
	if err != nil {
		return err
	}
	res, err := s.Dispatch.Approve(c.Request().Context(), principal(c), id, reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

func (s *Server) reject(c echo.Context) error {
	id, err := s.jobID(c)
	if err != nil {
		return err
	}
	reason, err := s.decodeReview(c, true)
	if err != nil {
		return err
	}
	res, err := s.Dispatch.Reject(c.Request().Context(), principal(c), id, reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

func (s *Server) cancel(c echo.Context) error {
	id, err := s.jobID(c)
	if err != nil {
		return err
	}
	res, err := s.Dispatch.Cancel(c.Request().Context(), principal(c), id, s.Inspector)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if res.CancelRequested {
		status = http.StatusAccepted
	}
	return c.JSON(status, res)
}

// reviewItem is one entry of the review queue.
type reviewItem struct {
	runstore.Run
	Payload        any             `json:"payload"`
	Tools          []string        `json:"tools"`
	CostCeilingUSD *float64        `json:"costCeilingUsd"`
	RiskLevel      string          `json:"riskLevel"`
	Pending        json.RawMessage `json:"pending,omitempty"`
}

func (s *Server) reviews(c echo.Context) error {
	ctx := c.Request().Context()
	p := principal(c)
	org, err := s.Dispatch.Registry.Org(ctx, p.OrgID)
	if err != nil {
		return dispatchDBError(err)
	}
	runs, err := s.runs().ListRuns(ctx, p.OrgID, runstore.ListFilter{
		Statuses: []string{string(run.HeldForReview), string(run.PendingReview)}, Limit: 200})
	if err != nil {
		return dispatchDBError(err)
	}
	items := make([]reviewItem, 0, len(runs))
	for _, r := range runs {
		it := reviewItem{Run: r, Tools: []string{}}
		if it.Payload, err = s.Dispatch.Governor.Mask(org.PIIKeywords, r.Payload); err != nil {
			it.Payload = nil
		}
		it.Run.Payload = nil
		var snap struct {
			Tools          []string `json:"tools"`
			CostCeilingUSD *float64 `json:"cost_ceiling_usd"`
			RiskLevel      string   `json:"risk_level"`
		}
		if err := s.runs().SkillSnapshot(ctx, r.JobID, &snap); err != nil {
			return dispatchDBError(err)
		}
		if snap.Tools != nil {
			it.Tools = snap.Tools
		}
		it.CostCeilingUSD, it.RiskLevel = snap.CostCeilingUSD, snap.RiskLevel
		if run.Status(r.Status) == run.PendingReview {
			if it.Pending, err = s.runs().LastEventData(ctx, r.JobID, event.JobHeld); err != nil {
				return dispatchDBError(err)
			}
		}
		items = append(items, it)
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items})
}
