package handlers

import (
	"net/http"
	"net/url"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// LoginReasonInvited is the sign-in page's notice after a person chose their password.
const LoginReasonInvited = "invited"

// InviteForm shows the form where an invited person chooses their password; a link that does
// not work says so, and offers nothing.
func (h *Console) InviteForm(c echo.Context) error {
	u, err := h.Ledger.InviteFor(c.Request().Context(), c.Param("token"))
	p := views.InvitePage{Page: views.Page{Title: "Choose your password", CSRFToken: CSRFTokenFrom(c.Request().Context())},
		Action: "/invite/" + url.PathEscape(c.Param("token"))}
	switch {
	case models.ErrorCode(err) == models.CodeNotFound:
		p.Broken = sentence(err.Error())
		return renderPage(c, http.StatusNotFound, views.Invite(p))
	case err != nil:
		return err
	}
	p.Email = u.Email
	return renderPage(c, http.StatusOK, views.Invite(p))
}

// AcceptInvite sets the invited person's password and sends them to sign in with it.
func (h *Console) AcceptInvite(c echo.Context) error {
	token := c.Param("token")
	password := c.FormValue("password")
	p := views.InvitePage{Page: views.Page{Title: "Choose your password", CSRFToken: CSRFTokenFrom(c.Request().Context())},
		Action: "/invite/" + url.PathEscape(token)}
	if password != c.FormValue("password_again") {
		u, err := h.Ledger.InviteFor(c.Request().Context(), token)
		if err == nil {
			p.Email, p.Error = u.Email, "The two passwords differ. Type the same one twice."
			return renderPage(c, http.StatusBadRequest, views.Invite(p))
		}
	}
	u, err := h.Ledger.AcceptInvite(c.Request().Context(), token, password)
	switch models.ErrorCode(err) {
	case "":
	case models.CodeNotFound:
		p.Broken = sentence(err.Error())
		return renderPage(c, http.StatusNotFound, views.Invite(p))
	case models.CodeInvalid:
		if u, ferr := h.Ledger.InviteFor(c.Request().Context(), token); ferr == nil {
			p.Email = u.Email
		}
		p.Error = sentence(err.Error())
		return renderPage(c, http.StatusBadRequest, views.Invite(p))
	default:
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/login?reason="+LoginReasonInvited+"&email="+url.QueryEscape(u.Email))
}
