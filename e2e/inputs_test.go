package e2e_test

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// badInput is one request that must be refused before anything is recorded or executed.
type badInput struct {
	name   string
	auth   string   // the Authorization header; "" sends none
	keys   []string // Idempotency-Key header values; nil sends none
	body   string
	status int
	slug   string
	// pointers, for invalid-params, are the pointers the errors member must name.
	pointers []string
}

func ticketBody(params string) string { return `{"tool":"tickets.create","params":` + params + `}` }

// TestBadInputRecordsAndRunsNothing walks every bad-input row of docs/API.md, and the order in
// which the checks apply, on one gateway: each gets its problem, and the ledger and the
// downstream see nothing.
func TestBadInputRecordsAndRunsNothing(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		limited := g.NewTenant(t, "acme", "ticket-bot", []string{"tickets.create"})
		// A well-formed key nobody issued.
		unknown := "idg_" + strings.Repeat("A", 43)

		valid := "Bearer " + g.Key
		key := []string{"bad-input-key"}
		good := ticketBody(ticketParams)
		huge := ticketBody(`{"subject":"` + strings.Repeat("x", 1<<20) + `"}`)

		rows := []badInput{
			// Authentication.
			{name: "no authorization", keys: key, body: good, status: 401, slug: "unauthenticated"},
			{name: "garbage bearer", auth: "Bearer garbage", keys: key, body: good, status: 401, slug: "unauthenticated"},
			{name: "unknown well-formed key", auth: "Bearer " + unknown, keys: key, body: good, status: 401, slug: "unauthenticated"},
			{name: "empty bearer", auth: "Bearer ", keys: key, body: good, status: 401, slug: "unauthenticated"},
			{name: "basic scheme", auth: "Basic YWdlbnQ6c2VjcmV0", keys: key, body: good, status: 401, slug: "unauthenticated"},
			{name: "key without scheme", auth: g.Key, keys: key, body: good, status: 401, slug: "unauthenticated"},

			// Idempotency-Key.
			{name: "key missing", auth: valid, body: good, status: 400, slug: "idempotency-key-missing"},
			{name: "key empty quoted string", auth: valid, keys: []string{`""`}, body: good, status: 400, slug: "idempotency-key-invalid"},
			{name: "key of 256 characters", auth: valid, keys: []string{strings.Repeat("k", 256)}, body: good, status: 400, slug: "idempotency-key-invalid"},
			{name: "quoted key of 256 characters", auth: valid, keys: []string{`"` + strings.Repeat("k", 256) + `"`}, body: good, status: 400, slug: "idempotency-key-invalid"},
			{name: "key with a control character", auth: valid, keys: []string{"abc\tdef"}, body: good, status: 400, slug: "idempotency-key-invalid"},
			{name: "key with non-ASCII", auth: valid, keys: []string{"clé"}, body: good, status: 400, slug: "idempotency-key-invalid"},
			{name: "key sent twice", auth: valid, keys: []string{"a", "b"}, body: good, status: 400, slug: "idempotency-key-invalid"},
			{name: "key sent twice, same value", auth: valid, keys: []string{"a", "a"}, body: good, status: 400, slug: "idempotency-key-invalid"},
			{name: "unterminated quoted key", auth: valid, keys: []string{`"abc`}, body: good, status: 400, slug: "idempotency-key-invalid"},
			{name: "quoted key with parameters", auth: valid, keys: []string{`"abc";x=1`}, body: good, status: 400, slug: "idempotency-key-invalid"},

			// Body.
			{name: "body over 1 MiB", auth: valid, keys: key, body: huge, status: 413, slug: "body-too-large"},
			{name: "bad JSON", auth: valid, keys: key, body: `{"tool":`, status: 400, slug: "malformed-body"},
			{name: "empty body", auth: valid, keys: key, body: ``, status: 400, slug: "malformed-body"},
			{name: "trailing data", auth: valid, keys: key, body: good + ` {}`, status: 400, slug: "malformed-body"},
			{name: "duplicate member names", auth: valid, keys: key, body: `{"tool":"tickets.create","tool":"refunds.issue","params":{"subject":"s"}}`, status: 400, slug: "malformed-body"},
			{name: "duplicate names in params", auth: valid, keys: key, body: ticketBody(`{"subject":"a","subject":"b"}`), status: 400, slug: "malformed-body"},
			{name: "duplicate names spelled with escapes", auth: valid, keys: key, body: ticketBody(`{"subject":"a","\u0073ubject":"b"}`), status: 400, slug: "malformed-body"},
			{name: "array body", auth: valid, keys: key, body: `[{"tool":"tickets.create","params":{"subject":"s"}}]`, status: 400, slug: "malformed-body"},
			{name: "string body", auth: valid, keys: key, body: `"tickets.create"`, status: 400, slug: "malformed-body"},
			{name: "params an array", auth: valid, keys: key, body: ticketBody(`["subject"]`), status: 400, slug: "malformed-body"},
			{name: "params a string", auth: valid, keys: key, body: ticketBody(`"subject=s"`), status: 400, slug: "malformed-body"},
			{name: "params a number", auth: valid, keys: key, body: ticketBody(`42`), status: 400, slug: "malformed-body"},
			{name: "unknown top-level member", auth: valid, keys: key, body: `{"tool":"tickets.create","params":{"subject":"s"},"priority":"high"}`, status: 400, slug: "malformed-body"},
			{name: "tool not a string", auth: valid, keys: key, body: `{"tool":7,"params":{"subject":"s"}}`, status: 400, slug: "malformed-body"},
			{name: "tool missing", auth: valid, keys: key, body: `{"params":{"subject":"s"}}`, status: 400, slug: "malformed-body"},
			{name: "invalid UTF-8", auth: valid, keys: key, body: ticketBody("{\"subject\":\"\xff\xfe\"}"), status: 400, slug: "malformed-body"},
			{name: "number beyond a double", auth: valid, keys: key, body: `{"tool":"refunds.issue","params":{"order_id":"o","amount_cents":1e400,"currency":"EUR"}}`, status: 400, slug: "malformed-body"},

			// Tool.
			{name: "unknown tool", auth: valid, keys: key, body: `{"tool":"tickets.delete","params":{"subject":"s"}}`, status: 404, slug: "unknown-tool"},
			{name: "forbidden tool", auth: "Bearer " + limited, keys: key, body: `{"tool":"refunds.issue","params":` + refundParams + `}`, status: 403, slug: "tool-forbidden"},

			// Params.
			{name: "required param missing", auth: valid, keys: key, body: ticketBody(`{}`), status: 400, slug: "invalid-params", pointers: []string{"/subject"}},
			{name: "params absent", auth: valid, keys: key, body: `{"tool":"tickets.create"}`, status: 400, slug: "invalid-params", pointers: []string{"/subject"}},
			{name: "param too long", auth: valid, keys: key, body: ticketBody(`{"subject":"` + strings.Repeat("s", 201) + `"}`), status: 400, slug: "invalid-params", pointers: []string{"/subject"}},
			{name: "param of the wrong type", auth: valid, keys: key, body: ticketBody(`{"subject":42}`), status: 400, slug: "invalid-params", pointers: []string{"/subject"}},
			{name: "param not allowed", auth: valid, keys: key, body: ticketBody(`{"subject":"s","assignee":"bob"}`), status: 400, slug: "invalid-params", pointers: []string{"/assignee"}},
			{name: "several params wrong", auth: valid, keys: key, body: `{"tool":"refunds.issue","params":{"order_id":"o","amount_cents":0,"currency":"eur"}}`, status: 400, slug: "invalid-params", pointers: []string{"/amount_cents", "/currency"}},
			{name: "fractional integer", auth: valid, keys: key, body: `{"tool":"refunds.issue","params":{"order_id":"o","amount_cents":1.5,"currency":"EUR"}}`, status: 400, slug: "invalid-params", pointers: []string{"/amount_cents"}},

			// The order of checks.
			{name: "unauthenticated beats a missing key", body: `{`, status: 401, slug: "unauthenticated"},
			{name: "a missing key beats a bad body", auth: valid, body: `{"tool":`, status: 400, slug: "idempotency-key-missing"},
			{name: "an invalid key beats a bad body", auth: valid, keys: []string{`""`}, body: `{"tool":`, status: 400, slug: "idempotency-key-invalid"},
			{name: "a missing key beats an oversized body", auth: valid, body: huge, status: 400, slug: "idempotency-key-missing"},
			{name: "an oversized body beats an unknown tool", auth: valid, keys: key, body: `{"tool":"nope","params":{"x":"` + strings.Repeat("x", 1<<20) + `"}}`, status: 413, slug: "body-too-large"},
			{name: "a bad body beats an unknown tool", auth: valid, keys: key, body: `{"tool":"nope","params":{},"extra":1}`, status: 400, slug: "malformed-body"},
			{name: "an unknown tool beats bad params", auth: valid, keys: key, body: `{"tool":"nope","params":{"subject":42}}`, status: 404, slug: "unknown-tool"},
			{name: "a forbidden tool beats bad params", auth: "Bearer " + limited, keys: key, body: `{"tool":"refunds.issue","params":{}}`, status: 403, slug: "tool-forbidden"},
			{name: "an unknown tool beats being forbidden", auth: "Bearer " + limited, keys: key, body: `{"tool":"nope","params":{}}`, status: 404, slug: "unknown-tool"},
		}

		ops := g.Count(t)
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				h := http.Header{"Content-Type": {"application/json"}}
				if row.auth != "" {
					h.Set("Authorization", row.auth)
				}
				for _, k := range row.keys {
					h.Add("Idempotency-Key", k)
				}
				var body []byte
				if row.body != "" {
					body = []byte(row.body)
				}
				r := send(t, g, http.MethodPost, "/v1/operations", h, body)
				p := requireProblem(t, g, r, row.status, row.slug)
				assert.NotContains(t, p, "operation_id", "nothing was recorded, so no operation can be named")

				if row.slug == "invalid-params" {
					requirePointers(t, p, row.pointers)
				} else {
					assert.NotContains(t, p, "errors")
				}
				assert.Equal(t, ops, g.Count(t), "no operation may be recorded")
				assert.Empty(t, g.Sandbox.Requests(""), "nothing may be sent downstream")
			})
		}

		// None of the keys used above was taken: a corrected request runs under it.
		r := g.Submit(t, "bad-input-key", "tickets.create", ticketParams, nil)
		assert.Equal(t, "SUCCEEDED", requireOp(t, r, http.StatusCreated)["state"])
		assert.Equal(t, 1, g.Sandbox.Committed("tickets"))
	})
}

