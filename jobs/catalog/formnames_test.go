package catalog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFormNameErrors(t *testing.T) {
	t.Parallel()
	c, err := Load([]byte(`
tools:
  - name: pay.form
    description: Pay
    effect: write
    params_schema: {type: object}
    http: {url: http://127.0.0.1:1/p, body: form, reference_param: /order_meta/reference}
  - name: pay.json
    description: Pay
    effect: write
    params_schema: {type: object}
    http: {url: http://127.0.0.1:1/p, reference_param: /order_meta/reference}
`))
	require.NoError(t, err)
	form, _ := c.Get("pay.form")
	asJSON, _ := c.Get("pay.json")
	cases := []struct {
		name, params string
		pointers     []string // want refused at these; none: accepted
	}{
		{"plain nested", `{"amount":1,"metadata":{"order":"o1"},"items":[{"price":"p"}],"x":null}`, nil},
		{"bracketed top-level name", `{"metadata[reference]":"mine"}`, []string{"/metadata[reference]"}},
		{"bracketed nested name", `{"metadata":{"a]":"x"}}`, []string{"/metadata/a]"}},
		{"bracket inside an array's object", `{"items":[{"p[0]":"x"}]}`, []string{"/items/0/p[0]"}},
		{"the key's place by PHP's folding", `{"order.meta":{"reference":"x"}}`, []string{"/order.meta/reference"}},
		{"two names PHP reads as one", `{"a.b":"1","a_b":"2"}`, []string{"/a_b"}},
		{"a null at the key's place is not sent", `{"order meta":{"reference":null}}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var v any
			require.NoError(t, json.Unmarshal([]byte(tc.params), &v))
			var got []string
			for _, e := range form.formNameErrors(v) {
				got = append(got, e.Pointer)
			}
			assert.Equal(t, tc.pointers, got)
			assert.Empty(t, asJSON.formNameErrors(v), "a JSON body carries names as they are")
		})
	}
}
