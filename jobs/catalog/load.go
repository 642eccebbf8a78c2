package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"gopkg.in/yaml.v3"
)

// FileError is one problem found in the tools file. Load returns every problem it finds, joined
// with errors.Join, so an operator can fix the whole file in one pass; errors.As finds the first.
type FileError struct {
	Tool  string // the tool's name, "" when it has no valid name
	Index int    // 1-based position of the tool in the file, 0 for file-level problems
	Line  int    // line of the tool in the file, 0 when unknown
	Field string // path of the field, e.g. "http.timeout", "" for the tool as a whole
	Err   error
}

// Error formats the problem as `tools file: tool "tickets.create": http.timeout: ...`.
func (e *FileError) Error() string {
	msg := "tools file: "
	switch {
	case e.Tool != "":
		msg += fmt.Sprintf("tool %q: ", e.Tool)
	case e.Index > 0 && e.Line > 0:
		msg += fmt.Sprintf("tool #%d (line %d): ", e.Index, e.Line)
	case e.Index > 0:
		msg += fmt.Sprintf("tool #%d: ", e.Index)
	}
	if e.Field != "" {
		msg += e.Field + ": "
	}
	return msg + e.Err.Error()
}

// Unwrap returns the underlying problem.
func (e *FileError) Unwrap() error { return e.Err }

// LoadFile reads and validates the tools file at path; see Load. Relative paths in it (TLS
// files, {file: …} secrets) are relative to the file's directory.
func LoadFile(path string) (*Catalog, error) {
	return LoadFileWith(path, Options{})
}

// LoadFileWith is LoadFile with options.
func LoadFileWith(path string, opts Options) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tools file: %w", err)
	}
	if opts.Dir == "" {
		opts.Dir = filepath.Dir(path)
	}
	return LoadWith(data, opts)
}

// Options are what loading a tools file reads besides the file.
type Options struct {
	// Getenv reads the {env: …} secrets (os.Getenv if nil). They are read once, at load.
	Getenv func(string) string
	// Dir is what relative paths are relative to ("" for the working directory).
	Dir string
	// MCP lists the tools of the file's mcp_servers (starting or connecting to each); nil
	// refuses a file that declares any.
	MCP MCPLister
	// SendsNothing loads the file for a command that sends no request through its connections
	// (export reads only the masking rules): their credentials ({env: …} and {file: …}
	// secrets, TLS files) are neither read nor required, so an auditor needs none of them. A
	// connection an MCP server uses is still loaded whole: its server is asked for its tools.
	// Such a catalogue must never send a request.
	SendsNothing bool
}

// Load parses the YAML tools file (docs/TOOLS.md), validates every tool, applies the defaults and
// compiles schemas and templates once, so nothing about a tool can fail later for reasons the
// file alone decides. The error names the tool and the field of every problem found.
func Load(data []byte) (*Catalog, error) {
	return LoadWith(data, Options{})
}

