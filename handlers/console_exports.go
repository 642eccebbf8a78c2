package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/idemgate/idemgate/handlers/export"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// Exports shows the form of an export: format, tenant, time range, state and tool.
func (h *Console) Exports(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	return h.exportsPage(c, v, http.StatusOK, "")
}

// DownloadExport streams the export the form asks for, as an attachment, limited to the
// viewer's tenants: a tenant outside them is 404, as on every page. The export is recorded in
// the audit log with the viewer as actor. A request that cannot be exported answers the form
// again with why.
func (h *Console) DownloadExport(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	q := requestValues(c)
	format, err := export.ParseFormat(q.Get("format"))
	if err != nil {
		return h.exportsPage(c, v, http.StatusBadRequest, "Choose CSV or NDJSON.")
	}
	f := export.Filter{Tenant: q.Get("tenant"), State: models.State(q.Get("state")), Tool: q.Get("tool")}
	if f.Tenant != "" && !v.Scope.Allows(f.Tenant) {
		return echo.ErrNotFound
	}
	if f.From, err = parseLocal(q.Get("from")); err != nil {
		return h.exportsPage(c, v, http.StatusBadRequest, "The “Created from” time is not a date and time.")
	}
	if f.To, err = parseLocal(q.Get("to")); err != nil {
		return h.exportsPage(c, v, http.StatusBadRequest, "The “Created before” time is not a date and time.")
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return h.exportsPage(c, v, http.StatusBadRequest, "The time range is empty: “Created from” must be before “Created before”.")
	}
	if f.State != "" && !f.State.Valid() {
		return h.exportsPage(c, v, http.StatusBadRequest, "Choose a state from the list.")
	}
	name := fmt.Sprintf("idemgate-export-%s-%s.%s", exportTenantsWord(f, v.Scope), h.now().UTC().Format("20060102T150405Z"), format)
	hdr := c.Response().Header()
	hdr.Set(echo.HeaderContentType, format.ContentType())
	hdr.Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`"`)
	hdr.Set("Cache-Control", "no-store")
	x := &export.Exporter{Ledger: h.Ledger, Catalog: h.Catalog}
	_, err = x.Write(c.Request().Context(), KeepWriting(c.Response(), exportWriteWait), export.Request{Format: format, Filter: f, Scope: v.Scope, Actor: v.Actor(), RequestID: RequestID(c)})
	if err != nil && !c.Response().Committed {
		// Nothing was sent: the filter was refused before the first byte.
		hdr.Del(echo.HeaderContentDisposition)
		return h.exportsPage(c, v, http.StatusBadRequest, "This export cannot be made: "+errDetail(err)+".")
	}
	if err != nil {
		// The body is cut short without its trailer, which marks the file incomplete; the
		// export's audit entry says it failed.
		logger(h.Log).Error("console export failed part-way", "err", err, "request_id", RequestID(c))
	}
	return nil
}

// exportTenantsWord names the tenants of an export in its file name, so that files of
// several tenants kept side by side are not confused: the tenant chosen, else the viewer's one
// tenant, else how many, or all-tenants. Tenant names are safe in a file name (models.nameRE).
func exportTenantsWord(f export.Filter, s models.Scope) string {
	switch ts := s.Tenants(); {
	case f.Tenant != "":
		return f.Tenant
	case s.Unlimited():
		return "all-tenants"
	case len(ts) == 1:
		return ts[0]
	default:
		return fmt.Sprintf("%d-tenants", len(ts))
	}
}

// exportWriteWait is how long a download may wait on a client that does not take the next
// part of the export.
const exportWriteWait = 30 * time.Second

// exportsPage renders the export form, keeping what was chosen.
func (h *Console) exportsPage(c echo.Context, v *Viewer, status int, problem string) error {
	tenants, err := h.Ledger.ScopedTenants(c.Request().Context(), v.Scope)
	if err != nil {
		return err
	}
	q := requestValues(c)
	p := views.ExportsPage{Page: h.page(c, v, "Exports", views.NavExports), Limited: !v.Scope.Unlimited(), Error: problem,
		Formats: []views.Option{{Value: string(export.CSV), Label: "CSV — one row per event"},
			{Value: string(export.NDJSON), Label: "NDJSON — one operation per line"}},
		Tenants: options(tenantNames(tenants), q.Get("tenant")), States: options(stateNames(), q.Get("state")),
		Tools: options(h.Catalog.Names(), q.Get("tool")), From: q.Get("from"), To: q.Get("to")}
	for i := range p.Formats {
		p.Formats[i].Selected = p.Formats[i].Value == q.Get("format")
	}
	// No key at all: exports go out unsigned (a key that cannot be opened refuses them instead).
	p.Unsigned = models.ErrorCode(h.Ledger.AuditSigningReady(c.Request().Context())) == models.CodeNotFound
	return renderPage(c, status, views.Exports(p))
}

// requestValues are the query's values, and on a POST the form's: the download is a POST (it
// records an export in the audit log, so another site must not be able to trigger it with a
// link), and the form it re-renders keeps what was chosen.
func requestValues(c echo.Context) url.Values {
	v, err := c.FormParams()
	if err != nil {
		return c.QueryParams()
	}
	return v
}
