package catalog

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestToolsFileReference: every field the loader accepts is named in docs/TOOLS.md, in the
// section of what it belongs to. The fields are found by walking the types the loader decodes
// into (their yaml tags), so a field added to the loader without a line in the reference fails
// here. A type met again (a server's tool has a tool's retry) is documented once, where it is
// first described; the field that holds it is still required.
func TestToolsFileReference(t *testing.T) {
	doc, err := os.ReadFile("../../docs/TOOLS.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[reflect.Type]bool{}
	for _, c := range []struct {
		section string
		typ     reflect.Type
	}{
		{"## Tools", reflect.TypeFor[rawTool]()},
		{"## Connections", reflect.TypeFor[rawConnection]()},
		{"## MCP servers", reflect.TypeFor[rawMCPServer]()},
	} {
		text := section(t, string(doc), c.section)
		fields := yamlFields(c.typ, "", seen)
		if len(fields) < 5 {
			t.Fatalf("%s: only %v found: the walk is broken", c.typ, fields)
		}
		for _, f := range fields {
			if !strings.Contains(text, "`"+f+"`") {
				t.Errorf("docs/TOOLS.md %q does not name `%s` (%s)", c.section, f, c.typ)
			}
		}
	}
	top := section(t, string(doc), "## Top level")
	for _, f := range []string{"tools", "connections", "mcp_servers"} { // the lists topLevel accepts
		if !strings.Contains(top, "`"+f+"`") {
			t.Errorf("docs/TOOLS.md \"## Top level\" does not name `%s`", f)
		}
	}
}

// yamlFields lists the dotted paths of typ's yaml fields ("http.method",
// "tools[].reconcile.tool"), descending into each struct type the first time it is met.
func yamlFields(typ reflect.Type, prefix string, seen map[reflect.Type]bool) []string {
	seen[typ] = true
	var out []string
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		path := prefix + name
		out = append(out, path)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		sub := path + "."
		if ft.Kind() == reflect.Slice {
			ft, sub = ft.Elem(), path+"[]."
		}
		if ft.Kind() == reflect.Struct && !seen[ft] {
			out = append(out, yamlFields(ft, sub, seen)...)
		}
	}
	return out
}

// section is the text under heading, up to the next heading of the same level or above.
func section(t *testing.T, md, heading string) string {
	t.Helper()
	i := strings.Index(md, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("docs/TOOLS.md has no %q", heading)
	}
	rest := md[i+len(heading)+2:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}
