package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemgate/idemgate/handlers/headers"
	"github.com/idemgate/idemgate/handlers/problems"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/fingerprint"
	"github.com/labstack/echo/v4"
)

// MaxBodyBytes bounds a request body (docs/API.md).
const MaxBodyBytes = 1 << 20

// API serves the agent JSON API.
type API struct {
	Ledger   *models.Ledger
	Catalog  *catalog.Catalog
	Executor *jobs.Executor
	Limiter  *RateLimiter
	Meter    RequestMeter // nil counts nothing
}

// RequestMeter counts answers to POST /v1/operations by outcome.
type RequestMeter interface {
	Request(outcome string)
}

// countRequest classifies the answer to a submit into a bounded set of outcomes.
func (a *API) countRequest(c echo.Context, err error) {
	if a.Meter == nil {
		return
	}
	outcome := "invalid"
	switch {
	case err == nil && c.Response().Status == http.StatusOK:
		outcome = "replayed"
	case err == nil:
		outcome = "created"
	default:
		switch ProblemFrom(err).Slug {
		case problems.OperationInProgress, problems.OperationUncertain, problems.OperationAwaitingApproval:
			outcome = "in_progress"
		case problems.IdempotencyKeyMismatch:
			outcome = "mismatch"
		case problems.IdempotencyKeyExpired:
			outcome = "expired"
		case problems.ToolForbidden:
			outcome = "forbidden"
		case problems.RateLimited:
			outcome = "rate_limited"
		case problems.LedgerUnavailable, problems.Internal:
			outcome = "unavailable"
		}
	}
	a.Meter.Request(outcome)
}

// operationRequest is the body of POST /v1/operations.
type operationRequest struct {
	Tool          string          `json:"tool"`
	Params        json.RawMessage `json:"params"`
	WorkflowRunID string          `json:"workflow_run_id"`
	StepID        string          `json:"step_id"`
	Justification string          `json:"justification"`
}

// MaxJustification is the longest justification taken, in characters (docs/API.md).
const MaxJustification = 2000

// CreateOperation handles POST /v1/operations, with the checks in the order of docs/API.md.
func (a *API) CreateOperation(c echo.Context) (err error) {
	defer func() { a.countRequest(c, err) }()
	caller := CallerFrom(c.Request().Context())
	if !a.Limiter.Allow(caller.PrincipalID) {
		return &Problem{Slug: problems.RateLimited, RetryAfter: 1, Detail: "too many requests for this principal; retry with the same Idempotency-Key"}
	}
	key, err := headers.ParseIdempotencyKey(c.Request().Header.Values("Idempotency-Key"))
	if err != nil {
		return keyProblem(err)
	}
	if err := reservedKey(key); err != nil {
		return err
	}
	if err := jsonBody(c.Request()); err != nil {
		return err
	}
	req, err := decodeOperationRequest(c.Request().Body)
	if err != nil {
		return err
	}
	prefer := headers.ParsePrefer(c.Request().Header.Values("Prefer"))
	res, err := a.submitCall(c.Request().Context(), caller, key, req, prefer.Wait)
	if err != nil {
		return err
	}
	if prefer.Applied != "" {
		c.Response().Header().Set("Preference-Applied", prefer.Applied)
	}
	return a.answer(c, res)
}

// submitCall runs the checks of a call that come after its key and body (the tool exists, the
// caller may use it, the params match its schema), then records and runs it. It is the one
// path into the ledger of POST /v1/operations and of MCP tools/call.
func (a *API) submitCall(ctx context.Context, caller *models.Caller, key string, req operationRequest, wait time.Duration) (jobs.SubmitResult, error) {
	if err := refuseNULCall(req); err != nil {
		return jobs.SubmitResult{}, err
	}
	tool, params, err := a.checkCall(caller, req.Tool, req.Params)
	if err != nil {
		return jobs.SubmitResult{}, err
	}
	res, err := a.Executor.Submit(ctx, jobs.SubmitRequest{
		Caller: caller, Key: key, Tool: tool, Params: params,
		WorkflowRunID: req.WorkflowRunID, StepID: req.StepID, Justification: req.Justification, Wait: wait,
	})
	return res, hideForeignOperation(caller, err)
}

