package toolsimport

import (
	"fmt"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgate/idemgate/jobs/catalog"
)

// idempotencyHeader is the header the IETF draft (and Stripe, Adyen, PayPal …) name for an
// idempotency key. Only a header parameter of that name (in any case) becomes
// idempotency_header: a key the API ignores would make the gateway retry ambiguous writes as
// if they were safe.
const idempotencyHeader = "Idempotency-Key"

// buildTool makes the tool for one operation. base is what its path is appended to; keyHeader,
// when set, is the idempotency header of every tool that changes something and whose document
// declares none.
func buildTool(o operation, prefix, connection, base, keyHeader string, budget *expansion) HTTPTool {
	b := &toolBuilder{conv: &schemaConverter{budget: budget}, props: map[string]any{}}
	t := HTTPTool{
		Name:        toolName(prefix, o.id()),
		Description: describe(o),
		Effect:      effectOf(o.method),
		HTTP:        HTTPSpec{Connection: connection, Method: o.method},
	}
	b.note("%s %s (operationId %s)", o.method, o.path, orNone(o.op.OperationID))
	if t.Name != prefix+"."+snakeCase(o.id()) {
		b.note("name shortened: OpenAI and Anthropic take at most %d characters, with each \".\" written \"__\"", catalog.MaxFunctionNameLen)
	}
	if o.op.Deprecated {
		b.note("deprecated in the document")
	}
	// A fragment is never sent: some documents (AWS's) tell apart operations of one path by
	// one, #X-Amz-Target=Service.Operation naming a header's value, or #param.
	path, fragment, _ := strings.Cut(o.path, "#")
	if fragment != "" {
		b.note("the path's fragment #%s is not part of the request", fragment)
		if name, value, ok := strings.Cut(fragment, "="); ok && headerName.MatchString(name) && fixedValue(value) {
			b.fixed = map[string]string{http.CanonicalHeaderKey(name): value}
		}
	}
	// The body first: its fields' names are the downstream's, while the names of path and
	// query params are only ours, so those give way when they clash.
	t.HTTP.Body = b.body(o)
	idents := b.params(o)
	t.HTTP.Headers = b.fixed
	target := replaceParams(path, func(sub string) string {
		name := strings.Trim(sub, "{}")
		ident, ok := idents[name]
		if !ok {
			// A {name} in the path that no parameter declares: still a param the URL needs.
			ident = b.ident(paramIdent(name), "_path")
			idents[name] = ident
			b.props[ident] = map[string]any{"type": "string"}
			b.required = append(b.required, ident)
			b.inURL = append(b.inURL, ident)
			b.note("the path's {%s} is declared by no parameter: taken as a string", name)
		}
		return "{{.Params." + ident + "}}"
	})
	t.HTTP.URL = literalBraces.Replace(base) + target + b.query
	t.HTTP.Query = b.queryParams
	switch {
	case b.idempotencyHeader != "":
		t.HTTP.IdempotencyHeader = b.idempotencyHeader
	case keyHeader != "" && t.Effect != string(catalog.EffectRead):
		// The API honours a key its document does not declare (Stripe): the person said so.
		t.HTTP.IdempotencyHeader = keyHeader
	case t.Effect == string(catalog.EffectWrite):
		t.HTTP.SuggestedIdempotencyHeader = idempotencyHeader
	}
	t.ParamsSchema = b.schema()
	if b.conv.cut > 0 {
		b.note("params_schema: %d schema(s) not expanded further (recursive, or nested too deep): see their $comment", b.conv.cut)
	}
	if len(b.conv.dropped) > 0 {
		b.note("params_schema: left out pattern(s) Go's regular expressions cannot compile: %s", strings.Join(slices.Sorted(slices.Values(b.conv.dropped)), " "))
	}
	t.Notes = b.notes
	return t
}

