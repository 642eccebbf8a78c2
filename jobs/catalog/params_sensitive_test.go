package catalog

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A validation message never carries a sensitive param's value, in any escaping: the
// validator quotes a refused value its own way ('4242…\u00a0'), which a scrubber looking for
// the value as sent would miss.
func TestValidationMessagesNeverQuoteSensitiveValues(t *testing.T) {
	cat, err := Load([]byte(`
tools:
  - name: cards.charge
    description: Charge a card
    effect: write
    params_schema:
      type: object
      properties:
        card_number: {type: string, pattern: "^[0-9]{16}$"}
        card: {type: object, properties: {pan: {type: string, maxLength: 4}}}
        nested: {type: object, const: {x: 1}}
        memo: {type: string, pattern: "^[a-z]+$"}
    sensitive_params: [card_number, /card/pan, /nested/secret]
    http: {url: "http://127.0.0.1:9/charge"}
`))
	require.NoError(t, err)
	tool, _ := cat.Get("cards.charge")
	for name, params := range map[string]string{
		"a pattern, with an escaped character": `{"card_number":"4242424242424242\u00a0"}`,
		"a type":                               `{"card_number":4242424242424242}`,
		"inside a sensitive object":            `{"card":{"pan":"4242424242424242"}}`,
		"a value holding a sensitive one":      `{"nested":{"secret":"4242424242424242"}}`,
	} {
		var v any
		require.NoError(t, json.Unmarshal([]byte(params), &v))
		errs := tool.ValidateParams(v)
		require.NotEmpty(t, errs, name)
		for _, e := range errs {
			assert.NotContains(t, e.Message, "4242", name)
			assert.NotContains(t, strings.ToLower(e.Message), `\u00a0`, name)
		}
	}
	var v any
	require.NoError(t, json.Unmarshal([]byte(`{"memo":"NOT-LOWER"}`), &v))
	errs := tool.ValidateParams(v)
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Message, "NOT-LOWER", "a value that is not sensitive is still quoted, to help the caller")
}

// A compensation may not copy a sensitive param into a param the compensating tool shows in
// clear; into one it treats as sensitive too, it may.
func TestCompensationMayNotUnmaskASensitiveParam(t *testing.T) {
	file := func(compParams, targetSensitive string) string {
		return `
tools:
  - name: cards.charge
    description: Charge a card
    effect: write
    params_schema: {type: object, properties: {card: {type: object}, amount: {type: integer}}}
    sensitive_params: [/card/pan]
    http: {url: "http://127.0.0.1:9/charge"}
    compensation: {tool: cards.refund, params: ` + compParams + `}
  - name: cards.refund
    description: Refund a charge
    effect: write
    params_schema: {type: object}
    sensitive_params: ` + targetSensitive + `
    http: {url: "http://127.0.0.1:9/refund"}
`
	}
	for name, tc := range map[string]struct{ params, sensitive, refused string }{
		"copied as it is":         {`{note: "{{.Params.card.pan}}"}`, `[]`, "compensation.params.note: copies the sensitive param /card/pan into note of cards.refund"},
		"inside a text":           {`{memo: {text: "card {{.Params.card.pan}}"}}`, `[]`, "compensation.params.memo.text: copies the sensitive param /card/pan"},
		"the object holding it":   {`{card: "{{.Params.card}}"}`, `[]`, "compensation.params.card: copies the sensitive param /card/pan"},
		"into a sensitive param":  {`{pan: "{{.Params.card.pan}}"}`, `[pan]`, ""},
		"into a sensitive object": {`{card: "{{.Params.card}}"}`, `[card]`, ""},
		"nothing sensitive":       {`{amount: "{{.Params.amount}}"}`, `[]`, ""},
	} {
		_, err := Load([]byte(file(tc.params, tc.sensitive)))
		if tc.refused == "" {
			assert.NoError(t, err, name)
			continue
		}
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.refused, name)
	}
}
