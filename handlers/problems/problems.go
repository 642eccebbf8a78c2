// Package problems is the one table of problem types the idemgate API answers with (docs/API.md).
//
// Every error the agent API returns is an RFC 9457 problem details object whose "type" member is
// "/problems/<slug>". The gateway serves a human page at that path, rendered from this table, so
// the text here is written for the developer of the agent that received the problem: what
// happened, whether anything was recorded or executed, and what is safe to do next.
//
// The table is immutable: Lookup and All are safe for concurrent use.
package problems

import "net/http"

// PathPrefix is the path under which every problem type is served; a problem's "type" member is
// PathPrefix followed by its slug.
const PathPrefix = "/problems/"

// The slugs of every problem type idemgate answers with. Handlers refer to these constants, never
// to string literals, so that a typo is a compile error rather than a page that does not exist.
const (
	Unauthenticated           = "unauthenticated"
	IdempotencyKeyMissing     = "idempotency-key-missing"
	IdempotencyKeyInvalid     = "idempotency-key-invalid"
	IdempotencyKeyReserved    = "idempotency-key-reserved"
	UnsupportedMediaType      = "unsupported-media-type"
	BodyTooLarge              = "body-too-large"
	MalformedBody             = "malformed-body"
	UnknownTool               = "unknown-tool"
	ToolForbidden             = "tool-forbidden"
	PolicyDenied              = "policy-denied"
	InvalidParams             = "invalid-params"
	OperationInProgress       = "operation-in-progress"
	OperationUncertain        = "operation-uncertain"
	OperationAwaitingApproval = "operation-awaiting-approval"
	IdempotencyKeyMismatch    = "idempotency-key-mismatch"
	IdempotencyKeyExpired     = "idempotency-key-expired"
	ConnectionNotConfigured   = "connection-not-configured"
	LedgerUnavailable         = "ledger-unavailable"
	RateLimited               = "rate-limited"
	NotFound                  = "not-found"
	NotCancellable            = "not-cancellable"
	NotCompensable            = "not-compensable"
	UnsupportedFormat         = "unsupported-format"
	OriginNotAllowed          = "origin-not-allowed"
	InvalidQuery              = "invalid-query"
	Internal                  = "internal"
)

// Type is one problem type: its slug, the HTTP status it is answered with, and the text of its
// page. Explanation says what happened; WhatToDo says what the agent developer should do next,
// and in particular whether repeating the request is safe. Both may mark code with backticks and
// separate paragraphs with a blank line.
type Type struct {
	Slug        string
	Status      int
	Title       string
	Explanation string
	WhatToDo    string
}

// URI returns the value of the problem's "type" member, such as "/problems/not-found".
func (t Type) URI() string { return PathPrefix + t.Slug }

// Lookup returns the problem type with the given slug, and false when there is none.
func Lookup(slug string) (Type, bool) {
	i, ok := index[slug]
	if !ok {
		return Type{}, false
	}
	return table[i], true
}

// All returns every problem type, in a stable order: the order in which a request to
// POST /v1/operations meets them, then the other endpoints' problems. The caller owns the
// returned slice.
func All() []Type {
	out := make([]Type, len(table))
	copy(out, table)
	return out
}

// index maps each slug to its position in table. It is built once, when the package is
// initialised, and only read afterwards.
var index = func() map[string]int {
	m := make(map[string]int, len(table))
	for i, t := range table {
		m[t.Slug] = i
	}
	return m
}()

