package openapispec

import "github.com/idemgate/idemgate/handlers/problems"

// The values of the enumerations the API answers with, as SPEC §5 fixes them. The
// conformance test (e2e) checks real answers against them.
var (
	states       = list("PENDING", "AWAITING_APPROVAL", "RUNNING", "SUCCEEDED", "FAILED_FINAL", "UNKNOWN")
	errorClasses = list("rejected", "ambiguous", "not_sent", "throttled", "retries_exhausted", "cancelled",
		"rejected_by_reviewer", "permission_revoked")
	eventTypes = list("created", "state_changed", "attempt_started", "attempt_finished", "retry_scheduled",
		"reconcile_started", "reconcile_finished", "escalated", "review_action", "compensation_linked")
	reviewReasons = list("unknown_outcome", "approval_required", "compensation_approval", "manual")
)

// operationProblems are the problem types about an existing operation: they always carry
// operation_id, state and safe_to_retry_with_new_key (false).
var operationProblems = []string{
	problems.OperationInProgress, problems.OperationUncertain, problems.OperationAwaitingApproval,
	problems.IdempotencyKeyMismatch, problems.IdempotencyKeyExpired, problems.NotCancellable, problems.NotCompensable,
}

const dateTime = "date-time"

// anyJSON allows any JSON value. It spells out every type rather than being {}: validators
// that apply OpenAPI 3.0 rules to 3.1 documents (kin-openapi, for one) refuse null for {}.
var anyJSON = o("type", list("object", "array", "string", "number", "boolean", "null"))

// schemas is components.schemas.
func schemas() obj {
	return o(
		"OperationRequest", operationRequest(),
		"Operation", operation(),
		"OperationState", o("type", "string", "enum", states,
			"description", "`SUCCEEDED` and `FAILED_FINAL` are terminal and never change; the others move on (SPEC §2)."),
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
		"ToolList", toolList("ToolDefinition"),
		"ToolDefinition", toolDefinition(),
		"OpenAIToolList", toolList("OpenAITool"),
		"OpenAITool", openAITool(),
		"AnthropicToolList", toolList("AnthropicTool"),
		"AnthropicTool", namedSchemaTool("input_schema", "The Anthropic tool-use format; each `.` of the name is written `__`."),
		"MCPToolList", toolList("MCPTool"),
		"MCPTool", namedSchemaTool("inputSchema", "The Model Context Protocol `tools/list` format; names keep their dots."),
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
		"JSONRPCMessage", o("type", "object", "required", list("jsonrpc"),
			"description", "A JSON-RPC 2.0 message of the Model Context Protocol.",
			"properties", o("jsonrpc", o("type", "string", "enum", list("2.0")))),
	)
}

func operationRequest() obj {
	return o("type", "object", "additionalProperties", false, "required", list("tool"),
		"properties", o(
			"tool", text("The tool's name, dotted (`tickets.create`) or with `__` for each dot (`tickets__create`)."),
			"params", o("type", list("object", "null"),
				"description", "The tool's params; they must match its `params_schema`. Absent or null means `{}`."),
			"workflow_run_id", o("type", "string", "maxLength", 255,
				"description", "Groups the operations of one workflow run (console page `/workflows/{id}`)."),
			"step_id", o("type", "string", "maxLength", 255, "description", "Names the step of the workflow run."),
		),
		"examples", list(o("tool", "tickets.create", "params", o("subject", "Printer on fire"),
			"workflow_run_id", "workflow-8472", "step_id", "create-ticket")))
}

