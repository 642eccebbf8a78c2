package catalog

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMoney(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ minor, currency, want string }{
		{"4200", "EUR", "42.00 EUR"},
		{"250000", "EUR", "2,500.00 EUR"},
		{"5", "USD", "0.05 USD"},
		{"1999", "JPY", "1,999 JPY"},
		{"1234", "KWD", "1.234 KWD"},
		{"-150", "EUR", "-1.50 EUR"},
		{"123456789012345678901", "EUR", "1,234,567,890,123,456,789.01 EUR"},
		{"***", "EUR", "*** EUR"},
	} {
		assert.Equal(t, c.want, Money(c.minor, c.currency), "%s %s", c.minor, c.currency)
	}
}

func TestSummaryAndReferenceURL(t *testing.T) {
	t.Parallel()
	tool := baseTool()
	set(tool, "summary", `{{money .Params.amount .Params.currency}} for "{{.Params.subject}}" (card {{.Params.card_number}})`)
	set(tool, "reference_url", "https://desk.example/search?q={{.DownstreamKey}}&s={{.Params.subject}}")
	cat, err := Load(fileOf(t, tool, closeTool()))
	require.NoError(t, err)
	tk, _ := cat.Get("tickets.create")

	s, ok := tk.Summary([]byte(`{"amount":4200,"currency":"EUR","subject":"Parcel <lost>","card_number":"***"}`), "k", "acme")
	assert.True(t, ok)
	assert.Equal(t, `42.00 EUR for "Parcel <lost>" (card ***)`, s)
	_, ok = tk.Summary([]byte(`{"subject":"no amount"}`), "k", "acme")
	assert.False(t, ok, "a summary naming a missing param gives way to the params")

	u := tk.ReferenceURL(TemplateData{DownstreamKey: "dk_1&x=2", Params: map[string]any{"subject": "a b"}})
	assert.Equal(t, "https://desk.example/search?q=dk_1%26x%3D2&s=a+b", u)
	assert.True(t, tk.HasReferenceURL())
	cl, _ := cat.Get("tickets.close")
	assert.Equal(t, "", cl.ReferenceURL(TemplateData{}))
	_, ok = cl.Summary([]byte(`{}`), "k", "acme")
	assert.False(t, ok)
}

func TestSummaryAndReferenceURLRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ field, value, want string }{
		{"summary", "{{len .Params.x}}", "summary"},
		{"summary", "{{money .Params.x}}", "money takes"},
		{"summary", "{{.Result.id}}", "unknown field .Result"},
		{"summary", "{{if .Params.x}}y{{end}}", "not allowed"},
		{"reference_url", "{{.Params.host}}/x", "scheme and host must be literal"},
		{"reference_url", "https://desk.example/?c={{.Params.card_number}}", "sensitive param"},
	} {
		tool := baseTool()
		set(tool, c.field, c.value)
		_, err := Load(fileOf(t, tool, closeTool()))
		require.Error(t, err, c.value)
		assert.Contains(t, err.Error(), c.field)
		assert.Contains(t, err.Error(), c.want)
	}
}
