package handlers

import (
	"encoding/json"
	"fmt"

	"github.com/idemgate/idemgate/catalog"
	"github.com/idemgate/idemgate/fingerprint"
	"github.com/idemgate/idemgate/headers"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/problems"
	"github.com/labstack/echo/v4"
)

// Compensate handles POST /v1/operations/{id}/compensate: it asks for the operation that
// undoes a SUCCEEDED one, built from the tool's compensation template and linked both ways.
// It answers like POST /v1/operations; the key defaults to compensate:<id>, so a repeated
// request returns the same compensation.
func (a *API) Compensate(c echo.Context) error {
	caller := CallerFrom(c.Request().Context())
	if !a.Limiter.Allow(caller.PrincipalID) {
		return &Problem{Slug: problems.RateLimited, RetryAfter: 1, Detail: "too many requests for this principal"}
	}
	original, err := a.visible(c, c.Param("id"))
	if err != nil {
		return err
	}
	key := "compensate:" + original.ID
	if len(c.Request().Header.Values("Idempotency-Key")) > 0 {
		if key, err = headers.ParseIdempotencyKey(c.Request().Header.Values("Idempotency-Key")); err != nil {
			return keyProblem(err)
		}
	}
	tool, params, err := a.compensation(caller, original)
	if err != nil {
		return err
	}
	prefer := headers.ParsePrefer(c.Request().Header.Values("Prefer"))
	res, err := a.Executor.Submit(c.Request().Context(), jobs.SubmitRequest{
		Caller: caller, Key: key, Tool: tool, Params: params, Fingerprint: fingerprint.Of(tool.Name, params),
		WorkflowRunID: deref(original.WorkflowRunID), Compensates: original.ID, Wait: prefer.Wait,
	})
	if err != nil {
		return err
	}
	if prefer.Applied != "" {
		c.Response().Header().Set("Preference-Applied", prefer.Applied)
	}
	return a.answer(c, res)
}

// compensation renders the compensating call of original and checks it like any other call.
func (a *API) compensation(caller *models.Caller, original *models.Operation) (*catalog.Tool, []byte, error) {
	notCompensable := func(format string, args ...any) error {
		return &Problem{Slug: problems.NotCompensable, Op: original, Detail: fmt.Sprintf(format, args...)}
	}
	tool, ok := a.Catalog.Get(original.Tool)
	switch {
	case !ok || tool.Compensation == nil:
		return nil, nil, notCompensable("tool %s declares no compensation", original.Tool)
	case original.State != models.StateSucceeded:
		return nil, nil, notCompensable("only SUCCEEDED operations can be compensated; this one is %s", original.State)
	case original.Params == nil:
		return nil, nil, notCompensable("the operation's record passed its retention; its compensation cannot be built")
	}
	data := catalog.TemplateData{OperationID: original.ID, Key: original.Key, Tenant: original.Tenant}
	var err error
	if data.Params, err = decodeObject(original.Params); err != nil {
		return nil, nil, err
	}
	if data.Result, err = decodeObject(original.Result); err != nil {
		data.Result = nil // a result that is not an object offers no fields to templates
	}
	rendered, err := tool.RenderCompensation(data)
	if err != nil {
		return nil, nil, notCompensable("rendering the compensation template: %v", err)
	}
	raw, err := json.Marshal(rendered)
	if err != nil {
		return nil, nil, notCompensable("encoding the compensation params: %v", err)
	}
	canon, err := fingerprint.Normalize(raw)
	if err != nil {
		return nil, nil, notCompensable("the compensation params: %v", err)
	}
	return a.checkCall(caller, tool.Compensation.Tool, canon)
}

func decodeObject(raw *string) (map[string]any, error) {
	if raw == nil {
		return nil, fmt.Errorf("no value")
	}
	v, err := decodeValue([]byte(*raw))
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not an object")
	}
	return m, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
