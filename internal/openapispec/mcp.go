package openapispec

import "github.com/idemgate/idemgate/handlers/problems"

// mcpPath describes /mcp: the Model Context Protocol over Streamable HTTP. OpenAPI cannot
// describe JSON-RPC methods, so the description says what tools/list and tools/call do.
func mcpPath() obj {
	plain := func(description string) obj {
		return o("description", description, "content", o("text/plain", o("schema", o("type", "string"))))
	}
	refusals := func(answers ...any) obj {
		return sortedByStatus(o(answers...).with(
			code(401), problemResponse(o("WWW-Authenticate", headerRef("WWW-Authenticate")), problems.Unauthenticated),
			code(403), problemResponse(nil, problems.OriginNotAllowed),
			code(503), problemResponse(o("Retry-After", headerRef("Retry-After")), problems.LedgerUnavailable),
		))
	}
	notAllowed := plain("The server is stateless: it offers neither a standalone event stream nor sessions to end. Use POST.")
	return o(
		"post", o("operationId", "mcp", "tags", list("mcp"), "summary", "Model Context Protocol (Streamable HTTP, stateless)",
			"description", "Authenticated with the same API keys; protocol revisions 2026-07-28, 2025-11-25 and 2025-06-18. "+
				"`tools/list` gives the key's tools under names every model provider takes (dots written `__`), each titled "+
				"with its own name; every state-changing tool's `inputSchema` adds a required `operation_key` string (a "+
				"read's takes it too, optional), and every tool's `outputSchema` describes its structured content. "+
				"`GET /v1/tools?format=mcp` answers the same list. `tools/call` takes either name and runs through the "+
				"same ledger and checks as `POST /v1/operations`, under the key from `params.idempotencyKey`, else `_meta` "+
				"`idemgate/key`, else the `operation_key` argument (`_meta` may also carry `idemgate/wait` in seconds, "+
				"`idemgate/workflow_run_id`, `idemgate/step_id` and `idemgate/justification`). Its structured content is "+
				"the operation object; a call with the same key returns the recorded operation and runs nothing. Only a "+
				"success is not an error result: an outcome that is not final (in progress, `UNKNOWN`, awaiting approval) "+
				"is an error result that asks to call again with the same key, or a task for a client that speaks MCP "+
				"tasks; a final failure and a refusal (its structured content is the problem details object) are error "+
				"results. Methods not served are JSON-RPC error -32601 (answered with 404 on 2026-07-28, 200 before).",
			"requestBody", o("required", true, "content", o(appJSON, o("schema", schemaRef("JSONRPCMessage")))),
			"responses", refusals(
				code(200), o("description", "The JSON-RPC response.", "content", o(
					appJSON, o("schema", schemaRef("JSONRPCMessage")),
					"text/event-stream", o())),
				code(202), o("description", "A notification was accepted; no body."),
				code(400), o("description", "The transport refused the message: not JSON-RPC, or an `Accept` without both "+
					"`application/json` and `text/event-stream` (text); or a JSON-RPC batch of more than 16 messages "+
					"(a JSON-RPC error).", "content", o("text/plain", o("schema", o("type", "string")),
					appJSON, o("schema", schemaRef("JSONRPCMessage")))),
				code(404), o("description", "On protocol revision 2026-07-28, a request for a method the server does "+
					"not serve (`prompts/list`, `resources/list`, an unknown method): the JSON-RPC error -32601 (method "+
					"not found). Earlier revisions answer it with 200.", "content", o(appJSON, o("schema", schemaRef("JSONRPCMessage")))),
				code(413), plain("The message is larger than the transport accepts."),
				code(415), plain("`Content-Type` is not `application/json`."),
				code(500), o("description", "The answer would be larger than 8 MiB: a JSON-RPC error asks for fewer "+
					"messages in one request.", "content", o(appJSON, o("schema", schemaRef("JSONRPCMessage")))),
			)),
		"get", o("operationId", "mcpStream", "tags", list("mcp"), "summary", "Not offered (stateless server)",
			"description", "The standalone server-to-client event stream of Streamable HTTP. This server keeps no "+
				"sessions and sends nothing unasked, so it refuses the request; MCP clients then carry on with POST.",
			"responses", refusals(code(405), notAllowed)),
		"delete", o("operationId", "mcpEndSession", "tags", list("mcp"), "summary", "Not offered (stateless server)",
			"description", "Ending a Streamable HTTP session. This server keeps no sessions, so there is none to end.",
			"responses", refusals(code(405), notAllowed)),
	)
}
