package handlers

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// searchPageSize is how many operations a search page lists.
const searchPageSize = 50

// dateTimeLocal is the value format of <input type="datetime-local">, read as UTC.
const dateTimeLocal = "2006-01-02T15:04"

// Operations searches the viewer's operations by id, key, downstream reference, a param's
// value, error class, workflow run, tool, state, tenant and creation time, newest first, a page
// at a time. An operation id that finds its operation opens it.
func (h *Console) Operations(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	q := c.QueryParams()
	p, err := h.searchPage(c, v, q)
	if err != nil {
		return err
	}
	s, err := operationSearch(q)
	if err == nil {
		err = h.refuseSensitive(&s)
	}
	if err != nil {
		p.Error, p.Views.CanSave = err.Error(), false // a refused filter is not kept either
		return renderPage(c, http.StatusBadRequest, views.Operations(p))
	}
	ops, more, err := h.Ledger.SearchOperations(c.Request().Context(), v.Scope, s)
	if models.ErrorCode(err) == models.CodeInvalid {
		p.Error = "This search cannot be run: " + errDetail(err) + "."
		return renderPage(c, http.StatusBadRequest, views.Operations(p))
	}
	if err != nil {
		return err
	}
	if s.ID != "" && len(ops) == 1 && s.Before == "" {
		return c.Redirect(http.StatusSeeOther, OperationHref(ops[0].ID))
	}
	p.Rows = operationRows(ops, h.now())
	for i, op := range ops {
		p.Rows[i].Amount = stakesFor(h.Catalog, op.Tool, op.Params, op.Key, op.Tenant).Amount
	}
	if p.Bulk = bulkBar(v, "operations", searchQuery(q), len(p.Rows), more || s.Before != ""); p.Bulk != nil {
		for i := range p.Rows {
			p.Rows[i].Pick = true
		}
	}
	if more && len(ops) > 0 {
		next := searchQuery(q)
		next.Set("before", ops[len(ops)-1].ID)
		p.NextHref = "/operations?" + next.Encode()
	}
	return renderPage(c, http.StatusOK, views.Operations(p))
}

// searchPage is the operations page for query q before it is run: the filters as typed, the
// choices of each select, and the viewer's saved views.
func (h *Console) searchPage(c echo.Context, v *Viewer, q url.Values) (views.SearchPage, error) {
	p := views.SearchPage{Page: h.page(c, v, "Operations", views.NavOperations),
		Key: strings.TrimSpace(q.Get("key")), Reference: strings.TrimSpace(q.Get("ref")),
		Param: strings.TrimSpace(q.Get("param")), Workflow: strings.TrimSpace(q.Get("workflow")),
		From: q.Get("from"), To: q.Get("to")}
	if id := strings.TrimSpace(q.Get("id")); p.Key == "" {
		p.Key = id // the key box takes an id too
	}
	tenants, err := h.Ledger.ScopedTenants(c.Request().Context(), v.Scope)
	if err != nil {
		return p, err
	}
	p.Tenants = options(tenantNames(tenants), q.Get("tenant"))
	p.Tools = options(h.Catalog.Names(), q.Get("tool"))
	p.States = options(stateNames(), q.Get("state"))
	p.ErrorClasses = options(models.ErrorClasses(), q.Get("error_class"))
	p.Searched = len(searchQuery(q)) > 0
	p.MoreOpen = len(pick(q, []string{"ref", "error_class", "workflow", "tool", "state", "tenant", "from", "to"})) > 0
	p.Views, err = h.savedViews(c, v, models.ViewPageOperations, q)
	return p, err
}

// searchFields are the operations page's filters, by their name in the query.
var searchFields = []string{"key", "id", "ref", "param", "error_class", "workflow", "tool", "state", "tenant", "from", "to"}

// searchQuery is q's filters alone, without empty values, the cursor or anything else: what a
// saved view keeps, and what makes a search a search.
func searchQuery(q url.Values) url.Values { return pick(q, searchFields) }

// pick returns the non-empty values of q under names, trimmed.
func pick(q url.Values, names []string) url.Values {
	out := url.Values{}
	for _, n := range names {
		if v := strings.TrimSpace(q.Get(n)); v != "" {
			out.Set(n, v)
		}
	}
	return out
}

// searchError is a filter that cannot be read, said for the person who typed it.
type searchError string

func (e searchError) Error() string { return string(e) }

