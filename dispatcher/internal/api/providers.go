package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/dispatch"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/providerstore"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

// registerProviders adds the organisation's provider administration (role admin): providers,
// their sealed credentials and a "Test connection" probe, the routing policy, limits and
// prices. Every write goes through shared/providerstore, the tables' owner.
func (s *Server) registerProviders(admin *echo.Group) {
	admin.GET("/providers", s.listProviders)
	admin.GET("/providers/:name", s.getProvider)
	admin.PUT("/providers/:name", s.putProvider)
	admin.DELETE("/providers/:name", s.deleteProvider)
	admin.PUT("/providers/:name/credential", s.setCredential)
	admin.DELETE("/providers/:name/credential", s.revokeCredential)
	admin.POST("/providers/:name/test", s.testProvider)
	admin.GET("/routing", s.getRouting)
	admin.PUT("/routing", s.putRouting)
	admin.GET("/limits", s.listLimits)
	admin.PUT("/limits", s.putLimit)
	admin.DELETE("/limits", s.deleteLimit)
	admin.GET("/prices", s.listPrices)
	admin.PUT("/prices", s.putPrice)
	admin.DELETE("/prices", s.deletePrice)
}

// providerError answers a providerstore error: VALIDATION_FAILED naming the fields,
// PROVIDER_NOT_FOUND, or a database error.
func providerError(err error) error {
	if inv, ok := errors.AsType[*providerstore.InvalidError](err); ok {
		return dispatch.ValidationFailed(inv.Fields)
	}
	if nf, ok := errors.AsType[*providerstore.NotFoundError](err); ok {
		return apierr.New(http.StatusNotFound, apierr.CodeProviderNotFound, "Your organisation has no such "+nf.What+".",
			"List the providers with `yard providers list` (GET /api/v1/admin/providers).").With("what", nf.What, "name", nf.Name)
	}
	return dispatchDBError(err)
}

func (s *Server) listProviders(c echo.Context) error {
	ps, err := providerstore.ListProviders(c.Request().Context(), s.DB, principal(c).OrgID)
	if err != nil {
		return providerError(err)
	}
	return c.JSON(http.StatusOK, map[string]any{"items": ps})
}

func (s *Server) getProvider(c echo.Context) error {
	p, err := providerstore.GetProvider(c.Request().Context(), s.DB, principal(c).OrgID, c.Param("name"))
	if err != nil {
		return providerError(err)
	}
	return c.JSON(http.StatusOK, p)
}

func (s *Server) putProvider(c echo.Context) error {
	var spec apitypes.ProviderSpec
	if err := dispatch.Decode(c.Request().Body, s.Validator, &spec); err != nil {
		return err
	}
	p, created, err := providerstore.PutProvider(c.Request().Context(), s.DB, principal(c).OrgID, c.Param("name"), spec)
	if err != nil {
		return providerError(err)
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, p)
}

func (s *Server) deleteProvider(c echo.Context) error {
	if err := providerstore.DeleteProvider(c.Request().Context(), s.DB, principal(c).OrgID, c.Param("name")); err != nil {
		return providerError(err)
	}
	return c.NoContent(http.StatusNoContent)
}

// setCredential seals the API key to the router's public key and stores it; the answer
// shows only its last four characters and when it was set.
func (s *Server) setCredential(c echo.Context) error {
	var req apitypes.CredentialSet
	if err := dispatch.Decode(c.Request().Body, s.Validator, &req); err != nil {
		return err
	}
	if s.Sealer == nil {
		return apierr.New(http.StatusServiceUnavailable, apierr.CodeCredentialUnavailable,
			"This dispatcher cannot seal API keys: it was started without the router's public key.",
			"Operators: set SWITCHYARD_CREDENTIAL_RECIPIENT to the router's public key (`provider-router credentials identity`, docs/router.md).")
	}
	p := principal(c)
	info, err := providerstore.SetCredential(c.Request().Context(), s.DB, s.Sealer, p.OrgID, c.Param("name"), req.APIKey, p.Actor())
	req.APIKey = ""
	if err != nil {
		return providerError(err)
	}
	return c.JSON(http.StatusOK, info)
}

