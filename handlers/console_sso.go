package handlers

import (
	"errors"
	"net/http"

	"github.com/idemgate/idemgate/handlers/sso"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// SSOStart sends the browser to the identity provider, keeping the pending sign-in (state,
// nonce, PKCE verifier) in its session cookie.
func (h *Console) SSOStart(c echo.Context) error {
	if h.SSO == nil {
		return echo.ErrNotFound
	}
	pend, to, err := h.SSO.Begin(c.Request().Context(), SafeNext(c.QueryParam("next")))
	if err != nil {
		return h.ssoRefused(c, http.StatusServiceUnavailable, err)
	}
	h.Sessions.SetPendingSSO(c, pend)
	return c.Redirect(http.StatusFound, to)
}

// SSOCallback completes a sign-in the provider sends the browser back with. The pending
// sign-in is taken from the cookie whatever happens next, and the ledger spends its state, so
// a callback works once.
func (h *Console) SSOCallback(c echo.Context) error {
	if h.SSO == nil {
		return echo.ErrNotFound
	}
	pend, _ := h.Sessions.TakePendingSSO(c)
	ctx := c.Request().Context()
	login, err := h.SSO.Finish(ctx, pend, c.QueryParams())
	var refused *sso.Error
	if errors.As(err, &refused) && refused.Subject != "" {
		// The provider vouched for the person and no longer gives them access: their live
		// sessions here end now, not when they would have lapsed.
		if _, endErr := h.Ledger.EndFederatedSessions(ctx, refused.Issuer, refused.Subject); endErr != nil {
			return endErr
		}
	}
	if err != nil {
		return h.ssoRefused(c, http.StatusUnauthorized, err)
	}
	login.RequestID = c.Response().Header().Get(echo.HeaderXRequestID)
	u, err := h.Ledger.SignInFederated(ctx, login)
	switch models.ErrorCode(err) {
	case "":
	case models.CodeConflict, models.CodeInvalid, models.CodeNotFound:
		return h.ssoRefused(c, http.StatusUnauthorized, &sso.Error{Message: sentence(err.Error()), Err: err})
	default:
		return err
	}
	if err := h.Sessions.SignIn(c, u); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, SafeNext(pend.Next))
}

// ssoRefused shows the sign-in page with why single sign-on did not work, and audits it as a
// refused sign-in.
func (h *Console) ssoRefused(c echo.Context, status int, err error) error {
	var e *sso.Error
	if !errors.As(err, &e) {
		return err
	}
	h.Log.Warn("single sign-on refused", "err", err, "request_id", c.Response().Header().Get(echo.HeaderXRequestID))
	h.recordFailedLogin(c, "", "single sign-on: "+e.Message)
	return h.loginPage(c, status, views.LoginPage{Next: "/", Error: e.Message})
}
