package toolsimport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
)

// OpenAPIOptions say what to import from an OpenAPI document.
type OpenAPIOptions struct {
	// Operations are the operationIds to import, in the order given; every operation when
	// empty.
	Operations []string
	// Connection is the connection each tool's http names (docs/TOOLS.md), and the prefix of the
	// tools' names; "" for none (URLs are then absolute, names start with "api.").
	Connection string
	// Source names the document in the header comment (its file name).
	Source string
	// IdempotencyHeader, when set, is the idempotency_header of every write and idempotent
	// tool whose operation declares none: for an API that honours a key its document does
	// not declare (Stripe's Idempotency-Key).
	IdempotencyHeader string

	// expansionTime replaces maxExpansionTime when set: this package's tests of the size bound
	// must not meet the time bound first on a loaded machine, nor the time bound's test wait.
	expansionTime time.Duration
}

// defaultPrefix starts the tools' names when no connection is named.
const defaultPrefix = "api"

// methods are the HTTP methods a tool may use (the catalog's), in the order they are printed.
var methods = []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete}

// operation is one operation of the document, with where it sits.
type operation struct {
	path   string
	method string
	item   *openapi3.PathItem
	op     *openapi3.Operation
}

// id is the operation's operationId, or a name made of its method and path when it has none.
func (o operation) id() string {
	if o.op.OperationID != "" {
		return o.op.OperationID
	}
	return strings.ToLower(o.method) + "_" + o.path
}

// OpenAPIDocument is an OpenAPI 3 document, read once to import from.
type OpenAPIDocument struct {
	doc *openapi3.T
}

// ReadOpenAPI reads an OpenAPI 3 document (JSON or YAML; its $refs must point inside it).
func ReadOpenAPI(data []byte) (*OpenAPIDocument, error) {
	// The loader reads no other file and no URL: an import looks at what it was given.
	doc, err := load(data)
	if err != nil {
		return nil, fmt.Errorf("toolsimport: read OpenAPI document: %w", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		return nil, errors.New("toolsimport: not an OpenAPI 3 document (no \"openapi: 3.x\"; Swagger 2.0 must be converted first)")
	}
	return &OpenAPIDocument{doc: doc}, nil
}

// load decodes a document. kin-openapi's loader reads JSON as YAML (one parser for both, to
// remember where each value was), which builds a node for every value first: on Stripe's
// 8 MB document that is about 650 MB allocated and a 440 MB process. A JSON document is
// decoded as JSON instead (about a sixth of that), then its $refs resolved as the loader
// would; YAML, or JSON that encoding/json refuses (a duplicate key is not one), takes the
// loader's own way.
func load(data []byte) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		doc := &openapi3.T{}
		if json.Unmarshal(data, doc) == nil {
			if err := loader.ResolveRefsIn(doc, nil); err != nil {
				return nil, err
			}
			return doc, nil
		}
	}
	return loader.LoadFromData(data)
}

// OpenAPI reads an OpenAPI 3 document and imports from it; see ReadOpenAPI and Import.
func OpenAPI(data []byte, opts OpenAPIOptions) (*File, error) {
	d, err := ReadOpenAPI(data)
	if err != nil {
		return nil, err
	}
	return d.Import(opts)
}

// Import returns a tools file with one tool per operation (docs/MCP.md). Naming an operationId
// the document lacks is an error that lists them, so a typo does not quietly import less. The
// document is only read, so imports from one document may run at once.
func (d *OpenAPIDocument) Import(opts OpenAPIOptions) (*File, error) {
	if opts.Connection != "" && !serverNameRE.MatchString(opts.Connection) {
		return nil, fmt.Errorf("toolsimport: invalid connection name %q: want %s", opts.Connection, serverNameRE)
	}
	doc := d.doc
	all, skipped := operations(doc)
	chosen, err := choose(all, skipped, opts.Operations)
	if err != nil {
		return nil, err
	}
	prefix := opts.Connection
	if prefix == "" {
		prefix = defaultPrefix
	}
	f := &File{Header: openAPIHeader(doc, opts, len(chosen))}
	used := map[string]bool{}
	expansionTime := maxExpansionTime
	if opts.expansionTime > 0 {
		expansionTime = opts.expansionTime
	}
	budget := newExpansion(maxExpansionBytes, expansionTime)
	for _, o := range chosen {
		base, baseNote, err := baseURL(doc, o, opts.Connection != "")
		if err != nil {
			return nil, err
		}
		t := buildTool(o, prefix, opts.Connection, base, opts.IdempotencyHeader, budget)
		if baseNote != "" {
			t.Notes = append(t.Notes, baseNote)
		}
		if err := budget.err(); err != nil {
			return nil, fmt.Errorf("toolsimport: operation %s: %w", o.id(), err)
		}
		for n := 2; used[t.Name]; n++ {
			// Two operationIds that differ only in case or punctuation make one snake-case name.
			t.Name = toolName(prefix, fmt.Sprintf("%s_%d", o.id(), n))
			if !used[t.Name] {
				t.Notes = append(t.Notes, "numbered: another operation's id makes the same name")
			}
		}
		used[t.Name] = true
		f.Tools = append(f.Tools, t)
	}
	if len(f.Tools) == 0 {
		return nil, errors.New("toolsimport: the document has no operations a tool can call (GET, PUT, POST, PATCH or DELETE)")
	}
	return f, nil
}

