package catalog

import "fmt"

// The formats GET /v1/tools can answer in (docs/API.md). FormatMCP is served by the MCP endpoint's
// own description of its tools, so that both say the same.
const (
	FormatDefault   = ""
	FormatOpenAI    = "openai"
	FormatAnthropic = "anthropic"
	FormatMCP       = "mcp"
)

// The shapes of OpenAI's tool definitions: Chat Completions nests the function, the Responses
// API is flat.
const (
	OpenAIChatCompletions = "chat_completions"
	OpenAIResponses       = "responses"
)

// Format says how to describe tools.
type Format struct {
	Name   string // FormatDefault ("" or "default"), FormatOpenAI or FormatAnthropic
	API    string // OpenAI only: OpenAIChatCompletions (also "") or OpenAIResponses
	Strict bool   // OpenAI only: strict-mode schemas where the tool's schema allows (StrictParameters)
}

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

// OpenAITool is one tool in the OpenAI Chat Completions function-calling format.
type OpenAITool struct {
	Type     string         `json:"type"` // always "function"
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction is the function of an OpenAITool; its Name uses "__" for ".". Strict is
// present only when strict schemas were asked for.
type OpenAIFunction struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
	Strict      *bool          `json:"strict,omitempty"`
}

// OpenAIResponsesTool is one tool in the OpenAI Responses API's flat format. Strict is always
// present: the Responses API takes an absent strict as true.
type OpenAIResponsesTool struct {
	Type        string         `json:"type"` // always "function"
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
	Strict      bool           `json:"strict"`
}

// AnthropicTool is one tool in the Anthropic tool-use format; its Name uses "__" for ".".
type AnthropicTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"input_schema"`
}

// Definitions describes tools in format f as a ToolList ready to encode as JSON. An unknown
// format, or OpenAI options with another format, is an error; the caller answers 400. The
// schemas are shared with the catalogue and must not be modified.
func Definitions(tools []*Tool, f Format) (any, error) {
	if f.Name != FormatOpenAI && (f.API != "" || f.Strict) {
		return nil, fmt.Errorf("api and strict apply to format openai only")
	}
	switch f.Name {
	case FormatDefault, "default":
		return listOf(tools, func(t *Tool) Definition {
			return Definition{Name: t.Name, Description: t.Description, Effect: t.Effect,
				ParamsSchema: t.ParamsSchemaRaw, RequiresApproval: t.Review.RequireApproval}
		}), nil
	case FormatOpenAI:
		return openAIDefinitions(tools, f)
	case FormatAnthropic:
		return listOf(tools, func(t *Tool) AnthropicTool {
			return AnthropicTool{Name: t.FunctionName(), Description: t.Description, InputSchema: t.ParamsSchemaRaw}
		}), nil
	default:
		return nil, fmt.Errorf("unknown tools format %q: want openai, anthropic or mcp", f.Name)
	}
}

func openAIDefinitions(tools []*Tool, f Format) (any, error) {
	params := func(t *Tool) (map[string]any, bool) {
		if f.Strict {
			return t.StrictParameters()
		}
		return t.ParamsSchemaRaw, false
	}
	switch f.API {
	case OpenAIChatCompletions, "":
		return listOf(tools, func(t *Tool) OpenAITool {
			fn := OpenAIFunction{Name: t.FunctionName(), Description: t.Description}
			var strict bool
			fn.Parameters, strict = params(t)
			if f.Strict {
				fn.Strict = &strict
			}
			return OpenAITool{Type: "function", Function: fn}
		}), nil
	case OpenAIResponses:
		return listOf(tools, func(t *Tool) OpenAIResponsesTool {
			out := OpenAIResponsesTool{Type: "function", Name: t.FunctionName(), Description: t.Description}
			out.Parameters, out.Strict = params(t)
			return out
		}), nil
	default:
		return nil, fmt.Errorf("unknown OpenAI API %q: want %s or %s", f.API, OpenAIChatCompletions, OpenAIResponses)
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
