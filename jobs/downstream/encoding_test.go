package downstream

import (
	"bytes"
	"encoding/json"
	"net/url"
	"testing"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func decoded(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m))
	return m
}

// TestEncodeForm: nested as Stripe and Rails read it, in a deterministic order.
func TestEncodeForm(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, params, want string }{
		{"flat", `{"charge":"ch_1","amount":100}`, "amount=100&charge=ch_1"},
		{"nested object", `{"metadata":{"order":"1042","b":"x"}}`, "metadata[b]=x&metadata[order]=1042"},
		{"array of objects", `{"items":[{"price":"p_1","quantity":2},{"price":"p_2"}]}`,
			"items[0][price]=p_1&items[0][quantity]=2&items[1][price]=p_2"},
		{"array of scalars", `{"tags":["a","b"]}`, "tags[0]=a&tags[1]=b"},
		{"booleans", `{"capture":true,"test":false}`, "capture=true&test=false"},
		{"numbers as written", `{"amount":1.50,"big":12345678901234567890}`, "amount=1.50&big=12345678901234567890"},
		{"nulls left out", `{"a":null,"b":"x","m":{"c":null}}`, "b=x"},
		{"escaped", `{"note":"a&b=c d","meta data":{"k/1":"é"}}`, "meta+data[k%2F1]=%C3%A9&note=a%26b%3Dc+d"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := EncodeForm(decoded(t, tc.params))
			assert.Equal(t, tc.want, got)
			_, err := url.ParseQuery(got)
			assert.NoError(t, err, "a valid form body")
		})
	}
}

// TestEncodeBodyWritesKey: the downstream key goes where the tool says, in either encoding;
// without key pointers a JSON body is sent as given.
func TestEncodeBodyWritesKey(t *testing.T) {
	t.Parallel()
	raw := []byte(`{"amount":5,"metadata":{"order":"1"}}`)
	body, ct, err := encodeBody(Call{Body: raw})
	require.NoError(t, err)
	assert.Equal(t, "application/json", ct)
	assert.Equal(t, raw, body)

	body, _, err = encodeBody(Call{Body: raw, KeyAt: []string{"/idempotency_key", "/metadata/reference"}, Key: "dk_1"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"amount":5,"idempotency_key":"dk_1","metadata":{"order":"1","reference":"dk_1"}}`, string(body))

	body, _, err = encodeBody(Call{Body: []byte(`{"note":"<a&b>"}`), KeyAt: []string{"/k"}, Key: "dk_1"})
	require.NoError(t, err)
	assert.Equal(t, `{"k":"dk_1","note":"<a&b>"}`, string(body), "no HTML escapes")

	body, ct, err = encodeBody(Call{Body: raw, Encoding: catalog.BodyForm, KeyAt: []string{"/metadata/reference"}, Key: "dk_1"})
	require.NoError(t, err)
	assert.Equal(t, "application/x-www-form-urlencoded", ct)
	assert.Equal(t, "amount=5&metadata[order]=1&metadata[reference]=dk_1", string(body))

	body, ct, err = encodeBody(Call{Body: raw, Encoding: catalog.BodyNone})
	require.NoError(t, err)
	assert.Nil(t, body)
	assert.Empty(t, ct)
}
