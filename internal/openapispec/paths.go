package openapispec

import (
	"slices"
	"strconv"
	"strings"

	"github.com/idemgate/idemgate/handlers/problems"
)

// paths is the paths object: the agent API, then the service endpoints.
func paths() obj {
	id := list(param("OperationID"))
	return o(
		"/v1/operations", o("post", createOperation(), "get", listOperations()),
		"/v1/operation-keys/{key}", o("parameters", list(param("OperationKey")), "get", getOperationByKey()),
		"/v1/operations/{id}", o("parameters", id, "get", getOperation()),
		"/v1/operations/{id}/events", o("parameters", id, "get", listEvents()),
		"/v1/operations/{id}/cancel", o("parameters", id, "post", cancelOperation()),
		"/v1/operations/{id}/compensate", o("parameters", id, "post", compensateOperation()),
		"/v1/tools", o("get", listTools()),
		"/v1/budgets", o("get", listBudgets()),
		"/mcp", mcpPath(),
		"/healthz", o("get", service("healthz", "Liveness", "200 while the process lives.",
			code(200), jsonResponse("Alive.", schemaRef("Health"), nil))),
		"/readyz", o("get", service("readyz", "Readiness", "200 when the ledger answers and its schema is current, else 503: "+
			"a gateway that cannot record must not take traffic.",
			code(200), jsonResponse("Ready.", schemaRef("Readiness"), nil),
			code(503), jsonResponse("Not ready: the ledger is unreachable or its schema is not current.", schemaRef("Readiness"),
				o("Retry-After", headerRef("Retry-After"))))),
		"/openapi.json", o("get", service("openapi", "This document", "The OpenAPI 3.1 document of this API.",
			code(200), jsonResponse("The document.", freeObject, nil))),
		"/problems", o("get", service("problemIndex", "Problem types", "A page listing every problem type.",
			code(200), html("The page."))),
		"/problems/{slug}", o("parameters", list(o("name", "slug", "in", "path", "required", true, "schema", o("type", "string"))),
			"get", service("problemPage", "A problem type", "The page a problem's `type` names: what happened and what is safe to do next.",
				code(200), html("The page."),
				code(404), o("description", "No such problem type: a page for browsers, problem details otherwise.",
					"content", o("text/html", o(), problemJSON, problemMedia(problems.NotFound))))),
	)
}

func createOperation() obj {
	return o("operationId", "createOperation", "tags", list("operations"),
		"summary", "Record and run an operation, at most once per key",
		"description", "Checks, in this order: authentication, `Idempotency-Key` (keys beginning with `compensate:` are "+
			"the gateway's own: `idempotency-key-reserved`), the body (≤ 1 MiB, well-formed), the "+
			"tool exists, the key may use it, the params match its schema. A request failing a check records and runs "+
			"nothing. Then the key is looked up: a new key records the operation and runs it; a known key with the same "+
			"tool and params never runs anything again and answers with the one operation's outcome; a known key with "+
			"other params is refused.",
		"parameters", list(param("IdempotencyKey"), param("Prefer")),
		"requestBody", o("required", true, "content", o(appJSON, o("schema", schemaRef("OperationRequest")))),
		"responses", submitResponses(
			code(400), problemResponse(nil, problems.IdempotencyKeyMissing, problems.IdempotencyKeyInvalid,
				problems.MalformedBody, problems.InvalidParams),
			code(403), problemResponse(nil, problems.ToolForbidden, problems.PolicyDenied),
			code(404), problemResponse(nil, problems.UnknownTool),
			code(409), problemResponse(inFlightHeaders(true),
				problems.OperationInProgress, problems.OperationUncertain, problems.OperationAwaitingApproval),
			code(410), problemResponse(nil, problems.IdempotencyKeyExpired),
			code(413), problemResponse(nil, problems.BodyTooLarge),
			code(415), problemResponse(nil, problems.UnsupportedMediaType),
			code(422), problemResponse(nil, problems.IdempotencyKeyReserved, problems.IdempotencyKeyMismatch,
				problems.ConnectionNotConfigured),
		))
}

func compensateOperation() obj {
	return o("operationId", "compensateOperation", "tags", list("operations"),
		"summary", "Undo a SUCCEEDED operation through a new, linked operation",
		"description", "Builds the compensation from the tool's `compensation` template and records it linked both ways "+
			"(`compensates` / `compensated_by`), subject to the compensation tool's own review policy. Answers like "+
			"`POST /v1/operations`; a second request returns the same compensation.",
		"parameters", list(param("CompensationKey"), param("Prefer")),
		"responses", submitResponses(
			code(400), problemResponse(nil, problems.IdempotencyKeyMissing, problems.IdempotencyKeyInvalid),
			code(403), problemResponse(nil, problems.ToolForbidden),
			code(404), problemResponse(nil, problems.NotFound),
			code(409), problemResponse(inFlightHeaders(false), problems.OperationInProgress, problems.OperationUncertain,
				problems.OperationAwaitingApproval, problems.NotCompensable),
			code(410), problemResponse(nil, problems.IdempotencyKeyExpired),
			code(422), problemResponse(nil, problems.IdempotencyKeyReserved, problems.IdempotencyKeyMismatch),
		))
}

