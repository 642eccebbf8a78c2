package handlers

import (
	"maps"
	"slices"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// needsKey reports whether calls of t must name their operation: every tool that changes
// something. A read may omit the key; the gateway then records it under a key of its own.
func needsKey(t *catalog.Tool) bool { return t.Effect != catalog.EffectRead }

// mcpTools describes tools as tools/list does; GET /v1/tools?format=mcp answers the same.
func mcpTools(tools []*catalog.Tool) catalog.ToolList[*mcp.Tool] {
	out := catalog.ToolList[*mcp.Tool]{Tools: make([]*mcp.Tool, 0, len(tools))}
	for _, t := range tools {
		out.Tools = append(out.Tools, mcpTool(t))
	}
	return out
}

// mcpTool describes t for tools/list: under the name every model provider takes (docs/MCP.md: dots
// written "__", a long name shortened), titled with its own name, with its params schema (to
// which a state-changing tool adds the required operation_key), the schema of its structured
// results, annotations that say what the tool does, and what it needs in _meta.
func mcpTool(t *catalog.Tool) *mcp.Tool {
	if t.MCP != nil {
		return mcpUpstreamTool(t)
	}
	return &mcp.Tool{
		Name:         t.FunctionName(),
		Title:        t.Name,
		Description:  t.Description,
		InputSchema:  inputSchema(t),
		OutputSchema: operationOutputSchema,
		Annotations:  annotations(t, nil),
		Meta:         toolMeta(t),
	}
}

// annotations are the hints of t as the gateway serves it: readOnlyHint for a read,
// destructiveHint forced true for a write and false for a read, and idempotentHint always,
// since a repeat with the same key replays the recorded outcome. An upstream's own hints are
// kept otherwise (its title, openWorldHint, and the destructiveHint of a tool that is neither
// read nor write: an idempotent delete stays destructive, an idempotent update does not); an
// HTTP tool, or an upstream that says nothing, is not destructive unless it is a write (an
// absent destructiveHint would read as true).
func annotations(t *catalog.Tool, upstream *mcp.ToolAnnotations) *mcp.ToolAnnotations {
	a := &mcp.ToolAnnotations{}
	if upstream != nil {
		*a = *upstream
	}
	a.ReadOnlyHint = t.Effect == catalog.EffectRead
	if t.Effect != catalog.EffectIdempotent || a.DestructiveHint == nil {
		destructive := t.Effect == catalog.EffectWrite
		a.DestructiveHint = &destructive
	}
	a.IdempotentHint = true
	return a
}

// The _meta members of a listed tool (docs/MCP.md).
const (
	MCPMetaTool             = "idemgate/tool"              // the tool's own (dotted) name
	MCPMetaEffect           = "idemgate/effect"            // read | idempotent | write
	MCPMetaRequiresApproval = "idemgate/requires_approval" // true when a reviewer must approve
	MCPMetaApprovals        = "idemgate/approvals"         // how many distinct reviewers
)

// toolMeta says what t needs, for a framework that routes approvals to its own interface.
func toolMeta(t *catalog.Tool) mcp.Meta {
	m := mcp.Meta{MCPMetaTool: t.Name, MCPMetaEffect: string(t.Effect)}
	if t.Review.RequireApproval {
		m[MCPMetaRequiresApproval], m[MCPMetaApprovals] = true, t.Review.Approvals
	}
	return m
}

// inputSchema is t's params schema with the operation_key property added, required when the
// tool changes something. The catalogue's schema is shared, so it is copied, never modified.
func inputSchema(t *catalog.Tool) map[string]any {
	schema := maps.Clone(t.ParamsSchemaRaw)
	if schema == nil {
		schema = map[string]any{"type": "object"}
	}
	props := map[string]any{}
	if p, ok := schema["properties"].(map[string]any); ok {
		props = maps.Clone(p)
	}
	props[MCPKeyArgument] = map[string]any{
		"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[ -~]+$",
		"description": "Names this logical action, stable across retries and restarts " +
			"(e.g. \"workflow-8472:create-ticket\"). Calling again with the same key returns the " +
			"recorded outcome; never use a new key for an action whose outcome is unclear.",
	}
	schema["properties"] = props
	if needsKey(t) {
		schema["required"] = requiredWith(schema["required"], MCPKeyArgument)
	}
	return schema
}

// requiredWith returns a new "required" list: the names of list (as decoded from the tools
// file, or built in Go) followed by name.
func requiredWith(list any, name string) []any {
	var out []any
	switch l := list.(type) {
	case []any:
		out = slices.Clone(l)
	case []string:
		for _, s := range l {
			out = append(out, s)
		}
	}
	return append(out, name)
}

// operationOutputSchema is the schema of a native tool's structured results: the operation
// object, or the problem details object of a refusal (an error result; MCP SDKs validate error
// results too). It names only what tells the two apart, so that it can be repeated on every
// listed tool at a few hundred bytes: the whole schema of both objects from the OpenAPI
// document (about 9 KB) on each of Stripe's 594 tools made a 7.2 MB tools/list.
var operationOutputSchema = map[string]any{
	"type":        "object",
	"description": "The operation object, or on an error result that is a refusal the problem details object (RFC 9457); both are described in full in the OpenAPI document at /openapi.json.",
	"anyOf": []any{
		map[string]any{"required": []any{"id", "state"}, "properties": map[string]any{
			"id": map[string]any{"type": "string"}, "state": map[string]any{"type": "string"}}},
		map[string]any{"required": []any{"type", "title"}, "properties": map[string]any{
			"type": map[string]any{"type": "string"}, "title": map[string]any{"type": "string"}}},
	},
}
