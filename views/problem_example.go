package views

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemgate/idemgate/problems"
)

// exampleOperationID is the operation id the examples use, taken from SPEC §5.
const exampleOperationID = "op_01JD7X4T6V8Q0W9M3K5N2P1R8S"

// exampleBody is an example problem details object. Its fields are in the order a reader
// expects; members that do not apply to a problem type are left out.
type exampleBody struct {
	Type                  string         `json:"type"`
	Title                 string         `json:"title"`
	Status                int            `json:"status"`
	Detail                string         `json:"detail"`
	OperationID           string         `json:"operation_id,omitempty"`
	State                 string         `json:"state,omitempty"`
	SafeToRetryWithNewKey *bool          `json:"safe_to_retry_with_new_key,omitempty"`
	Errors                []exampleError `json:"errors,omitempty"`
}

// exampleError is one entry of the errors member of invalid-params.
type exampleError struct {
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

// exampleDetails holds an illustrative detail member for each problem type.
var exampleDetails = map[string]string{
	problems.Unauthenticated:           "The API key is missing, unknown or revoked.",
	problems.IdempotencyKeyMissing:     "POST /v1/operations requires an Idempotency-Key header.",
	problems.IdempotencyKeyInvalid:     "The Idempotency-Key must be 1 to 255 printable ASCII characters.",
	problems.BodyTooLarge:              "The request body exceeds 1 MiB.",
	problems.MalformedBody:             "The body is not valid JSON: unexpected end of input.",
	problems.UnknownTool:               `No tool is named "tickets.crate".`,
	problems.ToolForbidden:             `This API key may not use the tool "refunds.issue".`,
	problems.InvalidParams:             "The params do not match the tool's schema.",
	problems.OperationInProgress:       "The operation is still running; poll it instead of sending a new key.",
	problems.OperationUncertain:        "The downstream may have performed this operation; idemgate is reconciling it.",
	problems.OperationAwaitingApproval: "The operation is waiting for a reviewer's approval.",
	problems.IdempotencyKeyMismatch:    "This key was first used with different params.",
	problems.IdempotencyKeyExpired:     "This key's record has passed its retention; the operation ended SUCCEEDED.",
	problems.LedgerUnavailable:         "The ledger cannot be reached; nothing was recorded.",
	problems.RateLimited:               "Too many requests for this principal.",
	problems.NotFound:                  "No operation has this id.",
	problems.NotCancellable:            "Only PENDING or AWAITING_APPROVAL operations can be cancelled.",
	problems.NotCompensable:            `The tool "tickets.create" declares no compensation.`,
	problems.UnsupportedFormat:         `Unknown format "gemini"; use openai, anthropic or mcp.`,
	problems.InvalidQuery:              `Unknown state "DONE".`,
	problems.Internal:                  "An unexpected error occurred.",
}

// exampleStates gives the state member of problems about an existing operation.
var exampleStates = map[string]string{
	problems.OperationInProgress:       "RUNNING",
	problems.OperationUncertain:        "UNKNOWN",
	problems.OperationAwaitingApproval: "AWAITING_APPROVAL",
	problems.IdempotencyKeyMismatch:    "SUCCEEDED",
	problems.IdempotencyKeyExpired:     "SUCCEEDED",
	problems.NotCancellable:            "RUNNING",
	problems.NotCompensable:            "SUCCEEDED",
}

// problemExample renders an example HTTP answer carrying the problem type: the status line, the
// headers the API sends with it, and the JSON body.
func problemExample(t problems.Type) string {
	body := exampleBody{
		Type:   t.URI(),
		Title:  t.Title,
		Status: t.Status,
		Detail: exampleDetails[t.Slug],
	}
	if body.Detail == "" {
		body.Detail = t.Title + "."
	}
	if state, ok := exampleStates[t.Slug]; ok {
		never := false
		body.OperationID = exampleOperationID
		body.State = state
		body.SafeToRetryWithNewKey = &never
	}
	if t.Slug == problems.InvalidParams {
		body.Errors = []exampleError{{Pointer: "/subject", Message: "maxLength: got 250, want 200"}}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\n", t.Status, http.StatusText(t.Status))
	b.WriteString("Content-Type: application/problem+json\n")
	switch t.Slug {
	case problems.OperationInProgress, problems.OperationUncertain, problems.OperationAwaitingApproval:
		fmt.Fprintf(&b, "Location: /v1/operations/%s\nRetry-After: 2\n", exampleOperationID)
	case problems.LedgerUnavailable, problems.RateLimited:
		b.WriteString("Retry-After: 5\n")
	}
	b.WriteString("\n")
	// The body is a fixed struct of strings, ints and bools: encoding cannot fail.
	js, _ := json.MarshalIndent(body, "", "  ")
	b.Write(js)
	return b.String()
}

// statusLine shows an HTTP status with its reason phrase, such as "409 Conflict".
func statusLine(status int) string {
	return fmt.Sprintf("%d %s", status, http.StatusText(status))
}
