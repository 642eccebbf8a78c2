// Package toolsimport writes tools files (docs/TOOLS.md, docs/MCP.md) from what an API already says about
// itself: an OpenAPI document's operations, or an MCP server's tools/list. What it writes is a
// draft for a person to review, never a file the gateway reads unseen, so it says in comments
// what it guessed and what it left out.
package toolsimport

// File is a tools file as import prints it. Header and every Notes are YAML comments.
type File struct {
	Header  []string    // comment lines at the top of the file
	Tools   []HTTPTool  // the tools: list
	Servers []MCPServer // the mcp_servers: list
}

// HTTPTool is one tool of the tools: list (docs/TOOLS.md).
type HTTPTool struct {
	Notes        []string // comment lines above the tool, for the reviewer
	Name         string
	Description  string
	Effect       string
	ParamsSchema map[string]any
	HTTP         HTTPSpec
}

// HTTPSpec is a tool's http: mapping (docs/TOOLS.md).
type HTTPSpec struct {
	Connection        string
	Method            string
	URL               string
	Body              string // "" (json, or none for a GET), "form" or "none"
	IdempotencyHeader string
	// SuggestedIdempotencyHeader is written as a commented-out idempotency_header line: the
	// document declares no such header, so only a person who knows the API may turn it on.
	SuggestedIdempotencyHeader string
	// Query are the params sent in the URL's query, each when given (http.query).
	Query []QueryParam
	// Headers are fixed headers the document gives one value (http.headers): a header
	// parameter with a single allowed value, or named in the path's fragment.
	Headers map[string]string
}

// QueryParam is one entry of http.query: the param, the query parameter's name when it
// differs, and the document's style and explode when they are not form's defaults.
type QueryParam struct {
	Param   string
	Name    string // "" when the param's name is the query parameter's
	Style   string // "" for form
	Explode *bool  // nil for the style's default
}

// MCPServer is one server of the mcp_servers: list (docs/MCP.md).
type MCPServer struct {
	Name       string
	Command    []string // stdio: the command and its arguments; or
	URL        string   // Streamable HTTP, with
	Connection string   // the connection for its credentials and TLS (optional)
	Tools      []MCPTool
}

// MCPTool is one upstream tool the server exposes.
type MCPTool struct {
	Notes    []string // comment lines above the tool: its title and description
	Upstream string
	Name     string // written only when the default, <server>.<upstream>, is not a valid name
	Effect   string
}
