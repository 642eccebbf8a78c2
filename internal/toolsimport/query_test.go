package toolsimport

import (
	"bytes"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/jobs/downstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// queryDoc has the query parameters that an import of the public OpenAPI directory met:
// Google's optional `callback` on every write, Amadeus's required list `hotelIds` on a GET
// (default style: form, explode), a list in a comma form (explode: false), a pipe-delimited
// one, Stripe's deepObject, and a name that cannot be a param as it is.
const queryDoc = `
openapi: 3.0.3
info: {title: Query, version: "1"}
servers: [{url: "https://api.example.com/v1"}]
paths:
  /hotels:
    get:
      operationId: listHotels
      parameters:
        - {name: hotelIds, in: query, required: true, schema: {type: array, items: {type: string}}}
        - {name: amenities, in: query, explode: false, schema: {type: array, items: {type: string}}}
        - {name: ratings, in: query, style: pipeDelimited, schema: {type: array, items: {type: integer}}}
        - {name: created, in: query, style: deepObject, explode: true, schema: {type: object, properties: {gt: {type: integer}}}}
        - {name: $top, in: query, schema: {type: integer}}
      responses: {"200": {description: ok}}
  /bookings:
    post:
      operationId: createBooking
      parameters:
        - {name: callback, in: query, schema: {type: string}}
        - {name: tags, in: query, schema: {type: array, items: {type: string}}}
        - {name: hotelId, in: query, required: true, schema: {type: string}}
      requestBody:
        content:
          application/json:
            schema: {type: object, required: [guest], properties: {guest: {type: string}}}
      responses: {"201": {description: ok}}
`

// TestImportQueryParameters (issue 50 items 2 and 3): an optional query parameter of a write is
// an optional param sent in the query only when given (it was made required, so a call without
// Google's callback was refused), and a list is sent as its style says (hotelIds=a&hotelIds=b,
// OpenAPI's default, where the form nesting hotelIds[0]=a was sent), both through http.query,
// which the catalog loads.
func TestImportQueryParameters(t *testing.T) {
	t.Parallel()
	f, err := OpenAPI([]byte(queryDoc), OpenAPIOptions{})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, f.WriteYAML(&buf))
	c := loadImported(t, buf.String(), "")

	create, ok := c.Get("api.create_booking")
	require.True(t, ok)
	assert.ElementsMatch(t, []string{"guest", "hotelId"}, create.ParamsSchemaRaw["required"], "callback and tags stay optional:\n%s", buf.String())
	assert.Equal(t, "https://api.example.com/v1/bookings?hotelId={{.Params.hotelId}}", create.HTTP.URL, "a required scalar stays in the URL")
	assert.Equal(t, []string{"callback", "tags"}, create.QueryParams())
	assert.Empty(t, create.ValidateParams(map[string]any{"guest": "Ann", "hotelId": "H1"}), "a call without the optional query parameters")
	assert.Equal(t, "", downstream.EncodeQuery(map[string]any{"guest": "Ann", "hotelId": "H1"}, create.HTTP.Query), "not sent when not given")
	assert.Equal(t, "callback=cb&tags=a&tags=b", downstream.EncodeQuery(map[string]any{"callback": "cb", "tags": []any{"a", "b"}}, create.HTTP.Query))

	list, ok := c.Get("api.list_hotels")
	require.True(t, ok)
	assert.Equal(t, []any{"hotelIds"}, list.ParamsSchemaRaw["required"])
	params := map[string]any{"hotelIds": []any{"H1", "H2"}, "amenities": []any{"SPA", "WIFI"}, "ratings": []any{4, 5},
		"top": 3, "created": map[string]any{"gt": 1}}
	assert.Equal(t, "hotelIds=H1&hotelIds=H2&amenities=SPA%2CWIFI&ratings=4%7C5&%24top=3", downstream.EncodeQuery(params, list.HTTP.Query))
	assert.NotContains(t, list.QueryParams(), "created", "deepObject is what a GET's plain params are sent as: created[gt]=1")
	assert.Contains(t, list.ParamsSchemaRaw["properties"], "created")
	assert.Equal(t, []catalog.QueryParam{
		{Param: "hotelIds", Name: "hotelIds", Style: catalog.QueryForm, Explode: true},
		{Param: "amenities", Name: "amenities", Style: catalog.QueryForm, Explode: false},
		{Param: "ratings", Name: "ratings", Style: catalog.QueryPipeDelimited, Explode: false},
		{Param: "top", Name: "$top", Style: catalog.QueryForm, Explode: true},
	}, list.HTTP.Query)
	assert.Contains(t, buf.String(), "query:\n        - {param: hotelIds}\n        - {param: amenities, explode: false}\n        - {param: ratings, style: pipeDelimited}\n        - {param: top, name: $top}\n")
}

