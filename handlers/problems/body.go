package problems

// Body is the wire form of a problem details object (RFC 9457), the one shape the API, the MCP
// server, the problem pages' examples and the OpenAPI document share. The standard members come
// first; the extension members appear only where docs/API.md says.
type Body struct {
	Type                  string `json:"type"`
	Title                 string `json:"title"`
	Status                int    `json:"status"`
	Detail                string `json:"detail"`
	OperationID           string `json:"operation_id,omitempty"`
	State                 string `json:"state,omitempty"`
	SafeToRetryWithNewKey *bool  `json:"safe_to_retry_with_new_key,omitempty"`
	// Rule and Reason name the policy rule or budget that refused the call and why
	// (policy-denied only).
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Errors lists what is wrong with the params (invalid-params only); its items are
	// {"pointer", "message"} objects.
	Errors any `json:"errors,omitempty"`
}

// New is the body of a problem of type t with the given detail.
func (t Type) New(detail string) Body {
	return Body{Type: t.URI(), Title: t.Title, Status: t.Status, Detail: detail}
}

// AboutOperation adds the members of a problem that concerns an existing operation. Such a
// problem is never solved by a new key: the agent must poll the operation it already has.
func (b Body) AboutOperation(id, state string) Body {
	never := false
	b.OperationID, b.State, b.SafeToRetryWithNewKey = id, state, &never
	return b
}
