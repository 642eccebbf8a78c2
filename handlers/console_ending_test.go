package handlers

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEndingOf(t *testing.T) {
	for _, c := range []struct {
		name string
		docs []string
		want string
	}{
		{"an IBAN param", []string{`{"amount_cents":480000,"iban":"DE89 3704 0044 0532 0130 00"}`}, "3000"},
		{"a Stripe result's card", []string{`{"amount":1}`, `{"id":"ch_1","payment_method_details":{"card":{"brand":"visa","last4":"4242"}}}`}, "4242"},
		{"a param before the result", []string{`{"destination_account_number":"000123456789"}`, `{"last4":"4242"}`}, "6789"},
		{"a numeric last4", []string{`{"card_last4":42}`}, "0042"},
		{"a masked card number gives nothing", []string{`{"card_number":"***","amount_cents":1999}`}, ""},
		{"an order id is not an account", []string{`{"order_id":"7702","account":"acme"}`}, ""},
		{"a short account-like value is not one", []string{`{"iban":"DE12"}`}, ""},
		{"not JSON, then nothing", []string{`nope`, `null`}, ""},
	} {
		docs := make([]json.RawMessage, len(c.docs))
		for i, d := range c.docs {
			docs[i] = json.RawMessage(d)
		}
		assert.Equal(t, c.want, endingOf(docs...), c.name)
	}
}