// inFlightHeaders are the headers of a 409 about an operation that is not terminal; they are
// optional where the same status also answers other problems.
func inFlightHeaders(required bool) obj {
	if !required {
		return o("Location", headerRef("Location-If-In-Flight"), "Retry-After", headerRef("Retry-After-If-In-Flight"),
			"Preference-Applied", headerRef("Preference-Applied"))
	}
	return o("Location", headerRef("Location"), "Retry-After", headerRef("Retry-After"), "Preference-Applied", headerRef("Preference-Applied"))
}

// submitResponses are the answers of a request that records an operation, with more.
func submitResponses(more ...any) obj {
	answers := []any{
		code(200), opResponse("Known key, same tool and params, operation terminal: the recorded operation, identical "+
			"result. Nothing ran again.", o("Idempotent-Replayed", headerRef("Idempotent-Replayed"), "Preference-Applied", headerRef("Preference-Applied"))),
		code(201), opResponse("New key; the operation reached a terminal state within the wait.",
			o("Preference-Applied", headerRef("Preference-Applied"))),
		code(202), opResponse("New key; the operation was not terminal when the wait ran out, or it needs approval. "+
			"Poll `Location`.", o("Location", headerRef("Location"), "Retry-After", headerRef("Retry-After"), "Preference-Applied", headerRef("Preference-Applied"))),
	}
	answers = append(answers, more...)
	answers = append(answers, code(problemStatus(problems.RateLimited)),
		problemResponse(o("Retry-After", headerRef("Retry-After")), problems.RateLimited))
	return authenticated(answers...)
}

func listOperations() obj {
	filter := func(name, description string, schema obj) obj {
		return o("name", name, "in", "query", "required", false, "description", description, "schema", schema)
	}
	return o("operationId", "listOperations", "tags", list("operations"),
		"summary", "List operations",
		"description", "A page of the operations the key may see, newest first, filtered; or, with `key`, that "+
			"key's operation instead of a page (or 404), as `GET /v1/operation-keys/{key}` answers it. A generated "+
			"client gets a list from this path with either type; `GET /v1/operation-keys/{key}` answers the operation "+
			"alone, typed as one.",
		"parameters", list(
			filter("key", "An operation key (the agent's `Idempotency-Key`): the answer is that key's operation, not a "+
				"page, and the other parameters are ignored. A key the tenant never used, or used for a tool this API key "+
				"may not use, is not found.", o("type", "string", "minLength", 1, "maxLength", 255)),
			filter("state", "Only operations in this state.", schemaRef("OperationState")),
			filter("tool", "Only operations of this tool.", o("type", "string")),
			filter("workflow_run_id", "Only operations of this workflow run.", o("type", "string")),
			filter("limit", "Page size.", o("type", "integer", "minimum", 1, "maximum", 500, "default", 50)),
			filter("cursor", "`next_cursor` of the previous page.", o("type", "string")),
		),
		"responses", authenticated(
			code(200), jsonResponse("A page of operations; with `key`, the key's operation.",
				o("oneOf", list(schemaRef("OperationList"), schemaRef("Operation"))), nil),
			code(400), problemResponse(nil, problems.InvalidQuery),
			code(404), problemResponse(nil, problems.NotFound),
		))
}

func getOperationByKey() obj {
	return o("operationId", "getOperationByKey", "tags", list("operations"),
		"summary", "Find the operation of a key",
		"description", "How an agent resumes after a restart: it asks the ledger, not its own memory, what became of "+
			"the action it named with this key. Answers as `GET /v1/operations?key=K` does. A key the tenant never "+
			"used, or used for a tool this API key may not use, is not found.",
		"responses", authenticated(
			code(200), opResponse("The key's operation.", nil),
			code(404), problemResponse(nil, problems.NotFound),
		))
}

func getOperation() obj {
	return o("operationId", "getOperation", "tags", list("operations"), "summary", "Read an operation",
		"description", "The operation object: state, result or error, attempts, review and links. Another tenant's "+
			"operation, or one of a tool this API key may not use, is not found, exactly as a missing one.",
		"responses", authenticated(
			code(200), opResponse("The operation.", nil),
			code(404), problemResponse(nil, problems.NotFound),
		))
}

func listEvents() obj {
	return o("operationId", "listEvents", "tags", list("operations"), "summary", "Read an operation's timeline",
		"description", "Every event of the operation, in the order it happened: creation, state changes, attempts, "+
			"retries, reconciliation, escalation, review actions and compensation links.",
		"responses", authenticated(
			code(200), jsonResponse("The events, in order.", schemaRef("EventList"), nil),
			code(404), problemResponse(nil, problems.NotFound),
		))
}