func (s *Server) revokeCredential(c echo.Context) error {
	if err := providerstore.RevokeCredential(c.Request().Context(), s.DB, principal(c).OrgID, c.Param("name")); err != nil {
		return providerError(err)
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) getRouting(c echo.Context) error {
	pol, err := providerstore.GetPolicy(c.Request().Context(), s.DB, principal(c).OrgID)
	if err != nil {
		return providerError(err)
	}
	return c.JSON(http.StatusOK, pol)
}

func (s *Server) putRouting(c echo.Context) error {
	var pol apitypes.RoutingPolicy
	if err := dispatch.Decode(c.Request().Body, s.Validator, &pol); err != nil {
		return err
	}
	out, err := providerstore.PutPolicy(c.Request().Context(), s.DB, principal(c).OrgID, pol)
	if err != nil {
		return providerError(err)
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) listLimits(c echo.Context) error {
	ls, err := providerstore.ListLimits(c.Request().Context(), s.DB, principal(c).OrgID)
	if err != nil {
		return providerError(err)
	}
	return c.JSON(http.StatusOK, map[string]any{"items": ls})
}

func (s *Server) putLimit(c echo.Context) error {
	var req apitypes.LimitSet
	if err := dispatch.Decode(c.Request().Body, s.Validator, &req); err != nil {
		return err
	}
	l, err := providerstore.PutLimit(c.Request().Context(), s.DB, principal(c).OrgID, req.Provider, req.Model, req)
	if err != nil {
		return providerError(err)
	}
	return c.JSON(http.StatusOK, l)
}

func (s *Server) deleteLimit(c echo.Context) error {
	provider, model := c.QueryParam("provider"), c.QueryParam("model")
	if provider == "" || model == "" {
		return badQuery("provider", "provider and model are required")
	}
	if err := providerstore.DeleteLimit(c.Request().Context(), s.DB, principal(c).OrgID, provider, model); err != nil {
		return providerError(err)
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) listPrices(c echo.Context) error {
	ps, err := providerstore.ListPrices(c.Request().Context(), s.DB, principal(c).OrgID)
	if err != nil {
		return providerError(err)
	}
	return c.JSON(http.StatusOK, map[string]any{"items": ps})
}

func (s *Server) putPrice(c echo.Context) error {
	var req apitypes.PriceSet
	if err := dispatch.Decode(c.Request().Body, s.Validator, &req); err != nil {
		return err
	}
	p, err := providerstore.PutPrice(c.Request().Context(), s.DB, principal(c).OrgID, req.ProviderKind, req.Model, req)
	if err != nil {
		return providerError(err)
	}
	return c.JSON(http.StatusOK, p)
}

func (s *Server) deletePrice(c echo.Context) error {
	kind, model := c.QueryParam("providerKind"), c.QueryParam("model")
	if kind == "" || model == "" {
		return badQuery("providerKind", "providerKind and model are required")
	}
	if err := providerstore.DeletePrice(c.Request().Context(), s.DB, principal(c).OrgID, kind, model); err != nil {
		return providerError(err)
	}
	return c.NoContent(http.StatusNoContent)
}

// probeSkill is the binding of "Test connection" probes: one short answer, no retries.
func probeSkill() skill.Skill {
	return skill.Skill{JobType: apitypes.ProviderTestJobType, Enabled: true, ExecutionType: "llm_only",
		Description:   "Test connection probe of the admin API: sends a tiny call to the provider named in the payload.",
		RoutingHint:   "default",
		SystemPrompt:  "You are a connectivity check. Reply with the single word OK.",
		MaxIterations: 1, MaxTokens: 16, MaxRetries: new(0), Queue: "default", RiskLevel: "minimal", DataResidency: "any"}
}

// ProbeTimeout bounds how long a "Test connection" waits for its probe run.
const ProbeTimeout = 25 * time.Second

// testProvider sends a tiny probe call through the normal path — dispatch, queue,
// executor, router, provider — pinned to the provider, and answers what the provider said
// or its structured error (e.g. PROVIDER_REJECTED with provider_status 401 for a bad key).
func (s *Server) testProvider(c echo.Context) error {
	ctx := c.Request().Context()
	p := principal(c)
	name := c.Param("name")
	if _, err := providerstore.GetProvider(ctx, s.DB, p.OrgID, name); err != nil {
		return providerError(err)
	}
	if err := s.ensureProbeSkill(ctx, p.OrgID, p.Actor()); err != nil {
		return dispatchDBError(err)
	}
	payload, _ := json.Marshal(apitypes.ProviderTestPayload{Prompt: "Reply with the single word OK.", Provider: name})
	started := time.Now()
	res, err := s.Dispatch.Dispatch(ctx, p, dispatch.Request{JobType: apitypes.ProviderTestJobType, Payload: payload,
		Priority: "high", Metadata: &dispatch.Metadata{SourceService: "provider-test"}}, dispatch.Options{})
	if err != nil {
		return err
	}
	out := apitypes.ProviderTest{Provider: name, JobID: res.JobID}
	r, err := s.awaitRun(ctx, p.OrgID, res.JobID, ProbeTimeout)
	out.LatencyMS = time.Since(started).Milliseconds()
	if err != nil {
		out.Error = map[string]any{"code": apierr.CodeTimedOut, "message": "The probe did not finish in time: " + err.Error(),
			"troubleshooting": []string{"Check that an executor consumes the default queue (`yard queues`), then look at the job: `yard jobs get " + res.JobID + "`."}}
		return c.JSON(http.StatusOK, out)
	}
	out.CostUSD = r.Billing.CostUSD
	if r.Status == "completed" {
		var o struct {
			Content, Model string
		}
		_ = json.Unmarshal(r.Output, &o)
		out.OK, out.Answer, out.Model = true, o.Content, o.Model
		return c.JSON(http.StatusOK, out)
	}
	out.Error = map[string]any{}
	_ = json.Unmarshal(r.Error, &out.Error)
	if len(out.Error) == 0 {
		out.Error = map[string]any{"code": string(r.Status), "message": "The probe ended " + string(r.Status) + "."}
	}
	return c.JSON(http.StatusOK, out)
}

// ensureProbeSkill binds the probe skill in the organisation unless it is bound as it
// should be.
func (s *Server) ensureProbeSkill(ctx context.Context, orgID, by string) error {
	want := probeSkill()
	have, err := skill.Get(ctx, s.DB, orgID, want.JobType)
	if err == nil && have.Enabled && have.MaxTokens == want.MaxTokens && have.SystemPrompt == want.SystemPrompt &&
		have.ExecutionType == want.ExecutionType && have.ModelOverride == "" && have.MaxRetries != nil && *have.MaxRetries == 0 {
		return nil
	}
	if err != nil && !errors.Is(err, skill.ErrNotFound) {
		return err
	}
	if err := pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
		_, _, err := skill.Put(ctx, tx, orgID, want, by)
		return err
	}); err != nil {
		return err
	}
	s.Dispatch.Registry.ForgetSkill(orgID, want.JobType)
	return nil
}

// awaitRun polls the run until it ends or timeout passes.
func (s *Server) awaitRun(ctx context.Context, orgID, id string, timeout time.Duration) (runstore.Run, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := s.runs().GetRun(ctx, orgID, id)
		if err == nil && r.Status.Terminal() {
			return r, nil
		}
		if err != nil && !errors.Is(err, runstore.ErrNotFound) && ctx.Err() == nil {
			return r, err
		}
		select {
		case <-ctx.Done():
			return r, errors.New("no answer within " + timeout.String())
		case <-tick.C:
		}
	}
}
