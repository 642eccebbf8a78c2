package handlers

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/models"
	"github.com/labstack/echo/v4"
)

// Problem is an API error answered as RFC 9457 problem details. Handlers return it as an
// error; the one error handler in web writes it.
type Problem struct {
	Slug   string
	Detail string
	// Op, when set, adds operation_id, state and safe_to_retry_with_new_key.
	Op *models.Operation
	// Errors lists invalid params (invalid-params).
	Errors any
	// RetryAfter, when positive, is sent as Retry-After (seconds).
	RetryAfter int
	// Location, when set, is sent as Location.
	Location string
	// Policy, when set, names the rule and reason of a policy's refusal (policy-denied).
	Policy *models.PolicyDenied
	Err    error // the cause, for logs only
}

func (p *Problem) Error() string {
	if p.Err != nil {
		return fmt.Sprintf("%s: %s: %v", p.Slug, p.Detail, p.Err)
	}
	return p.Slug + ": " + p.Detail
}

func (p *Problem) Unwrap() error { return p.Err }

func problem(slug, format string, args ...any) *Problem {
	return &Problem{Slug: slug, Detail: fmt.Sprintf(format, args...)}
}

// body is the problem details object of p, as the API and the MCP server answer it.
func (p *Problem) body() problems.Body {
	t, ok := problems.Lookup(p.Slug)
	if !ok {
		t, _ = problems.Lookup(problems.Internal)
	}
	body := t.New(p.Detail)
	body.Errors = p.Errors
	if p.Op != nil {
		body = body.AboutOperation(p.Op.ID, string(p.Op.State))
	}
	if p.Policy != nil {
		body.Rule, body.Reason = p.Policy.Rule, p.Policy.Reason
	}
	return body
}

// WriteProblem answers c with p.
func WriteProblem(c echo.Context, p *Problem) error {
	body := p.body()
	h := c.Response().Header()
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	if p.Location != "" {
		h.Set("Location", p.Location)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return c.Blob(body.Status, "application/problem+json", b)
}
