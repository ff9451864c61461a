package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/dispatch"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/session"
)

type sessionRequest struct {
	APIKey string `json:"api_key" validate:"required,max=200"`
}

// createSession exchanges an API key for a session cookie.
func (s *Server) createSession(c echo.Context) error {
	var req sessionRequest
	if err := dispatch.Decode(c.Request().Body, s.Validator, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	p, err := auth.Authenticate(ctx, s.DB, strings.TrimSpace(req.APIKey))
	if errors.Is(err, auth.ErrUnknownKey) {
		return unauthenticated("The API key is unknown or revoked.")
	}
	if err != nil {
		return dispatchDBError(err)
	}
	token, err := s.Sessions.Create(ctx, p.KeyID, p.OrgID)
	if err != nil {
		return queueError(err)
	}
	c.SetCookie(&http.Cookie{
		Name: session.CookieName, Value: token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.Scheme() == "https", MaxAge: int(session.TTL.Seconds()),
	})
	return c.JSON(http.StatusOK, principalView(p))
}

func (s *Server) getSession(c echo.Context) error {
	return c.JSON(http.StatusOK, principalView(principal(c)))
}

func (s *Server) deleteSession(c echo.Context) error {
	if cookie, err := c.Cookie(session.CookieName); err == nil {
		_ = s.Sessions.Delete(c.Request().Context(), cookie.Value)
	}
	c.SetCookie(&http.Cookie{Name: session.CookieName, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) authenticateSession(c echo.Context, token string, next echo.HandlerFunc) error {
	ctx := c.Request().Context()
	sess, err := s.Sessions.Get(ctx, token)
	if errors.Is(err, session.ErrNoSession) {
		return unauthenticated("The session has expired; sign in again.")
	}
	if err != nil {
		return queueError(err)
	}
	p, err := auth.ByID(ctx, s.DB, sess.KeyID)
	if errors.Is(err, auth.ErrUnknownKey) {
		_ = s.Sessions.Delete(ctx, token)
		return unauthenticated("The session's API key was revoked; sign in again.")
	}
	if err != nil {
		return dispatchDBError(err)
	}
	c.Set("principal", p)
	return next(c)
}

func principalView(p auth.Principal) map[string]any {
	return map[string]any{"orgId": p.OrgID, "keyId": p.KeyID, "keyName": p.KeyName, "roles": p.Roles}
}
