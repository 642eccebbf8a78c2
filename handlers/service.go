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

// AuditKeys serves the audit signing keys' public halves with their validity (docs/AUDIT.md), the
// KEYFILE of `idemgate audit verify --key` and of docs/AUDIT.md. It needs no login: a public
// key reveals nothing, and an auditor from outside has no account. What makes a key file
// trustworthy is how the auditor got it (over TLS from the gateway, compared with the key ids
// an operator gave them), not who may read it.
func (s *Service) AuditKeys(c echo.Context) error {
	keys, err := s.Ledger.AuditKeys(c.Request().Context())
	if err != nil {
		return err
	}
	// A rotation must reach auditors within a minute; the list is small and cheap to read.
	c.Response().Header().Set("Cache-Control", "public, max-age=60")
	return c.JSON(http.StatusOK, keys)
}