// requirePointers checks the errors member of an invalid-params problem.
func requirePointers(t testing.TB, p map[string]any, want []string) {
	t.Helper()
	list, ok := p["errors"].([]any)
	require.True(t, ok, "invalid-params must carry an errors array: %v", p)
	var got []string
	for _, e := range list {
		m, ok := e.(map[string]any)
		require.True(t, ok, "error entry %v", e)
		assert.Len(t, m, 2, "an error entry is {pointer, message}: %v", m)
		ptr, _ := m["pointer"].(string)
		msg, _ := m["message"].(string)
		assert.NotEmpty(t, msg, "error entry %v", m)
		got = append(got, ptr)
	}
	sort.Strings(got)
	got = compact(got)
	assert.Equal(t, want, got, "errors: %v", list)
}

func compact(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// TestKeyHeaderForms: a bare token and an RFC 8941 string name the same key, and the
// longest allowed key works.
func TestKeyHeaderForms(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)

		bare := g.Submit(t, "abc", "tickets.create", ticketParams, nil)
		op := requireOp(t, bare, http.StatusCreated)
		assert.Equal(t, "abc", op["key"])
		quoted := g.Submit(t, `"abc"`, "tickets.create", ticketParams, nil)
		requireReplay(t, quoted, bare)
		padded := g.Submit(t, ` "abc"  `, "tickets.create", ticketParams, nil)
		requireReplay(t, padded, bare)

		// Escapes inside the string are decoded: "a\"b" is the key a"b.
		esc := g.Submit(t, `"a\"b\\c"`, "tickets.create", ticketParams, nil)
		escOp := requireOp(t, esc, http.StatusCreated)
		assert.Equal(t, `a"b\c`, escOp["key"])
		byKey := g.Do(t, http.MethodGet, "/v1/operations?key="+url.QueryEscape(`a"b\c`), g.Key, nil, "")
		assert.Equal(t, escOp["id"], requireOp(t, byKey, http.StatusOK)["id"])

		long := strings.Repeat("k", 255)
		longFirst := g.Submit(t, long, "tickets.create", ticketParams, nil)
		requireOp(t, longFirst, http.StatusCreated)
		requireReplay(t, g.Submit(t, `"`+long+`"`, "tickets.create", ticketParams, nil), longFirst)

		// Printable ASCII, spaces and punctuation included, is a key.
		odd := `wf 8472:step/1?x=y&z=~!`
		requireOp(t, g.Submit(t, odd, "tickets.create", ticketParams, nil), http.StatusCreated)

		assert.Equal(t, 4, g.Sandbox.Committed("tickets"))
		assert.EqualValues(t, 4, g.Count(t))
	})
}

