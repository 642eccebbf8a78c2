package handlers

import (
	"cmp"
	"encoding/json"
	"fmt"

	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPMetaOperation is the _meta member of a result from an MCP server's tool that names
// idemgate's operation: {"id", "state", "replayed"}. The result itself is the upstream's.
const MCPMetaOperation = "idemgate/operation"

// Tools of MCP servers pass through faithfully (docs/MCP.md): an agent talking to an upstream
// through idemgate's /mcp sees the upstream's schemas, title, annotations and results, with
// idemgate's additions (the operation_key input, the operation in _meta) beside them.

// mcpUpstreamTool describes a tool of an MCP server for tools/list: the upstream's
// inputSchema (as checked by the gateway, so a tools file's params_schema shows) with
// operation_key, its outputSchema and title, and annotations that say what the tool does
// through the gateway (idempotentHint is true: a repeat with the same key has no further
// effect). The upstream's own annotations are kept in _meta, so a person reading the listing
// sees what the server itself claims.
func mcpUpstreamTool(t *catalog.Tool) *mcp.Tool {
	out := &mcp.Tool{Name: t.FunctionName(), Title: cmp.Or(t.MCP.Title, t.Name), Description: t.Description, InputSchema: inputSchema(t)}
	if t.MCP.OutputSchema != nil {
		out.OutputSchema = t.MCP.OutputSchema
	}
	var upstream *mcp.ToolAnnotations
	if t.MCP.Annotations != nil {
		upstream = &mcp.ToolAnnotations{}
		if b, err := json.Marshal(t.MCP.Annotations); err == nil {
			_ = json.Unmarshal(b, upstream) // a hint of the wrong type is the upstream's mistake: dropped
		}
	}
	out.Annotations = annotations(t, upstream)
	out.Meta = toolMeta(t)
	if t.MCP.Annotations != nil {
		out.Meta[MCPMetaUpstreamAnnotations] = t.MCP.Annotations
	}
	return out
}

// MCPMetaUpstreamAnnotations holds an upstream tool's annotations as its server listed them.
const MCPMetaUpstreamAnnotations = "idemgate/upstream_annotations"

// operationMeta is the _meta of a result about op.
func operationMeta(res jobs.SubmitResult) mcp.Meta {
	return mcp.Meta{
		MCPMetaOperation: map[string]any{"id": res.Op.ID, "state": res.Op.State, "replayed": !res.Created},
		MCPMetaReplayed:  !res.Created,
	}
}

// upstreamResult answers a tools/call of an MCP server's tool: a terminal operation answers
// the upstream's recorded result as it came (content, structuredContent, isError), with the
// operation in _meta. One that is not terminal has no upstream result yet: it answers an
// error result naming the state and asking to call again with the same key, never a result
// that would break the upstream's outputSchema (a non-error result without the
// structuredContent it requires is refused by the TypeScript SDK).
func upstreamResult(t *catalog.Tool, res jobs.SubmitResult) *mcp.CallToolResult {
	op := res.Op
	meta := operationMeta(res)
	if op.State.Terminal() && op.UpstreamResult != nil {
		var out mcp.CallToolResult
		if err := json.Unmarshal([]byte(*op.UpstreamResult), &out); err == nil {
			if out.Meta == nil {
				out.Meta = mcp.Meta{}
			}
			for k, v := range meta {
				out.Meta[k] = v
			}
			return &out
		}
	}
	out := &mcp.CallToolResult{Meta: meta}
	switch {
	case op.State == models.StateSucceeded:
		// Settled by a look-up or a reviewer, not by the call's own answer: the result is what
		// they recorded.
		var v any
		if op.Result != nil && json.Unmarshal([]byte(*op.Result), &v) == nil && t.MCP.OutputSchema != nil {
			out.StructuredContent = v
		}
		text := "{}"
		if op.Result != nil {
			text = *op.Result
		}
		out.Content = []mcp.Content{&mcp.TextContent{Text: text}}
	case op.State.Terminal():
		out.IsError = true
		out.Content = []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s did not succeed (operation %s is %s%s). "+
			"Calling again with the same operation_key returns this outcome.", op.Tool, op.ID, op.State, failure(op))}}
	default:
		p := inFlightProblem(op, t)
		out.IsError = true
		out.Meta[MCPMetaProblem], out.Meta[MCPMetaRetryAfter] = p.Slug, p.RetryAfter
		out.Content = []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Operation %s is %s, not final yet: %s "+
			"There is no result from %s yet. Call this tool again in about %d s with the same operation_key and "+
			"arguments to learn the outcome. Do not retry with a new operation_key: that could perform the action twice.",
			op.ID, op.State, p.Detail, t.MCP.Server.Name, p.RetryAfter)}}
	}
	return out
}
