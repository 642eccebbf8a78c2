package openapispec

import "github.com/idemgate/idemgate/handlers/problems"

// The values of the enumerations the API answers with, as docs/API.md fixes them. The
// conformance test (e2e) checks real answers against them.
var (
	states       = list("PENDING", "AWAITING_APPROVAL", "RUNNING", "SUCCEEDED", "FAILED_FINAL", "UNKNOWN")
	errorClasses = list("rejected", "ambiguous", "not_sent", "throttled", "retries_exhausted", "cancelled",
		"rejected_by_reviewer", "permission_revoked")
	eventTypes = list("created", "state_changed", "attempt_started", "attempt_finished", "retry_scheduled",
		"reconcile_started", "reconcile_finished", "escalated", "review_action", "compensation_linked")
	reviewReasons = list("unknown_outcome", "approval_required", "policy", "compensation_approval", "manual")
)

// operationProblems are the problem types about an existing operation: they always carry
// operation_id, state and safe_to_retry_with_new_key (false).
var operationProblems = []string{
	problems.OperationInProgress, problems.OperationUncertain, problems.OperationAwaitingApproval,
	problems.IdempotencyKeyMismatch, problems.IdempotencyKeyExpired, problems.NotCancellable, problems.NotCompensable,
}

const dateTime = "date-time"

// anyJSON allows any JSON value: a $ref to JSONValue, which generators type as unknown
// (openapi-typescript), never as an empty object. A list of types would need "items" for
// "array" (Spectral's array-items), and a recursive union is a circular type to TypeScript.
var anyJSON = schemaRef("JSONValue")

// jsonValue is components.schemas.JSONValue: anything, spelled "null, or not null" rather than
// {} because kin-openapi validates schemas that use $ref by OpenAPI 3.0's rules, under which
// {} refuses null; and not as anyOf [null, {}], which Redocly calls illogical.
func jsonValue() obj {
	return o("description", "Any JSON value: an object, array, string, number, boolean or null.",
		"anyOf", list(o("type", "null"), o("not", o("type", "null"))))
}

// freeObject is a JSON object with any members; additionalProperties is spelled out so that
// generators give an open object (openapi-typescript: { [key: string]: unknown }), not {}.
var freeObject = o("type", "object", "additionalProperties", schemaRef("JSONValue"))

