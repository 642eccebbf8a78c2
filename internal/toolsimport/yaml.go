package toolsimport

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// WriteYAML prints f as a tools file. Fields come in the order docs/TOOLS.md lists them, and schema
// keywords in the order a person reads a schema (type and description first, subschemas
// last), not alphabetically as encoding a map would. Tools are encoded one at a time, so
// that only one tool's nodes are held at once (Stripe's 594 tools as one tree of nodes took
// about 280 MB to print 2.4 MB).
func (f *File) WriteYAML(w io.Writer) error {
	if len(f.Tools) == 0 && len(f.Servers) == 0 {
		return fmt.Errorf("toolsimport: nothing to write")
	}
	bw := bufio.NewWriter(w)
	header := comment(f.Header)
	for i := range f.Tools {
		item := sequence()
		item.Content = append(item.Content, httpToolNode(&f.Tools[i]))
		var n *yaml.Node
		indent := ""
		if i == 0 {
			// The first with the file's header and the tools: key: the encoder's own
			// layout, which each following item then repeats at the same indentation.
			n = mapping()
			n.Content = append(n.Content, scalar("tools"), item)
			n.Content[0].HeadComment = header
		} else {
			n, indent = item, "  "
		}
		if err := encodeYAML(bw, n, indent); err != nil {
			return err
		}
	}
	if len(f.Servers) > 0 {
		servers := sequence()
		for i := range f.Servers {
			servers.Content = append(servers.Content, serverNode(&f.Servers[i]))
		}
		root := mapping()
		root.Content = append(root.Content, scalar("mcp_servers"), servers)
		if len(f.Tools) == 0 {
			root.Content[0].HeadComment = header
		}
		if err := encodeYAML(bw, root, ""); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// encodeYAML writes n as YAML to w, each line but the empty ones after indent.
func encodeYAML(w *bufio.Writer, n *yaml.Node, indent string) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{n}}); err != nil {
		return fmt.Errorf("toolsimport: encode YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("toolsimport: encode YAML: %w", err)
	}
	for line := range bytes.Lines(buf.Bytes()) {
		if len(line) > 1 {
			_, _ = w.WriteString(indent)
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	return nil
}

func httpToolNode(t *HTTPTool) *yaml.Node {
	n := mapping()
	n.HeadComment = comment(t.Notes)
	add(n, "name", t.Name)
	add(n, "description", t.Description)
	add(n, "effect", t.Effect)
	n.Content = append(n.Content, scalar("params_schema"), schemaNode(t.ParamsSchema, true))
	h := mapping()
	add(h, "connection", t.HTTP.Connection)
	add(h, "method", t.HTTP.Method)
	add(h, "url", t.HTTP.URL)
	add(h, "body", t.HTTP.Body)
	if len(t.HTTP.Query) > 0 {
		q := sequence()
		for _, p := range t.HTTP.Query {
			e := mapping()
			e.Style = yaml.FlowStyle
			add(e, "param", p.Param)
			add(e, "name", p.Name)
			add(e, "style", p.Style)
			if p.Explode != nil {
				e.Content = append(e.Content, scalar("explode"), &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(*p.Explode)})
			}
			q.Content = append(q.Content, e)
		}
		h.Content = append(h.Content, scalar("query"), q)
	}
	if len(t.HTTP.Headers) > 0 {
		hs := mapping()
		hs.Style = yaml.FlowStyle
		for _, name := range slices.Sorted(maps.Keys(t.HTTP.Headers)) {
			add(hs, name, t.HTTP.Headers[name])
		}
		h.Content = append(h.Content, scalar("headers"), hs)
	}
	add(h, "idempotency_header", t.HTTP.IdempotencyHeader)
	if s := t.HTTP.SuggestedIdempotencyHeader; s != "" {
		// A foot comment on the last key prints after its value, inside http: at the
		// indentation a person who uncomments it needs.
		h.Content[len(h.Content)-2].FootComment = "idempotency_header: " + s +
			"   # the document declares no idempotency header: uncomment if the API honours one"
	}
	n.Content = append(n.Content, scalar("http"), h)
	return n
}

func serverNode(s *MCPServer) *yaml.Node {
	n := mapping()
	add(n, "name", s.Name)
	if len(s.Command) > 0 {
		cmd := sequence()
		cmd.Style = yaml.FlowStyle
		for _, a := range s.Command {
			cmd.Content = append(cmd.Content, scalar(a))
		}
		n.Content = append(n.Content, scalar("command"), cmd)
	}
	add(n, "url", s.URL)
	add(n, "connection", s.Connection)
	tools := sequence()
	for _, t := range s.Tools {
		tn := mapping()
		tn.HeadComment = comment(t.Notes)
		add(tn, "upstream", t.Upstream)
		add(tn, "name", t.Name)
		add(tn, "effect", t.Effect)
		tools.Content = append(tools.Content, tn)
	}
	n.Content = append(n.Content, scalar("tools"), tools)
	return n
}

// keywordOrder is the order schema keywords are printed in; others follow alphabetically.
var keywordOrder = []string{"$comment", "type", "title", "description", "deprecated", "format", "enum", "const", "default",
	"examples", "multipleOf", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "minLength", "maxLength",
	"pattern", "minItems", "maxItems", "uniqueItems", "minContains", "maxContains", "minProperties", "maxProperties",
	"required", "dependentRequired", "properties", "patternProperties", "additionalProperties", "propertyNames",
	"dependentSchemas", "unevaluatedProperties", "items", "prefixItems", "contains", "unevaluatedItems",
	"allOf", "anyOf", "oneOf", "not", "if", "then", "else"}

// The keywords whose values are schemas: one, a list, or a map from names (of properties,
// patterns) to schemas.
var (
	schemaValued = []string{"items", "additionalProperties", "propertyNames", "unevaluatedProperties", "contains",
		"unevaluatedItems", "not", "if", "then", "else"}
	schemaLists = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	namesMaps   = []string{"properties", "patternProperties", "dependentSchemas", "$defs"}
)

// schemaNode prints a JSON Schema value. keywords says whether v's keys are keywords (a schema)
// or data (enum values, defaults, examples), which are printed as they are, sorted.
func schemaNode(v any, keywords bool) *yaml.Node {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		if keywords {
			sortKeywords(keys)
		} else {
			slices.Sort(keys)
		}
		n := mapping()
		for _, k := range keys {
			var val *yaml.Node
			switch {
			case !keywords:
				val = schemaNode(x[k], false)
			case slices.Contains(namesMaps, k):
				val = namedSchemas(x[k])
			case slices.Contains(schemaLists, k):
				val = schemaNode(x[k], true)
				for _, item := range val.Content {
					compact(item)
				}
			case slices.Contains(schemaValued, k):
				val = schemaNode(x[k], true)
				compact(val)
			default: // a value: a number, a name, a list of names, or data
				val = schemaNode(x[k], false)
			}
			n.Content = append(n.Content, scalar(k), val)
		}
		return n
	case []any:
		n := sequence()
		for _, e := range x {
			n.Content = append(n.Content, schemaNode(e, keywords))
		}
		compact(n)
		return n
	case []string:
		n := sequence()
		for _, e := range x {
			n.Content = append(n.Content, scalar(e))
		}
		n.Style = yaml.FlowStyle
		return n
	default:
		return value(v)
	}
}