// operationSearch turns the operations page's query into the search it asks for. It is the one
// reading of that query: the page's list and anything that acts on "every operation matching
// this filter" call it, so both mean the same operations. Its error says, for the person who
// typed it, which field cannot be read.
//
// A param filter comes back not Checked: the caller refuses sensitive params with the
// catalogue (Console.refuseSensitive) before searching, and the ledger refuses one unchecked.
func operationSearch(q url.Values) (models.Search, error) {
	s := models.Search{Key: strings.TrimSpace(q.Get("key")), ID: strings.TrimSpace(q.Get("id")),
		Reference: strings.TrimSpace(q.Get("ref")), ErrorClass: q.Get("error_class"),
		WorkflowRunID: strings.TrimSpace(q.Get("workflow")), Tool: q.Get("tool"), State: models.State(q.Get("state")),
		Tenant: q.Get("tenant"), Before: q.Get("before"), Limit: searchPageSize}
	if s.ID == "" && looksLikeOperationID(s.Key) {
		s.ID, s.Key = s.Key, "" // an id pasted in the key box
	}
	var err error
	if s.Param, err = parseParam(q.Get("param")); err != nil {
		return s, err
	}
	if s.From, err = parseLocal(q.Get("from")); err != nil {
		return s, searchError("The “Created from” time is not a date and time.")
	}
	if s.To, err = parseLocal(q.Get("to")); err != nil {
		return s, searchError("The “Created before” time is not a date and time.")
	}
	return s, nil
}

// looksLikeOperationID reports whether s has the shape of an operation id: "op_" and a ULID.
func looksLikeOperationID(s string) bool {
	if len(s) != 3+26 || !strings.HasPrefix(s, "op_") {
		return false
	}
	for _, c := range s[3:] {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// parseParam reads "name = value"; "" is no filter. A value in double quotes means the text
// inside them, as the same value without them does (order_id = "1042" or 1042).
func parseParam(text string) (models.ParamMatch, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return models.ParamMatch{}, nil
	}
	name, value, ok := strings.Cut(text, "=")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" {
		return models.ParamMatch{}, searchError("Write the param as name = value, for example order_id = 1042.")
	}
	if !models.ValidParamName(name) {
		return models.ParamMatch{}, searchError("A param's name is letters, digits, “_” and “-”, for example order_id.")
	}
	if len(value) >= 2 && strings.HasPrefix(value, `"`) && strings.HasSuffix(value, `"`) {
		value = value[1 : len(value)-1]
	}
	return models.ParamMatch{Name: name, Value: value}, nil
}

// refuseSensitive refuses a search by a sensitive param: one the chosen tool masks, or, with no
// tool chosen, one any tool masks. Otherwise it names the tools whose params the search may
// read: the catalogue's (the chosen one's). A tool no longer in the catalogue is never searched
// by param: which of its params were sensitive is no longer known. A search never unseals
// params: it reads what is stored, which with data keys is the masked params.
func (h *Console) refuseSensitive(s *models.Search) error {
	if !s.Param.Set() {
		return nil
	}
	tools := h.Catalog.Tools()
	if s.Tool != "" {
		t, ok := h.Catalog.Get(s.Tool)
		if !ok {
			return searchError(s.Tool + " is no longer in the catalogue, so which of its params are sensitive is unknown: its operations are not searched by param.")
		}
		tools = []*catalog.Tool{t}
	}
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		if t.MasksParam(s.Param.Name) {
			return searchError("“" + s.Param.Name + "” is a sensitive param of " + t.Name + ": operations are never searched by it.")
		}
		names = append(names, t.Name)
	}
	s.Param.Tools = names
	return nil
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
	repeats, err := h.Ledger.RepeatsOf(c.Request().Context(), v.Scope, rec.Op.ID)
	if err != nil {
		return err
	}
	p.Timeline = withRequests(p.Timeline, repeats, rec.Audit)
	alikes, more, err := h.lookAlikesOf(c.Request().Context(), v.Scope, rec.Op)
	if err != nil {
		return err
	}
	p.LookAlikes = lookAlikesBox(rec.Op, alikes, more, lookAlikeRule(h.Catalog, rec.Op.Tool), now)
	p.Page = h.page(c, v, rec.Op.Key, views.NavOperations)
	p.Page.Scripts = []string{"console.js"}
	p.Notice = notice
	// The version of what the page shows, from the same record: the live check compares it.
	p.LiveVersion, p.LiveSrc = rec.Version(), OperationHref(rec.Op.ID)+"/version"
	p.Claim = h.claimBox(v, rec, now)
	panel := h.actionPanel(v, rec, now, refused, p.Situation.Search)
	if panel.Search != nil {
		p.Situation.Search = nil // the decision's step 1: not repeated below it
	}
	for i := range panel.Forms {
		if panel.Forms[i].Name == models.ActionApprove && len(alikes) > 0 {
			panel.Forms[i].Confirm = lookAlikeConfirm(len(alikes))
		}
	}
	if panel.Approvals != nil {
		p.Timeline = quotedAbove(p.Timeline)
	}
	p.Actions = views.ActionsPanel(panel)
	p.DecisionFirst = len(panel.Forms) > 0 && (rec.Op.State == models.StateUnknown || rec.Op.State == models.StateAwaitingApproval)
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
