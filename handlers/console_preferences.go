package handlers

import (
	"net/http"
	"time"

	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// preferencesAge is how long display preferences are kept: a year, renewed at each change.
const preferencesAge = 365 * 24 * time.Hour

// SavePreferences keeps the theme and time zone a person chose in a cookie (they are not
// secrets and need no account) and returns to the page they were on.
func (h *Console) SavePreferences(c echo.Context) error {
	p := views.ParsePreferences("theme=" + c.FormValue("theme") + "&times=" + c.FormValue("times"))
	c.SetCookie(&http.Cookie{Name: views.PreferencesCookie, Value: p.Cookie(), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: c.Scheme() == "https", MaxAge: int(preferencesAge.Seconds())})
	return c.Redirect(http.StatusSeeOther, SafeNext(c.FormValue("next")))
}

// Preferences puts the person's display preferences on the request's context, for the
// layout of whatever page answers, error pages included.
func Preferences(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		var p views.Preferences
		if ck, err := c.Cookie(views.PreferencesCookie); err == nil {
			p = views.ParsePreferences(ck.Value)
		}
		p.Path = SafeNext(c.Request().URL.RequestURI())
		c.SetRequest(c.Request().WithContext(views.WithPreferences(c.Request().Context(), p)))
		return next(c)
	}
}