// TestRevokedKeyIsUnauthenticated: a key revoked by its prefix (as `idemgate apikey revoke`
// does) is refused everywhere, before any other check, and the principal's other keys work.
func TestRevokedKeyIsUnauthenticated(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		old := g.NewTenant(t, "acme", "old-bot", nil)
		other := g.NewTenant(t, "acme", "new-bot", nil)
		made := requireOp(t, submitAs(t, g, old, "before-revoke", "tickets.create", ticketParams, nil), http.StatusCreated)

		revoked, err := g.Ledger.RevokeAPIKey(context.Background(), models.AllTenants(), models.Requester{Actor: models.ActorCLI}, old[:models.APIKeyPrefixLen])
		require.NoError(t, err, "revoking by the stored prefix must work on every engine")
		assert.True(t, strings.HasPrefix(old, revoked.Prefix))
		ops, requests := g.Count(t), len(g.Sandbox.Requests(""))

		for _, c := range []struct {
			name, method, path string
			header             map[string]string
			body               string
		}{
			{"post", http.MethodPost, "/v1/operations", map[string]string{"Idempotency-Key": "after-revoke"}, ticketBody(ticketParams)},
			{"post without a key", http.MethodPost, "/v1/operations", nil, `{`},
			{"replay", http.MethodPost, "/v1/operations", map[string]string{"Idempotency-Key": "before-revoke"}, ticketBody(ticketParams)},
			{"get", http.MethodGet, "/v1/operations/" + made["id"].(string), nil, ""},
			{"list", http.MethodGet, "/v1/operations", nil, ""},
			{"tools", http.MethodGet, "/v1/tools", nil, ""},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := g.Do(t, c.method, c.path, old, c.header, c.body)
				requireProblem(t, g, r, http.StatusUnauthorized, "unauthenticated")
				assert.NotContains(t, string(r.Body), made["id"])
			})
		}
		assert.Equal(t, ops, g.Count(t))
		assert.Len(t, g.Sandbox.Requests(""), requests)

		// Only that key was revoked: the tenant's other keys work.
		r := g.Do(t, http.MethodGet, "/v1/operations/"+made["id"].(string), other, nil, "")
		assert.Equal(t, made["id"], requireOp(t, r, http.StatusOK)["id"])
	})
}

