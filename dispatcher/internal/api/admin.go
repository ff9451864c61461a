package api

import (
	"net/http"
	"regexp"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/dispatch"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

func (s *Server) getOrg(c echo.Context) error {
	o, err := store.GetOrg(c.Request().Context(), s.DB, principal(c).OrgID)
	if err != nil {
		return dispatchDBError(err)
	}
	return c.JSON(http.StatusOK, o)
}

func (s *Server) patchOrg(c echo.Context) error {
	var p store.OrgPatch
	if err := dispatch.Decode(c.Request().Body, s.Validator, &p); err != nil {
		return err
	}
	o, err := store.UpdateOrg(c.Request().Context(), s.DB, principal(c).OrgID, p)
	if err != nil {
		return dispatchDBError(err)
	}
	s.Dispatch.Registry.ForgetOrg(o.ID)
	return c.JSON(http.StatusOK, o)
}

func (s *Server) createKey(c echo.Context) error {
	var req apitypes.KeyCreate
	if err := dispatch.Decode(c.Request().Body, s.Validator, &req); err != nil {
		return err
	}
	roles := make([]auth.Role, len(req.Roles))
	for i, r := range req.Roles {
		roles[i] = auth.Role(r)
	}
	p := principal(c)
	key, info, err := auth.Create(c.Request().Context(), s.DB, p.OrgID, req.Name, roles, p.Actor())
	if err != nil {
		return dispatchDBError(err)
	}
	return c.JSON(http.StatusCreated, apitypes.KeyCreated{Key: key, Info: info,
		Note: "Store the key now: it is shown only once."})
}

func (s *Server) listKeys(c echo.Context) error {
	keys, err := auth.List(c.Request().Context(), s.DB, principal(c).OrgID)
	if err != nil {
		return dispatchDBError(err)
	}
	return c.JSON(http.StatusOK, map[string]any{"items": keys})
}

func (s *Server) revokeKey(c echo.Context) error {
	id := c.Param("id")
	if uuid.Validate(id) != nil {
		return keyNotFound(id)
	}
	ok, err := auth.Revoke(c.Request().Context(), s.DB, principal(c).OrgID, id)
	if err != nil {
		return dispatchDBError(err)
	}
	if !ok {
		return keyNotFound(id)
	}
	s.Dispatch.Registry.ForgetKeys()
	return c.NoContent(http.StatusNoContent)
}

func keyNotFound(id string) *apierr.Error {
	return apierr.New(http.StatusNotFound, apierr.CodeKeyNotFound, "No API key with this id exists among yours.",
		"List the keys with GET /api/v1/admin/keys (an operator: GET /api/v1/operator/keys).").With("key_id", id)
}

func (s *Server) listQueues(c echo.Context) error {
	qs, err := store.ListQueues(c.Request().Context(), s.DB)
	if err != nil {
		return dispatchDBError(err)
	}
	for i := range qs {
		if s.Dispatch.Queues != nil {
			n := s.Dispatch.Queues.Consumers(qs[i].Name)
			qs[i].Consumers = &n
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"items": qs})
}

type putQueueRequest struct {
	Class          string `json:"class" validate:"required,oneof=cpu gpu"`
	Concurrency    int    `json:"concurrency" validate:"required,min=1,max=10000"`
	TimeoutSeconds int    `json:"timeoutSeconds" validate:"required,min=1,max=604800"`
	Description    string `json:"description" validate:"max=500"`
}

func (s *Server) putQueue(c echo.Context) error {
	name := c.Param("name")
	if !queueNameRE.MatchString(name) {
		return dispatch.ValidationFailed([]dispatch.FieldError{{Field: "name", Rule: "queuename",
			Message: "must match ^[a-z0-9][a-z0-9_-]{0,62}$"}})
	}
	var req putQueueRequest
	if err := dispatch.Decode(c.Request().Body, s.Validator, &req); err != nil {
		return err
	}
	q, created, err := store.PutQueue(c.Request().Context(), s.DB, store.Queue{Name: name, Class: req.Class,
		Concurrency: req.Concurrency, TimeoutSeconds: req.TimeoutSeconds, Description: req.Description})
	if err != nil {
		return dispatchDBError(err)
	}
	s.Dispatch.Registry.ForgetQueue(name)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, q)
}

var queueNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
