package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// searchPageSize is how many operations a search page lists.
const searchPageSize = 50

// dateTimeLocal is the value format of <input type="datetime-local">, read as UTC.
const dateTimeLocal = "2006-01-02T15:04"

// Operations searches the viewer's operations by key, tool, state, tenant and creation time,
// newest first, a page at a time.
func (h *Console) Operations(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	q := c.QueryParams()
	p := views.SearchPage{Page: h.page(c, v, "Operations", views.NavOperations),
		Key: strings.TrimSpace(q.Get("key")), From: q.Get("from"), To: q.Get("to")}
	tenants, err := h.Ledger.ScopedTenants(ctx, v.Scope)
	if err != nil {
		return err
	}
	p.Tenants = options(tenantNames(tenants), q.Get("tenant"))
	p.Tools = options(h.Catalog.Names(), q.Get("tool"))
	p.States = options(stateNames(), q.Get("state"))
	p.Searched = p.Key != "" || q.Get("tool") != "" || q.Get("state") != "" || q.Get("tenant") != "" || p.From != "" || p.To != ""

	s, err := operationSearch(q)
	if err != nil {
		p.Error = err.Error()
		return renderPage(c, http.StatusBadRequest, views.Operations(p))
	}
	ops, more, err := h.Ledger.SearchOperations(ctx, v.Scope, s)
	if models.ErrorCode(err) == models.CodeInvalid {
		p.Error = "This search cannot be run: " + errDetail(err) + "."
		return renderPage(c, http.StatusBadRequest, views.Operations(p))
	}
	if err != nil {
		return err
	}
	p.Rows = operationRows(ops, h.now())
	if more && len(ops) > 0 {
		next := url.Values{}
		for k, vs := range q {
			next[k] = vs
		}
		next.Set("before", ops[len(ops)-1].ID)
		p.NextHref = "/operations?" + next.Encode()
	}
	return renderPage(c, http.StatusOK, views.Operations(p))
}

// operationSearch turns the operations page's query into the search it asks for. It is the one
// reading of that query: the page's list and anything that acts on "every operation matching
// this filter" call it, so both mean the same operations. Its error says, for the person who
// typed it, which field cannot be read.
func operationSearch(q url.Values) (models.Search, error) {
	s := models.Search{Key: strings.TrimSpace(q.Get("key")), Tool: q.Get("tool"), State: models.State(q.Get("state")),
		Tenant: q.Get("tenant"), Before: q.Get("before"), Limit: searchPageSize}
	var err error
	if s.From, err = parseLocal(q.Get("from")); err != nil {
		return s, errors.New("The “Created from” time is not a date and time.")
	}
	if s.To, err = parseLocal(q.Get("to")); err != nil {
		return s, errors.New("The “Created before” time is not a date and time.")
	}
	return s, nil
}

// parseLocal reads a datetime-local value as UTC; "" is the zero time (no bound).
func parseLocal(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(dateTimeLocal, s); err == nil {
		return t, nil
	}
	return time.Parse("2006-01-02T15:04:05", s) // browsers add seconds when step allows
}

// viewedOperation is the signed-in viewer and the operation the path's :id names, read within
// the viewer's scope: one outside it is CodeNotFound, as a missing one.
func (h *Console) viewedOperation(c echo.Context) (*Viewer, *models.OperationRecord, error) {
	v, err := currentViewer(c)
	if err != nil {
		return nil, nil, err
	}
	id, err := url.PathUnescape(c.Param("id"))
	if err != nil {
		return nil, nil, echo.ErrNotFound
	}
	rec, err := h.Ledger.OperationRecord(c.Request().Context(), v.Scope, id)
	if err != nil {
		return nil, nil, err
	}
	return v, rec, nil
}

// Operation shows one operation in full. An operation of a tenant outside the viewer's scope
// is 404, exactly as a missing one.
func (h *Console) Operation(c echo.Context) error {
	v, rec, err := h.viewedOperation(c)
	if err != nil {
		return err
	}
	var notice *views.NoticeText
	var refused *refusedAction
	if f, ok := h.takeFlash(c); ok {
		notice = &views.NoticeText{Kind: views.NoticeKind(f.Kind), Message: f.Message, NextHref: f.NextHref, NextText: f.NextText}
		if f.Refused != "" {
			refused = &refusedAction{Name: f.Refused, Input: f.Input, Message: f.Why}
		}
	}
	return h.renderOperation(c, v, rec, http.StatusOK, notice, refused)
}

// renderOperation writes the operation page for v with its review actions, notice on top of
// them, and the form of a refused action open again.
func (h *Console) renderOperation(c echo.Context, v *Viewer, rec *models.OperationRecord, status int, notice *views.NoticeText, refused *refusedAction) error {
	now := h.now()
	p := operationPage(h.Catalog, rec, now)
	p.Page = h.page(c, v, rec.Op.Key, views.NavOperations)
	p.Page.Scripts = []string{"console.js"}
	p.Notice = notice
	// A version that cannot be read leaves the page as it is, without live updates.
	if ver, err := h.Ledger.OperationVersion(c.Request().Context(), v.Scope, rec.Op.ID); err == nil {
		p.LiveVersion, p.LiveSrc = ver, OperationHref(rec.Op.ID)+"/version"
	}
	panel := h.actionPanel(v, rec, now, refused)
	p.Actions = views.ActionsPanel(panel)
	return renderPage(c, status, views.Operation(p))
}

// Workflow lists every operation of one workflow run within the viewer's scope, in creation
// order. A run with none visible is 404.
func (h *Console) Workflow(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	runID, err := url.PathUnescape(c.Param("run"))
	if err != nil {
		return echo.ErrNotFound
	}
	ops, err := h.Ledger.WorkflowOperations(c.Request().Context(), v.Scope, runID)
	if err != nil {
		return err
	}
	p := views.WorkflowPage{Page: h.page(c, v, "Workflow "+runID, views.NavOperations), RunID: runID, Rows: operationRows(ops, h.now())}
	return renderPage(c, http.StatusOK, views.Workflow(p))
}

// OperationVersion answers the operation page's question "has it changed?" with the
// operation's current version (models.Ledger.OperationVersion), as plain text.
func (h *Console) OperationVersion(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	id, err := url.PathUnescape(c.Param("id"))
	if err != nil {
		return echo.ErrNotFound
	}
	ver, err := h.Ledger.OperationVersion(c.Request().Context(), v.Scope, id)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.String(http.StatusOK, ver)
}