func operation() obj {
	nullableString := o("type", list("string", "null"))
	nullableTime := o("type", list("string", "null"), "format", dateTime)
	return o("type", "object", "additionalProperties", false,
		"description", "One logical action an agent asked for: (tenant, key) → tool + params. Every member is always present.",
		"required", list("id", "key", "tool", "state", "fingerprint", "params", "result", "error", "downstream_ref",
			"attempts", "next_attempt_at", "review", "compensates", "compensated_by", "workflow_run_id", "step_id",
			"created_at", "updated_at", "completed_at"),
		"properties", o(
			"id", o("type", "string", "pattern", "^op_[0-9A-Z]{26}$", "description", "Also the downstream key sent on every attempt."),
			"key", o("type", "string", "minLength", 1, "maxLength", 255, "description", "The caller's operation key (`Idempotency-Key`)."),
			"tool", text("The tool's dotted name."),
			"state", schemaRef("OperationState"),
			"fingerprint", o("type", "string", "pattern", "^sha256:[0-9a-f]{64}$",
				"description", "SHA-256 of the JCS canonical JSON of {\"tool\", \"params\"}."),
			"params", o("type", list("object", "null"),
				"description", "The params, with sensitive params shown as `\"***\"`; null once retention has dropped them."),
			"result", anyJSON.with("description", "The downstream's 2xx body once SUCCEEDED; null before and after retention."),
			"error", nullable(schemaRef("OperationError")),
			"downstream_ref", o("type", list("string", "null"), "description", "The downstream's id of what it made (`result_reference`)."),
			"attempts", o("type", "integer", "minimum", 0),
			"next_attempt_at", nullableTime.with("description", "When a retry proven safe is due."),
			"review", nullable(schemaRef("Review")),
			"compensates", nullableString.with("description", "The id of the operation this one undoes."),
			"compensated_by", nullableString.with("description", "The id of the operation that undoes this one."),
			"workflow_run_id", nullableString,
			"step_id", nullableString,
			"created_at", o("type", "string", "format", dateTime),
			"updated_at", o("type", "string", "format", dateTime),
			"completed_at", nullableTime,
		),
		"examples", list(o(
			"id", "op_01JD7X4T6V8Q0W9M3K5N2P1R8S", "key", "workflow-8472:create-ticket", "tool", "tickets.create",
			"state", "SUCCEEDED", "fingerprint", "sha256:9f2c5a4e0d1b7c3a8e6f2d4b1a0c9e8d7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c",
			"params", o("subject", "Printer on fire"), "result", o("id", "T-1042", "status", "open"), "error", nil,
			"downstream_ref", "T-1042", "attempts", 1, "next_attempt_at", nil, "review", nil, "compensates", nil,
			"compensated_by", nil, "workflow_run_id", "workflow-8472", "step_id", "create-ticket",
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

// jsonSchema is a JSON Schema 2020-12 document, as a tool's params schema is.
var jsonSchema = o("type", "object", "description", "A JSON Schema (2020-12) of the tool's params.")

func toolDefinition() obj {
	return o("type", "object", "additionalProperties", false,
		"required", list("name", "description", "effect", "params_schema", "requires_approval"),
		"properties", o(
			"name", o("type", "string", "pattern", "^[a-z0-9][a-z0-9_.-]{0,63}$"),
			"description", o("type", "string"),
			"effect", o("type", "string", "enum", list("read", "idempotent", "write")),
			"params_schema", jsonSchema,
			"requires_approval", o("type", "boolean"),
		))
}

func openAITool() obj {
	return o("type", "object", "additionalProperties", false, "required", list("type", "function"),
		"description", "The OpenAI function-calling format; each `.` of the name is written `__`.",
		"properties", o(
			"type", o("type", "string", "enum", list("function")),
			"function", o("type", "object", "additionalProperties", false, "required", list("name", "description", "parameters"),
				"properties", o(
					"name", o("type", "string", "pattern", "^[a-zA-Z0-9_-]{1,64}$"),
					"description", o("type", "string"),
					"parameters", jsonSchema,
				)),
		))
}

// namedSchemaTool is a {name, description, <schemaMember>} tool definition.
func namedSchemaTool(schemaMember, description string) obj {
	name := o("type", "string", "pattern", "^[a-zA-Z0-9_-]{1,64}$")
	if schemaMember == "inputSchema" {
		name = o("type", "string", "pattern", "^[a-z0-9][a-z0-9_.-]{0,63}$")
	}
	return o("type", "object", "additionalProperties", false, "required", list("name", "description", schemaMember),
		"description", description,
		"properties", o("name", name, "description", o("type", "string"), schemaMember, jsonSchema))
}