// TestServerURLWithoutScheme (issue 50 item 4): a server URL without a scheme
// ("//api.edrv.io/v1", 40 documents of the OpenAPI directory) is read as https: the header
// advises base_url https://api.edrv.io (it said "://api.edrv.io", which serve refuses), the
// tools' URLs keep only the path below a connection (the host ended up in the path), are
// absolute without one, and a note says how the URL was read.
func TestServerURLWithoutScheme(t *testing.T) {
	t.Parallel()
	doc := strings.Replace(queryDoc, `"https://api.example.com/v1"`, `"//api.edrv.io/v1"`, 1)
	withConn, err := OpenAPI([]byte(doc), OpenAPIOptions{Connection: "edrv", Operations: []string{"createBooking"}})
	require.NoError(t, err)
	assert.Contains(t, strings.Join(withConn.Header, "\n"), "with base_url https://api.edrv.io (the document's server URL has no scheme: read as https)")
	tool := withConn.Tools[0]
	assert.Equal(t, "/v1/bookings?hotelId={{.Params.hotelId}}", tool.HTTP.URL)
	assert.Contains(t, strings.Join(tool.Notes, "\n"), `the document's server URL "//api.edrv.io/v1" has no scheme: read as https://api.edrv.io/v1`)
	var buf bytes.Buffer
	require.NoError(t, withConn.WriteYAML(&buf))
	c, err := catalog.Load([]byte("connections:\n  - name: edrv\n    base_url: https://api.edrv.io\n" + buf.String()))
	require.NoError(t, err)
	loaded, _ := c.Get("edrv.create_booking")
	u, err := loaded.RenderURL(catalog.TemplateData{Params: map[string]any{"hotelId": "H1"}})
	require.NoError(t, err)
	assert.Equal(t, "https://api.edrv.io/v1/bookings?hotelId=H1", u)

	without, err := OpenAPI([]byte(doc), OpenAPIOptions{Operations: []string{"createBooking"}})
	require.NoError(t, err, "no connection: the URL is absolute once read as https")
	assert.Equal(t, "https://api.edrv.io/v1/bookings?hotelId={{.Params.hotelId}}", without.Tools[0].HTTP.URL)
}

// TestHeaderNotesAgreeWithTheLoader (issue 50 item 5): a header parameter is left out with a
// note, and the note's advice is one the loader takes: a Content-Type parameter (67 tools of the
// OpenAPI directory were told to put it in the connection's headers, which the loader refuses)
// is said to be idemgate's own, Authorization to belong in the connection's auth; only another
// header is sent to the connection's headers, and there the loader takes it.
func TestHeaderNotesAgreeWithTheLoader(t *testing.T) {
	t.Parallel()
	doc := strings.Replace(queryDoc, `        - {name: callback, in: query, schema: {type: string}}`,
		`        - {name: callback, in: query, schema: {type: string}}
        - {name: Content-Type, in: header, schema: {type: string}}
        - {name: Authorization, in: header, schema: {type: string}}
        - {name: X-Tenant, in: header, schema: {type: string}}`, 1)
	f, err := OpenAPI([]byte(doc), OpenAPIOptions{Connection: "api", Operations: []string{"createBooking"}})
	require.NoError(t, err)
	notes := f.Tools[0].Notes
	var headerNotes []string
	for _, n := range notes {
		if strings.Contains(n, "header parameter") {
			headerNotes = append(headerNotes, n)
		}
	}
	assert.Equal(t, []string{
		"left out: the header parameters X-Tenant (fixed values go in the connection's headers or http.headers)",
		"left out: the header parameters Content-Type (idemgate sets them itself: Content-Type from http.body)",
		"left out: the header parameter Authorization (credentials go in the connection's auth)",
	}, headerNotes)

	// What each note advises, tried on the loader: the connection's headers take X-Tenant only.
	var buf bytes.Buffer
	require.NoError(t, f.WriteYAML(&buf))
	for header, takes := range map[string]bool{"X-Tenant": true, "Content-Type": false} {
		conn := "connections:\n  - name: api\n    base_url: https://api.example.com\n    headers: {" + header + ": x}\n"
		_, err := catalog.Load([]byte(conn + buf.String()))
		if takes {
			assert.NoError(t, err, "the note sends %s to the connection's headers", header)
		} else {
			assert.Error(t, err, "%s: the loader refuses it, so no note may send it there", header)
		}
	}
}