// schemas is components.schemas.
func schemas() obj {
	return o(
		"OperationRequest", operationRequest(),
		"Operation", operation(),
		"OperationState", o("type", "string", "enum", states,
			"description", "`SUCCEEDED` and `FAILED_FINAL` are terminal and never change; the others move on (docs/STATES.md in the repository)."),
		"OperationError", o("type", "object", "additionalProperties", false,
			"description", "Why the operation failed or is uncertain.",
			"required", list("class", "message", "downstream_status"),
			"properties", o(
				"class", o("type", "string", "enum", errorClasses),
				"message", o("type", "string"),
				"downstream_status", o("type", list("integer", "null"), "description", "The downstream's HTTP status, when it answered."),
			)),
		"Review", o("type", "object", "additionalProperties", false,
			"description", "The operation's current review by people, when it has one.",
			"required", list("id", "status", "reason"),
			"properties", o(
				"id", o("type", "string"),
				"status", o("type", "string", "enum", list("open", "resolved")),
				"reason", o("type", "string", "enum", reviewReasons),
			)),
		"OperationList", o("type", "object", "additionalProperties", false,
			"required", list("operations", "next_cursor"),
			"properties", o(
				"operations", o("type", "array", "items", schemaRef("Operation"), "description", "Newest first."),
				"next_cursor", o("type", list("string", "null"),
					"description", "Pass it back as `cursor`, with the same filters, for the next page; null on the last page."),
			)),
		"Event", event(),
		"EventList", o("type", "object", "additionalProperties", false, "required", list("events"),
			"properties", o("events", o("type", "array", "items", schemaRef("Event"), "description", "In the order they happened."))),
		"PolicyDecision", o("type", "object", "additionalProperties", false,
			"description", "What the tools file's policies and budgets decided when the operation was recorded (docs/POLICY.md).",
			"required", list("rule", "decision", "reason", "budgets"),
			"properties", o(
				"rule", o("type", "string", "description", "The rule that decided; \"\" when only budgets applied."),
				"decision", o("type", "string", "enum", list("allow", "require_approval", "deny")),
				"reason", o("type", "string"),
				"approvals", o("type", "integer", "minimum", 1, "description", "The rule's own count of distinct reviewers, when it gives one."),
				"budgets", o("type", list("array", "null"), "items", o("type", "object", "additionalProperties", false,
					"required", list("name", "scope", "amount", "used", "limit", "decision"),
					"properties", o("name", o("type", "string"), "scope", o("type", "string"), "amount", o("type", "integer"),
						"used", o("type", "integer", "description", "What was counted against the scope value before this operation."),
						"limit", o("type", "integer"), "decision", o("type", "string", "enum", list("allow", "require_approval", "deny"))))),
			)),
		"BudgetList", o("type", "object", "additionalProperties", false, "required", list("budgets"),
			"properties", o("budgets", o("type", "array", "items", schemaRef("Budget")))),
		"Budget", o("type", "object", "additionalProperties", false,
			"required", list("name", "limit", "scope", "used", "remaining"),
			"properties", o(
				"name", o("type", "string"),
				"limit", o("type", "integer", "minimum", 0, "description", "The tenant's limit per scope value and window."),
				"window", o("type", "string", "description", "A rolling window (`24h0m0s`); absent with `period`."),
				"period", o("type", "string", "enum", list("day", "week", "month"), "description", "A calendar period in UTC; absent with `window`."),
				"scope", o("type", list("string", "null"), "description", "The scope value: the `per` parts joined with `/`."),
				"used", o("type", "integer", "minimum", 0),
				"remaining", o("type", "integer", "minimum", 0),
			)),
		"ToolList", toolList("ToolDefinition"),
		"ToolDefinition", toolDefinition(),
		"OpenAIToolList", toolList("OpenAITool"),
		"OpenAITool", openAITool(),
		"OpenAIResponsesToolList", toolList("OpenAIResponsesTool"),
		"OpenAIResponsesTool", openAIResponsesTool(),
		"AnthropicToolList", toolList("AnthropicTool"),
		"AnthropicTool", namedSchemaTool("input_schema", "The Anthropic tool-use format; each `.` of the name is written `__`."),
		"MCPToolList", toolList("MCPTool"),
		"MCPTool", mcpTool(),
		"Problem", problem(),
		"ParamError", o("type", "object", "additionalProperties", false, "required", list("pointer", "message"),
			"properties", o(
				"pointer", text("JSON pointer (RFC 6901) into params of the value at fault; \"\" for params as a whole."),
				"message", o("type", "string"),
			)),
		"Health", o("type", "object", "additionalProperties", false, "required", list("status"),
			"properties", o("status", o("type", "string", "enum", list("ok")))),
		"Readiness", o("type", "object", "additionalProperties", false, "required", list("status"),
			"properties", o(
				"status", o("type", "string", "enum", list("ready", "unavailable")),
				"reason", o("type", "string"),
			)),
		"JSONValue", jsonValue(),
		"JSONSchema", jsonSchema(),
		"JSONRPCMessage", o("type", "object", "required", list("jsonrpc"), "additionalProperties", true,
			"description", "A JSON-RPC 2.0 message of the Model Context Protocol.",
			"properties", o("jsonrpc", o("type", "string", "enum", list("2.0")))),
	)
}

func operationRequest() obj {
	return o("type", "object", "additionalProperties", false, "required", list("tool"),
		"properties", o(
			"tool", text("The tool's name, dotted (`tickets.create`) or with `__` for each dot (`tickets__create`)."),
			"params", nullableObject("The tool's params; they must match its `params_schema`. Absent or null means `{}`. "+
				"A null for a param the schema does not require, where its schema refuses null, means the param is absent: "+
				"`{\"priority\": null}` is `{}` (OpenAI's strict mode sends such nulls)."),
			"workflow_run_id", o("type", "string", "maxLength", 255,
				"description", "Groups the operations of one workflow run (console page `/workflows/{id}`)."),
			"step_id", o("type", "string", "maxLength", 255, "description", "Names the step of the workflow run."),
			"justification", o("type", "string", "maxLength", 2000,
				"description", "The agent's reason for the call, shown to reviewers. Not part of the fingerprint: a retry that "+
					"words it differently still replays, and the first one recorded is kept. Sensitive values in it are masked."),
		),
		"examples", list(o("tool", "tickets.create", "params", o("subject", "Printer on fire"),
			"workflow_run_id", "workflow-8472", "step_id", "create-ticket",
			"justification", "The customer reported the printer fire in chat 5512.")))
}

