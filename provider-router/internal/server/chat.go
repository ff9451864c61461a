package server

import (
	"cmp"
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
	"github.com/switchyard-ai/switchyard/provider-router/internal/pipeline"
	"github.com/switchyard-ai/switchyard/shared/aichat"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// HeaderUserPreference names the provider the user prefers; consulted only for the
// default routing hint (see routing.Resolver.Resolve).
const HeaderUserPreference = "X-User-Preference"

var priorities = map[string]int{"": limiter.PriorityNormal, "critical": limiter.PriorityCritical,
	"high": limiter.PriorityHigh, "normal": limiter.PriorityNormal, "low": limiter.PriorityLow}

func invalid(msg, fix, header string) *apierr.Error {
	return apierr.New(http.StatusBadRequest, apierr.CodeValidationFailed, msg, fix).With("header", header)
}

// chat is POST /internal/ai/chat: parse the request into a call, pass it through the
// chain (package pipeline: hand-off, routing, residency, money, limits, retries, ledger),
// write the answer, then run the call's bookkeeping.
func (s *Server) chat(c echo.Context) error {
	call, err := s.parse(c)
	if err != nil {
		s.Metrics.Done(call, err)
		return err
	}
	ctx := c.Request().Context()
	res, err := s.chain.Chat(ctx, call)
	if err != nil {
		return err
	}
	if res.Replayed {
		c.Response().Header().Set(HeaderReplayed, "true")
	}
	err = c.JSONBlob(http.StatusOK, res.Body)
	if res.Pending() {
		s.after.Go(func() { res.Settle(context.WithoutCancel(ctx)) })
	}
	return err
}

// parse reads the call from the request's body and headers (shared/aichat). The call is
// returned with its arrival time even when the request is refused.
func (s *Server) parse(c echo.Context) (*pipeline.Call, error) {
	h := c.Request().Header
	call := &pipeline.Call{Arrived: time.Now(),
		OrgID: h.Get(aichat.HeaderOrgID), JobID: h.Get(aichat.HeaderJobID), ChainID: h.Get(aichat.HeaderChainID),
		UserID: h.Get(aichat.HeaderUserID), JobType: h.Get(aichat.HeaderJobType), StepKey: h.Get(aichat.HeaderStepKey),
		SpanID: h.Get(aichat.HeaderSpanID), Hint: h.Get(aichat.HeaderRoutingHint), Preference: h.Get(HeaderUserPreference),
		Provider: h.Get(aichat.HeaderProvider), Residency: h.Get(aichat.HeaderResidency)}
	if call.OrgID == "" {
		return call, invalid("X-Org-ID is required.", "Send the job's organisation in X-Org-ID.", aichat.HeaderOrgID)
	}
	if err := c.Bind(&call.Req); err != nil {
		return call, apierr.New(http.StatusBadRequest, apierr.CodeValidationFailed, "The body is not an OpenAI chat completion request.",
			"Send a Chat Completions JSON body.")
	}
	if len(call.Req.Messages) == 0 {
		return call, apierr.New(http.StatusBadRequest, apierr.CodeValidationFailed, "messages must not be empty.",
			"Send at least one message.").With("field", "messages")
	}
	call.ModelOverride = cmp.Or(h.Get(aichat.HeaderModelOverride), call.Req.Model)
	var ok bool
	if call.Priority, ok = priorities[h.Get(aichat.HeaderPriority)]; !ok {
		return call, invalid("Unknown priority.", "Use critical, high, normal or low.", aichat.HeaderPriority)
	}
	call.Deadline = call.Arrived.Add(s.maxWait())
	if v := h.Get(aichat.HeaderDeadline); v != "" {
		d, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return call, invalid("X-Deadline is not an RFC 3339 time.", "Send e.g. 2026-01-02T15:04:05.000Z.", aichat.HeaderDeadline)
		}
		call.Deadline = d
	}
	if v := h.Get(aichat.HeaderCapacityWait); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return call, invalid("X-Capacity-Wait-MS is not a positive number of milliseconds.",
				"Send how long the caller will wait for capacity, e.g. 10000.", aichat.HeaderCapacityWait)
		}
		call.MaxWait = time.Duration(ms) * time.Millisecond
	}
	if v := h.Get(aichat.HeaderChainPending); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return call, invalid("X-Chain-Pending is not a non-negative whole number.",
				"Send how many of the chain's steps are not yet dispatched, e.g. 4.", aichat.HeaderChainPending)
		}
		call.ChainPending = n
	}
	if v := h.Get(aichat.HeaderCostCeiling); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return call, invalid("X-Cost-Ceiling-USD is not a non-negative number.", "Send the run's ceiling in USD, e.g. 0.50.", aichat.HeaderCostCeiling)
		}
		if call.JobID == "" {
			return call, invalid("A cost ceiling needs the run's X-Job-ID.", "Send X-Job-ID with X-Cost-Ceiling-USD.", aichat.HeaderJobID)
		}
		call.RunCeiling = &f
	}
	queueWait, _ := strconv.ParseInt(h.Get(aichat.HeaderQueueWaitMS), 10, 64)
	call.QueueWait = time.Duration(queueWait) * time.Millisecond
	return call, checkIdentity(h)
}