// TestKeyRotation: a principal may hold two keys at once (rotation, as `idemgate apikey create`
// run twice for one principal does); both act as the principal, and revoking one leaves the
// other working.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		ctx := context.Background()
		first, err := g.Ledger.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "rotating-bot", nil)
		require.NoError(t, err)
		second, err := g.Ledger.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "rotating-bot", nil)
		require.NoError(t, err, "a second key for an existing principal must be created")
		assert.Equal(t, first.Key.PrincipalID, second.Key.PrincipalID)

		made := submitAs(t, g, first.Secret, "rotation", "tickets.create", ticketParams, nil)
		requireOp(t, made, http.StatusCreated)
		requireReplay(t, submitAs(t, g, second.Secret, "rotation", "tickets.create", ticketParams, nil), made)

		_, err = g.Ledger.RevokeAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, first.Secret[:models.APIKeyPrefixLen])
		require.NoError(t, err)
		requireProblem(t, g, submitAs(t, g, first.Secret, "rotation", "tickets.create", ticketParams, nil),
			http.StatusUnauthorized, "unauthenticated")
		requireReplay(t, submitAs(t, g, second.Secret, "rotation", "tickets.create", ticketParams, nil), made)
		assert.Equal(t, 1, g.Sandbox.Committed("tickets"))
	})
}
