package catalog

import (
	"encoding/json"
	"errors"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const secretCard = "4242424242424242"

func TestSecretsOfACall(t *testing.T) {
	tl := paramsTool(t)
	params := decode(t, `{"customer":"c","note":"call me maybe","card":{"number":"`+secretCard+`","cvc":"123"},
		"items":[{"sku":"a","qty":1},{"sku":"b","qty":2,"secret":"abc"}],"a/b":"slash-secret"}`).(map[string]any)
	s := tl.Secrets(params)
	require.NotNil(t, s)
	got := s.Text("note=call me maybe card=" + secretCard + " sku=b cvc=123 abc slash-secret")
	assert.Equal(t, "note=*** card=*** sku=b cvc=123 abc ***", got,
		"every sensitive value long enough is masked; /items/1/secret (abc) is too short to search for")

	assert.Nil(t, tl.Secrets(decode(t, `{"customer":"c"}`).(map[string]any)), "no sensitive value present")
	var none *Secrets
	assert.Equal(t, "x", none.Text("x"))
	assert.Equal(t, []byte(`{"a":1}`), none.Body([]byte(`{"a":1}`)))
	assert.NoError(t, none.Error(nil))

	// An object at a sensitive pointer: each of its leaves is sensitive, numbers too.
	tl.SensitiveParams = []string{"/card"}
	s = tl.Secrets(decode(t, `{"card":{"number":4242424242424242,"cvc":"9876"}}`).(map[string]any))
	assert.Equal(t, "*** and ***", s.Text("4242424242424242 and 9876"))
}

func TestScrubText(t *testing.T) {
	cases := []struct {
		name, secret, in, want string
	}{
		{"as it is", secretCard, "card " + secretCard + " declined", "card *** declined"},
		{"twice", secretCard, secretCard + secretCard, "******"},
		{"escaped in JSON", `pa"ss\word`, `{"error":"bad password pa\"ss\\word"}`, `{"error":"bad password ***"}`},
		{"HTML-safe JSON", "<tok&en>", `{"echo":"\u003ctok\u0026en\u003e"}`, `{"echo":"***"}`},
		{"URL path", "a b/c?d", `Post "http://x/cards/a%20b%2Fc%3Fd/charge": dial tcp: refused`, `Post "http://x/cards/***/charge": dial tcp: refused`},
		{"URL query", "a b&c", "GET http://x/find?card=a+b%26c: timeout", "GET http://x/find?card=***: timeout"},
		{"too short to search", "123", "cvc 123 of 1234", "cvc 123 of 1234"},
		{"nothing to scrub", secretCard, "all fine", "all fine"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, NewSecrets(tc.secret).Text(tc.in))
		})
	}
	err := &url.Error{Op: "Post", URL: "http://x/cards/" + secretCard, Err: errors.New("connection refused")}
	assert.Equal(t, `Post "http://x/cards/***": connection refused`, NewSecrets(secretCard).Error(err).Error())
}

func TestScrubBody(t *testing.T) {
	s := NewSecrets(secretCard, "pässwörd")
	cases := []struct {
		name, in, want string
	}{
		{"member order kept", `{"id":"R-1","echo":{"card_number":"` + secretCard + `"},"z":1,"a":2}`,
			`{"id":"R-1","echo":{"card_number":"***"},"z":1,"a":2}`},
		{"inside a message", `{"error":"card ` + secretCard + ` declined"}`, `{"error":"card *** declined"}`},
		{"as a number", `{"card":` + secretCard + `,"amount":1999}`, `{"card":"***","amount":1999}`},
		{"as a name", `{"` + secretCard + `":true}`, `{"***":true}`},
		{"escaped by the downstream", `{"pw":"p\u00e4ssw\u00f6rd"}`, `{"pw":"***"}`},
		{"every character escaped", `{"c":"\u0034\u0032\u0034\u0032424242424242"}`, `{"c":"***"}`},
		{"JSON in a string", `{"request":"{\"card_number\":\"` + secretCard + `\"}"}`, `{"request":"{\"card_number\":\"***\"}"}`},
		{"in an array", `["a","` + secretCard + `",null,false]`, `["a","***",null,false]`},
		{"a bare string", `"` + secretCard + `"`, `"***"`},
		{"not JSON", `card=` + secretCard + `&ok=1`, `card=***&ok=1`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := s.Body([]byte(tc.in))
			assert.Equal(t, tc.want, string(got))
			if json.Valid([]byte(tc.in)) {
				assert.True(t, json.Valid(got), "JSON stays JSON: %s", got)
			}
		})
	}
	clean := []byte(`{"id": "R-1", "status": "issued"}`)
	assert.Equal(t, &clean[0], &s.Body(clean)[0], "a body with nothing to scrub is not copied")
}

// MasksParam names the top-level params a search must not match: a sensitive param, and the
// param a sensitive pointer lies inside.
func TestMasksParam(t *testing.T) {
	tool := &Tool{SensitiveParams: []string{"card_number", "/payer/iban", "/a~1b"}}
	for name, want := range map[string]bool{"card_number": true, "payer": true, "a/b": true, "iban": false, "order_id": false, "": false} {
		assert.Equal(t, want, tool.MasksParam(name), name)
	}
	whole := &Tool{SensitiveParams: []string{""}}
	assert.False(t, whole.MasksParam("x"), "an empty entry is refused by Load, and masks nothing here")
	root := &Tool{SensitiveParams: []string{"/"}}
	assert.True(t, root.MasksParam(""), `"/" is the param named ""`)
	assert.False(t, root.MasksParam("x"))
}