// value prints a scalar of a schema: a string, number, boolean or null.
func value(v any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode}
	switch x := v.(type) {
	case string:
		return scalar(x)
	case bool:
		n.Tag, n.Value = "!!bool", strconv.FormatBool(x)
	case nil:
		n.Tag, n.Value = "!!null", "null"
	case float64:
		n.Tag, n.Value = "!!float", strconv.FormatFloat(x, 'g', -1, 64)
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			n.Tag, n.Value = "!!int", strconv.FormatFloat(x, 'f', -1, 64)
		}
	case uint64:
		n.Tag, n.Value = "!!int", strconv.FormatUint(x, 10)
	default:
		// Other values (a json.Number, an int) are rare: let the encoder spell them.
		if err := n.Encode(v); err != nil {
			// Every value here came from JSON or is a Go scalar; one that is not is a bug.
			panic(fmt.Sprintf("toolsimport: cannot print %T: %v", v, err))
		}
	}
	return n
}

// namedSchemas prints a map of names to schemas, each schema compacted where it is short.
func namedSchemas(v any) *yaml.Node {
	m, ok := v.(map[string]any)
	if !ok {
		return schemaNode(v, false)
	}
	n := mapping()
	for _, name := range slices.Sorted(maps.Keys(m)) {
		val := schemaNode(m[name], true)
		compact(val)
		n.Content = append(n.Content, scalar(name), val)
	}
	return n
}

// compact writes a short node on one line: a mapping of at most four scalars ({type: string,
// maxLength: 5000}) or a list of at most sixteen, and no long text.
func compact(n *yaml.Node) {
	if n.Kind != yaml.MappingNode && n.Kind != yaml.SequenceNode {
		return
	}
	limit := 4
	if n.Kind == yaml.MappingNode {
		limit = 8 // keys and values
	}
	if n.Kind == yaml.SequenceNode {
		limit = 16 // a list of names (enum, required) reads well on one line
	}
	if len(n.Content) > limit {
		return
	}
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode || len(c.Value) > 60 || strings.Contains(c.Value, "\n") {
			return
		}
	}
	n.Style = yaml.FlowStyle
}

func sortKeywords(keys []string) {
	rank := func(k string) int {
		if i := slices.Index(keywordOrder, k); i >= 0 {
			return i
		}
		return len(keywordOrder)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
}

func mapping() *yaml.Node  { return &yaml.Node{Kind: yaml.MappingNode} }
func sequence() *yaml.Node { return &yaml.Node{Kind: yaml.SequenceNode} }

// scalar is a string node. Tagged !!str, the encoder quotes it where plain YAML would read
// it as something else ("true", "1.0", "null", text with ": ").
//
// Text of several lines holding a tab is double-quoted: yaml.v3 prints it as a literal block
// whose tab-led lines its own parser then refuses ("found a tab character where an indentation
// space is expected"; Adyen's descriptions have such lines).
func scalar(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	if strings.Contains(s, "\n") && strings.Contains(s, "\t") {
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// add appends key: value to a mapping, unless value is empty.
func add(n *yaml.Node, key, value string) {
	if value != "" {
		n.Content = append(n.Content, scalar(key), scalar(value))
	}
}

// comment joins lines into a YAML comment; the encoder writes "# " before each.
func comment(lines []string) string {
	var out []string
	for _, l := range lines {
		for _, part := range strings.Split(l, "\n") {
			out = append(out, strings.TrimRight(part, " \t"))
		}
	}
	return strings.Join(out, "\n")
}
