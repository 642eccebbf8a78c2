package web

import (
	"net/http"

	"github.com/idemgate/idemgate/handlers"
	"github.com/idemgate/idemgate/problems"
	"github.com/idemgate/idemgate/static"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// routes lists every route of the gateway, in one place.
func routes(e *echo.Echo, cfg Config) {
	api := &handlers.API{Ledger: cfg.Ledger, Catalog: cfg.Catalog, Executor: cfg.Executor, Limiter: cfg.Limiter}
	svc := &handlers.Service{Ledger: cfg.Ledger}

	e.GET("/healthz", svc.Healthz)
	e.GET("/readyz", svc.Readyz)
	e.GET("/problems", func(c echo.Context) error {
		return render(c, http.StatusOK, views.ProblemIndex(problems.All()))
	})
	e.GET("/problems/:slug", func(c echo.Context) error {
		t, ok := problems.Lookup(c.Param("slug"))
		if !ok {
			return echo.ErrNotFound
		}
		return render(c, http.StatusOK, views.ProblemPage(t))
	})
	e.GET("/static/*", echo.WrapHandler(static.Handler()))

	v1 := e.Group("/v1", authenticate(cfg.Ledger))
	v1.POST("/operations", api.CreateOperation)
	v1.GET("/operations", api.ListOperations)
	v1.GET("/operations/:id", api.GetOperation)
	v1.GET("/operations/:id/events", api.Events)
	v1.POST("/operations/:id/cancel", api.Cancel)
	v1.POST("/operations/:id/compensate", api.Compensate)
	v1.GET("/tools", api.Tools)

	if cfg.Sandbox != nil {
		sb := echo.WrapHandler(http.StripPrefix("/sandbox", cfg.Sandbox))
		e.Any("/sandbox", sb)
		e.Any("/sandbox/*", sb)
	}
}
