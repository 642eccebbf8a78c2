package catalog

import (
	"bytes"
	"encoding/json"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func paramsTool(t *testing.T) *Tool {
	t.Helper()
	c, err := Load([]byte(`
tools:
  - name: orders.create
    description: Create an order
    effect: write
    params_schema:
      type: object
      additionalProperties: false
      required: [customer, items]
      properties:
        customer: {type: string, minLength: 1, maxLength: 10}
        note: {type: string}
        "a/b": {type: string}
        card:
          type: object
          properties:
            number: {type: string, pattern: "^[0-9]+$"}
            cvc: {type: string}
        items:
          type: array
          minItems: 1
          items:
            type: object
            required: [sku, qty]
            properties:
              sku: {type: string}
              qty: {type: integer, minimum: 1}
              secret: {type: string}
    sensitive_params: [note, /card/number, /items/1/secret, "a/b", /missing/deep]
    http: {url: "http://127.0.0.1:9100/orders"}
`))
	require.NoError(t, err)
	tl, ok := c.Get("orders.create")
	require.True(t, ok)
	return tl
}

func decode(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	return v
}

func TestValidateParams(t *testing.T) {
	t.Parallel()
	tl := paramsTool(t)
	tests := []struct {
		name   string
		params string
		want   []ParamError
	}{
		{"valid", `{"customer": "ada", "items": [{"sku": "x", "qty": 2}]}`, []ParamError{}},
		{"root not an object", `[1]`, []ParamError{{"", "got array, want object"}}},
		{"null", `null`, []ParamError{{"", "got null, want object"}}},
		{"missing required", `{"customer": "ada"}`, []ParamError{{"/items", "required property is missing"}}},
		{"two missing", `{}`, []ParamError{{"/customer", "required property is missing"}, {"/items", "required property is missing"}}},
		{"wrong type", `{"customer": 5, "items": [{"sku": "x", "qty": 1}]}`, []ParamError{{"/customer", "got number, want string"}}},
		{"too long", `{"customer": "abcdefghijk", "items": [{"sku": "x", "qty": 1}]}`, []ParamError{{"/customer", "maxLength: got 11, want 10"}}},
		{"additional property", `{"customer": "a", "items": [{"sku": "x", "qty": 1}], "extra": true}`, []ParamError{{"/extra", "property is not allowed"}}},
		{"nested errors", `{"customer": "a", "items": [{"sku": "x", "qty": 1}, {"qty": 0.5}]}`, []ParamError{
			{"/items/1/qty", "got number, want integer"},
			{"/items/1/sku", "required property is missing"},
		}},
		{"integer as decimal", `{"customer": "a", "items": [{"sku": "x", "qty": 2.0}]}`, []ParamError{}},
		{"escaped pointer", `{"customer": "a", "items": [{"sku": "x", "qty": 1}], "a/b": 1}`, []ParamError{{"/a~1b", "got number, want string"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tl.ValidateParams(decode(t, tc.params))
			require.NotNil(t, got)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestValidateParamsNeverPanics(t *testing.T) {
	t.Parallel()
	tl := paramsTool(t)
	odd := []any{
		nil, 1, 1.5, math.NaN(), math.Inf(1), json.Number("abc"), json.Number(""), "x", true,
		map[string]string{"customer": "a"}, map[string]any{"customer": make(chan int)},
		map[string]any{"customer": "a", "items": []any{map[string]any{"sku": "x", "qty": json.Number("1e999999999")}}},
		map[string]any{"customer": "a", "items": []any{map[string]any{"sku": "x", "qty": math.NaN()}}},
		struct{ A int }{1}, []byte("{}"),
	}
	for _, v := range odd {
		assert.NotPanics(t, func() {
			errs := tl.ValidateParams(v)
			assert.NotEmpty(t, errs, "%#v", v)
		}, "%#v", v)
	}
	var bare Tool
	assert.Equal(t, []ParamError{}, bare.ValidateParams(map[string]any{}), "no schema accepts anything")
}

func TestValidateParamsConcurrently(t *testing.T) {
	t.Parallel()
	tl := paramsTool(t)
	valid := decode(t, `{"customer": "ada", "items": [{"sku": "x", "qty": 2}]}`)
	invalid := decode(t, `{"customer": 5}`)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				assert.Empty(t, tl.ValidateParams(valid))
				assert.Len(t, tl.ValidateParams(invalid), 2)
			}
		})
	}
	wg.Wait()
}

func TestMask(t *testing.T) {
	t.Parallel()
	tl := paramsTool(t)
	in := decode(t, `{
		"customer": "ada", "note": {"private": true}, "a/b": "x",
		"card": {"number": "4111111111111111", "cvc": "123"},
		"items": [{"sku": "a", "secret": "s0"}, {"sku": "b", "secret": "s1"}],
		"missing": 5
	}`)
	before := deepCopy(in)

	got := tl.Mask(in)

	assert.Equal(t, decode(t, `{
		"customer": "ada", "note": "***", "a/b": "***",
		"card": {"number": "***", "cvc": "123"},
		"items": [{"sku": "a", "secret": "s0"}, {"sku": "b", "secret": "***"}],
		"missing": 5
	}`), got)
	assert.Equal(t, before, in, "the input is not modified")

	// The copy is deep: changing it leaves the input alone.
	got.(map[string]any)["card"].(map[string]any)["cvc"] = "changed"
	assert.Equal(t, before, in)
}

func TestMaskMissingPointers(t *testing.T) {
	t.Parallel()
	tl := paramsTool(t)
	tests := []struct{ name, in string }{
		{"nothing sensitive present", `{"customer": "ada"}`},
		{"pointer through a scalar", `{"card": "4111", "items": "none", "missing": "x"}`},
		{"index out of range", `{"items": [{"secret": "s0"}]}`},
		{"not an object", `[1, 2]`},
		{"null", `null`},
		{"scalar", `"text"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, decode(t, tc.in), tl.Mask(decode(t, tc.in)))
		})
	}
	assert.Nil(t, tl.Mask(nil))
}

func TestMaskArrayIndexRules(t *testing.T) {
	t.Parallel()
	tl := &Tool{SensitiveParams: []string{"/a/01", "/a/-", "/b/1"}}
	in := decode(t, `{"a": ["x", "y"], "b": {"1": "obj key"}}`)
	assert.Equal(t, decode(t, `{"a": ["x", "y"], "b": {"1": "***"}}`), tl.Mask(in),
		"leading zeros and - are not indexes; digits are keys in objects")
}

func TestMaskOnToolBuiltByHand(t *testing.T) {
	t.Parallel()
	tl := &Tool{SensitiveParams: []string{"card_number", "/bad~", ""}}
	assert.Equal(t, map[string]any{"card_number": "***", "x": "1"}, tl.Mask(map[string]any{"card_number": "4111", "x": "1"}),
		"a bare name still masks; invalid entries are skipped")
}

func TestMaskJSON(t *testing.T) {
	t.Parallel()
	tl := paramsTool(t)
	got, err := tl.MaskJSON([]byte(`{"customer": "<ada & co>", "total": 12.50, "big": 123456789012345678901234567890, "note": "n",
		"card": {"number": "4111"}}`))
	require.NoError(t, err)
	assert.Equal(t, `{"big":123456789012345678901234567890,"card":{"number":"***"},"customer":"<ada & co>","note":"***","total":12.50}`, string(got))

	for _, bad := range []string{``, `{`, `{} {}`, `{"a": 1} x`, `nope`} {
		_, err := tl.MaskJSON([]byte(bad))
		assert.Error(t, err, bad)
	}
	got, err = tl.MaskJSON([]byte(" [1, 2] \n"))
	require.NoError(t, err)
	assert.Equal(t, `[1,2]`, string(got))
}

// TestMaskCanonical: canonical params are masked as MaskJSON masks them, and handed back
// unchanged by a tool with nothing to mask.
func TestMaskCanonical(t *testing.T) {
	t.Parallel()
	tl := paramsTool(t)
	canonical := []byte(`{"card":{"number":"4111"},"customer":"ada","note":"n"}`)
	got, err := tl.MaskCanonical(canonical)
	require.NoError(t, err)
	want, err := tl.MaskJSON(canonical)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
	assert.Equal(t, `{"card":{"number":"***"},"customer":"ada","note":"***"}`, string(got))

	plain := &Tool{Name: "plain"}
	got, err = plain.MaskCanonical(canonical)
	require.NoError(t, err)
	assert.Equal(t, string(canonical), string(got))
}

func TestParsePointer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", nil, false},
		{"/", []string{""}, false},
		{"/a/b", []string{"a", "b"}, false},
		{"/a~1b/c~0d", []string{"a/b", "c~d"}, false},
		{"/~01", []string{"~1"}, false},
		{"a", nil, true},
		{"/a~", nil, true},
		{"/a~2", nil, true},
	}
	for _, tc := range tests {
		got, err := parsePointer(tc.in)
		if tc.wantErr {
			assert.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
		assert.Equal(t, tc.in, pointerOf(got), "round trip %q", tc.in)
	}
}
