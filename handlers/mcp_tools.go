package handlers

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/static"
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

// mcpTool describes t for tools/list: its dotted name (MCP allows dots), description, params
// schema (to which a state-changing tool adds the required operation_key), the schema of its
// structured results, and hints.
func mcpTool(t *catalog.Tool) *mcp.Tool {
	if t.MCP != nil {
		return mcpUpstreamTool(t)
	}
	return &mcp.Tool{
		Name:         t.Name,
		Description:  t.Description,
		InputSchema:  inputSchema(t),
		OutputSchema: mcpOutputSchema(),
		Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint: t.Effect == catalog.EffectRead,
			// Repeating a call with the same arguments, operation_key included, replays the
			// recorded outcome: idemgate makes every tool idempotent per key.
			IdempotentHint: true,
		},
	}
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

// mcpOutputSchema is the schema of every tools/call result's structured content: the
// operation object, or the problem details object of a refusal (an error result). It is taken
// from the OpenAPI document, so the two cannot differ: its Operation and Problem schemas and
// what they refer to, under $defs. MCP SDKs validate structured content against it, error
// results included (the TypeScript SDK does), which is why it names both.
var mcpOutputSchema = sync.OnceValue(func() map[string]any {
	s, err := outputSchemaFrom(static.OpenAPI())
	if err != nil {
		panic(err) // the embedded document is generated and tested: a programming error
	}
	return s
})

const componentRef = "#/components/schemas/"

func outputSchemaFrom(doc []byte) (map[string]any, error) {
	var d struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("mcp output schema: %w", err)
	}
	defs := map[string]any{}
	var add func(name string) error
	add = func(name string) error {
		if _, done := defs[name]; done {
			return nil
		}
		s, ok := d.Components.Schemas[name]
		if !ok {
			return fmt.Errorf("mcp output schema: no schema %q in the OpenAPI document", name)
		}
		defs[name] = nil // mark before walking: schemas may refer to each other
		var refs []string
		defs[name] = rewriteRefs(s, &refs)
		for _, r := range refs {
			if err := add(r); err != nil {
				return err
			}
		}
		return nil
	}
	for _, name := range []string{"Operation", "Problem"} {
		if err := add(name); err != nil {
			return nil, err
		}
	}
	return map[string]any{
		"type":        "object",
		"description": "The operation object (see the OpenAPI document at /openapi.json); on an error result that is a refusal, the problem details object.",
		"anyOf":       []any{map[string]any{"$ref": "#/$defs/Operation"}, map[string]any{"$ref": "#/$defs/Problem"}},
		"$defs":       defs,
	}, nil
}

// rewriteRefs copies a schema of the document, pointing its component $refs at $defs, and
// collects the names it refers to.
func rewriteRefs(v any, refs *[]string) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if ref, ok := e.(string); ok && k == "$ref" && strings.HasPrefix(ref, componentRef) {
				name := strings.TrimPrefix(ref, componentRef)
				*refs = append(*refs, name)
				out[k] = "#/$defs/" + name
				continue
			}
			out[k] = rewriteRefs(e, refs)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = rewriteRefs(e, refs)
		}
		return out
	default:
		return v
	}
}
