package api

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/dispatch"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// registerOperator adds the platform operator's routes: organisations, their limits,
// suspension and first admin key. Only an operator key (no organisation, role operator)
// passes; an organisation's admin does not.
func (s *Server) registerOperator(v1 *echo.Group) {
	op := v1.Group("/operator", require(auth.RoleOperator))
	op.GET("/orgs", s.listOrgs)
	op.POST("/orgs", s.createOrg)
	op.GET("/orgs/:org", s.showOrg)
	op.PATCH("/orgs/:org", s.updateOrg)
	op.POST("/orgs/:org/suspend", s.suspendOrg)
	op.POST("/orgs/:org/resume", s.resumeOrg)
	op.POST("/orgs/:org/admin-keys", s.createAdminKey)
	// The operator keys themselves: the principal has no organisation, so the admin key
	// handlers list and revoke the keys without one.
	op.GET("/keys", s.listKeys)
	op.POST("/keys", s.createOperatorKey)
	op.DELETE("/keys/:id", s.revokeKey)
}

// createOperatorKey makes another operator key, e.g. before revoking a leaked one.
func (s *Server) createOperatorKey(c echo.Context) error {
	var req apitypes.OperatorKeyCreate
	if err := dispatch.Decode(c.Request().Body, s.Validator, &req); err != nil {
		return err
	}
	key, info, err := auth.CreateOperator(c.Request().Context(), s.DB, req.Name, principal(c).Actor())
	if err != nil {
		return dispatchDBError(err)
	}
	return c.JSON(http.StatusCreated, apitypes.KeyCreated{Key: key, Info: info,
		Note: "Store the key now: it is shown only once."})
}

func orgNotFound(ref string) *apierr.Error {
	return apierr.New(http.StatusNotFound, apierr.CodeOrgNotFound, "No organisation with this id or slug exists.",
		"List the organisations with GET /api/v1/operator/orgs (`yard orgs list`).").With("org", ref)
}

// findOrg resolves the :org parameter, an id or a slug.
func (s *Server) findOrg(c echo.Context) (store.Org, error) {
	ref := c.Param("org")
	o, err := store.FindOrg(c.Request().Context(), s.DB, ref)
	if errors.Is(err, store.ErrNotFound) {
		return o, orgNotFound(ref)
	}
	if err != nil {
		return o, dispatchDBError(err)
	}
	return o, nil
}

func (s *Server) listOrgs(c echo.Context) error {
	orgs, err := store.ListOrgs(c.Request().Context(), s.DB)
	if err != nil {
		return dispatchDBError(err)
	}
	return c.JSON(http.StatusOK, map[string]any{"items": orgs})
}

func (s *Server) createOrg(c echo.Context) error {
	var req apitypes.OrgCreate
	if err := dispatch.Decode(c.Request().Body, s.Validator, &req); err != nil {
		return err
	}
	o, err := store.CreateOrg(c.Request().Context(), s.DB, req, principal(c).Actor())
	if errors.Is(err, store.ErrOrgExists) {
		return apierr.New(http.StatusConflict, apierr.CodeOrgExists, "An organisation with this slug exists already.",
			"Choose another slug, or change the existing organisation with PATCH /api/v1/operator/orgs/{slug}.").
			With("slug", req.Slug, "field", "slug")
	}
	if err != nil {
		return dispatchDBError(err)
	}
	return c.JSON(http.StatusCreated, o)
}

func (s *Server) showOrg(c echo.Context) error {
	o, err := s.findOrg(c)
	if err != nil {
		return err
	}
	audit, err := store.OrgAudit(c.Request().Context(), s.DB, o.ID, 100)
	if err != nil {
		return dispatchDBError(err)
	}
	return c.JSON(http.StatusOK, apitypes.OrgDetail{Org: o, Audit: audit})
}

func (s *Server) updateOrg(c echo.Context) error {
	var req apitypes.OperatorOrgPatch
	if err := dispatch.Decode(c.Request().Body, s.Validator, &req); err != nil {
		return err
	}
	o, err := s.findOrg(c)
	if err != nil {
		return err
	}
	o, err = store.OperatorUpdateOrg(c.Request().Context(), s.DB, o.ID, req, principal(c).Actor())
	if errors.Is(err, store.ErrNotFound) {
		return orgNotFound(c.Param("org"))
	}
	if err != nil {
		return dispatchDBError(err)
	}
	s.Dispatch.Registry.ForgetOrg(o.ID)
	return c.JSON(http.StatusOK, o)
}

// suspendOrg suspends an organisation — from the commit on, every dispatch of it answers
// 403 ORG_SUSPENDED on every replica — and then stops its unfinished work (StopOrg). When
// the sweep fails half-way the organisation stays suspended and the answer is the error;
// suspending again repeats the sweep.
func (s *Server) suspendOrg(c echo.Context) error {
	var req apitypes.OrgSuspend
	if err := dispatch.Decode(c.Request().Body, s.Validator, &req); err != nil {
		return err
	}
	o, err := s.findOrg(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	op := principal(c)
	o, err = store.SetSuspended(ctx, s.DB, o.ID, true, req.Reason, op.Actor())
	if err != nil {
		return dispatchDBError(err)
	}
	s.Dispatch.Registry.ForgetOrg(o.ID)
	stopped, err := s.Dispatch.StopOrg(ctx, op, o.ID, s.Inspector)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apitypes.OrgSuspended{Org: o, Cancelled: stopped.Cancelled,
		CancelRequested: stopped.CancelRequested})
}

func (s *Server) resumeOrg(c echo.Context) error {
	o, err := s.findOrg(c)
	if err != nil {
		return err
	}
	o, err = store.SetSuspended(c.Request().Context(), s.DB, o.ID, false, "", principal(c).Actor())
	if err != nil {
		return dispatchDBError(err)
	}
	s.Dispatch.Registry.ForgetOrg(o.ID)
	return c.JSON(http.StatusOK, o)
}

// createAdminKey issues an admin key of the organisation — its first, or one more when its
// admins have lost theirs — shown this once. The body is optional: {"name"}.
func (s *Server) createAdminKey(c echo.Context) error {
	body, err := io.ReadAll(c.Request().Body)
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return dispatch.PayloadTooLarge(mbe.Limit)
	}
	if err != nil {
		return apierr.New(http.StatusBadRequest, apierr.CodeBadRequest, "The request body could not be read.",
			"Send the request again.")
	}
	var req apitypes.AdminKeyCreate
	if len(bytes.TrimSpace(body)) > 0 {
		if err := dispatch.Decode(bytes.NewReader(body), s.Validator, &req); err != nil {
			return err
		}
	}
	o, err := s.findOrg(c)
	if err != nil {
		return err
	}
	name := req.Name
	if name == "" {
		name = "admin"
	}
	ctx := c.Request().Context()
	by := principal(c).Actor()
	var key string
	var info auth.KeyInfo
	err = pgx.BeginFunc(ctx, s.DB, func(db pgx.Tx) error {
		var err error
		if key, info, err = auth.Create(ctx, db, o.ID, name, []auth.Role{auth.RoleAdmin}, by); err != nil {
			return err
		}
		return store.Audit(ctx, db, o.ID, "admin_key", by, "", map[string]any{"key_id": info.ID, "name": info.Name, "prefix": info.Prefix})
	})
	if err != nil {
		return dispatchDBError(err)
	}
	return c.JSON(http.StatusCreated, apitypes.KeyCreated{Key: key, Info: info,
		Note: "Store the key now: it is shown only once. Give it to the organisation's admin."})
}