func cancelOperation() obj {
	return o("operationId", "cancelOperation", "tags", list("operations"), "summary", "Cancel an operation that has not started",
		"description", "A `PENDING` or `AWAITING_APPROVAL` operation ends `FAILED_FINAL` (`cancelled`); any other is refused.",
		"responses", authenticated(
			code(200), opResponse("The operation, now FAILED_FINAL (cancelled).", nil),
			code(404), problemResponse(nil, problems.NotFound),
			code(409), problemResponse(nil, problems.NotCancellable),
		))
}

func listBudgets() obj {
	return o("operationId", "listBudgets", "tags", list("tools"), "summary", "How much room this key's budgets have left",
		"description", "The budgets of the tools file (docs/POLICY.md) that apply to a tool this key may use, with the tenant's "+
			"limit, one entry per scope value the key's operations were charged to in the window (one with a null `scope` "+
			"while there is none). `used` counts every principal's operations of that scope value; past `remaining`, a call "+
			"waits for a person (or is refused, as the budget says).",
		"responses", authenticated(
			code(200), jsonResponse("The budgets.", schemaRef("BudgetList"), nil),
		))
}

func listTools() obj {
	query := func(name, description string, schema obj) obj {
		return o("name", name, "in", "query", "required", false, "description", description, "schema", schema)
	}
	return o("operationId", "listTools", "tags", list("tools"), "summary", "The tools this key may use",
		"description", "In idemgate's own format, or as tool definitions an agent framework loads as they are. "+
			"Where a format forbids dots in names (OpenAI, Anthropic) each `.` is written `__`; `POST /v1/operations` "+
			"accepts either spelling. `format=mcp` is exactly what the MCP endpoint's `tools/list` says, `operation_key` "+
			"argument, annotations and output schema included.\n\n"+
			"For OpenAI, `api` chooses the shape and `strict` the strict-mode schemas. With `strict=true` every param "+
			"is required, and each optional one also accepts null, which the gateway reads as absent: the same "+
			"fingerprint as leaving it out. A tool whose schema strict mode cannot express is given as written, "+
			"with `strict: false`.",
		"parameters", list(
			query("format", "Absent for idemgate's own format.", o("type", "string", "enum", list("default", "openai", "anthropic", "mcp"))),
			query("api", "`format=openai` only: `chat_completions` (the default) nests each function as Chat Completions "+
				"takes it; `responses` gives the Responses API's flat `{type, name, description, parameters, strict}`.",
				o("type", "string", "enum", list("chat_completions", "responses"))),
			query("strict", "`format=openai` only: `true` for strict-mode schemas, with `strict` set on each tool.",
				o("type", "string", "enum", list("true", "false"))),
		),
		"responses", authenticated(
			code(200), jsonResponse("The tools, in the format asked for.", o("anyOf", list(schemaRef("ToolList"),
				schemaRef("OpenAIToolList"), schemaRef("OpenAIResponsesToolList"), schemaRef("AnthropicToolList"),
				schemaRef("MCPToolList")),
				"description", "anyOf, not oneOf: an empty list is valid in every format."), nil),
			code(400), problemResponse(nil, problems.UnsupportedFormat, problems.InvalidQuery),
		))
}

// authenticated adds the answers every API-key route may give to the given ones, ordered by
// status.
func authenticated(answers ...any) obj {
	all := o(answers...)
	all = all.with(
		code(401), problemResponse(o("WWW-Authenticate", headerRef("WWW-Authenticate")), problems.Unauthenticated),
		code(500), problemResponse(nil, problems.Internal),
		code(503), problemResponse(o("Retry-After", headerRef("Retry-After")), problems.LedgerUnavailable),
	)
	return sortedByStatus(all)
}

// service is an operation of the service endpoints, which need no API key.
func service(id, summary, description string, answers ...any) obj {
	return o("operationId", id, "tags", list("service"), "summary", summary, "description", description,
		"security", list(), "responses", o(answers...))
}

func jsonResponse(description string, schema, headers obj) obj {
	r := o("description", description)
	if len(headers) > 0 {
		r = r.with("headers", headers)
	}
	return r.with("content", o(appJSON, o("schema", schema)))
}

func opResponse(description string, headers obj) obj {
	return jsonResponse(description, schemaRef("Operation"), headers)
}

// html is a response of a page for people; its markup is not described.
func html(description string) obj {
	return o("description", description, "content", o("text/html", o()))
}

func param(name string) obj { return o("$ref", "#/components/parameters/"+name) }

func code(status int) string { return strconv.Itoa(status) }

// sortedByStatus orders a responses object by status code (three digits each).
func sortedByStatus(r obj) obj {
	out := append(obj{}, r...)
	slices.SortStableFunc(out, func(a, b member) int { return strings.Compare(a.name, b.name) })
	return out
}