// table is the one list of problem types. Its text is served to agent developers as is.
var table = []Type{
	{
		Slug:   Unauthenticated,
		Status: http.StatusUnauthorized,
		Title:  "Not authenticated",
		Explanation: "The request carried no API key, or a key idemgate does not know or has revoked. " +
			"Keys are sent as `Authorization: Bearer idg_…`. The request was refused before anything " +
			"else was checked: nothing was recorded and nothing was executed.",
		WhatToDo: "Send a valid, unrevoked API key in the `Authorization` header. Repeating the request " +
			"with the same key will fail the same way; ask an admin of your tenant for a key if yours " +
			"was revoked.\n\n" +
			"Once the key is fixed, resend the same request with the same `Idempotency-Key`. That is " +
			"safe whatever happened before: idemgate never runs a key twice.",
	},
	{
		Slug:   IdempotencyKeyMissing,
		Status: http.StatusBadRequest,
		Title:  "Idempotency key missing",
		Explanation: "`POST /v1/operations` requires an `Idempotency-Key` header naming the logical " +
			"operation, and the request had none. Without it idemgate cannot tell a retry from a new " +
			"action, so it refuses: nothing was recorded and nothing was executed.",
		WhatToDo: "Choose a key that names the logical action, derived from your workflow rather than " +
			"generated per request, for example `workflow-8472:create-ticket`. Record it before you " +
			"send the request, and send the same key on every retry of that action, including after " +
			"your agent restarts. A key is 1 to 255 printable ASCII characters.",
	},
	{
		Slug:   IdempotencyKeyInvalid,
		Status: http.StatusBadRequest,
		Title:  "Idempotency key invalid",
		Explanation: "The `Idempotency-Key` header is present but is not a valid key: it is empty, longer " +
			"than 255 characters, contains characters outside printable ASCII, or is a malformed " +
			"quoted string. Nothing was recorded and nothing was executed.",
		WhatToDo: "Send a key of 1 to 255 printable ASCII characters, either bare " +
			"(`Idempotency-Key: abc`) or as an RFC 8941 string (`Idempotency-Key: \"abc\"`); both name " +
			"the key `abc`. Keep the corrected key stable across retries of the same action.",
	},
	{
		Slug:   IdempotencyKeyReserved,
		Status: http.StatusUnprocessableEntity,
		Title:  "Idempotency key reserved",
		Explanation: "Keys that begin with `compensate:` belong to idemgate itself: it gives them to the " +
			"compensations it records (`compensate:<operation id>`), so that a compensation proposed " +
			"by a reviewer or asked for with `POST /v1/operations/{id}/compensate` can never collide " +
			"with an agent's operation. An agent may not choose one. Nothing was recorded and nothing " +
			"was executed.",
		WhatToDo: "Choose another key for your action, one that names it in your own words, such as " +
			"`workflow-8472:undo-refund`. To undo a succeeded operation, do not call the reversing tool " +
			"yourself under a `compensate:` key: ask for its compensation with " +
			"`POST /v1/operations/{id}/compensate` and no `Idempotency-Key` header (or exactly " +
			"`compensate:<that operation's id>`), which idemgate links to the operation it undoes.",
	},
	{
		Slug:   UnsupportedMediaType,
		Status: http.StatusUnsupportedMediaType,
		Title:  "Unsupported media type",
		Explanation: "The request's `Content-Type` says its body is something other than JSON (such as " +
			"`text/plain` or a form), and `POST /v1/operations` takes only `application/json`. The request " +
			"was refused before its body was read: nothing was recorded and nothing was executed.",
		WhatToDo: "Send the body with `Content-Type: application/json`. Resending the corrected request with " +
			"the same `Idempotency-Key` is safe.",
	},
	{
		Slug:   BodyTooLarge,
		Status: http.StatusRequestEntityTooLarge,
		Title:  "Request body too large",
		Explanation: "The request body is larger than 1 MiB, the most idemgate accepts. The request was " +
			"refused: nothing was recorded and nothing was executed.",
		WhatToDo: "Send smaller params. Pass references to large content (a URL, a document id) " +
			"instead of the content itself. Sending the same body again will fail the same way.",
	},
	{
		Slug:   MalformedBody,
		Status: http.StatusBadRequest,
		Title:  "Malformed request body",
		Explanation: "The request body is not a well-formed JSON object of the expected shape, " +
			"`{\"tool\": \"…\", \"params\": {…}}`. Nothing was recorded and nothing was executed.",
		WhatToDo: "Send `Content-Type: application/json` and a body that parses as one JSON object with " +
			"a string `tool` and an object `params`. The `detail` member describes what was wrong. " +
			"Once the body is fixed, resending it with the same `Idempotency-Key` is safe.",
	},
	{
		Slug:   UnknownTool,
		Status: http.StatusNotFound,
		Title:  "Unknown tool",
		Explanation: "No tool of that name is declared in this gateway's tool catalogue. Nothing was " +
			"recorded and nothing was executed.",
		WhatToDo: "Use a name listed by `GET /v1/tools`, which shows the tools your key may use. A name " +
			"may be spelled with dots (`tickets.create`) or with `__` in place of each dot " +
			"(`tickets__create`), as the OpenAI and Anthropic formats require; both name the same tool.",
	},
	{
		Slug:   ToolForbidden,
		Status: http.StatusForbidden,
		Title:  "Tool not allowed for this key",
		Explanation: "The tool exists, but your API key is not allowed to use it. idemgate checks this on " +
			"every request, including a replay of an operation your key created before its permissions " +
			"changed. Nothing was executed by this request.",
		WhatToDo: "Ask an admin of your tenant to allow the tool for your key. Do not switch to a " +
			"different tool to get the same effect. `GET /v1/tools` lists the tools your key may use.",
	},
	{
		Slug:   PolicyDenied,
		Status: http.StatusForbidden,
		Title:  "Refused by a policy",
		Explanation: "A policy of the gateway (a rule on the tool's arguments, or a budget that this call " +
			"would pass) refuses this call. The problem's `rule` names the rule or budget and `reason` says " +
			"why, in words an operator wrote. The key was new, so nothing was recorded and nothing was " +
			"sent: the same key may be used again once the policy allows it.",
		WhatToDo: "Do not retry the same call, and do not split it into smaller ones to get around the " +
			"policy: tell the person you act for what `reason` says. If the call must happen, a person " +
			"with the authority to change the policy (or a budget's limit) decides, and then the same " +
			"request with the same `Idempotency-Key` may be sent again.",
	},
	{
		Slug:   InvalidParams,
		Status: http.StatusBadRequest,
		Title:  "Invalid params",
		Explanation: "The params do not match the tool's `params_schema`. The `errors` member lists each " +
			"problem as `{\"pointer\": \"/subject\", \"message\": \"…\"}`. Nothing was recorded and " +
			"nothing was executed.",
		WhatToDo: "Correct the params using the schema from `GET /v1/tools`, then send the request again. " +
			"Because nothing was recorded, you may reuse the same `Idempotency-Key` for the corrected " +
			"request.",
	},
	{
		Slug:   OperationInProgress,
		Status: http.StatusConflict,
		Title:  "Operation in progress",
		Explanation: "An operation with this `Idempotency-Key` and the same tool and params already " +
			"exists, and it is still `PENDING` or `RUNNING`: it did not finish within your request's " +
			"wait. Your request did not start a second execution. The problem carries `operation_id`, " +
			"`state` and `safe_to_retry_with_new_key: false`, with `Location` and `Retry-After` headers.",
		WhatToDo: "Do not send the request again with a new key: that would record a second operation " +
			"and could perform the action twice. Poll the operation at `Location` " +
			"(`GET /v1/operations/{id}`) after `Retry-After` seconds, or resend the same request with " +
			"the same key; idemgate answers with the one operation's outcome once it is final.",
	},
	{
		Slug:   OperationUncertain,
		Status: http.StatusConflict,
		Title:  "Operation outcome uncertain",
		Explanation: "An operation with this `Idempotency-Key` exists and is `UNKNOWN`: an attempt may " +
			"have reached the downstream system (a timeout or reset after the request was sent, a " +
			"server error, or a worker that lost its lease), and idemgate cannot yet confirm whether " +
			"the action took effect. The downstream may have performed it. The problem carries " +
			"`operation_id`, `state` and `safe_to_retry_with_new_key: false`.",
		WhatToDo: "Do not retry with a new key, and do not perform the action another way: either could " +
			"do it twice, such as refunding a customer twice. Poll the operation at `Location`. " +
			"idemgate asks the downstream whether the action took effect: if it did, the operation " +
			"becomes `SUCCEEDED`; if it is proven not executed, idemgate retries it under the same " +
			"operation or ends it `FAILED_FINAL`. When it cannot settle the question, it escalates to " +
			"a human reviewer, who decides. The action is never repeated without that proof.",
	},
	{
		Slug:   OperationAwaitingApproval,
		Status: http.StatusConflict,
		Title:  "Operation awaiting approval",
		Explanation: "An operation with this `Idempotency-Key` exists and is `AWAITING_APPROVAL`: the tool " +
			"requires a human approval before it may run, and it has not run. The problem carries " +
			"`operation_id`, `state` and `safe_to_retry_with_new_key: false`.",
		WhatToDo: "Poll the operation at `Location` until a reviewer decides. Do not resubmit under a new " +
			"key: an approval is bound to this operation and its params, and a second operation could " +
			"be approved and run as well. If it is rejected, or the approval lapses, the operation ends " +
			"`FAILED_FINAL`. To withdraw the request, cancel it with " +
			"`POST /v1/operations/{id}/cancel`.",
	},
	{
		Slug:   IdempotencyKeyMismatch,
		Status: http.StatusUnprocessableEntity,
		Title:  "Idempotency key reused with different params",
		Explanation: "This `Idempotency-Key` already names an operation in your tenant with a different " +
			"tool or different params (a different fingerprint). Key order, whitespace and number " +
			"spelling do not count as differences; a changed value does. Nothing ran, and the existing " +
			"operation is unchanged. When the existing operation's tool is one your key may not use, " +
			"the problem says only that the key is taken: it carries no `operation_id` or `state`.",
		WhatToDo: "If you meant to retry the same action, resend exactly the original tool and params, or " +
			"read the existing operation with `GET /v1/operations?key=…`. If your agent regenerated or " +
			"reworded the params of the same action, the existing operation is the one that counts: use " +
			"its outcome rather than creating a second operation. Use a new key only for a genuinely " +
			"different action.",
	},
	{
		Slug:   IdempotencyKeyExpired,
		Status: http.StatusGone,
		Title:  "Idempotency key expired",
		Explanation: "This `Idempotency-Key` was used by an operation whose full record has passed the " +
			"tool's retention period, so its params and result were dropped. idemgate keeps a tombstone " +
			"so that the key can never run again; the problem carries the operation's final `state`. " +
			"Nothing ran.",
		WhatToDo: "Treat `state` as the outcome of the original action: `SUCCEEDED` means it took " +
			"effect. Do not reuse this key. Only if you have decided, knowing that outcome, to perform " +
			"the action again as a new logical action, send it with a new key.",
	},
	{
		Slug:   ConnectionNotConfigured,
		Status: http.StatusUnprocessableEntity,
		Title:  "Connection not configured for your tenant",
		Explanation: "The tool calls its downstream through a connection that presents a credential of " +
			"your tenant's own (a `{tenant: …}` secret in the tools file), and your tenant has not set " +
			"it. The problem's detail names the connection and the secret, never a value. The key was " +
			"new, so nothing was recorded and nothing was sent: the key is still unused.",
		WhatToDo: "Ask an admin of the gateway to set the secret for your tenant " +
			"(`idemgate secret set --tenant <tenant> <name>`, the value on standard input), then resend " +
			"the same request with the same `Idempotency-Key`. Repeating it before the secret is set " +
			"fails the same way.",
	},
	{
		Slug:   LedgerUnavailable,
		Status: http.StatusServiceUnavailable,
		Title:  "Ledger unavailable",
		Explanation: "idemgate could not reach the ledger database that records operations, so it could " +
			"neither record nor look up the operation within the request's ledger deadline (on PostgreSQL, 5 seconds " +
			"unless the operator set `--ledger-deadline`): the answer comes within that deadline rather " +
			"than after the database's own timeouts. It fails closed: nothing was executed by this " +
			"request. Usually nothing was recorded either; but when the connection broke while the " +
			"request's commit was in flight (a database failover), the operation may have been recorded, " +
			"and then it runs: the `detail` says so.",
		WhatToDo: "Wait for the `Retry-After` header's number of seconds, then resend the same request " +
			"with the same `Idempotency-Key`, backing off if it happens again. That is always safe. Do " +
			"not switch to a new key: if an earlier request did record the operation, a new key would " +
			"create a second one.",
	},
	{
		Slug:   RateLimited,
		Status: http.StatusTooManyRequests,
		Title:  "Rate limit exceeded",
		Explanation: "Your principal sent more requests than its rate limit allows. This request was not " +
			"processed: nothing was recorded and nothing was executed.",
		WhatToDo: "Wait for the `Retry-After` header's number of seconds, then resend the same request " +
			"with the same `Idempotency-Key`. If you are polling, poll less often, or use " +
			"`Prefer: wait=N` to let a request wait for the outcome.",
	},
	{
		Slug:   NotFound,
		Status: http.StatusNotFound,
		Title:  "Not found",
		Explanation: "There is no operation with this id, or no operation recorded under this key, in " +
			"your tenant. Another tenant's operation is answered the same way, as if it did not exist.",
		WhatToDo: "Check the id or key. When `GET /v1/operations?key=…` answers this, the ledger holds " +
			"no operation under that key: the original request was never recorded (it failed a check " +
			"or never arrived), and sending it with that same key is safe. idemgate never runs a key " +
			"twice.",
	},
	{
		Slug:   NotCancellable,
		Status: http.StatusConflict,
		Title:  "Operation cannot be cancelled",
		Explanation: "Only an operation that is `PENDING` or `AWAITING_APPROVAL` can be cancelled, because " +
			"it has not started. This one has moved past that; its current `state` is in the problem. " +
			"Nothing was changed.",
		WhatToDo: "Read the operation. If it is `RUNNING` or `UNKNOWN`, wait: idemgate settles it or a " +
			"reviewer does. If it `SUCCEEDED` and must be undone, ask for its compensation with " +
			"`POST /v1/operations/{id}/compensate`. If it is `FAILED_FINAL`, there is nothing to cancel.",
	},
	{
		Slug:   NotCompensable,
		Status: http.StatusConflict,
		Title:  "Operation cannot be compensated",
		Explanation: "A compensation undoes a succeeded operation through a new, linked operation. This " +
			"operation cannot have one: either its tool declares no compensation, or the operation is " +
			"not `SUCCEEDED`. Nothing was created.",
		WhatToDo: "If the operation is not final yet, wait until it is `SUCCEEDED` and ask again. If it is " +
			"`FAILED_FINAL`, there is nothing to undo. If its tool has no compensation, an operator must " +
			"undo the effect in the downstream system; do not improvise a reversing call.",
	},
	{
		Slug:        UnsupportedFormat,
		Status:      http.StatusBadRequest,
		Title:       "Unsupported tool format",
		Explanation: "`GET /v1/tools` was asked for a `format` it does not know.",
		WhatToDo: "Leave `format` out for idemgate's own listing, or use `format=openai`, " +
			"`format=anthropic` or `format=mcp`.",
	},
	{
		Slug:   InvalidQuery,
		Status: http.StatusBadRequest,
		Title:  "Invalid query",
		Explanation: "A filter of `GET /v1/operations` is not valid: an unknown `state`, a `limit` out " +
			"of range, or a `cursor` that idemgate did not issue. Any request whose path, query or form " +
			"holds the NUL character (`%00`) is refused the same way: the ledger cannot store or search " +
			"for it. Nothing was recorded or changed.",
		WhatToDo: "Correct the filter; the `detail` member describes it. Pass `next_cursor` back exactly as " +
			"you received it, with the same filters, or start again without a cursor.",
	},
	{
		Slug:   OriginNotAllowed,
		Status: http.StatusForbidden,
		Title:  "Origin not allowed",
		Explanation: "The request came from a web page (its `Origin` header names a site) that is neither this " +
			"gateway's own origin nor one it was told to allow. `/mcp` refuses such requests, as the Model " +
			"Context Protocol requires, so that a page on another site cannot reach the gateway by its " +
			"address (DNS rebinding). Nothing was read, recorded or executed.",
		WhatToDo: "Call `/mcp` from a program (which sends no `Origin`), from a page served by the gateway's own " +
			"origin, or ask the operator to allow your page's origin (`idemgate serve --allowed-origin " +
			"https://app.example.com`). Behind a reverse proxy, the operator names the proxy with " +
			"`--trust-proxy` so that the gateway knows the origin clients reach it at.",
	},
	{
		Slug:   Internal,
		Status: http.StatusInternalServerError,
		Title:  "Internal error",
		Explanation: "idemgate failed unexpectedly while handling the request. The details are in its " +
			"logs, not in this answer.",
		WhatToDo: "If this answered `POST /v1/operations`, the operation may or may not have been " +
			"recorded: resend the same request with the same `Idempotency-Key`, never a new one, and " +
			"idemgate either returns the recorded operation or records it now. It never runs a key " +
			"twice. Reads may be retried freely. If it persists, tell the gateway's operators the time " +
			"of the request.",
	},
}