// operations lists the document's operations by path, then method; skipped are the ones a
// tool cannot be (HEAD, OPTIONS, TRACE, …), by id.
func operations(doc *openapi3.T) (all []operation, skipped map[string]string) {
	skipped = map[string]string{}
	if doc.Paths == nil {
		return nil, skipped
	}
	paths := doc.Paths.Keys()
	sort.Strings(paths)
	for _, p := range paths {
		item := doc.Paths.Value(p)
		if item == nil {
			continue
		}
		ops := item.Operations()
		for _, m := range methods {
			if op := ops[m]; op != nil {
				all = append(all, operation{path: p, method: m, item: item, op: op})
			}
		}
		for m, op := range ops {
			if op != nil && !slices.Contains(methods, m) {
				skipped[operation{path: p, method: m, op: op}.id()] = m
			}
		}
	}
	return all, skipped
}

// choose picks the operations named in ids, in that order, or all of them.
func choose(all []operation, skipped map[string]string, ids []string) ([]operation, error) {
	if len(ids) == 0 {
		return all, nil
	}
	byID := make(map[string]operation, len(all))
	for _, o := range all {
		if _, dup := byID[o.id()]; !dup {
			byID[o.id()] = o
		}
	}
	var out []operation
	var unknown []string
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		o, ok := byID[id]
		switch {
		case ok:
			out = append(out, o)
		case skipped[id] != "":
			unknown = append(unknown, fmt.Sprintf("%s (a %s operation: a tool uses GET, PUT, POST, PATCH or DELETE)", id, skipped[id]))
		default:
			unknown = append(unknown, id+suggestion(id, byID))
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("toolsimport: unknown operation %s: the document has no such operationId", strings.Join(unknown, ", "))
	}
	return out, nil
}

// suggestion names the operationId that id is probably a misspelling of: the same but for
// case and punctuation ("post_refunds" for "PostRefunds").
func suggestion(id string, byID map[string]operation) string {
	fold := func(s string) string { return strings.ReplaceAll(snakeCase(s), "_", "") }
	want := fold(id)
	var near []string
	for other := range byID {
		if fold(other) == want {
			near = append(near, other)
		}
	}
	if len(near) == 0 {
		return ""
	}
	sort.Strings(near)
	return fmt.Sprintf(" (did you mean %s?)", strings.Join(near, " or "))
}

