package catalog

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const revealTools = `
tools:
  - name: payouts.card
    description: Pay out to a card
    effect: write
    params_schema:
      type: object
      properties:
        order_id: {type: string}
        amount_cents: {type: integer}
        currency: {type: string}
        card_number: {type: string}
        bin_card: {type: string}
        email: {type: string}
        pin: {type: string}
    sensitive_params: [{name: card_number, reveal: last4}, {name: bin_card, reveal: first6last4}, {name: email, reveal: domain}, pin]
    summary: "{{money .Params.amount_cents .Params.currency}} to card {{reveal .Params.card_number}} ({{.Params.card_number}}) for order {{.Params.order_id}}"
    http: {url: "http://127.0.0.1:9/payouts"}
`

// A sensitive param may declare a safe form for people; the console,
// notifications and exports show it, the API keeps "***". A form of a form is itself, so the
// ledger may keep the people's forms in place of the clear values.
func TestRevealSafeForms(t *testing.T) {
	cat, err := Load([]byte(revealTools))
	require.NoError(t, err)
	tool, _ := cat.Get("payouts.card")
	params := []byte(`{"amount_cents":125000,"bin_card":"4000 0566 5566 5556","card_number":"4242424242424242","currency":"EUR","email":"ada@example.com","order_id":"7702","pin":"1234"}`)

	people, err := tool.RevealCanonical(params)
	require.NoError(t, err)
	assert.JSONEq(t, `{"amount_cents":125000,"bin_card":"400005 •••• 5556","card_number":"•••• 4242","currency":"EUR","email":"•••@example.com","order_id":"7702","pin":"***"}`, string(people))
	again, err := tool.RevealCanonical(people)
	require.NoError(t, err)
	assert.JSONEq(t, string(people), string(again), "a form of a form is itself")

	api, err := tool.MaskCanonical(people)
	require.NoError(t, err)
	assert.JSONEq(t, `{"amount_cents":125000,"bin_card":"***","card_number":"***","currency":"EUR","email":"***","order_id":"7702","pin":"***"}`, string(api),
		"the API's masking of the people's forms is the API's masking")

	s, ok := tool.Summary(people, "k", "acme")
	require.True(t, ok)
	assert.Equal(t, "1,250.00 EUR to card •••• 4242 (***) for order 7702", s, "reveal shows the safe form, a plain reference ***")
	s, ok = tool.Summary(api, "k", "acme")
	require.True(t, ok)
	assert.Equal(t, "1,250.00 EUR to card *** (***) for order 7702", s)
	s, _ = tool.Summary(params, "k", "acme")
	assert.NotContains(t, s, "4242424242424242", "clear params given by mistake show no more than the safe form")
}

func TestRevealValueShowsLittle(t *testing.T) {
	for _, c := range []struct{ form, in, want string }{
		{RevealLast4, "4242424242424242", "•••• 4242"},
		{RevealLast4, "4242-4242-4242-4242", "•••• 4242"},
		{RevealLast4, "1234567", Masked},
		{RevealLast4, Masked, Masked},
		{RevealFirst6Last4, "4242424242424242", "424242 •••• 4242"},
		{RevealFirst6Last4, "4242424242424", Masked},
		{RevealDomain, "ada@example.com", "•••@example.com"},
		{RevealDomain, "ada", Masked},
		{RevealDomain, "@example.com", Masked},
		{RevealNone, "4242424242424242", Masked},
	} {
		assert.Equal(t, c.want, RevealValue(c.form, c.in), "%s of %q", c.form, c.in)
		assert.Equal(t, c.want, RevealValue(c.form, RevealValue(c.form, c.in)), "%s of its own form %q", c.form, c.want)
	}
	assert.Equal(t, Masked, RevealValue(RevealLast4, 4242424242424242.0), "a number is not a string")
}

func TestRevealRefusedWhenUnknown(t *testing.T) {
	_, err := Load([]byte(strings.Replace(revealTools, "reveal: domain", "reveal: first4", 1)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `sensitive_params[2].reveal: invalid reveal "first4"`)
	_, err = Load([]byte(strings.Replace(revealTools, "{{reveal .Params.card_number}}", "{{reveal .Key}}", 1)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reveal takes a param")
}
