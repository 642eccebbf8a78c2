package web

import (
	"github.com/idemgate/idemgate/models"
	"github.com/labstack/echo/v4"
)

// ledgerDeadline marks every request's context: each ledger call it makes ends within the
// ledger's request deadline (serve --ledger-deadline), and past it the request answers 503
// ledger-unavailable (models/deadline.go).
func ledgerDeadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		c.SetRequest(r.WithContext(models.MarkRequest(r.Context())))
		return next(c)
	}
}