// headerName is a header's name as a fragment may give it.
var headerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*$`)

// fixedValue reports whether v may be written as a fixed header's value: printable, and no
// template (a value is a template over the call, like a URL).
func fixedValue(v string) bool {
	return v != "" && !strings.ContainsAny(v, "{}\r\n") && strings.TrimSpace(v) == v
}

// pathParam finds the {name}s of a path template.
var pathParam = regexp.MustCompile(`\{[^{}]+\}`)

// literalBraces percent-encodes the braces a document writes outside its {name}s: a URL
// means the same with them encoded, and a literal "{{" must never reach a template.
var literalBraces = strings.NewReplacer("{", "%7B", "}", "%7D")

// replaceParams is path with each {name} replaced by param(name) and every other brace
// percent-encoded.
func replaceParams(path string, param func(string) string) string {
	var sb strings.Builder
	last := 0
	for _, m := range pathParam.FindAllStringIndex(path, -1) {
		sb.WriteString(literalBraces.Replace(path[last:m[0]]))
		sb.WriteString(param(path[m[0]:m[1]]))
		last = m[1]
	}
	sb.WriteString(literalBraces.Replace(path[last:]))
	return sb.String()
}

// toolBuilder gathers one tool's params_schema, URL and notes.
type toolBuilder struct {
	conv              *schemaConverter
	props             map[string]any
	required          []string
	additional        any    // the body's additionalProperties, nil when it says none
	bodyless          bool   // the operation sends nothing but its URL
	query             string // "?a={{.Params.a}}&…"
	queryParams       []QueryParam
	inURL             []string
	idempotencyHeader string
	fixed             map[string]string // http.headers: fixed values the document gives
	notes             []string
}

func (b *toolBuilder) note(format string, args ...any) {
	b.notes = append(b.notes, fmt.Sprintf(format, args...))
}

// schema is the params_schema: one object with every param. An operation with no body takes
// no params but those of its URL, so any other is refused rather than silently dropped.
func (b *toolBuilder) schema() map[string]any {
	s := map[string]any{"type": "object", "properties": b.props}
	if len(b.required) > 0 {
		s["required"] = unique(b.required)
	}
	switch {
	case b.bodyless:
		s["additionalProperties"] = false
	case b.additional != nil:
		s["additionalProperties"] = b.additional
	}
	return s
}

// body adds the request body's fields and returns the http.body to send them with.
func (b *toolBuilder) body(o operation) string {
	rb := o.op.RequestBody
	if rb == nil || rb.Value == nil || len(rb.Value.Content) == 0 {
		b.bodyless = true
		if o.method == http.MethodGet {
			return ""
		}
		return catalog.BodyNone
	}
	mediaType, mt := pickMedia(rb.Value.Content)
	encoding := ""
	switch {
	case mt == nil:
		b.note("request body left out: idemgate sends JSON or form bodies, the document offers %s", strings.Join(slices.Sorted(maps.Keys(rb.Value.Content)), ", "))
		b.bodyless = true
		return noBodyFor(o.method)
	case mediaType == formMedia:
		encoding = catalog.BodyForm
	}
	s, ok := b.conv.convert(mt.Schema).(map[string]any)
	if ok {
		flattenAllOf(s)
	}
	props, _ := s["properties"].(map[string]any)
	if !ok || (props == nil && !isObject(s)) {
		b.note("request body left out: its schema is not an object with properties, and params are one object")
		b.bodyless = true
		return noBodyFor(o.method)
	}
	if len(props) == 0 && s["additionalProperties"] == false {
		b.bodyless = true // Stripe's GET and DELETE declare an empty form body
		return noBodyFor(o.method)
	}
	if o.method == http.MethodGet {
		b.note("request body left out: a GET sends none")
		b.bodyless = true
		return ""
	}
	for name, p := range props {
		b.props[name] = p
	}
	if req, ok := s["required"].([]string); ok {
		b.required = append(b.required, req...)
	}
	b.additional = s["additionalProperties"]
	if b.additional == nil && len(props) == 0 {
		b.additional = true // a free-form object body: any params go
	}
	return encoding
}

func noBodyFor(method string) string {
	if method == http.MethodGet {
		return ""
	}
	return catalog.BodyNone
}

// params adds the path and query parameters, and returns the idents of the path's, by name.
// Header and cookie parameters cannot be params (only the URL and body are made from them),
// except the idempotency key's header, which the gateway fills itself.
func (b *toolBuilder) params(o operation) map[string]string {
	idents := map[string]string{}
	var leftQuery, leftHeader, leftOwn, leftAuth, leftCookie []string
	for _, p := range mergedParams(o.item.Parameters, o.op.Parameters) {
		switch p.In {
		case openapi3.ParameterInPath:
			ident := b.ident(paramIdent(p.Name), "_path")
			b.props[ident] = b.paramSchema(p)
			b.required = append(b.required, ident)
			b.inURL = append(b.inURL, ident)
			idents[p.Name] = ident
		case openapi3.ParameterInQuery:
			s := b.paramSchema(p)
			if p.Required && isScalar(s) {
				ident := b.ident(paramIdent(p.Name), "_query")
				b.props[ident] = s
				b.required = append(b.required, ident)
				b.inURL = append(b.inURL, ident)
				sep := "?"
				if b.query != "" {
					sep = "&"
				}
				b.query += sep + url.QueryEscape(p.Name) + "={{.Params." + ident + "}}"
				continue
			}
			if _, taken := b.props[p.Name]; o.method == http.MethodGet && !taken && identRE.MatchString(p.Name) &&
				(isScalar(s) || p.Style == openapi3.SerializationDeepObject) {
				// A GET sends the params its URL does not carry as its query, as a form
				// spells them (limit=3, expand[0]=x): what a scalar is in every style, and
				// what deepObject (Stripe's) means. So a filter is a plain param when its
				// name can be one as it is.
				b.props[p.Name] = s
				if p.Required {
					b.required = append(b.required, p.Name)
				}
				continue
			}
			// An optional parameter (sent only when given), or a list or object, spelled as
			// the document's style and explode say: http.query.
			q, ok := queryParam(p)
			if !ok {
				leftQuery = append(leftQuery, p.Name)
				continue
			}
			q.Param = b.ident(paramIdent(p.Name), "_query")
			if q.Param != p.Name {
				q.Name = p.Name
			}
			b.props[q.Param] = s
			if p.Required {
				b.required = append(b.required, q.Param)
			}
			b.queryParams = append(b.queryParams, q)
		case openapi3.ParameterInHeader:
			switch {
			case strings.EqualFold(p.Name, idempotencyHeader):
				b.idempotencyHeader = p.Name
			case catalog.SetByIdemgate(p.Name):
				leftOwn = append(leftOwn, p.Name)
			case strings.EqualFold(p.Name, "Authorization"):
				leftAuth = append(leftAuth, p.Name)
			case b.fixed[http.CanonicalHeaderKey(p.Name)] != "":
				// Its value is the fragment's (AWS's X-Amz-Target): sent as it says.
			default:
				if v, ok := onlyValue(p); ok && p.Required {
					if b.fixed == nil {
						b.fixed = map[string]string{}
					}
					b.fixed[http.CanonicalHeaderKey(p.Name)] = v
					continue
				}
				leftHeader = append(leftHeader, p.Name)
			}
		case openapi3.ParameterInCookie:
			leftCookie = append(leftCookie, p.Name)
		}
	}
	if len(leftQuery) > 0 {
		b.note("left out: the query parameters %s (in a style http.query cannot send: %s)",
			strings.Join(leftQuery, ", "), strings.Join(leftQueryWhy(o), "; "))
	}
	if len(leftHeader) > 0 {
		b.note("left out: the header parameters %s (fixed values go in the connection's headers or http.headers)", strings.Join(leftHeader, ", "))
	}
	if len(leftOwn) > 0 {
		b.note("left out: the header parameters %s (idemgate sets them itself: Content-Type from http.body)", strings.Join(leftOwn, ", "))
	}
	if len(leftAuth) > 0 {
		b.note("left out: the header parameter %s (credentials go in the connection's auth)", strings.Join(leftAuth, ", "))
	}
	if len(leftCookie) > 0 {
		b.note("left out: the cookie parameters %s", strings.Join(leftCookie, ", "))
	}
	return idents
}

// onlyValue is the one value a header parameter's schema allows (an enum of one string), if so.
func onlyValue(p *openapi3.Parameter) (string, bool) {
	if p.Schema == nil || p.Schema.Value == nil || len(p.Schema.Value.Enum) != 1 {
		return "", false
	}
	v, ok := p.Schema.Value.Enum[0].(string)
	return v, ok && fixedValue(v)
}

// ident returns name, or name+suffix when a param already has that name.
func (b *toolBuilder) ident(name, suffix string) string {
	for _, ok := b.props[name]; ok; _, ok = b.props[name] {
		name += suffix
	}
	return name
}

// paramSchema is a parameter's schema (from schema, or from its one content entry), with the
// parameter's description.
func (b *toolBuilder) paramSchema(p *openapi3.Parameter) any {
	ref := p.Schema
	if ref == nil {
		for _, mt := range p.Content {
			if mt != nil {
				ref = mt.Schema
				break
			}
		}
	}
	s := b.conv.convert(ref)
	m, ok := s.(map[string]any)
	if !ok {
		return s
	}
	if _, has := m["description"]; !has && p.Description != "" {
		m["description"] = p.Description
	}
	if p.Deprecated {
		m["deprecated"] = true
	}
	return m
}

// mergedParams are the path item's parameters with the operation's overriding those of the
// same name and place, as OpenAPI says.
func mergedParams(item, op openapi3.Parameters) []*openapi3.Parameter {
	var out []*openapi3.Parameter
	overridden := func(p *openapi3.Parameter) bool {
		return slices.ContainsFunc(op, func(r *openapi3.ParameterRef) bool {
			return r != nil && r.Value != nil && r.Value.Name == p.Name && r.Value.In == p.In
		})
	}
	for _, r := range item {
		if r != nil && r.Value != nil && !overridden(r.Value) {
			out = append(out, r.Value)
		}
	}
	for _, r := range op {
		if r != nil && r.Value != nil {
			out = append(out, r.Value)
		}
	}
	return out
}

const formMedia = "application/x-www-form-urlencoded"

// pickMedia chooses the body's media type: JSON when offered (the gateway's default, and it
// keeps types), else a form; nil when the document offers neither.
func pickMedia(content openapi3.Content) (string, *openapi3.MediaType) {
	var form *openapi3.MediaType
	for _, name := range slices.Sorted(maps.Keys(content)) {
		base, _, err := mime.ParseMediaType(name)
		if err != nil || content[name] == nil {
			continue
		}
		switch {
		case base == "application/json" || strings.HasSuffix(base, "+json"):
			return "application/json", content[name]
		case base == formMedia:
			form = content[name]
		}
	}
	if form != nil {
		return formMedia, form
	}
	return "", nil
}

// flattenAllOf merges an allOf of object schemas into s, the common way of extending a body.
func flattenAllOf(s map[string]any) {
	list, ok := s["allOf"].([]any)
	if !ok {
		return
	}
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	req, _ := s["required"].([]string)
	for _, sub := range list {
		m, ok := sub.(map[string]any)
		if !ok || !isObject(m) || m["anyOf"] != nil || m["oneOf"] != nil || m["allOf"] != nil {
			return // not a plain extension: keep allOf as it is
		}
	}
	for _, sub := range list {
		m := sub.(map[string]any)
		if p, ok := m["properties"].(map[string]any); ok {
			for k, v := range p {
				props[k] = v
			}
		}
		if r, ok := m["required"].([]string); ok {
			req = append(req, r...)
		}
	}
	delete(s, "allOf")
	s["type"] = "object"
	s["properties"] = props
	if len(req) > 0 {
		s["required"] = unique(req) // parts of an allOf may require the same field
	}
}

// unique is list without its repeated names, in the order first given: JSON Schema wants the
// items of required unique, and the catalog refuses a schema whose are not.
func unique(list []string) []string {
	out := make([]string, 0, len(list))
	for _, v := range list {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func isObject(s map[string]any) bool {
	return s["type"] == "object" || s["properties"] != nil
}

// isScalar says whether a schema's values can be written in a URL: a string, number, integer
// or boolean.
func isScalar(s any) bool {
	m, ok := s.(map[string]any)
	if !ok {
		return false
	}
	t, _ := m["type"].(string)
	return t == "string" || t == "integer" || t == "number" || t == "boolean"
}

// describe is the tool's description: the operation's summary, else the first sentence or
// line of its description without markup, else its method and path.
func describe(o operation) string {
	if s := strings.TrimSpace(o.op.Summary); s != "" {
		return s
	}
	text := strings.TrimSpace(htmlTag.ReplaceAllString(o.op.Description, ""))
	if first, _, _ := strings.Cut(text, "\n"); strings.TrimSpace(first) != "" {
		return strings.TrimSpace(first)
	}
	return o.method + " " + o.path
}

var htmlTag = regexp.MustCompile(`<[^>]*>`)

// effectOf is the effect docs/MCP.md gives an HTTP method.
func effectOf(method string) string {
	switch method {
	case http.MethodGet:
		return string(catalog.EffectRead)
	case http.MethodPut, http.MethodDelete:
		return string(catalog.EffectIdempotent)
	}
	return string(catalog.EffectWrite)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// queryParam is the http.query entry of a query parameter, with the document's style and
// explode when they differ from form's defaults; false when its style is none a query
// parameter may have.
func queryParam(p *openapi3.Parameter) (QueryParam, bool) {
	q := QueryParam{}
	switch p.Style {
	case "", openapi3.SerializationForm:
		if p.Explode != nil && !*p.Explode {
			q.Explode = p.Explode
		}
	case openapi3.SerializationSpaceDelimited, openapi3.SerializationPipeDelimited:
		q.Style = p.Style
		if p.Explode != nil && *p.Explode {
			q.Explode = p.Explode
		}
	case openapi3.SerializationDeepObject:
		if p.Explode != nil && !*p.Explode {
			return q, false // undefined in OpenAPI
		}
		q.Style = p.Style
	default:
		return q, false
	}
	return q, true
}

// leftQueryWhy lists the styles of the query parameters of o that queryParam refuses.
func leftQueryWhy(o operation) []string {
	var out []string
	for _, p := range mergedParams(o.item.Parameters, o.op.Parameters) {
		if p.In != openapi3.ParameterInQuery {
			continue
		}
		if _, ok := queryParam(p); !ok {
			explode := "default"
			if p.Explode != nil {
				explode = fmt.Sprint(*p.Explode)
			}
			out = append(out, fmt.Sprintf("%s: style %s, explode %s", p.Name, p.Style, explode))
		}
	}
	return out
}
