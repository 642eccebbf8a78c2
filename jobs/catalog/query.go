package catalog

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
)

// QueryParam is one param a tool sends in its URL's query rather than in its body
// (http.query, docs/TOOLS.md), spelled as OpenAPI's style and explode say. It is sent only when
// the call gives it: an optional query parameter of a write stays optional.
type QueryParam struct {
	// Param is the top-level param whose value is sent.
	Param string
	// Name is the query parameter's name as the downstream reads it (Param unless told).
	Name string
	// Style is QueryForm, QuerySpaceDelimited, QueryPipeDelimited or QueryDeepObject.
	Style string
	// Explode is OpenAPI's explode: a list as repeated name=value pairs (or an object as its
	// members' own pairs) rather than one delimited value.
	Explode bool
}

// Query styles, as OpenAPI 3 names them for query parameters.
const (
	QueryForm           = "form"
	QuerySpaceDelimited = "spaceDelimited"
	QueryPipeDelimited  = "pipeDelimited"
	QueryDeepObject     = "deepObject"
)

type rawQuery struct {
	Param   string `yaml:"param"`
	Name    string `yaml:"name"`
	Style   string `yaml:"style"`
	Explode *bool  `yaml:"explode"`
}

// queryParamName is what a query param may be called: a top-level param's name.
var queryParamName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)

// validateQuery checks http.query: each entry a top-level param the URL does not already
// carry, not sensitive (a URL ends up in logs and traces), once, in a style OpenAPI defines for
// the query, with explode as that style allows.
func validateQuery(t *Tool, raw []rawQuery, ec *collector) {
	inURL := t.PathParams()
	for i, r := range raw {
		field := fmt.Sprintf("http.query[%d]", i)
		q := QueryParam{Param: r.Param, Name: r.Name, Style: r.Style}
		switch {
		case r.Param == "":
			ec.addf(field+".param", "required: the param sent in the query")
			continue
		case !queryParamName.MatchString(r.Param):
			ec.addf(field+".param", "invalid param %q: a top-level param's name", r.Param)
			continue
		case slices.Contains(inURL, r.Param):
			ec.addf(field+".param", "%q is already in http.url", r.Param)
			continue
		case slices.ContainsFunc(t.HTTP.Query, func(o QueryParam) bool { return o.Param == r.Param }):
			ec.addf(field+".param", "%q is listed twice", r.Param)
			continue
		}
		if ptr, hit := sensitiveOverlap(t.SensitiveParams, []string{r.Param}); hit {
			ec.addf(field+".param", "%q would put the sensitive param %s into the URL; send it in the body instead", r.Param, ptr)
			continue
		}
		if q.Name == "" {
			q.Name = r.Param
		} else if url.QueryEscape(q.Name) == "" {
			ec.addf(field+".name", "empty")
			continue
		}
		if q.Style == "" {
			q.Style = QueryForm
		}
		switch q.Style {
		case QueryForm:
			q.Explode = r.Explode == nil || *r.Explode // OpenAPI's default for form: true
		case QuerySpaceDelimited, QueryPipeDelimited:
			q.Explode = r.Explode != nil && *r.Explode
		case QueryDeepObject:
			if r.Explode != nil && !*r.Explode {
				ec.addf(field+".explode", "deepObject is defined only with explode: true")
				continue
			}
			q.Explode = true
		default:
			ec.addf(field+".style", "invalid style %q: want form, spaceDelimited, pipeDelimited or deepObject", r.Style)
			continue
		}
		t.HTTP.Query = append(t.HTTP.Query, q)
	}
}

// QueryParams are the names of the params http.query sends in the URL's query.
func (t *Tool) QueryParams() []string {
	out := make([]string, len(t.HTTP.Query))
	for i, q := range t.HTTP.Query {
		out[i] = q.Param
	}
	return out
}

// SetByIdemgate reports whether idemgate sets the header itself on every request (Content-Type
// from the body's encoding, Host, the idempotency and tracing headers, …): neither a
// connection's headers nor http.headers may set it.
func SetByIdemgate(name string) bool {
	return slices.Contains(reservedHeaders, http.CanonicalHeaderKey(name))
}
