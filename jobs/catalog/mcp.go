package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// MCPServer is one entry of the tools file's mcp_servers (docs/MCP.md): a Model Context Protocol
// server whose tools become idemgate tools. Exactly one of Command (stdio: a child process of
// every gateway process that executes operations) and URL (Streamable HTTP) is set.
type MCPServer struct {
	Name    string
	Command []string
	// Env is the child's environment besides PATH and HOME, in file order.
	Env []EnvVar
	URL string
	// Connection carries the credentials and TLS settings of a URL server, nil for none.
	Connection *Connection
	Timeout    time.Duration // per call
	// MaxResultBytes bounds what one answer may be: past it the call is ambiguous and the
	// gateway stops reading (docs/MCP.md), as an HTTP tool's answer is bounded.
	MaxResultBytes int
}

// Bounds of what a server may send (docs/MCP.md).
const (
	DefaultMaxResultBytes = 1 << 20
	MaxMaxResultBytes     = 64 << 20
	// MaxUpstreamDescription and MaxUpstreamSchema bound the tool metadata tools/list gives:
	// every agent's tools/list carries it, so one huge tool would fail it for all of them.
	MaxUpstreamDescription = 16 << 10
	MaxUpstreamSchema      = 256 << 10
)

// EnvVar is one variable of a stdio server's environment.
type EnvVar struct {
	Name  string
	Value Secret
}

// Describe names the server for people and logs: its name and how it is reached.
func (s *MCPServer) Describe() string {
	if s.URL != "" {
		return fmt.Sprintf("MCP server %q at %s", s.Name, s.URL)
	}
	return fmt.Sprintf("MCP server %q (%s)", s.Name, strings.Join(s.Command, " "))
}

// UpstreamTool is a tool as its server's tools/list describes it.
type UpstreamTool struct {
	Name         string
	Title        string
	Description  string
	InputSchema  map[string]any
	OutputSchema map[string]any // nil: the tool declares none
	// Annotations are the server's hints as it wrote them (readOnlyHint, idempotentHint,
	// destructiveHint, openWorldHint, title), nil for none.
	Annotations map[string]any
}

// hint reads a boolean annotation; absent is false.
func (u UpstreamTool) hint(name string) bool {
	b, _ := u.Annotations[name].(bool)
	return b
}

// MCPLister lists an MCP server's tools at load. The gateway's MCP client implements it; it
// starts (or connects to) the server as a side effect, and keeps that session for the calls.
type MCPLister interface {
	ListTools(server *MCPServer) ([]UpstreamTool, error)
}

// MCPCall says how a tool of an MCP server is called: which server, which upstream tool, and
// what the upstream told us about it (passed through on idemgate's own /mcp).
type MCPCall struct {
	Server       *MCPServer
	Upstream     string
	Title        string
	InputSchema  map[string]any // the upstream's, as listed (before any params_schema override)
	OutputSchema map[string]any
	Annotations  map[string]any
	// IdempotencyArgument is an argument the downstream key is also written into, "" for none.
	IdempotencyArgument string
	// HonoursKey says the upstream deduplicates by the downstream key it is sent.
	HonoursKey bool
	// EffectFromAnnotations: the tools file gave no effect, and the upstream's annotations
	// made the tool read or idempotent, so the gateway repeats its ambiguous attempts on the
	// server's word alone (the gateway says so at start, for a person to confirm).
	EffectFromAnnotations bool
}

// MCPReconcile is a reconcile through an upstream tool of the same server.
type MCPReconcile struct {
	Tool      string
	arguments *paramsTemplate
}

// The raw forms of mcp_servers, as written.
type rawMCPServer struct {
	Name       string   `yaml:"name"`
	Command    []string `yaml:"command"`
	URL        string   `yaml:"url"`
	Connection string   `yaml:"connection"`
	Env        any      `yaml:"env"`
	Timeout    string   `yaml:"timeout"`
	// MaxResultBytes is max_result_bytes: nil for the default.
	MaxResultBytes *int         `yaml:"max_result_bytes"`
	Tools          []rawMCPTool `yaml:"tools"`
}

