package toolsimport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/mcpclient"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPOptions say which MCP server to import (docs/MCP.md): a command to start (stdio), or a URL
// (Streamable HTTP).
type MCPOptions struct {
	Command    []string // the command and its arguments, or
	URL        string   // the server's endpoint, with
	Connection string   // optionally the connection that carries its credentials and TLS
	Name       string   // the server's name in the file; derived from Command or URL when ""
	// HTTPClient reaches URL (http.DefaultClient when nil). The import itself sends no
	// credentials: those live in the connection, which the tools file declares.
	HTTPClient *http.Client
}

// MCP starts or reaches the server, lists its tools (every page) and returns an mcp_servers
// file with the server and every tool, its effect from its annotations.
func MCP(ctx context.Context, opts MCPOptions) (*File, error) {
	server, err := mcpServer(opts)
	if err != nil {
		return nil, err
	}
	var transport mcp.Transport
	var stderr *tailBuffer
	if len(opts.Command) > 0 {
		cmd := exec.CommandContext(ctx, opts.Command[0], opts.Command[1:]...)
		// What the server says on stderr is kept, to explain a server that fails to start.
		stderr = &tailBuffer{max: 2048}
		cmd.Stderr = stderr
		// Once the server has exited, what it started may still hold its standard error open;
		// the group is stopped right after, so there is nothing to wait for.
		cmd.WaitDelay = 100 * time.Millisecond
		// Its own process group, stopped whole once the tools are listed: npx's node, and
		// whatever it starts, must not outlive the import.
		transport = mcpclient.CommandTransport(cmd, time.Second)
	} else {
		// Only tools/list is sent: no stream for the server's own messages is needed.
		transport = &mcp.StreamableClientTransport{Endpoint: opts.URL, HTTPClient: opts.HTTPClient, DisableStandaloneSSE: true}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "idemgate-tools-import", Version: "1"}, nil)
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("toolsimport: connect to MCP server %s: %w%s", describeServer(opts), err, stderr.said())
	}
	defer session.Close()
	var tools []*mcp.Tool
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("toolsimport: list the tools of MCP server %s: %w%s", describeServer(opts), err, stderr.said())
		}
		tools = append(tools, t)
	}
	if len(tools) == 0 {
		return nil, fmt.Errorf("toolsimport: MCP server %s lists no tools", describeServer(opts))
	}
	for _, t := range tools {
		server.Tools = append(server.Tools, mcpTool(server.Name, t))
	}
	var info *mcp.Implementation
	if r := session.InitializeResult(); r != nil {
		info = r.ServerInfo
	}
	return &File{Header: mcpHeader(opts, info, len(tools)), Servers: []MCPServer{server}}, nil
}

// mcpServer checks opts and returns the server without its tools.
func mcpServer(opts MCPOptions) (MCPServer, error) {
	switch {
	case len(opts.Command) == 0 && opts.URL == "":
		return MCPServer{}, errors.New("toolsimport: give the MCP server's command or URL")
	case len(opts.Command) > 0 && opts.URL != "":
		return MCPServer{}, errors.New("toolsimport: give the MCP server's command or its URL, not both")
	case len(opts.Command) > 0 && opts.Connection != "":
		return MCPServer{}, errors.New("toolsimport: a connection is for a server reached by URL, not one started by a command")
	case opts.Connection != "" && !serverNameRE.MatchString(opts.Connection):
		return MCPServer{}, fmt.Errorf("toolsimport: invalid connection name %q: want %s", opts.Connection, serverNameRE)
	}
	name := opts.Name
	switch {
	case name != "" && !serverNameRE.MatchString(name):
		return MCPServer{}, fmt.Errorf("toolsimport: invalid server name %q: want %s", name, serverNameRE)
	case name == "" && len(opts.Command) > 0:
		name = nameFromCommand(opts.Command)
	case name == "":
		name = nameFromURL(opts.URL)
	}
	if name == "" {
		return MCPServer{}, fmt.Errorf("toolsimport: no server name can be made from %s: give one with --name", describeServer(opts))
	}
	return MCPServer{Name: name, Command: opts.Command, URL: opts.URL, Connection: opts.Connection}, nil
}

