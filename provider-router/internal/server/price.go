package server

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchyard-ai/switchyard/provider-router/internal/pricing"
	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
	"github.com/switchyard-ai/switchyard/shared/aichat"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// price is POST /internal/ai/price: the Quote of the model a call with the request's
// routing headers would be routed to, resolved and priced as a chat call is (the
// organisation's policy, its own prices over the platform's defaults). It reserves and
// bills nothing.
func (s *Server) price(c echo.Context) error {
	h := c.Request().Header
	org := h.Get(aichat.HeaderOrgID)
	if org == "" {
		return invalid("X-Org-ID is required.", "Send the job's organisation in X-Org-ID.", aichat.HeaderOrgID)
	}
	ctx := c.Request().Context()
	var route routing.Route
	var err error
	if name := h.Get(aichat.HeaderProvider); name != "" {
		route, err = s.Routes.ResolveProvider(ctx, org, name, h.Get(aichat.HeaderRoutingHint), h.Get(aichat.HeaderModelOverride))
	} else {
		route, err = s.Routes.Resolve(ctx, org, h.Get(aichat.HeaderRoutingHint), h.Get(aichat.HeaderModelOverride), "")
	}
	if err != nil {
		return err
	}
	q := aichat.Quote{Provider: route.ProviderName, Model: route.Model}
	p, err := s.Prices.Lookup(ctx, org, string(route.Kind), route.Model)
	switch {
	case errors.Is(err, pricing.ErrUnknown):
	case err != nil:
		return apierr.New(http.StatusServiceUnavailable, apierr.CodeDatabaseUnavailable,
			"The router could not read the price table.", "Check Postgres; the estimate can be asked again.").Wrap(err)
	default:
		q.Known, q.InputPerMTok, q.OutputPerMTok = true, p.InputPerMTok, p.OutputPerMTok
	}
	return c.JSON(http.StatusOK, q)
}
