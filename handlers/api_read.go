package handlers

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/labstack/echo/v4"
)

// visible returns the caller's operation id: another tenant's, or one of a tool the key may
// not use, is not found, exactly as a missing one, so nothing leaks.
func (a *API) visible(c echo.Context, id string) (*models.Operation, error) {
	caller := CallerFrom(c.Request().Context())
	op, err := a.Ledger.Get(c.Request().Context(), caller.Tenant, id)
	if err != nil {
		return nil, err
	}
	if !caller.AllowsTool(op.Tool) {
		return nil, problem(problems.NotFound, "no such operation")
	}
	return op, nil
}

// GetOperation handles GET /v1/operations/{id}.
func (a *API) GetOperation(c echo.Context) error {
	op, err := a.visible(c, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a.render(c.Request().Context(), op))
}

type listJSON struct {
	Operations []operationJSON `json:"operations"`
	NextCursor *string         `json:"next_cursor"`
}

// ListOperations handles GET /v1/operations: by key (how an agent resumes after a restart),
// or a filtered page, newest first.
func (a *API) ListOperations(c echo.Context) error {
	caller := CallerFrom(c.Request().Context())
	if c.QueryParams().Has("key") {
		return a.byKey(c, c.QueryParam("key"))
	}
	f, err := listFilter(c, caller, a.Ledger)
	if err != nil {
		return err
	}
	ops, more, err := a.Ledger.List(c.Request().Context(), caller.Tenant, f)
	if err != nil {
		return err
	}
	out := listJSON{Operations: make([]operationJSON, 0, len(ops))}
	for _, op := range ops {
		out.Operations = append(out.Operations, a.render(c.Request().Context(), op))
	}
	if more {
		cur := a.Ledger.ListCursor(caller.Tenant, ops[len(ops)-1].ID)
		out.NextCursor = &cur
	}
	return c.JSON(http.StatusOK, out)
}

// GetOperationByKey handles GET /v1/operation-keys/{key}: the key's operation, as
// GET /v1/operations?key= answers it, at a path of its own so that a client generated from the
// OpenAPI document gets an operation from one and a list from the other, each typed.
func (a *API) GetOperationByKey(c echo.Context) error {
	key := c.Param("key")
	if c.Request().URL.RawPath != "" {
		// The router matched the escaped path, so the value is still escaped ("a%2Fb").
		k, err := url.PathUnescape(key)
		if err != nil {
			return problem(problems.NotFound, "no such operation")
		}
		key = k
	}
	return a.byKey(c, key)
}

// byKey answers the caller's operation of key; one of a tool the caller may not use is not
// found, as a missing one, so nothing leaks.
func (a *API) byKey(c echo.Context, key string) error {
	caller := CallerFrom(c.Request().Context())
	op, err := a.Ledger.GetByKey(c.Request().Context(), caller.Tenant, key)
	if err != nil {
		return err
	}
	if !caller.AllowsTool(op.Tool) {
		return problem(problems.NotFound, "no such operation")
	}
	return c.JSON(http.StatusOK, a.render(c.Request().Context(), op))
}

func listFilter(c echo.Context, caller *models.Caller, ledger *models.Ledger) (models.ListFilter, error) {
	f := models.ListFilter{Limit: 50, State: models.State(c.QueryParam("state")), Tool: c.QueryParam("tool"),
		WorkflowRunID: c.QueryParam("workflow_run_id")}
	if f.State != "" && !f.State.Valid() {
		return f, problem(problems.InvalidQuery, "state must be one of PENDING, AWAITING_APPROVAL, RUNNING, SUCCEEDED, FAILED_FINAL, UNKNOWN")
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return f, problem(problems.InvalidQuery, "limit must be an integer from 1 to 500")
		}
		f.Limit = n
	}
	if v := c.QueryParam("cursor"); v != "" {
		// Signed (models.ListCursor): text idemgate did not issue, or issued to another
		// tenant, is refused rather than read as a place in the list.
		id, err := ledger.ParseListCursor(caller.Tenant, v)
		if err != nil {
			return f, problem(problems.InvalidQuery, "cursor is not one this API returned")
		}
		f.Before = id
	}
	if !caller.AllowsTool("*") {
		f.Tools = strings.Split(caller.Key.Tools, ",")
	}
	return f, nil
}

// Events handles GET /v1/operations/{id}/events.
func (a *API) Events(c echo.Context) error {
	op, err := a.visible(c, c.Param("id"))
	if err != nil {
		return err
	}
	evs, err := a.Ledger.Events(c.Request().Context(), op.Tenant, op.ID)
	if err != nil {
		return err
	}
	out := make([]eventJSON, 0, len(evs))
	for _, e := range evs {
		out = append(out, renderEvent(e))
	}
	return c.JSON(http.StatusOK, map[string]any{"events": out})
}

// Cancel handles POST /v1/operations/{id}/cancel.
func (a *API) Cancel(c echo.Context) error {
	op, err := a.visible(c, c.Param("id"))
	if err != nil {
		return err
	}
	op, err = a.Ledger.Cancel(c.Request().Context(), op.Tenant, op.ID, CallerFrom(c.Request().Context()).Actor())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a.render(c.Request().Context(), op))
}

// Tools handles GET /v1/tools: the caller's tools, in the format asked for.
func (a *API) Tools(c echo.Context) error {
	caller := CallerFrom(c.Request().Context())
	var mine []*catalog.Tool
	for _, t := range a.Catalog.Tools() {
		if caller.AllowsTool(t.Name) {
			mine = append(mine, t)
		}
	}
	f, err := toolsFormat(c)
	if err != nil {
		return err
	}
	if f.Name == catalog.FormatMCP {
		return c.JSON(http.StatusOK, mcpTools(mine))
	}
	out, err := catalog.Definitions(mine, f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// toolsFormat reads format, api and strict of GET /v1/tools. api (chat_completions or
// responses) and strict (true or false) belong to format=openai.
func toolsFormat(c echo.Context) (catalog.Format, error) {
	f := catalog.Format{Name: c.QueryParam("format"), API: c.QueryParam("api")}
	switch f.Name {
	case catalog.FormatDefault, "default", catalog.FormatOpenAI, catalog.FormatAnthropic, catalog.FormatMCP:
	default:
		return f, problem(problems.UnsupportedFormat, "format must be openai, anthropic or mcp (or absent)")
	}
	q := c.QueryParams()
	if f.Name != catalog.FormatOpenAI && (q.Has("api") || q.Has("strict")) {
		return f, problem(problems.InvalidQuery, "api and strict apply to format=openai only")
	}
	switch f.API {
	case "", catalog.OpenAIChatCompletions, catalog.OpenAIResponses:
	default:
		return f, problem(problems.InvalidQuery, "api must be %s or %s", catalog.OpenAIChatCompletions, catalog.OpenAIResponses)
	}
	switch q.Get("strict") {
	case "", "false":
	case "true":
		f.Strict = true
	default:
		return f, problem(problems.InvalidQuery, "strict must be true or false")
	}
	return f, nil
}
