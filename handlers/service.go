package handlers

import (
	"net/http"

	"github.com/idemgate/idemgate/models"
	"github.com/labstack/echo/v4"
)

// Service serves the endpoints operators and orchestrators probe.
type Service struct {
	Ledger *models.Ledger
}

// Healthz answers 200 while the process lives.
func (s *Service) Healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// Readyz answers 200 when the ledger answers and its schema is current, else 503: a gateway
// that cannot record must not take traffic.
func (s *Service) Readyz(c echo.Context) error {
	if err := s.Ledger.Ready(c.Request().Context()); err != nil {
		c.Response().Header().Set("Retry-After", "2")
		// The cause is logged by nobody here on purpose: probes run every few seconds. The
		// answer stays generic so it leaks nothing about the database.
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable",
			"reason": "the ledger is unreachable or its schema is not current"})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}
