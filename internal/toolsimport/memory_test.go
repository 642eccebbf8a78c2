package toolsimport

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// TestReadOpenAPIJSONAsJSON: a JSON document, decoded as JSON rather than through
// kin-openapi's YAML parser (a sixth of the memory), imports exactly as the same document
// written in YAML: $refs resolved, every tool, every line. A $ref to nowhere is still refused.
func TestReadOpenAPIJSONAsJSON(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/pets.yaml")
	require.NoError(t, err)
	var doc any
	require.NoError(t, yaml.Unmarshal(data, &doc))
	asJSON, err := json.Marshal(doc)
	require.NoError(t, err)

	print := func(data []byte) string {
		f, err := OpenAPI(data, OpenAPIOptions{Connection: "pets", Source: "pets"})
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, f.WriteYAML(&buf))
		return buf.String()
	}
	fromYAML := print(data)
	assert.Equal(t, fromYAML, print(append([]byte(" \n\t"), asJSON...)), "the same document, in JSON")
	assert.Contains(t, fromYAML, "- name: pets.create_pet\n")

	dangling := strings.Replace(string(asJSON), `"#/components/schemas/`, `"#/components/schemas/Nothing`, 1)
	require.NotEqual(t, string(asJSON), dangling, "the document has a $ref to break")
	_, err = ReadOpenAPI([]byte(dangling))
	assert.ErrorContains(t, err, "read OpenAPI document")
}

// oneTree is how WriteYAML printed a file before it printed one tool at a time: the whole
// file as one tree of nodes.
func oneTree(t *testing.T, f *File) string {
	t.Helper()
	root := mapping()
	tools := sequence()
	for i := range f.Tools {
		tools.Content = append(tools.Content, httpToolNode(&f.Tools[i]))
	}
	root.Content = append(root.Content, scalar("tools"), tools)
	root.Content[0].HeadComment = comment(f.Header)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	require.NoError(t, enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}))
	require.NoError(t, enc.Close())
	return buf.String()
}

// TestWriteYAMLOneToolAtATime: printing tool by tool (so that Stripe's 594 tools never stand
// as one tree of nodes, which took about 280 MB) writes the very bytes one tree did: notes,
// block scalars with empty lines, the commented-out idempotency header, flow and block styles.
func TestWriteYAMLOneToolAtATime(t *testing.T) {
	t.Parallel()
	f, out, _ := importPets(t, OpenAPIOptions{Source: "pets.yaml"})
	assert.Equal(t, oneTree(t, f), out)

	f.Tools[1].Description = "First line.\n\n  Indented, after an empty line.\n"
	f.Tools[1].Notes = append(f.Tools[1].Notes, "a note\nof two lines")
	f.Tools[2].ParamsSchema["description"] = "text: with a colon\n\nand a paragraph"
	var buf bytes.Buffer
	require.NoError(t, f.WriteYAML(&buf))
	assert.Equal(t, oneTree(t, f), buf.String())
	assert.Contains(t, buf.String(), "\n\n", "an empty line inside a block scalar, not indented")
	loadImported(t, buf.String(), "")
}
