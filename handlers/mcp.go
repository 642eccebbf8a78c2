package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The names an MCP client uses to pass idemgate's own inputs to tools/call. The key may come
// in the call's _meta or as the operation_key argument that every state-changing tool's
// schema carries; the other members are optional and only read from _meta.
const (
	MCPKeyArgument = catalog.ReservedParam
	MCPMetaKey     = "idemgate/key"
	// MCPMetaRuntimeKey carries params.idempotencyKey (MCP's Request Idempotency proposal,
	// SEP-3182) from bounded, which reads the raw request, to the tool handler, which the SDK
	// gives only _meta; a client's own member of that name is dropped first.
	MCPMetaRuntimeKey = "idemgate/runtime_key"
	MCPMetaWait       = "idemgate/wait"            // seconds, 0 to 60, as Prefer: wait=N
	MCPMetaRunID      = "idemgate/workflow_run_id" // as workflow_run_id of POST /v1/operations
	MCPMetaStepID     = "idemgate/step_id"         // as step_id of POST /v1/operations
	MCPMetaReason     = "idemgate/justification"   // as justification of POST /v1/operations
	MCPMetaReplayed   = "idemgate/replayed"        // on results: true when nothing ran for this call
	mcpMaxBodyMargin  = 64 << 10                   // the JSON-RPC envelope around 1 MiB of params
)

// mcpInstructions is what an MCP client is told about the server at initialisation.
const mcpInstructions = "idemgate runs each state-changing tool call at most once per operation key. " +
	"Pass operation_key (or _meta \"idemgate/key\"): a key naming the logical action, stable across " +
	"retries and restarts, such as \"workflow-8472:create-ticket\". Calling again with the same key and " +
	"arguments returns the recorded outcome without running anything again. When an outcome is " +
	"in progress, uncertain or awaiting approval, call again later with the same key: never invent a " +
	"new key for the same action, or it may happen twice."

// MCP serves the Model Context Protocol over Streamable HTTP. It is stateless: any replica can
// answer any request. Each request is served by the server of its caller's tool scope (the
// tools its key may use), built once per scope and kept, so that what a request costs does not
// grow with the catalogue; tool handlers read the caller from the request's context.
// tools/call takes the same path into the ledger as POST /v1/operations.
type MCP struct {
	api     *API
	log     *slog.Logger
	handler http.Handler

	mu      sync.Mutex
	servers map[string]*mcp.Server // by the key's tool list ("*", "a,b")
	// resultWaits counts the tasks/result requests waiting, per API key.
	resultWaits waitCounter
}

// maxScopes bounds the servers kept: one per distinct tool list of the keys in use, which a
// deployment has a handful of. Past it a request's server is built for it alone.
const maxScopes = 256

var _ http.Handler = (*MCP)(nil)

// NewMCP returns the MCP endpoint over api. The web layer authenticates each request first;
// the caller travels on the request context (WithCaller).
func NewMCP(api *API, log *slog.Logger) *MCP {
	m := &MCP{api: api, log: log, servers: map[string]*mcp.Server{}}
	m.handler = mcp.NewStreamableHTTPHandler(m.server, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		Logger:       log,
		// The SDK's DNS-rebinding guard refuses loopback requests whose Host is not a
		// loopback name, which breaks a gateway behind a local reverse proxy. Every request
		// here carries a bearer API key, which a rebinding page cannot supply, so the guard
		// protects nothing the key does not.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        MaxBodyBytes + mcpMaxBodyMargin,
	})
	return m
}

// ServeHTTP serves one MCP request, within the bounds of a batch and an answer.
func (m *MCP) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.bounded(w, r) }

// server returns the MCP server for the request's caller: the tools its key may use. Nil
// (the SDK answers 400) only if the request was not authenticated, which the web layer
// prevents.
func (m *MCP) server(r *http.Request) *mcp.Server {
	caller := CallerFrom(r.Context())
	if caller == nil {
		return nil
	}
	scope := caller.Key.Tools
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.servers[scope]; ok {
		return s
	}
	s := m.build(caller)
	if len(m.servers) < maxScopes {
		m.servers[scope] = s
	}
	return s
}

// build makes the server of caller's tool scope. Nothing in it is the caller's own: the
// handlers read the caller of each request from its context.
func (m *MCP) build(caller *models.Caller) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "idemgate", Title: "idemgate execution gateway", Version: "1"},
		&mcp.ServerOptions{Instructions: mcpInstructions, Logger: m.log,
			// Tools even for a key that may use none; the list never changes within a request.
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
			// The list depends on the key: no shared cache may keep it.
			SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.CacheScope = "private" }})
	s.AddReceivingMiddleware(m.limitMethods)
	for _, t := range m.api.Catalog.Tools() {
		if caller.AllowsTool(t.Name) {
			s.AddTool(mcpTool(t), m.callHandler(t))
		}
	}
	return s
}