// LoadWith is Load with options.
func LoadWith(data []byte, opts Options) (*Catalog, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	nodes, err := topLevel(data)
	if err != nil {
		return nil, err
	}
	items, connItems := nodes.tools, nodes.connections
	chk := connectionChecks{getenv: opts.Getenv, dir: opts.Dir}
	var unsent func(name string) bool
	if opts.SendsNothing {
		unsent = func(name string) bool { return !usedByServer(nodes.servers, name) }
	}
	conns, errs := buildConnections(connItems, chk, unsent)
	entries, serrs := buildMCPServers(nodes.servers, conns, chk)
	errs = append(errs, serrs...)
	tools := make([]*Tool, 0, len(items))
	for i, node := range items {
		t, terrs := buildTool(node, i+1, conns)
		errs = append(errs, terrs...)
		if t != nil {
			t.memo = newParamsMemo()
			tools = append(tools, t)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Servers are asked only once the file itself is sound: a typo is reported without
	// starting anything.
	upstream, errs := mcpTools(entries, opts.MCP)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	tools = append(tools, upstream...)
	c, errs := link(tools)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for _, e := range entries {
		c.servers = append(c.servers, e.server)
	}
	// Policies and budgets are checked against every tool they apply to, upstream ones too.
	if c.rules, errs = buildRules(nodes.policies, nodes.budgets, c.tools); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for _, node := range connItems {
		if n := mappingValue(node, "name"); n != nil {
			if conn, ok := conns[n.Value]; ok {
				c.connections = append(c.connections, conn)
			}
		}
	}
	return c, nil
}

// buildConnections decodes and validates the connections, indexed by name.
// unsent, when set, names the connections nothing will be sent through: their credentials
// are not read.
func buildConnections(items []*yaml.Node, chk connectionChecks, unsent func(name string) bool) (map[string]*Connection, []error) {
	conns := make(map[string]*Connection, len(items))
	var errs []error
	for i, node := range items {
		var raw rawConnection
		if err := decodeStrict(node, &raw); err != nil {
			name := ""
			if n := mappingValue(node, "name"); n != nil && n.Kind == yaml.ScalarNode {
				name = n.Value
			}
			for _, e := range pathErrors(err) {
				ce := &ConnectionError{Connection: name, Index: i + 1, Err: e}
				var pe *pathError
				if errors.As(e, &pe) {
					ce.Field, ce.Err = pe.path, pe.err
				}
				errs = append(errs, ce)
			}
			continue
		}
		cc := chk
		cc.unsent = unsent != nil && unsent(raw.Name)
		c, cerrs := buildConnection(&raw, i+1, cc)
		if _, dup := conns[raw.Name]; dup && raw.Name != "" {
			cerrs = append(cerrs, &ConnectionError{Connection: raw.Name, Index: i + 1, Field: "name", Err: errors.New("declared twice")})
		}
		errs = append(errs, cerrs...)
		if len(cerrs) == 0 {
			conns[c.Name] = c
		} else if raw.Name != "" {
			conns[raw.Name] = nil // known, but broken: its tools are not blamed for an unknown name
		}
	}
	return conns, errs
}

// usedByServer reports whether an MCP server of the file names connection name.
func usedByServer(servers []*yaml.Node, name string) bool {
	for _, s := range servers {
		if n := mappingValue(s, "connection"); n != nil && n.Kind == yaml.ScalarNode && n.Value == name {
			return true
		}
	}
	return false
}

// fileNodes are the items of the tools file's top-level lists.
type fileNodes struct {
	tools, connections, servers []*yaml.Node
	policies, budgets           []*yaml.Node
}

// topLevel returns the items of the top-level "tools", "connections", "mcp_servers",
// "policies" and "budgets" lists, rejecting any other top-level field. A file declares tools, servers, or both.
func topLevel(data []byte) (fileNodes, error) {
	var out fileNodes
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return out, &FileError{Err: errors.New("empty file")}
		}
		return out, &FileError{Err: fmt.Errorf("invalid YAML: %w", err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return out, &FileError{Err: errors.New("more than one YAML document")}
	}
	if len(doc.Content) == 0 {
		return out, &FileError{Err: errors.New("empty file")}
	}
	root := resolveAlias(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		return out, &FileError{Err: fmt.Errorf("expected a mapping with a tools list, got %s", describeNode(root))}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := root.Content[i]
		switch {
		case k.Value != "tools" && k.Value != "connections" && k.Value != "mcp_servers" && k.Value != "policies" && k.Value != "budgets":
			return out, &FileError{Field: k.Value, Err: fmt.Errorf("unknown field (line %d)", k.Line)}
		case seen[k.Value]:
			return out, &FileError{Field: k.Value, Err: fmt.Errorf("declared twice (line %d)", k.Line)}
		}
		seen[k.Value] = true
	}
	list := func(field string) ([]*yaml.Node, error) {
		l := mappingValue(root, field)
		if l == nil || isNull(l) {
			return nil, nil
		}
		if l.Kind != yaml.SequenceNode {
			return nil, &FileError{Field: field, Err: fmt.Errorf("expected a list, got %s", describeNode(l))}
		}
		return l.Content, nil
	}
	var err error
	if out.connections, err = list("connections"); err != nil {
		return out, err
	}
	if out.servers, err = list("mcp_servers"); err != nil {
		return out, err
	}
	if out.tools, err = list("tools"); err != nil {
		return out, err
	}
	if out.policies, err = list("policies"); err != nil {
		return out, err
	}
	if out.budgets, err = list("budgets"); err != nil {
		return out, err
	}
	switch {
	case (mappingValue(root, "tools") == nil || isNull(mappingValue(root, "tools"))) && len(out.servers) == 0:
		return out, &FileError{Field: "tools", Err: errors.New("required (or mcp_servers)")}
	case len(out.tools) == 0 && len(out.servers) == 0:
		return out, &FileError{Field: "tools", Err: errors.New("no tools declared")}
	}
	return out, nil
}

// buildTool decodes and validates one tool. It returns the tool only when it has no errors.
func buildTool(node *yaml.Node, index int, conns map[string]*Connection) (*Tool, []error) {
	ec := &collector{index: index, line: resolveAlias(node).Line, conns: conns, node: node}
	if n := mappingValue(node, "name"); n != nil && n.Kind == yaml.ScalarNode && nameRE.MatchString(n.Value) {
		ec.tool = n.Value // label errors with the name as soon as it is usable
	}
	var raw rawTool
	if err := decodeStrict(node, &raw); err != nil {
		for _, e := range pathErrors(err) {
			var pe *pathError
			if errors.As(e, &pe) {
				ec.add(pe.path, pe.err)
			} else {
				ec.add("", e)
			}
		}
		return nil, ec.errs
	}
	t := validateTool(&raw, ec)
	if len(ec.errs) > 0 {
		return nil, ec.errs
	}
	return t, nil
}

// link checks what concerns several tools (unique names, compensation targets) and indexes them.
func link(tools []*Tool) (*Catalog, []error) {
	c := &Catalog{tools: tools, byWire: make(map[string]*Tool, len(tools))}
	index := make(map[*Tool]int, len(tools))
	var errs []error
	for i, t := range tools {
		wire := wireName(t.Name)
		if prev, ok := c.byWire[wire]; ok {
			err := fmt.Errorf("declared twice (first as tool #%d)", index[prev])
			if prev.Name != t.Name {
				err = fmt.Errorf("clashes with tool %q once each \".\" is written \"__\"", prev.Name)
			}
			errs = append(errs, &FileError{Tool: t.Name, Index: i + 1, Field: "name", Err: err})
			continue
		}
		c.byWire[wire] = t
		index[t] = i + 1
	}
	for i, t := range tools {
		if t.Compensation == nil {
			continue
		}
		target, ok := c.Get(t.Compensation.Tool)
		switch {
		case !ok:
			errs = append(errs, &FileError{Tool: t.Name, Index: i + 1, Field: "compensation.tool",
				Err: fmt.Errorf("unknown tool %q", t.Compensation.Tool)})
		case target == t:
			errs = append(errs, &FileError{Tool: t.Name, Index: i + 1, Field: "compensation.tool",
				Err: errors.New("a tool cannot compensate itself")})
		default:
			t.Compensation.Tool = target.Name // store the dotted spelling
			if leaf, ptr, leak := compensationLeak(t, target); leak {
				errs = append(errs, &FileError{Tool: t.Name, Index: i + 1, Field: joinPath("compensation.params", leaf),
					Err: fmt.Errorf("copies the sensitive param %s into %s of %s, which is not sensitive there; "+
						"add it to %s's sensitive_params, or leave it out", ptr, leaf, target.Name, target.Name)})
			}
		}
	}
	return c, errs
}

// collector gathers the problems of one tool, labelled with the tool.
type collector struct {
	tool  string
	index int
	line  int
	errs  []error
	conns map[string]*Connection // the file's connections; nil for a broken one
	node  *yaml.Node             // the tool's mapping, for the lines of what is inside it
}

// schemaLine is the line of the key at pointer inside the tool's params_schema (a keyword:
// its last token), 0 when it cannot be found.
func (c *collector) schemaLine(pointer string) int {
	n := mappingValue(c.node, "params_schema")
	tokens, err := parsePointer(pointer)
	if n == nil || err != nil || len(tokens) == 0 {
		return 0
	}
	for i, tok := range tokens {
		n = resolveAlias(n)
		switch n.Kind {
		case yaml.MappingNode:
			found := false
			for j := 0; j+1 < len(n.Content); j += 2 {
				if resolveAlias(n.Content[j]).Value == tok {
					if i == len(tokens)-1 {
						return n.Content[j].Line
					}
					n, found = n.Content[j+1], true
					break
				}
			}
			if !found {
				return 0
			}
		case yaml.SequenceNode:
			idx, err := strconv.Atoi(tok)
			if err != nil || idx < 0 || idx >= len(n.Content) || i == len(tokens)-1 {
				return 0
			}
			n = n.Content[idx]
		default:
			return 0
		}
	}
	return 0
}

func (c *collector) add(field string, err error) {
	c.errs = append(c.errs, &FileError{Tool: c.tool, Index: c.index, Line: c.line, Field: field, Err: err})
}

func (c *collector) addf(field, format string, args ...any) {
	c.add(field, fmt.Errorf(format, args...))
}