// mcpTool is one upstream tool as the file lists it.
func mcpTool(server string, t *mcp.Tool) MCPTool {
	out := MCPTool{Upstream: t.Name, Effect: annotatedEffect(t.Annotations)}
	title := t.Title
	if title == "" && t.Annotations != nil {
		title = t.Annotations.Title
	}
	first, _, _ := strings.Cut(strings.TrimSpace(t.Description), "\n")
	switch first = strings.TrimSpace(first); {
	case title != "" && first != "":
		out.Notes = append(out.Notes, title+": "+first)
	case title != "" || first != "":
		out.Notes = append(out.Notes, title+first)
	}
	if t.Annotations == nil {
		out.Notes = append(out.Notes, "no annotations: effect write, the safe default")
	}
	if def := server + "." + t.Name; !fits(def) {
		// The default name (docs/MCP.md) would be refused; this one is not.
		out.Name = toolName(server, t.Name)
		out.Notes = append(out.Notes, fmt.Sprintf("named %s: the default %s is not a valid tool name", out.Name, def))
	}
	return out
}

// annotatedEffect is the effect docs/MCP.md reads from a tool's annotations: readOnlyHint →
// read, else idempotentHint → idempotent, else write (no annotations: write, the safe guess).
func annotatedEffect(a *mcp.ToolAnnotations) string {
	switch {
	case a == nil:
		return string(catalog.EffectWrite)
	case a.ReadOnlyHint:
		return string(catalog.EffectRead)
	case a.IdempotentHint:
		return string(catalog.EffectIdempotent)
	}
	return string(catalog.EffectWrite)
}

// mcpHeader is the comment at the top of the file.
func mcpHeader(opts MCPOptions, info *mcp.Implementation, n int) []string {
	flag, from := "--mcp-url", opts.URL
	if len(opts.Command) > 0 {
		flag, from = "--mcp-command", strings.Join(opts.Command, " ")
	}
	server := "the MCP server"
	if info != nil && info.Name != "" {
		server = strings.TrimSpace("the MCP server " + info.Name + " " + info.Version)
	}
	lines := []string{
		fmt.Sprintf("Imported by `idemgate tools import %s` from %s (%s): %d tool(s).", flag, server, from, n),
		"Review before use: each effect comes from the tool's annotations (readOnlyHint → read, else idempotentHint →",
		"idempotent, else write), which are the server's hints about itself; leave out the tools agents should not call.",
	}
	switch {
	case len(opts.Command) > 0:
		lines = append(lines, "The command starts in every process that executes operations (serve, worker): it must be installed",
			"there; what it needs from the environment goes in env: (the child gets PATH and HOME besides).")
	case opts.Connection != "":
		lines = append(lines, fmt.Sprintf("Connection %q is not declared here: declare it under connections: (docs/TOOLS.md) for the server's credentials.", opts.Connection))
	default:
		lines = append(lines, "No --connection: requests to the server carry no credentials.")
	}
	return lines
}

func describeServer(opts MCPOptions) string {
	if len(opts.Command) > 0 {
		return fmt.Sprintf("%q", strings.Join(opts.Command, " "))
	}
	return opts.URL
}

// tailBuffer keeps the last max bytes written to it; the command's stderr is copied into it
// by another goroutine, hence the lock.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = b.buf[len(b.buf)-b.max:]
	}
	return len(p), nil
}

// said is what the server wrote on stderr, for an error message; "" when nothing (or no
// command).
func (b *tailBuffer) said() string {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := strings.TrimSpace(string(b.buf)); s != "" {
		return "; the server's stderr ends: " + s
	}
	return ""
}
