package web

import (
	"net/http"
	"strings"

	"github.com/idemgate/idemgate/handlers"
	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/labstack/echo/v4"
)

// PostgreSQL cannot store or compare text holding the NUL character: a statement given one
// fails, which would answer 503 ledger-unavailable, log an error and could set off the
// ledger alert on demand. SQLite takes it. So a NUL in a request's path, query or form is
// refused with 400 before any handler runs, on both engines alike (the JSON bodies of the
// API are checked where they are read: handlers.refuseNULCall).

// refuseNUL refuses a request whose path or query holds NUL (%00).
func refuseNUL(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if strings.ContainsRune(r.URL.Path, 0) || strings.Contains(r.URL.RawPath, "%00") || strings.Contains(r.URL.RawQuery, "%00") {
			return nulRefusal()
		}
		return next(c)
	}
}

// refuseNULForm refuses a form post one of whose values holds NUL. It runs after the body
// limit, so reading the form is bounded.
func refuseNULForm(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().Method != http.MethodPost {
			return next(c)
		}
		form, err := c.FormParams()
		if err != nil {
			return next(c) // the handler reports a form it cannot read
		}
		for name, values := range form {
			if strings.ContainsRune(name, 0) {
				return nulRefusal()
			}
			for _, v := range values {
				if strings.ContainsRune(v, 0) {
					return nulRefusal()
				}
			}
		}
		return next(c)
	}
}

func nulRefusal() error {
	return &handlers.Problem{Slug: problems.InvalidQuery,
		Detail: "the request contains the NUL character (%00), which the ledger cannot store or search for; nothing was done"}
}
