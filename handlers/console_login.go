package handlers

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/idemgate/idemgate/handlers/sso"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// Why a person lands on the sign-in page, as the "reason" query parameter says.
const (
	LoginReasonSignedOut = "signed-out"
	LoginReasonIdle      = "idle"
	LoginReasonExpired   = "expired"
)

var loginNotices = map[string]string{
	LoginReasonSignedOut: "You are signed out.",
	LoginReasonIdle:      "You were signed out after a while without activity. Sign in again to continue.",
	LoginReasonExpired:   "Your session reached its maximum length. Sign in again to continue.",
	LoginReasonInvited:   "Your password is set. Sign in with it.",
}

// LoginForm shows the sign-in form.
func (h *Console) LoginForm(c echo.Context) error {
	p := views.LoginPage{Next: SafeNext(c.QueryParam("next")), Notice: loginNotices[c.QueryParam("reason")]}
	if c.QueryParam("reason") == LoginReasonInvited {
		p.Email = c.QueryParam("email")
	}
	return h.loginPage(c, http.StatusOK, p)
}

// Login checks the email and password and starts a new session. Wrong credentials answer
// 401 and too many failures 429, each with the form again and a plain explanation.
func (h *Console) Login(c echo.Context) error {
	form := views.LoginPage{Email: strings.TrimSpace(c.FormValue("email")), Next: SafeNext(c.FormValue("next"))}
	u, err := h.Ledger.Login(c.Request().Context(), models.LoginAttempt{
		Email: form.Email, Password: c.FormValue("password"), ClientIP: c.RealIP(), Limits: h.Limits,
	})
	switch models.ErrorCode(err) {
	case "":
	case models.CodeNotFound:
		h.recordFailedLogin(c, form.Email, "wrong email or password")
		form.Error = "Wrong email or password."
		return h.loginPage(c, http.StatusUnauthorized, form)
	case models.CodeThrottled:
		h.recordFailedLogin(c, form.Email, "too many failed sign-ins")
		minutes := int(h.Limits.Window.Minutes())
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(h.Limits.Window.Seconds())))
		form.Error = "Too many failed sign-ins. Wait " + strconv.Itoa(minutes) + " minutes, then try again. If you forgot your password, ask an admin."
		return h.loginPage(c, http.StatusTooManyRequests, form)
	default:
		return err
	}
	if err := h.Sessions.SignIn(c, u); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, form.Next)
}

// recordFailedLogin writes the audit entry of a refused sign-in: the address it came from and
// the email tried, never the password.
func (h *Console) recordFailedLogin(c echo.Context, email, refusal string) {
	h.Refusals.Record(c, models.AuditInput{Actor: models.AnonymousActor(c.RealIP()), Action: models.AuditLoginFailed,
		Detail: map[string]any{"email": strings.ToLower(email), "ip": c.RealIP(), "refusal": refusal}})
}

// Logout ends the session and returns to the sign-in page.
func (h *Console) Logout(c echo.Context) error {
	if err := h.Sessions.SignOut(c); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/login?reason="+LoginReasonSignedOut)
}

func (h *Console) loginPage(c echo.Context, status int, p views.LoginPage) error {
	p.Page = views.Page{Title: "Sign in", CSRFToken: CSRFTokenFrom(c.Request().Context())}
	if h.SSO != nil {
		p.SSOName, p.SSOStart = h.SSO.Name(), sso.StartPath+"?next="+url.QueryEscape(p.Next)
	}
	return renderPage(c, status, views.Login(p))
}

// SafeNext returns next when it is a path on this site, else "/". Only same-origin paths
// qualify: no scheme, no host, no "//" or "/\" (which browsers read as another host), no
// control characters, and not the sign-in or sign-out pages themselves.
func SafeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t\x00") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	if u.Path == "/login" || u.Path == "/logout" {
		return "/"
	}
	return next
}
