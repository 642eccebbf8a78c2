package problems

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// exampleOperationID is the operation id the examples use, taken from docs/API.md.
const exampleOperationID = "op_01JD7X4T6V8Q0W9M3K5N2P1R8S"

// exampleDetails holds an illustrative detail member for each problem type.
var exampleDetails = map[string]string{
	UnsupportedMediaType:      `the body is sent as "text/plain"; send it as application/json`,
	OriginNotAllowed:          `requests from pages of "https://evil.example" are not accepted; a browser client must be served from this gateway's origin or one it allows`,
	Unauthenticated:           "The API key is missing, unknown or revoked.",
	IdempotencyKeyMissing:     "POST /v1/operations requires an Idempotency-Key header.",
	IdempotencyKeyInvalid:     "The Idempotency-Key must be 1 to 255 printable ASCII characters.",
	IdempotencyKeyReserved:    "Keys beginning with compensate: are reserved for the compensations idemgate records.",
	BodyTooLarge:              "The request body exceeds 1 MiB.",
	MalformedBody:             "The body is not valid JSON: unexpected end of input.",
	UnknownTool:               `No tool is named "tickets.crate".`,
	ToolForbidden:             `This API key may not use the tool "refunds.issue".`,
	PolicyDenied:              `Refunds over 10,000.00 are made by finance, not by agents.`,
	InvalidParams:             "The params do not match the tool's schema.",
	OperationInProgress:       "The operation is still running; poll it instead of sending a new key.",
	OperationUncertain:        "The downstream may have performed this operation; idemgate is reconciling it.",
	OperationAwaitingApproval: "The operation is waiting for a reviewer's approval.",
	IdempotencyKeyMismatch:    "This key was first used with different params.",
	IdempotencyKeyExpired:     "This key's record has passed its retention; the operation ended SUCCEEDED.",
	ConnectionNotConfigured:   `connection "stripe" needs the tenant secret "stripe_key", which tenant "acme" has not set; nothing was recorded`,
	LedgerUnavailable:         "The ledger cannot be reached; nothing was recorded.",
	RateLimited:               "Too many requests for this principal.",
	NotFound:                  "No operation has this id.",
	NotCancellable:            "Only PENDING or AWAITING_APPROVAL operations can be cancelled.",
	NotCompensable:            `The tool "tickets.create" declares no compensation.`,
	UnsupportedFormat:         `Unknown format "gemini"; use openai, anthropic or mcp.`,
	InvalidQuery:              `Unknown state "DONE".`,
	Internal:                  "An unexpected error occurred.",
}

// exampleStates gives the state member of problems about an existing operation.
var exampleStates = map[string]string{
	OperationInProgress:       "RUNNING",
	OperationUncertain:        "UNKNOWN",
	OperationAwaitingApproval: "AWAITING_APPROVAL",
	IdempotencyKeyMismatch:    "SUCCEEDED",
	IdempotencyKeyExpired:     "SUCCEEDED",
	NotCancellable:            "RUNNING",
	NotCompensable:            "SUCCEEDED",
}

// Example renders an example HTTP answer carrying the problem type, for its page: the status
// line, the headers the API sends with it, and the JSON body.
func (t Type) Example() string {
	detail := exampleDetails[t.Slug]
	if detail == "" {
		detail = t.Title + "."
	}
	body := t.New(detail)
	if state, ok := exampleStates[t.Slug]; ok {
		body = body.AboutOperation(exampleOperationID, state)
	}
	if t.Slug == InvalidParams {
		body.Errors = []map[string]string{{"pointer": "/subject", "message": "maxLength: got 250, want 200"}}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\n", t.Status, http.StatusText(t.Status))
	b.WriteString("Content-Type: application/problem+json\n")
	switch t.Slug {
	case OperationInProgress, OperationUncertain, OperationAwaitingApproval:
		fmt.Fprintf(&b, "Location: /v1/operations/%s\nRetry-After: 2\n", exampleOperationID)
	case LedgerUnavailable, RateLimited:
		b.WriteString("Retry-After: 5\n")
	}
	b.WriteString("\n")
	// The body holds only strings, ints, bools and string maps: encoding cannot fail.
	js, _ := json.MarshalIndent(body, "", "  ")
	b.Write(js)
	return b.String()
}