func operation() obj {
	nullableString := o("type", list("string", "null"))
	nullableTime := o("type", list("string", "null"), "format", dateTime)
	return o("type", "object", "additionalProperties", false,
		"description", "One logical action an agent asked for: (tenant, key) → tool + params. Every member is always present.",
		"required", list("id", "key", "tool", "state", "fingerprint", "params", "result", "error", "downstream_ref",
			"downstream_key", "attempts", "next_attempt_at", "review", "compensates", "compensated_by", "workflow_run_id", "step_id",
			"justification", "policy", "created_at", "updated_at", "completed_at"),
		"properties", o(
			"id", o("type", "string", "pattern", "^op_[0-9A-Z]{26}$"),
			"key", o("type", "string", "minLength", 1, "maxLength", 255, "description", "The caller's operation key (`Idempotency-Key`)."),
			"tool", text("The tool's dotted name."),
			"state", schemaRef("OperationState"),
			"fingerprint", o("type", "string", "pattern", "^(hmac-sha256|sha256):[0-9a-f]{64}$",
				"description", "HMAC-SHA256, under the ledger's key, of the JCS canonical JSON of {\"tool\", \"params\"}. "+
					"Operations recorded before fingerprints were keyed keep their plain `sha256:` form."),
			"params", nullableObject("The params, with sensitive params shown as `\"***\"`; null once retention has dropped them."),
			"result", anyJSON.with("description", "The downstream's 2xx body once SUCCEEDED; null before and after retention."),
			"error", nullable(schemaRef("OperationError")),
			"downstream_ref", o("type", list("string", "null"), "description", "The downstream's id of what it made (`result_reference`)."),
			"downstream_key", o("type", "string", "pattern", "^(dk_[0-9a-f]{32}|op_[0-9A-Z]{26})$",
				"description", "The key sent downstream on every attempt (`X-Idemgate-Downstream-Key`, the tool's `idempotency_header`, "+
					"`{{.DownstreamKey}}`): derived from tenant and key alone, so an operation made anew after the ledger lost its record sends it again. "+
					"Operations recorded before downstream keys were derived send their id."),
			"attempts", o("type", "integer", "minimum", 0),
			"next_attempt_at", nullableTime.with("description", "When a retry proven safe is due."),
			"review", nullable(schemaRef("Review")),
			"compensates", nullableString.with("description", "The id of the operation this one undoes."),
			"compensated_by", nullableString.with("description", "The id of the operation that undoes this one."),
			"workflow_run_id", nullableString,
			"step_id", nullableString,
			"justification", nullableString.with("description", "The agent's reason, as first recorded (masked); null when none was given."),
			"policy", nullable(schemaRef("PolicyDecision")),
			"created_at", o("type", "string", "format", dateTime),
			"updated_at", o("type", "string", "format", dateTime),
			"completed_at", nullableTime,
		),
		"examples", list(o(
			"id", "op_01JD7X4T6V8Q0W9M3K5N2P1R8S", "key", "workflow-8472:create-ticket", "tool", "tickets.create",
			"state", "SUCCEEDED", "fingerprint", "hmac-sha256:9f2c5a4e0d1b7c3a8e6f2d4b1a0c9e8d7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c",
			"params", o("subject", "Printer on fire"), "result", o("id", "T-1042", "status", "open"), "error", nil,
			"downstream_ref", "T-1042", "downstream_key", "dk_4f1c0b7e9a2d5c8f3e6b1a4d7c0f9e2b", "attempts", 1, "next_attempt_at", nil, "review", nil, "compensates", nil,
			"compensated_by", nil, "workflow_run_id", "workflow-8472", "step_id", "create-ticket",
			"justification", "The customer reported the printer fire in chat 5512.", "policy", nil,
			"created_at", "2026-11-29T10:00:00Z", "updated_at", "2026-11-29T10:00:00Z", "completed_at", "2026-11-29T10:00:00Z",
		)))
}

func event() obj {
	state := nullable(schemaRef("OperationState"))
	return o("type", "object", "additionalProperties", false,
		"required", list("id", "at", "type", "from_state", "to_state", "attempt", "actor", "detail"),
		"properties", o(
			"id", o("type", "integer"),
			"at", o("type", "string", "format", dateTime),
			"type", o("type", "string", "enum", eventTypes),
			"from_state", state,
			"to_state", state,
			"attempt", o("type", list("integer", "null"), "description", "The attempt's number, for attempt events."),
			"actor", text("`api:<principal>`, `worker:<instance>` or `user:<email>`."),
			"detail", anyJSON.with("description", "What the event records beyond its type (often an object); null when nothing."),
		))
}

func toolList(item string) obj {
	return o("type", "object", "additionalProperties", false, "required", list("tools"),
		"properties", o("tools", o("type", "array", "items", schemaRef(item), "description", "Only the tools the API key may use.")))
}

// jsonSchema is a JSON Schema 2020-12 document of an object, as a tool's params schema is;
// spelled so that generated types take it where the providers' SDKs want a schema of an object.
func jsonSchema() obj {
	return o("type", "object", "description", "A JSON Schema (2020-12) of the tool's params: an object schema.",
		"required", list("type"), "additionalProperties", schemaRef("JSONValue"),
		"properties", o(
			"type", o("type", "string", "const", "object"),
			"properties", freeObject,
			"required", o("type", "array", "items", o("type", "string")),
		))
}

