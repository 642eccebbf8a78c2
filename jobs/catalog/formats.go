package catalog

import "fmt"

// The formats GET /v1/tools can answer in (SPEC §5).
const (
	FormatDefault   = ""
	FormatOpenAI    = "openai"
	FormatAnthropic = "anthropic"
	FormatMCP       = "mcp"
)

// ToolList is the body of GET /v1/tools in every format.
type ToolList[T any] struct {
	Tools []T `json:"tools"`
}

// Definition is one tool in idemgate's own format.
type Definition struct {
	Name             string         `json:"name"`
	Description      string         `json:"description"`
	Effect           Effect         `json:"effect"`
	ParamsSchema     map[string]any `json:"params_schema"`
	RequiresApproval bool           `json:"requires_approval"`
}

// OpenAITool is one tool in the OpenAI function-calling format.
type OpenAITool struct {
	Type     string         `json:"type"` // always "function"
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction is the function of an OpenAITool; its Name uses "__" for ".".
type OpenAIFunction struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
}

// AnthropicTool is one tool in the Anthropic tool-use format; its Name uses "__" for ".".
type AnthropicTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"input_schema"`
}

// MCPTool is one tool in the Model Context Protocol tools/list format.
type MCPTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
}

// Definitions describes tools in the given format ("", "default", "openai", "anthropic" or
// "mcp") as a ToolList ready to encode as JSON. An unknown format is an error; the caller
// answers 400. The schemas are shared with the catalogue and must not be modified.
func Definitions(tools []*Tool, format string) (any, error) {
	switch format {
	case FormatDefault, "default":
		return listOf(tools, func(t *Tool) Definition {
			return Definition{Name: t.Name, Description: t.Description, Effect: t.Effect,
				ParamsSchema: t.ParamsSchemaRaw, RequiresApproval: t.Review.RequireApproval}
		}), nil
	case FormatOpenAI:
		return listOf(tools, func(t *Tool) OpenAITool {
			return OpenAITool{Type: "function", Function: OpenAIFunction{Name: t.FunctionName(),
				Description: t.Description, Parameters: t.ParamsSchemaRaw}}
		}), nil
	case FormatAnthropic:
		return listOf(tools, func(t *Tool) AnthropicTool {
			return AnthropicTool{Name: t.FunctionName(), Description: t.Description, InputSchema: t.ParamsSchemaRaw}
		}), nil
	case FormatMCP:
		return listOf(tools, func(t *Tool) MCPTool {
			return MCPTool{Name: t.Name, Description: t.Description, InputSchema: t.ParamsSchemaRaw}
		}), nil
	default:
		return nil, fmt.Errorf("unknown tools format %q: want openai, anthropic or mcp", format)
	}
}

// listOf maps tools; the list is never nil, so an empty catalogue encodes as {"tools": []}.
func listOf[T any](tools []*Tool, f func(*Tool) T) ToolList[T] {
	out := ToolList[T]{Tools: make([]T, 0, len(tools))}
	for _, t := range tools {
		out.Tools = append(out.Tools, f(t))
	}
	return out
}
