package catalog

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHTTPQuery: http.query's entries take OpenAPI's defaults (form, explode true; false for
// the delimited styles), and what cannot be sent as asked is refused, every problem at once.
func TestHTTPQuery(t *testing.T) {
	t.Parallel()
	c, err := Load([]byte(`
tools:
  - name: a.list
    description: d
    effect: read
    params_schema: {type: object}
    http: {url: "https://a.example/x", method: GET, query: [{param: ids}, {param: tags, style: pipeDelimited}, {param: top, name: $top, explode: false}, {param: f, style: deepObject}]}
`))
	require.NoError(t, err)
	tool, _ := c.Get("a.list")
	assert.Equal(t, []QueryParam{{"ids", "ids", QueryForm, true}, {"tags", "tags", QueryPipeDelimited, false},
		{"top", "$top", QueryForm, false}, {"f", "f", QueryDeepObject, true}}, tool.HTTP.Query)

	_, err = Load([]byte(`
tools:
  - name: a.write
    description: d
    effect: write
    params_schema: {type: object}
    sensitive_params: [card]
    http:
      url: "https://a.example/x/{{.Params.id}}"
      query: [{param: id}, {param: card}, {param: ""}, {param: q, style: matrix}, {param: r, style: deepObject, explode: false}, {param: s}, {param: s}]
`))
	require.Error(t, err)
	for _, want := range []string{
		`http.query[0].param: "id" is already in http.url`,
		`http.query[1].param: "card" would put the sensitive param /card into the URL`,
		`http.query[2].param: required`,
		`http.query[3].style: invalid style "matrix"`,
		`http.query[4].explode: deepObject is defined only with explode: true`,
		`http.query[6].param: "s" is listed twice`,
	} {
		assert.Contains(t, err.Error(), want)
	}
}