// nullableObject is a JSON object with any members, or null.
func nullableObject(description string) obj {
	return o("type", list("object", "null"), "additionalProperties", schemaRef("JSONValue"), "description", description)
}

func toolDefinition() obj {
	return o("type", "object", "additionalProperties", false,
		"required", list("name", "description", "effect", "params_schema", "requires_approval"),
		"properties", o(
			"name", o("type", "string", "pattern", "^[a-z0-9][a-z0-9_.-]{0,63}$"),
			"description", o("type", "string"),
			"effect", o("type", "string", "enum", list("read", "idempotent", "write")),
			"params_schema", schemaRef("JSONSchema"),
			"requires_approval", o("type", "boolean"),
		))
}

var functionName = o("type", "string", "pattern", "^[a-zA-Z0-9_-]{1,64}$",
	"description", "The tool's name with each `.` written `__`.")

func openAITool() obj {
	return o("type", "object", "additionalProperties", false, "required", list("type", "function"),
		"description", "The OpenAI Chat Completions function-calling format (`api=chat_completions`, the default).",
		"properties", o(
			"type", o("type", "string", "const", "function"),
			"function", o("type", "object", "additionalProperties", false, "required", list("name", "description", "parameters"),
				"properties", o(
					"name", functionName,
					"description", o("type", "string"),
					"parameters", schemaRef("JSONSchema"),
					"strict", o("type", "boolean", "description", strictDescription+" Present only with `strict`."),
				)),
		))
}

func openAIResponsesTool() obj {
	return o("type", "object", "additionalProperties", false, "required", list("type", "name", "description", "parameters", "strict"),
		"description", "The OpenAI Responses API's flat function tool format (`api=responses`).",
		"properties", o(
			"type", o("type", "string", "const", "function"),
			"name", functionName,
			"description", o("type", "string"),
			"parameters", schemaRef("JSONSchema"),
			"strict", o("type", "boolean", "description", strictDescription+" Always present: the Responses API takes an absent `strict` as true."),
		))
}

const strictDescription = "True when `parameters` is in strict-mode form (every param required; the optional ones accept " +
	"null, which the gateway reads as absent); false when strict mode cannot express the tool's schema, which is then given as written."

// namedSchemaTool is a {name, description, <schemaMember>} tool definition.
func namedSchemaTool(schemaMember, description string) obj {
	return o("type", "object", "additionalProperties", false, "required", list("name", "description", schemaMember),
		"description", description,
		"properties", o("name", functionName, "description", o("type", "string"), schemaMember, schemaRef("JSONSchema")))
}

// mcpTool is a tool as MCP's tools/list describes it.
func mcpTool() obj {
	hint := func(description string) obj { return o("type", "boolean", "description", description) }
	return o("type", "object", "additionalProperties", false,
		"required", list("name", "title", "description", "inputSchema", "outputSchema", "annotations", "_meta"),
		"description", "A tool exactly as the MCP endpoint's `tools/list` describes it: listed under a name every model "+
			"provider takes, titled with its own (dotted) name.",
		"properties", o(
			"name", functionName,
			"title", o("type", "string", "description", "The tool's own name (for a tool of an upstream MCP server, its server's title when it has one)."),
			"description", o("type", "string"),
			"inputSchema", schemaRef("JSONSchema"),
			"outputSchema", freeObject.with("description", "The schema of every call's structured content: the operation "+
				"object, or the problem details object of a refusal."),
			"annotations", o("type", "object", "additionalProperties", false, "required", list("readOnlyHint", "idempotentHint"),
				"properties", o(
					"readOnlyHint", hint("True for a tool whose effect is `read`."),
					"destructiveHint", hint("True for a tool whose effect is `write`, false for a `read`; for an MCP server's `idempotent` tool, its server's own hint when it gives one (else false)."),
					"idempotentHint", hint("Always true: a call repeated with the same operation key and arguments replays the recorded outcome."),
					"openWorldHint", hint("As the upstream MCP server says, for its tools."),
					"title", o("type", "string", "description", "As the upstream MCP server says, for its tools."),
				)),
			"_meta", o("type", "object", "required", list("idemgate/tool", "idemgate/effect"),
				"description", "What the tool needs, for a framework that routes approvals to its own interface.",
				"properties", o(
					"idemgate/tool", o("type", "string", "description", "The tool's own name."),
					"idemgate/effect", o("type", "string", "enum", list("read", "idempotent", "write")),
					"idemgate/requires_approval", o("type", "boolean", "description", "Present and true when a reviewer must approve each call."),
					"idemgate/approvals", o("type", "integer", "minimum", 1, "description", "How many distinct reviewers must approve."),
					"idemgate/upstream_annotations", freeObject.with("description", "An upstream MCP server's tool: its annotations as the server listed them."),
				)),
		))
}
