package handlers

import (
	"github.com/idemgate/idemgate/handlers/headers"
	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
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
	key := jobs.CompensationKey(original.ID)
	if len(c.Request().Header.Values("Idempotency-Key")) > 0 {
		if key, err = headers.ParseIdempotencyKey(c.Request().Header.Values("Idempotency-Key")); err != nil {
			return keyProblem(err)
		}
		// The default, spelled out, is fine; another operation's compensation key is not.
		if key != jobs.CompensationKey(original.ID) {
			if err := reservedKey(key); err != nil {
				return err
			}
		}
	}
	tool, params, err := a.compensation(caller, original)
	if err != nil {
		return err
	}
	prefer := headers.ParsePrefer(c.Request().Header.Values("Prefer"))
	res, err := a.Executor.Submit(c.Request().Context(), jobs.SubmitRequest{
		Caller: caller, Key: key, Tool: tool, Params: params,
		WorkflowRunID: deref(original.WorkflowRunID), Compensates: original.ID, Wait: prefer.Wait,
	})
	if models.ErrorCode(err) == models.CodeNotCompensable && models.ErrorOperation(err) == nil {
		// The ledger refused to link a second compensation: the problem concerns original,
		// so it names it, as every problem about an existing operation does (docs/API.md).
		return &Problem{Slug: problems.NotCompensable, Op: original, Err: err,
			Detail: "this operation already has a compensation (see its compensated_by); it is not compensated twice"}
	}
	if err != nil {
		return hideForeignOperation(caller, err)
	}
	if prefer.Applied != "" {
		c.Response().Header().Set("Preference-Applied", prefer.Applied)
	}
	return a.answer(c, res)
}

// compensation builds the compensating call of original and checks the caller may make it.
func (a *API) compensation(caller *models.Caller, original *models.Operation) (*catalog.Tool, []byte, error) {
	tool, params, err := a.Executor.CompensationCall(original)
	if err != nil {
		return nil, nil, err
	}
	if !caller.AllowsTool(tool.Name) {
		return nil, nil, problem(problems.ToolForbidden, "this API key may not use the compensation tool %q", tool.Name)
	}
	return tool, params, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
