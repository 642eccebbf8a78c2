package e2e_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/static"
	"github.com/stretchr/testify/require"
)

// conformance sends requests to gateways and validates each answer, and each request meant to
// be valid, against the OpenAPI document the gateway serves. It records every documented
// answer it met, so the test can require that it met them all: the document can then neither
// miss an answer the gateway gives nor promise one it never gives.
type conformance struct {
	doc    *openapi3.T
	router routers.Router

	mu   sync.Mutex
	seen map[string]bool // "POST /v1/operations 409" and "POST /v1/operations 409 operation-uncertain"
}

// validationHost is the server the document is matched against; requests go to the real
// gateway, and a copy addressed here is what gets validated.
const validationHost = "http://gateway"

func newConformance(t *testing.T) *conformance {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(static.OpenAPI())
	require.NoError(t, err)
	require.NoError(t, doc.Validate(t.Context()))
	doc.Servers = openapi3.Servers{{URL: validationHost}}
	router, err := gorillamux.NewRouter(doc)
	require.NoError(t, err)
	return &conformance{doc: doc, router: router, seen: map[string]bool{}}
}

// req is one request of the conformance test.
type req struct {
	method, path string
	apiKey       string      // "" sends no Authorization
	header       http.Header // more headers; several values per name allowed
	body         string
	// outside marks a request deliberately outside the document (a missing key, a bad
	// query): its answer is validated, the request is not.
	outside bool
}

// send sends r to g, validates request and answer, and returns the answer.
func (c *conformance) send(t *testing.T, g *gatewaytest.Gateway, r req) gatewaytest.Response {
	t.Helper()
	header := r.header.Clone()
	if header == nil {
		header = http.Header{}
	}
	if r.apiKey != "" {
		header.Set("Authorization", "Bearer "+r.apiKey)
	}
	if r.body != "" && header.Get("Content-Type") == "" {
		header.Set("Content-Type", "application/json")
	}
	resp := send(t, g, r.method, r.path, header, bodyBytes(r.body))

	vreq := httptest.NewRequest(r.method, validationHost+r.path, bytes.NewReader(bodyBytes(r.body)))
	vreq.Header = header
	route, params, err := c.router.FindRoute(vreq)
	require.NoError(t, err, "%s %s is not in the document", r.method, r.path)
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	if !r.outside {
		require.NoError(t, openapi3filter.ValidateRequest(t.Context(), in), "request %s %s", r.method, r.path)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.Status, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(resp.Body)), Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	require.NoError(t, openapi3filter.ValidateResponse(t.Context(), out),
		"answer %d to %s %s does not match the document:\n%.2000s", resp.Status, r.method, r.path, resp.Body)

	answer := route.Method + " " + route.Path + " " + strconv.Itoa(resp.Status)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[answer] = true
	if slug := problemSlug(resp); slug != "" {
		c.seen[answer+" "+slug] = true
	}
	return resp
}

func bodyBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// problemSlug is the slug of a problem answer, "" for other answers.
func problemSlug(r gatewaytest.Response) string {
	if r.Header.Get("Content-Type") != "application/problem+json" {
		return ""
	}
	var p struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(r.Body, &p) != nil {
		return ""
	}
	return strings.TrimPrefix(p.Type, "/problems/")
}

// documented lists every answer the document promises: each (method, path, status), and for
// problem answers each problem type the status may carry.
func (c *conformance) documented() []string {
	var out []string
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status, resp := range op.Responses.Map() {
				answer := method + " " + path + " " + status
				out = append(out, answer)
				for _, slug := range documentedProblems(resp.Value) {
					out = append(out, answer+" "+slug)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// documentedProblems reads the problem types a response narrows Problem to (see
// internal/openapispec: allOf [Problem, {properties: {type: {enum}}}]).
func documentedProblems(r *openapi3.Response) []string {
	media := r.Content.Get("application/problem+json")
	if media == nil || media.Schema == nil || len(media.Schema.Value.AllOf) != 2 {
		return nil
	}
	var out []string
	for _, v := range media.Schema.Value.AllOf[1].Value.Properties["type"].Value.Enum {
		out = append(out, strings.TrimPrefix(v.(string), "/problems/"))
	}
	return out
}

// unmet returns the documented answers the test never met, less the exempted ones and the
// 500s (internal errors, which no well-behaved test can cause).
func (c *conformance) unmet(exempt map[string]string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, a := range c.documented() {
		if !c.seen[a] && exempt[a] == "" && strings.Fields(a)[2] != "500" {
			out = append(out, a)
		}
	}
	return out
}