// checkCall finds the tool, checks the caller may use it and that params match its schema.
// It returns the tool and the canonical params.
func (a *API) checkCall(caller *models.Caller, name string, params json.RawMessage) (*catalog.Tool, []byte, error) {
	tool, ok := a.Catalog.Get(name)
	if !ok {
		return nil, nil, problem(problems.UnknownTool, "no tool named %q in the catalogue", name)
	}
	if !caller.AllowsTool(tool.Name) {
		return nil, nil, problem(problems.ToolForbidden, "this API key may not use tool %q", tool.Name)
	}
	if len(params) == 0 || bytes.Equal(params, []byte("null")) {
		params = json.RawMessage("{}")
	}
	// A null for an optional param that refuses null means absent (OpenAI's strict mode
	// sends one for every param it has nothing for): removed before the schema check and the
	// fingerprint, so {"a": null} and {} are the same request.
	params, dropped, err := tool.DropAbsentNulls(params)
	if err == nil && dropped {
		params, err = fingerprint.Normalize(params)
	}
	if err != nil {
		return nil, nil, problem(problems.MalformedBody, "params: %v", err)
	}
	errs, err := tool.CheckCanonical(params)
	if err != nil {
		return nil, nil, problem(problems.MalformedBody, "params: %v", err)
	}
	if len(errs) > 0 {
		return nil, nil, &Problem{Slug: problems.InvalidParams, Errors: scrubParamErrors(tool, params, errs),
			Detail: fmt.Sprintf("params do not match the schema of %s", tool.Name)}
	}
	return tool, params, nil
}

