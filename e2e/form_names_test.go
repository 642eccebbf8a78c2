package e2e_test

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// formTools are two form tools of a downstream without Idempotency-Key: one searchable by a
// reference the gateway writes into metadata (look-first and reconcile find an earlier
// attempt by it), one that dedupes by a body field the gateway writes.
const formTools = `
tools:
  - name: payments.create
    description: Create a payment; found again by metadata[reference]
    effect: write
    params_schema:
      type: object
      required: [amount]
      properties:
        amount: {type: integer}
        metadata: {type: object, additionalProperties: false, properties: {order: {type: string, maxLength: 8}}}
    reference_url: "{{DOWN}}/v1/payments?reference={{.DownstreamKey}}"
    http: {url: "{{DOWN}}/v1/payments", body: form, timeout: 1s, reference_param: /metadata/reference}
    reconcile:
      url: "{{DOWN}}/v1/payments?reference={{.DownstreamKey}}"
      found: /data/0
      settle: 200ms
    retry: {max_attempts: 3, initial_backoff: 20ms, max_backoff: 50ms}
    review: {escalate_after: 1h}
  - name: payouts.create
    description: Create a payout; the downstream dedupes by options[key]
    effect: write
    params_schema: {type: object, required: [amount], properties: {amount: {type: integer}}}
    http: {url: "{{DOWN}}/v1/payouts", body: form, timeout: 1s, idempotency_param: /options/key}
    retry: {max_attempts: 3, initial_backoff: 20ms, max_backoff: 50ms}
`

// lastValueWins reads a form body the way Rack and PHP do: percent-decoded names, and of two
// values for one name the last one kept.
func lastValueWins(body string) map[string]string {
	out := map[string]string{}
	for _, pair := range strings.Split(body, "&") {
		name, value, _ := strings.Cut(pair, "=")
		n, err1 := url.QueryUnescape(name)
		v, err2 := url.QueryUnescape(value)
		if err1 == nil && err2 == nil {
			out[n] = v
		}
	}
	return out
}

// formDownstream keeps payments and payouts, answers searches by metadata[reference], dedupes
// payouts by options[key], and drops the answer to the first write after committing it.
type formDownstream struct {
	mu       sync.Mutex
	payments []map[string]string
	payouts  map[string]map[string]string
	dropNext bool
}

func (f *formDownstream) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method == http.MethodGet {
		ref := r.URL.Query().Get("reference")
		matches := []map[string]string{}
		for _, p := range f.payments {
			if p["metadata[reference]"] == ref {
				matches = append(matches, p)
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": matches})
		return
	}
	form := lastValueWins(string(body))
	var rec map[string]string
	switch r.URL.Path {
	case "/v1/payments":
		form["id"] = fmt.Sprintf("py_%d", len(f.payments)+1)
		f.payments = append(f.payments, form)
		rec = form
	case "/v1/payouts":
		if f.payouts == nil {
			f.payouts = map[string]map[string]string{}
		}
		rec = f.payouts[form["options[key]"]]
		if rec == nil {
			form["id"] = fmt.Sprintf("po_%d", len(f.payouts)+1)
			f.payouts[form["options[key]"]] = form
			rec = form
		}
	}
	if f.dropNext {
		f.dropNext = false
		dropConnection(w) // committed, then the answer is lost
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

func (f *formDownstream) effects() (payments, payouts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.payments), len(f.payouts)
}

// TestFormNamesCannotSetTheGatewaysFields: a form tool's params may not hold a member name
// with brackets, nor one a parser reads as the key's place. Without that refusal, a top-level
// "metadata[reference]" reached a last-value-wins downstream after the gateway's own, so the
// look-up by the downstream key found nothing, the ambiguous attempt was "proven not sent",
// and one key made two payments. The refusal comes before anything is recorded or sent.
func TestFormNamesCannotSetTheGatewaysFields(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		f := &formDownstream{}
		down, u := startDownstream(t, f.handle)
		g := startWithTools(t, d, formTools, u, gatewaytest.Options{Recovery: true})

		hostile := []struct{ tool, params, pointer string }{
			{"payments.create", `{"amount":7,"metadata[reference]":"mine"}`, "/metadata[reference]"},
			{"payments.create", `{"amount":7,"metadata":{"order":"o1"},"metadata[order]":"far longer than eight"}`, "/metadata[order]"},
			{"payments.create", `{"amount":7,"metadata":{"a][reference":"x"}}`, "/metadata/a][reference"},
			{"payouts.create", `{"amount":7,"options[key]":"mine"}`, "/options[key]"},
			{"payouts.create", `{"amount":7,"options":{"key":"mine"}}`, "/options/key"},
		}
		for i, h := range hostile {
			f.mu.Lock()
			f.dropNext = true
			f.mu.Unlock()
			r := g.Submit(t, fmt.Sprintf("hostile-%d", i), h.tool, h.params, map[string]string{"Prefer": "wait=5"})
			p := requireProblem(t, g, r, http.StatusBadRequest, "invalid-params")
			assert.Contains(t, fmt.Sprint(p["errors"]), h.pointer, "%s %s", h.tool, h.params)
		}
		assert.Empty(t, down.requests(), "nothing sent")
		assert.Zero(t, g.Count(t), "nothing recorded")

		// An ordinary payment whose answer is lost is found again by its reference: one payment.
		f.mu.Lock()
		f.dropNext = true
		f.mu.Unlock()
		op := requireOp(t, g.Submit(t, "pay-1", "payments.create", `{"amount":7,"metadata":{"order":"o1"}}`, map[string]string{"Prefer": "wait=0"}), http.StatusAccepted)
		done := waitState(t, g, op["id"].(string), "SUCCEEDED", 15*time.Second)
		payments, _ := f.effects()
		assert.Equal(t, 1, payments, "one payment for one key")
		assert.EqualValues(t, 1, done["attempts"], "found by its reference, not sent again")

		// A payout whose answer is lost is retried with the same options[key]: one payout.
		f.mu.Lock()
		f.dropNext = true
		f.mu.Unlock()
		op = requireOp(t, g.Submit(t, "payout-1", "payouts.create", `{"amount":9}`, map[string]string{"Prefer": "wait=10"}), http.StatusCreated)
		assert.Equal(t, "SUCCEEDED", op["state"])
		assert.EqualValues(t, 2, op["attempts"], "retried: the downstream dedupes by the key")
		_, payouts := f.effects()
		assert.Equal(t, 1, payouts, "one payout for one key")

		var names []string
		for _, r := range down.requests() {
			if r.Method == http.MethodPost {
				names = append(names, r.Body)
			}
		}
		sort.Strings(names)
		require.NotEmpty(t, names)
		for _, b := range names {
			assert.NotContains(t, b, "%5B", "no bracket spelled inside a name: %s", b)
		}
	})
}

