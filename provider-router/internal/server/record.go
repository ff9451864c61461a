package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchyard-ai/switchyard/provider-router/internal/handoff"
	"github.com/switchyard-ai/switchyard/provider-router/internal/ledger"
	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
	"github.com/switchyard-ai/switchyard/shared/aichat"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// paid is what a provider call cost, as the ledger and the answer state it.
type paid struct {
	in, out, cached int64
	cost            float64
}

// answerPaid records a paid call and then answers it. The ledger entry is stored durably
// — and, for a step's call, the answer handed to repeated calls of the pair, in the same
// Redis round trip — before the caller sees the answer, so a router that dies right after
// answering loses neither. Neither waits for a caller that went away.
func (s *Server) answerPaid(ctx context.Context, c echo.Context, route routing.Route, a answer, cost paid,
	out *upstream, step *handoff.Call) error {
	body, err := json.Marshal(a)
	if err != nil {
		return apierr.Internal(err)
	}
	h := c.Request().Header
	queueWait, _ := strconv.ParseInt(h.Get(aichat.HeaderQueueWaitMS), 10, 64)
	jobID, stepKey := h.Get(aichat.HeaderJobID), h.Get(aichat.HeaderStepKey)
	entry := ledger.Entry{
		CallKey: ledger.CallKey(jobID, stepKey, step.Token()), StepKey: stepKey,
		OrgID: h.Get(aichat.HeaderOrgID), UserID: h.Get(aichat.HeaderUserID), RunID: jobID,
		ChainID: h.Get(aichat.HeaderChainID), JobType: h.Get(aichat.HeaderJobType),
		Provider: route.ProviderName, Model: route.Model, TokensIn: cost.in, TokensOut: cost.out, TokensCached: cost.cached,
		CostUSD: cost.cost, Latency: out.latency, QueueWait: time.Duration(queueWait)*time.Millisecond + out.waited,
	}
	bctx := context.WithoutCancel(ctx)
	s.Ledger.Record(bctx, entry, step.Finish(bctx, body))
	step.Close(bctx)
	return c.JSONBlob(http.StatusOK, body)
}

// replay answers a call from its pair's stored answer.
func replay(c echo.Context, body []byte) error {
	c.Response().Header().Set(HeaderReplayed, "true")
	return c.JSONBlob(http.StatusOK, body)
}