type rawMCPTool struct {
	Upstream            string           `yaml:"upstream"`
	Name                string           `yaml:"name"`
	Description         string           `yaml:"description"`
	Effect              string           `yaml:"effect"`
	ParamsSchema        any              `yaml:"params_schema"`
	IdempotencyArgument string           `yaml:"idempotency_argument"`
	HonoursKey          bool             `yaml:"honours_key"`
	Reconcile           *rawMCPReconcile `yaml:"reconcile"`
	SensitiveParams     []rawSensitive   `yaml:"sensitive_params"`
	Retry               *rawRetry        `yaml:"retry"`
	Review              *rawReview       `yaml:"review"`
	Compensation        *rawCompensation `yaml:"compensation"`
	Retention           string           `yaml:"retention"`
	Summary             string           `yaml:"summary"`
	ReferenceURL        string           `yaml:"reference_url"`
}

type rawMCPReconcile struct {
	Tool      string `yaml:"tool"`
	Arguments any    `yaml:"arguments"`
	Found     string `yaml:"found"`
	Settle    string `yaml:"settle"`
}

// reconcileRoots are what a reconcile tool's arguments may refer to: what URLs may.
var reconcileRoots = urlRoots

// argumentRE is what an idempotency_argument may be called: a plain property name.
var argumentRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`)

// mcpEntry is a decoded server with its tools file entries, before the server is asked.
type mcpEntry struct {
	server *MCPServer
	tools  []rawMCPTool
	index  int
}

// buildMCPServers decodes and checks mcp_servers. It asks no server anything.
func buildMCPServers(items []*yaml.Node, conns map[string]*Connection, chk connectionChecks) ([]mcpEntry, []error) {
	var out []mcpEntry
	var errs []error
	seen := map[string]bool{}
	for i, node := range items {
		var raw rawMCPServer
		add := func(field, format string, args ...any) {
			errs = append(errs, &MCPServerError{Server: raw.Name, Index: i + 1, Field: field, Err: fmt.Errorf(format, args...)})
		}
		if err := decodeStrict(node, &raw); err != nil {
			if n := mappingValue(node, "name"); n != nil && n.Kind == yaml.ScalarNode {
				raw.Name = n.Value
			}
			for _, e := range pathErrors(err) {
				var pe *pathError
				if errors.As(e, &pe) {
					add(pe.path, "%v", pe.err)
				} else {
					add("", "%v", e)
				}
			}
			continue
		}
		n := len(errs)
		s := &MCPServer{Name: raw.Name}
		switch {
		case !connectionNameRE.MatchString(raw.Name):
			add("name", "invalid name %q: want %s", raw.Name, connectionNameRE)
		case seen[raw.Name]:
			add("name", "declared twice")
		}
		seen[raw.Name] = true
		switch {
		case len(raw.Command) > 0 && raw.URL != "":
			add("", "give command (stdio) or url (Streamable HTTP), not both")
		case len(raw.Command) > 0:
			if slices.Contains(raw.Command, "") {
				add("command", "an empty word")
			}
			s.Command = raw.Command
			if raw.Connection != "" {
				add("connection", "a connection is for a url server; a stdio server takes its credentials in env")
			}
		case raw.URL != "":
			if err := checkServerURL(raw.URL); err != nil {
				add("url", "%v", err)
			}
			s.URL = raw.URL
			if raw.Env != nil {
				add("env", "env is for a stdio server (command)")
			}
		default:
			add("", "required: command (stdio) or url (Streamable HTTP)")
		}
		if raw.Connection != "" && raw.URL != "" {
			c, ok := conns[raw.Connection]
			switch {
			case !ok:
				add("connection", "unknown connection %q", raw.Connection)
			case c != nil && len(c.TenantSecrets()) > 0:
				// One session serves every tenant's calls (docs/MCP.md), so it cannot present
				// one tenant's credentials.
				add("connection", "connection %q uses {tenant: …} secrets; a server's one session serves every tenant", raw.Connection)
			default:
				s.Connection = c
			}
		}
		s.Env = serverEnv(raw.Env, chk, add)
		ec := &collector{}
		s.Timeout = duration(ec, "timeout", raw.Timeout, DefaultTimeout, func(d time.Duration) error {
			if d <= 0 || d > MaxTimeout {
				return fmt.Errorf("must be more than 0 and at most %s", MaxTimeout)
			}
			return nil
		})
		s.MaxResultBytes = intInRange(ec, "max_result_bytes", raw.MaxResultBytes, DefaultMaxResultBytes, 1<<10, MaxMaxResultBytes)
		for _, e := range ec.errs {
			var fe *FileError
			if errors.As(e, &fe) {
				add(fe.Field, "%v", fe.Err)
			}
		}
		for j, t := range raw.Tools {
			if t.Upstream == "" {
				add(fmt.Sprintf("tools[%d].upstream", j), "required: the tool's name on the server")
			}
		}
		if len(errs) == n {
			out = append(out, mcpEntry{server: s, tools: raw.Tools, index: i + 1})
		}
	}
	return out, errs
}

func checkServerURL(raw string) error {
	if strings.Contains(raw, "{{") {
		return errors.New("a server URL is not a template")
	}
	return checkAbsoluteURL(raw)
}

// serverEnv reads a stdio server's env: a mapping of names to values or secret references.
func serverEnv(raw any, chk connectionChecks, add func(string, string, ...any)) []EnvVar {
	if raw == nil {
		return nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		add("env", "expected a mapping of names to values or secret references")
		return nil
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]EnvVar, 0, len(names))
	for _, name := range names {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			add("env", "invalid variable name %q", name)
			continue
		}
		v := m[name]
		if _, isMap := v.(map[string]any); !isMap {
			v = fmt.Sprint(v) // a plain value: a number or boolean is written as YAML spells it
		}
		s, err := parseSecret(v, !credentialName(name), chk)
		if err == nil && s.Tenant != "" {
			err = errors.New("{tenant: …} secrets are per operation; a server's environment is set when it starts")
		}
		if err != nil {
			add("env."+name, "%v", err)
			continue
		}
		out = append(out, EnvVar{Name: name, Value: s})
	}
	return out
}

// MCPServerError is a problem with one entry of mcp_servers, or with what its server listed.
type MCPServerError struct {
	Server string
	Index  int
	Field  string
	Err    error
}

func (e *MCPServerError) Error() string {
	msg := "tools file: "
	if e.Server != "" {
		msg += fmt.Sprintf("mcp server %q: ", e.Server)
	} else {
		msg += fmt.Sprintf("mcp server #%d: ", e.Index)
	}
	if e.Field != "" {
		msg += e.Field + ": "
	}
	return msg + e.Err.Error()
}

func (e *MCPServerError) Unwrap() error { return e.Err }

// mcpTools asks each server for its tools and builds the idemgate tools of every entry. A
// server that cannot be asked, or that does not list a tool the file names, is an error:
// the gateway does not start half-configured.
func mcpTools(entries []mcpEntry, lister MCPLister) ([]*Tool, []error) {
	var tools []*Tool
	var errs []error
	for _, e := range entries {
		if lister == nil {
			errs = append(errs, &MCPServerError{Server: e.server.Name, Index: e.index,
				Err: errors.New("this command cannot start MCP servers")})
			continue
		}
		listed, err := lister.ListTools(e.server)
		if err != nil {
			errs = append(errs, &MCPServerError{Server: e.server.Name, Index: e.index, Err: fmt.Errorf("listing its tools: %w", err)})
			continue
		}
		byName := make(map[string]UpstreamTool, len(listed))
		for _, u := range listed {
			byName[u.Name] = u
		}
		wanted := e.tools
		if wanted == nil {
			for _, u := range listed {
				wanted = append(wanted, rawMCPTool{Upstream: u.Name})
			}
		}
		for j, w := range wanted {
			u, ok := byName[w.Upstream]
			if !ok {
				errs = append(errs, &MCPServerError{Server: e.server.Name, Index: e.index, Field: fmt.Sprintf("tools[%d].upstream", j),
					Err: fmt.Errorf("the server lists no tool %q (it lists %s)", w.Upstream, upstreamNames(listed))})
				continue
			}
			t, terrs := buildMCPTool(e.server, w, u, e.index)
			errs = append(errs, terrs...)
			if t != nil {
				tools = append(tools, t)
			}
		}
	}
	return tools, errs
}

func upstreamNames(listed []UpstreamTool) string {
	if len(listed) == 0 {
		return "none"
	}
	names := make([]string, len(listed))
	for i, u := range listed {
		names[i] = u.Name
	}
	return strings.Join(names, ", ")
}

// DefaultMCPToolName is what an upstream tool is called in idemgate when the file does not
// name it: <server>.<upstream name>, lower-cased, with every character a tool name cannot
// hold written "_".
func DefaultMCPToolName(server, upstream string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(upstream) {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return server + "." + b.String()
}

// UpstreamEffect is the effect the upstream's annotations imply (docs/MCP.md).
func UpstreamEffect(u UpstreamTool) Effect {
	switch {
	case u.hint("readOnlyHint"):
		return EffectRead
	case u.hint("idempotentHint"):
		return EffectIdempotent
	}
	return EffectWrite
}

// buildMCPTool turns one upstream tool and its tools file entry into an idemgate tool,
// validated exactly as an HTTP tool's common fields are.
func buildMCPTool(s *MCPServer, w rawMCPTool, u UpstreamTool, index int) (*Tool, []error) {
	raw := rawTool{Name: w.Name, Description: w.Description, Effect: w.Effect, ParamsSchema: w.ParamsSchema,
		SensitiveParams: w.SensitiveParams, Retry: w.Retry, Review: w.Review, Compensation: w.Compensation,
		Retention: w.Retention, Summary: w.Summary, ReferenceURL: w.ReferenceURL}
	if raw.Name == "" {
		raw.Name = DefaultMCPToolName(s.Name, u.Name)
	}
	if errs := upstreamBounds(s, w, u, index); errs != nil {
		return nil, errs
	}
	if raw.Description == "" {
		raw.Description = firstNonEmpty(u.Description, u.Title, u.Name)
	}
	fromAnnotations := false
	if raw.Effect == "" {
		raw.Effect = string(UpstreamEffect(u))
		fromAnnotations = raw.Effect != string(EffectWrite)
	}
	if raw.ParamsSchema == nil {
		raw.ParamsSchema = withoutArgument(upstreamInputSchema(u.InputSchema), w.IdempotencyArgument)
	}
	ec := &collector{index: index, tool: raw.Name}
	t := validateCommon(&raw, ec, func(t *Tool) {
		call := &MCPCall{Server: s, Upstream: u.Name, Title: u.Title, InputSchema: u.InputSchema, OutputSchema: u.OutputSchema,
			Annotations: u.Annotations, HonoursKey: w.HonoursKey, EffectFromAnnotations: fromAnnotations}
		if a := w.IdempotencyArgument; a != "" {
			if !argumentRE.MatchString(a) {
				ec.addf("idempotency_argument", "invalid argument name %q", a)
			} else {
				call.IdempotencyArgument = a
			}
		}
		t.MCP = call
		t.HTTP.Timeout = s.Timeout
		validateMCPReconcile(t, w.Reconcile, ec)
	})
	// The errors of a tool from a server name the server too: the file may not name the tool.
	for i, err := range ec.errs {
		ec.errs[i] = &MCPServerError{Server: s.Name, Index: index, Err: err}
	}
	if len(ec.errs) > 0 {
		return nil, ec.errs
	}
	t.memo = newParamsMemo()
	return t, nil
}

// upstreamInputSchema is the schema params are checked against when the file gives none: the
// upstream's inputSchema. MCP requires "type": "object"; a server that leaves it out (some
// write {} for a tool without arguments) gets it added rather than the gateway refusing.
func upstreamInputSchema(in map[string]any) map[string]any {
	if in == nil {
		return map[string]any{"type": "object"}
	}
	if _, ok := in["type"]; ok {
		return in
	}
	out := make(map[string]any, len(in)+1)
	for k, v := range in {
		out[k] = v
	}
	out["type"] = "object"
	return out
}

// withoutArgument is schema without the property name, which the gateway fills (the
// downstream key, for an idempotency_argument) and an agent may not send: a server such as
// Square's requires it, and the agent could not call the tool otherwise.
func withoutArgument(schema map[string]any, name string) map[string]any {
	props, ok := schema["properties"].(map[string]any)
	if name == "" || !ok {
		return schema
	}
	out := make(map[string]any, len(schema))
	for k, v := range schema {
		out[k] = v
	}
	kept := make(map[string]any, len(props))
	for k, v := range props {
		if k != name {
			kept[k] = v
		}
	}
	out["properties"] = kept
	if req, ok := schema["required"].([]any); ok {
		out["required"] = slices.DeleteFunc(slices.Clone(req), func(v any) bool { return v == name })
	}
	return out
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

func validateMCPReconcile(t *Tool, raw *rawMCPReconcile, ec *collector) {
	if raw == nil {
		return
	}
	r := &ReconcileSpec{MCP: &MCPReconcile{Tool: raw.Tool}}
	if raw.Tool == "" {
		ec.addf("reconcile.tool", "required: an upstream tool of the same server that answers whether it happened")
	}
	args := map[string]any{}
	if raw.Arguments != nil {
		v, err := toJSONValue(raw.Arguments)
		m, ok := v.(map[string]any)
		switch {
		case err != nil:
			ec.add("reconcile.arguments", err)
		case !ok:
			ec.addf("reconcile.arguments", "expected a mapping of argument names to values")
		default:
			args = m
		}
	}
	root, err := compileLeaves(args, "", reconcileRoots)
	if err != nil {
		ec.add("reconcile.arguments", err)
	} else {
		r.MCP.arguments = &paramsTemplate{root: root.(map[string]any)}
	}
	if raw.Found == "" {
		// A search tool answers a result whether or not it found anything: without a pointer
		// to what it found, every look-up would say "it happened".
		ec.addf("reconcile.found", "required: a JSON pointer into the reconcile tool's structured result that holds a value only when the effect was found")
	}
	r.Found = foundPointer(raw.Found, ec)
	r.Settle = duration(ec, "reconcile.settle", raw.Settle, 0, nonNegative)
	t.Reconcile = r
}

// RenderReconcileArguments renders the arguments of an MCP tool's reconcile call.
func (t *Tool) RenderReconcileArguments(data TemplateData) (map[string]any, error) {
	if t.Reconcile == nil || t.Reconcile.MCP == nil || t.Reconcile.MCP.arguments == nil {
		return map[string]any{}, nil
	}
	return t.Reconcile.MCP.arguments.render(&data)
}

// MCPServers are the servers of the tools file, in file order.
func (c *Catalog) MCPServers() []*MCPServer {
	if c == nil {
		return nil
	}
	return slices.Clone(c.servers)
}

// credentialWords are the words of an environment variable's name that say it holds a
// credential (GITHUB_PERSONAL_ACCESS_TOKEN, BRAVE_API_KEY, PGPASSWORD): such a value must be
// a secret reference, so that it is read from where secrets live and masked wherever the
// server echoes it, as a connection's credentials are (docs/TOOLS.md).
var credentialWords = regexp.MustCompile(`(?i)(^|[_.-])(key|apikey|token|secret|password|passwd|pass|pwd|credentials?|auth|pat|private)([_.-]|$)|password|secret|token`)

// credentialName reports whether an environment variable's name says it holds a credential.
func credentialName(name string) bool { return credentialWords.MatchString(name) }

// upstreamBounds refuses tool metadata from tools/list too large to serve: a description over
// MaxUpstreamDescription, or a schema over MaxUpstreamSchema, unless the tools file gives its
// own description or params_schema.
func upstreamBounds(s *MCPServer, w rawMCPTool, u UpstreamTool, index int) []error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, &MCPServerError{Server: s.Name, Index: index, Err: fmt.Errorf("tool %q: "+format, append([]any{u.Name}, args...)...)})
	}
	if w.Description == "" && len(u.Description) > MaxUpstreamDescription {
		add("tools/list gives a description of %d bytes, more than %d: give the tool a description in the tools file", len(u.Description), MaxUpstreamDescription)
	}
	if n := jsonSize(u.InputSchema); w.ParamsSchema == nil && n > MaxUpstreamSchema {
		add("tools/list gives an inputSchema of %d bytes, more than %d: give the tool a params_schema in the tools file", n, MaxUpstreamSchema)
	}
	if n := jsonSize(u.Annotations); n > MaxUpstreamDescription {
		add("tools/list gives annotations of %d bytes, more than %d: leave the tool out of tools", n, MaxUpstreamDescription)
	}
	if n := jsonSize(u.OutputSchema); n > MaxUpstreamSchema {
		add("tools/list gives an outputSchema of %d bytes, more than %d: leave the tool out of tools", n, MaxUpstreamSchema)
	}
	return errs
}

func jsonSize(v map[string]any) int {
	if v == nil {
		return 0
	}
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}