// TestPathParamsGoInTheURLOnly: a param the URL carries is not also sent in the body, as an
// update endpoint that refuses unknown fields (Stripe's POST /v1/customers/{customer}) needs.
// JSON and form bodies alike; both engines.
func TestPathParamsGoInTheURLOnly(t *testing.T) {
	t.Parallel()
	const tools = `
tools:
  - name: customers.update
    description: Update a customer
    effect: idempotent
    params_schema: {type: object, required: [customer], properties: {customer: {type: string}, name: {type: string}}}
    http: {url: "{{DOWN}}/v1/customers/{{.Params.customer}}", body: form, timeout: 1s}
  - name: orders.rename
    description: Rename an order
    effect: idempotent
    params_schema: {type: object, required: [order], properties: {order: {type: string}, name: {type: string}}}
    http: {url: "{{DOWN}}/v1/orders/{{.Params.order}}?notify={{.Params.name}}", method: PUT, timeout: 1s}
`
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		down, u := startDownstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			writeJSON(w, http.StatusOK, map[string]string{"ok": "yes"})
		})
		g := startWithTools(t, d, tools, u, gatewaytest.Options{})
		requireOp(t, g.Submit(t, "c-1", "customers.update", `{"customer":"cus_1","name":"Bob"}`, nil), http.StatusCreated)
		requireOp(t, g.Submit(t, "o-1", "orders.rename", `{"order":"o_7","name":"spring"}`, nil), http.StatusCreated)
		reqs := down.requests()
		require.Len(t, reqs, 2)
		assert.Equal(t, "/v1/customers/cus_1", reqs[0].Path)
		assert.Equal(t, "name=Bob", reqs[0].Body, "the path param is not in the body")
		assert.Equal(t, "/v1/orders/o_7", reqs[1].Path)
		assert.Equal(t, "notify=spring", reqs[1].Query)
		assert.JSONEq(t, `{}`, reqs[1].Body, "neither the path's nor the query's param is in the body")
	})
}

// TestQueryParamsAsTheirStyleSays (issue 50 items 2 and 3): the params http.query lists go in
// the query, spelled as their style says, only when given, and not in the body: a write's
// optional query parameter (Google's callback) may be left out, and a GET's list goes as
// OpenAPI's default form spells it (hotelIds=H1&hotelIds=H2), while the GET's other params keep
// the form nesting (filter[city]=Oslo). Both engines.
func TestQueryParamsAsTheirStyleSays(t *testing.T) {
	t.Parallel()
	const tools = `
tools:
  - name: bookings.create
    description: Book a room
    effect: write
    params_schema: {type: object, required: [guest], properties: {guest: {type: string}, callback: {type: string}, tags: {type: array, items: {type: string}}}}
    http: {url: "{{DOWN}}/v1/bookings", timeout: 1s, query: [{param: callback}, {param: tags, explode: false}]}
  - name: hotels.list
    description: List hotels
    effect: read
    params_schema: {type: object, properties: {hotelIds: {type: array, items: {type: string}}, filter: {type: object}}}
    http: {url: "{{DOWN}}/v1/hotels", method: GET, timeout: 1s, query: [{param: hotelIds}]}
`
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		down, u := startDownstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			writeJSON(w, http.StatusOK, map[string]string{"ok": "yes"})
		})
		g := startWithTools(t, d, tools, u, gatewaytest.Options{})
		requireOp(t, g.Submit(t, "b-1", "bookings.create", `{"guest":"Ann"}`, nil), http.StatusCreated)
		requireOp(t, g.Submit(t, "b-2", "bookings.create", `{"guest":"Bob","callback":"cb","tags":["a","b"]}`, nil), http.StatusCreated)
		requireOp(t, g.Submit(t, "h-1", "hotels.list", `{"hotelIds":["H1","H2"],"filter":{"city":"Oslo"}}`, nil), http.StatusCreated)
		reqs := down.requests()
		require.Len(t, reqs, 3)
		assert.Equal(t, "", reqs[0].Query, "an optional query param not given is not sent")
		assert.JSONEq(t, `{"guest":"Ann"}`, reqs[0].Body)
		assert.Equal(t, "callback=cb&tags=a%2Cb", reqs[1].Query)
		assert.JSONEq(t, `{"guest":"Bob"}`, reqs[1].Body, "the query's params are not in the body")
		assert.Equal(t, "hotelIds=H1&hotelIds=H2&filter[city]=Oslo", reqs[2].Query)
	})
}
