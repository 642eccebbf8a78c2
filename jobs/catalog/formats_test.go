package catalog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefinitions(t *testing.T) {
	t.Parallel()
	c, err := Load([]byte(`
tools:
  - name: tickets.create
    description: Create a ticket
    effect: write
    params_schema: {type: object, required: [subject], properties: {subject: {type: string, maxLength: 200}}}
    http: {url: "http://127.0.0.1:9100/tickets"}
  - name: payouts-send
    description: Send a payout
    effect: write
    params_schema: {type: object, properties: {amount: {type: integer, minimum: 1}}}
    http: {url: "http://127.0.0.1:9100/payouts"}
    review: {require_approval: true}
`))
	require.NoError(t, err)
	const (
		schemaA = `{"properties":{"subject":{"maxLength":200,"type":"string"}},"required":["subject"],"type":"object"}`
		schemaB = `{"properties":{"amount":{"minimum":1,"type":"integer"}},"type":"object"}`
	)
	tests := []struct {
		format string
		want   string
	}{
		{"", `{"tools":[` +
			`{"name":"tickets.create","description":"Create a ticket","effect":"write","params_schema":` + schemaA + `,"requires_approval":false},` +
			`{"name":"payouts-send","description":"Send a payout","effect":"write","params_schema":` + schemaB + `,"requires_approval":true}]}`},
		{"openai", `{"tools":[` +
			`{"type":"function","function":{"name":"tickets__create","description":"Create a ticket","parameters":` + schemaA + `}},` +
			`{"type":"function","function":{"name":"payouts-send","description":"Send a payout","parameters":` + schemaB + `}}]}`},
		{"anthropic", `{"tools":[` +
			`{"name":"tickets__create","description":"Create a ticket","input_schema":` + schemaA + `},` +
			`{"name":"payouts-send","description":"Send a payout","input_schema":` + schemaB + `}]}`},
	}
	for _, tc := range tests {
		t.Run("format "+tc.format, func(t *testing.T) {
			t.Parallel()
			v, err := Definitions(c.Tools(), Format{Name: tc.format})
			require.NoError(t, err)
			b, err := json.Marshal(v)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(b))
		})
	}

	def, err := Definitions(c.Tools(), Format{Name: "default"})
	require.NoError(t, err)
	assert.IsType(t, ToolList[Definition]{}, def)
}

func TestDefinitionsEmptyAndUnknown(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"", "openai", "anthropic"} {
		v, err := Definitions(nil, Format{Name: format})
		require.NoError(t, err)
		b, err := json.Marshal(v)
		require.NoError(t, err)
		assert.Equal(t, `{"tools":[]}`, string(b), format)
	}
	for _, format := range []string{"OpenAI", "gemini", " mcp", "mcp"} {
		_, err := Definitions(nil, Format{Name: format})
		assert.ErrorContains(t, err, "unknown tools format", format)
	}
	_, err := Definitions(nil, Format{Name: "anthropic", Strict: true})
	assert.ErrorContains(t, err, "format openai only")
	_, err = Definitions(nil, Format{Name: "openai", API: "assistants"})
	assert.ErrorContains(t, err, "unknown OpenAI API")
}