// scrubParamErrors masks the sensitive values of params in the schema's messages, some of
// which quote the value they refuse ("'4242 4242…' does not match pattern …").
func scrubParamErrors(tool *catalog.Tool, params []byte, errs []catalog.ParamError) []catalog.ParamError {
	if len(tool.SensitiveParams) == 0 {
		return errs
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	var v map[string]any
	if dec.Decode(&v) != nil {
		return errs
	}
	secrets := tool.Secrets(v)
	for i := range errs {
		errs[i].Message = secrets.Text(errs[i].Message)
	}
	return errs
}

// jsonBody refuses a body declared as anything but JSON (415 unsupported-media-type): a client
// that sends text/plain or a form means something else than the JSON object it would be read
// as. No Content-Type at all is read as JSON, as the API's only body type.
func jsonBody(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return problem(problems.UnsupportedMediaType, "the body is sent as %q; send it as application/json", ct)
}

// decodeOperationRequest reads and checks the body: at most 1 MiB, I-JSON (no duplicate
// names, valid UTF-8, numbers exact as doubles), an object with known members. The params it
// returns are already canonical (a member of canonical JSON is canonical).
func decodeOperationRequest(body io.Reader) (operationRequest, error) {
	raw, err := io.ReadAll(io.LimitReader(body, MaxBodyBytes+1))
	if err != nil {
		return operationRequest{}, problem(problems.MalformedBody, "reading the body: %v", err)
	}
	if len(raw) > MaxBodyBytes {
		return operationRequest{}, problem(problems.BodyTooLarge, "the body is larger than %d bytes", MaxBodyBytes)
	}
	canon, err := fingerprint.Normalize(raw)
	if err != nil {
		return operationRequest{}, problem(problems.MalformedBody, "%v", err)
	}
	// Members are matched exactly: encoding/json would also take "TOOL" or "Params", and a
	// body carrying both "params" and "Params" would mean one thing to us and another to a
	// stricter reader of the same bytes.
	var members map[string]json.RawMessage
	if err := json.Unmarshal(canon, &members); err != nil {
		return operationRequest{}, problem(problems.MalformedBody, "the body must be a JSON object with tool, params, workflow_run_id and step_id")
	}
	var req operationRequest
	for name, value := range members {
		var err error
		switch name {
		case "tool":
			err = json.Unmarshal(value, &req.Tool)
		case "params":
			req.Params = value
		case "workflow_run_id":
			err = json.Unmarshal(value, &req.WorkflowRunID)
		case "step_id":
			err = json.Unmarshal(value, &req.StepID)
		case "justification":
			err = json.Unmarshal(value, &req.Justification)
		default:
			return req, problem(problems.MalformedBody, "unknown member %q: the body has tool, params, workflow_run_id, step_id and justification", name)
		}
		if err != nil {
			return req, problem(problems.MalformedBody, "%s must be a string", name)
		}
	}
	switch {
	case req.Tool == "":
		return req, problem(problems.MalformedBody, "tool is required")
	case len(req.WorkflowRunID) > 255 || len(req.StepID) > 255:
		return req, problem(problems.MalformedBody, "workflow_run_id and step_id are at most 255 bytes")
	case utf8.RuneCountInString(req.Justification) > MaxJustification:
		return req, problem(problems.MalformedBody, "justification is at most %d characters", MaxJustification)
	case len(req.Params) > 0 && req.Params[0] != '{' && !bytes.Equal(req.Params, []byte("null")):
		return req, problem(problems.MalformedBody, "params must be a JSON object")
	}
	return req, nil
}

func keyProblem(err error) *Problem {
	if errors.Is(err, headers.ErrKeyMissing) {
		return problem(problems.IdempotencyKeyMissing, "send an Idempotency-Key header naming this logical operation, stable across retries")
	}
	return &Problem{Slug: problems.IdempotencyKeyInvalid, Detail: err.Error(), Err: err}
}

// answer renders the outcome of a submit as the table of docs/API.md says.
func (a *API) answer(c echo.Context, res jobs.SubmitResult) error {
	op := res.Op
	location := "/v1/operations/" + op.ID
	h := c.Response().Header()
	switch {
	case res.Created && op.State.Terminal():
		return c.JSON(http.StatusCreated, a.render(c.Request().Context(), op))
	case res.Created:
		h.Set("Location", location)
		h.Set("Retry-After", strconv.Itoa(retryAfter(op)))
		return c.JSON(http.StatusAccepted, a.render(c.Request().Context(), op))
	case op.State.Terminal():
		h.Set("Idempotent-Replayed", "true")
		return c.JSON(http.StatusOK, a.render(c.Request().Context(), op))
	}
	return inFlightProblem(op, toolOf(a.Catalog, op.Tool))
}

// inFlightProblem is the answer to a duplicate request whose operation was not terminal within
// its wait: the agent must poll that operation, never invent a new key.
func inFlightProblem(op *models.Operation, tool *catalog.Tool) *Problem {
	p := &Problem{Op: op, Location: "/v1/operations/" + op.ID, RetryAfter: retryAfter(op)}
	switch op.State {
	case models.StateUnknown:
		p.Slug, p.Detail = problems.OperationUncertain, "the downstream may have performed this operation; "+uncertainBy(op, tool)+
			". Poll the operation; do not retry with a new key."
	case models.StateAwaitingApproval:
		p.Slug, p.Detail = problems.OperationAwaitingApproval, "this operation waits for a reviewer's approval. Poll the operation."
	default:
		p.Slug, p.Detail = problems.OperationInProgress, "this operation is still running. Poll the operation or retry with the same key."
	}
	return p
}

// uncertainBy says who settles an UNKNOWN operation: a person, once a review is open on it or
// when its tool has no reconcile (its outcome goes straight to a person); otherwise idemgate,
// by asking the downstream. tool is nil when the catalogue no longer has it.
func uncertainBy(op *models.Operation, tool *catalog.Tool) string {
	if op.ReviewID != nil || (tool != nil && tool.Reconcile == nil) {
		return "idemgate cannot settle it by asking the downstream, so a person decides its outcome in the review queue"
	}
	return "idemgate is reconciling it with the downstream"
}

// toolOf is the catalogue's tool of that name, nil when there is none.
func toolOf(cat *catalog.Catalog, name string) *catalog.Tool {
	if cat == nil {
		return nil
	}
	t, _ := cat.Get(name)
	return t
}

// retryAfter suggests when to look again: when the next attempt is due, else soon.
func retryAfter(op *models.Operation) int {
	if op.NextAttemptAt != nil {
		if d := time.Until(*op.NextAttemptAt); d > time.Second {
			return int(d.Seconds() + 0.999)
		}
	}
	if op.State == models.StateAwaitingApproval || op.State == models.StateUnknown {
		return 5
	}
	return 1
}
