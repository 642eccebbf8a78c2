package catalog

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryProblemAtOnce (issue 50 item 15): as docs/TOOLS.md says, a tools file's problems
// are reported together, each with its line: two unknown fields of one tool (and one nested in
// http), two schema typos, and the problems of another tool, in one error. They came one at a
// time: the first unknown field, or the first typo, hid the rest.
func TestEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	_, err := Load([]byte(`tools:
  - name: a.one
    description: d
    effect: write
    colour: blue
    params_schema:
      type: object
      properties:
        subject: {type: string, maxlength: 10}
        tags:
          type: array
          items: {type: string, minlenght: 1}
    http:
      url: https://a.example/x
      tiemout: 1s
    sizes: big
  - name: a.two
    description: d
    effect: write
    params_schema: {type: object, requird: [x]}
    http: {url: https://a.example/y}
`))
	require.Error(t, err)
	for _, want := range []string{
		`tool "a.one": colour: unknown field (line 5)`,
		`tool "a.one": http.tiemout: unknown field (line 15)`,
		`tool "a.one": sizes: unknown field (line 16)`,
		`tool "a.two": params_schema: at "/": unknown keyword "requird"`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	// The schema typos of a tool whose fields decode: every one, with its line.
	_, err = Load([]byte(`tools:
  - name: a.one
    description: d
    effect: write
    params_schema:
      type: object
      properties:
        subject: {type: string, maxlength: 10}
        tags:
          type: array
          items: {type: string, minlenght: 1}
    http: {url: https://a.example/x}
`))
	require.Error(t, err)
	for _, want := range []string{
		`params_schema: at "/properties/subject": unknown keyword "maxlength": JSON Schema 2020-12 has no such keyword (line 8)`,
		`params_schema: at "/properties/tags/items": unknown keyword "minlenght": JSON Schema 2020-12 has no such keyword (line 11)`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Equal(t, 2, strings.Count(err.Error(), "unknown keyword"))
}
