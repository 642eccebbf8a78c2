package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
	Err      error // the cause, for logs only
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

// ledgerRetryAfter is what a caller is told to wait when the ledger is unreachable.
const ledgerRetryAfter = 2

// ProblemFrom turns any error into the problem it is answered with: the one table from ledger
// codes and framework errors to problem types.
func ProblemFrom(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	op := models.ErrorOperation(err)
	switch models.ErrorCode(err) {
	case models.CodeNotFound:
		return &Problem{Slug: problems.NotFound, Detail: "no such operation", Err: err}
	case models.CodeKeyMismatch:
		return &Problem{Slug: problems.IdempotencyKeyMismatch, Op: op, Err: err,
			Detail: "this Idempotency-Key was first used with another tool or other params; nothing was run"}
	case models.CodeKeyExpired:
		return &Problem{Slug: problems.IdempotencyKeyExpired, Op: op, Err: err,
			Detail: "the record of this Idempotency-Key passed its retention; the key will never run again"}
	case models.CodeNotCancellable:
		return &Problem{Slug: problems.NotCancellable, Op: op, Detail: errDetail(err), Err: err}
	case models.CodeNotCompensable:
		return &Problem{Slug: problems.NotCompensable, Op: op, Detail: errDetail(err), Err: err}
	case models.CodeInvalid:
		return &Problem{Slug: problems.InvalidQuery, Detail: errDetail(err), Err: err}
	case models.CodeUnavailable:
		return &Problem{Slug: problems.LedgerUnavailable, RetryAfter: ledgerRetryAfter, Err: err,
			Detail: "the ledger cannot be reached; nothing was recorded or executed. Retry with the same Idempotency-Key."}
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound, http.StatusMethodNotAllowed:
			return &Problem{Slug: problems.NotFound, Detail: "no such resource", Err: err}
		case http.StatusRequestEntityTooLarge:
			return &Problem{Slug: problems.BodyTooLarge, Detail: "the body is larger than 1 MiB", Err: err}
		}
	}
	return &Problem{Slug: problems.Internal, Detail: "an unexpected error occurred; it has been logged", Err: err}
}

func errDetail(err error) string {
	var e *models.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
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

// ProblemStatus is the HTTP status err will be answered with.
func ProblemStatus(err error) int {
	t, ok := problems.Lookup(ProblemFrom(err).Slug)
	if !ok {
		return http.StatusInternalServerError
	}
	return t.Status
}