// baseURL is what an operation's path is appended to: with a connection, the path of its
// server URL ("/v2" for https://api.example.com/v2), since the connection's base_url gives
// the scheme and host; without one, the whole server URL, which must then be absolute. note,
// when not "", says how a server URL that is neither a URL nor a path was read.
func baseURL(doc *openapi3.T, o operation, withConnection bool) (base, note string, err error) {
	servers := doc.Servers
	switch {
	case o.op.Servers != nil && len(*o.op.Servers) > 0:
		servers = *o.op.Servers
	case len(o.item.Servers) > 0:
		servers = o.item.Servers
	}
	raw := serverURL(servers)
	raw = strings.TrimRight(raw, "/")
	if resolved, ok := schemeRelative(raw); ok {
		// "//api.edrv.io": a network-path reference, relative to the document's own scheme,
		// which an imported document no longer has.
		raw = resolved
		note = fmt.Sprintf("the document's server URL %q has no scheme: read as %s", strings.TrimPrefix(raw, "https:"), raw)
	}
	u, err := url.Parse(raw)
	absolute := err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
	switch {
	case withConnection && absolute:
		return strings.TrimRight(u.EscapedPath(), "/"), note, nil
	case withConnection && (raw == "" || strings.HasPrefix(raw, "/")):
		return raw, "", nil // a relative server URL ("/api") or none
	case withConnection:
		// A host without its scheme ("api.example.com/v1"), or text that is no URL ("Your API
		// URL"): a URL template must stay below the connection's base_url.
		if u, err := url.Parse("https://" + raw); err == nil && hostName.MatchString(u.Hostname()) {
			path := strings.TrimRight(u.EscapedPath(), "/")
			return path, fmt.Sprintf("the document's server URL %q has no scheme: read as host %s, path %q", raw, u.Host, path), nil
		}
		return "", fmt.Sprintf("the document's server URL %q is neither a URL nor a path: left out, the URL is the operation's path", raw), nil
	case absolute:
		return raw, note, nil
	}
	return "", "", fmt.Errorf("toolsimport: operation %s: the document gives no absolute server URL (servers: %q): "+
		"name a connection with --connection and give it a base_url", o.id(), raw)
}

// hostName matches a DNS name of at least two labels, or localhost.
var hostName = regexp.MustCompile(`^(localhost|([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,})$`)

// schemeRelative resolves a server URL that starts with "//" (a host without a scheme) as
// https; false for any other.
func schemeRelative(raw string) (string, bool) {
	if strings.HasPrefix(raw, "//") && len(raw) > 2 && raw[2] != '/' {
		return "https:" + raw, true
	}
	return raw, false
}

// serverURL is the first server's URL with its variables at their defaults; "" for none.
func serverURL(servers openapi3.Servers) string {
	if len(servers) == 0 || servers[0] == nil {
		return ""
	}
	raw := servers[0].URL
	for name, v := range servers[0].Variables {
		if v != nil {
			raw = strings.ReplaceAll(raw, "{"+name+"}", v.Default)
		}
	}
	return raw
}

// openAPIHeader is the comment at the top of the file: where it came from and what to check.
func openAPIHeader(doc *openapi3.T, opts OpenAPIOptions, n int) []string {
	title := "an OpenAPI document"
	if doc.Info != nil && doc.Info.Title != "" {
		title = strings.TrimSpace(doc.Info.Title + " " + doc.Info.Version)
	}
	src := ""
	if opts.Source != "" {
		src = " (" + opts.Source + ")"
	}
	lines := []string{
		fmt.Sprintf("Imported by `idemgate tools import --openapi` from %s%s, OpenAPI %s: %d operation(s).", title, src, doc.OpenAPI, n),
		"Review before use: each tool's effect (read for GET, idempotent for PUT and DELETE, write otherwise),",
		"its description and params_schema, which params are sensitive (sensitive_params), and the notes above it.",
	}
	if opts.Connection == "" {
		lines = append(lines, "No --connection: the URLs are absolute and the requests carry no credentials.")
		return lines
	}
	base := "the API's scheme and host"
	server, resolved := schemeRelative(serverURL(doc.Servers))
	if u, err := url.Parse(server); err == nil && u.Host != "" {
		base = u.Scheme + "://" + u.Host
		if resolved {
			base += " (the document's server URL has no scheme: read as https)"
		}
	}
	lines = append(lines, fmt.Sprintf("Connection %q is not declared here: declare it under connections: (docs/TOOLS.md) with base_url %s.", opts.Connection, base))
	if doc.Components != nil && len(doc.Components.SecuritySchemes) > 0 {
		var schemes []string
		for _, name := range slices.Sorted(maps.Keys(doc.Components.SecuritySchemes)) {
			if s := doc.Components.SecuritySchemes[name]; s != nil && s.Value != nil {
				how := strings.Join(strings.Fields(strings.Join([]string{s.Value.Type, s.Value.Scheme, s.Value.In, s.Value.Name}, " ")), " ")
				schemes = append(schemes, name+" ("+how+")")
			}
		}
		lines = append(lines, "The document's security schemes, one of which becomes its auth: "+strings.Join(schemes, ", ")+".")
	}
	return lines
}
