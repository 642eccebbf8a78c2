package catalog

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
)

// connection returns the connection named name, recording an unknown name. It returns nil for
// "" and for a connection that exists but has problems of its own (reported with it).
func (c *collector) connection(field, name string) *Connection {
	if name == "" {
		return nil
	}
	conn, ok := c.conns[name]
	if !ok {
		known := make([]string, 0, len(c.conns))
		for n := range c.conns {
			known = append(known, n)
		}
		sort.Strings(known)
		if len(known) == 0 {
			c.addf(field, "unknown connection %q: the tools file declares no connections", name)
		} else {
			c.addf(field, "unknown connection %q (declared: %s)", name, strings.Join(known, ", "))
		}
	}
	return conn
}

// joinBase returns a tool's URL as sent: a path ("/v1/refunds") is joined to its connection's
// base_url; an absolute URL is kept as it is, and must lie under the base_url when the
// connection has one.
func joinBase(conn *Connection, src, named string) (string, error) {
	if !strings.HasPrefix(src, "/") {
		// A connection's credentials go only where its base_url says.
		if conn != nil && conn.BaseURL != "" && src != conn.BaseURL && !strings.HasPrefix(src, conn.BaseURL+"/") &&
			!strings.HasPrefix(src, conn.BaseURL+"?") {
			return "", fmt.Errorf("invalid URL %q: outside connection %q's base_url %s, where its credentials may go; give a path", src, conn.Name, conn.BaseURL)
		}
		return src, nil
	}
	switch {
	case conn == nil && named != "":
		return "", nil // the connection's own problems say why
	case conn == nil:
		return "", fmt.Errorf("invalid URL %q: want an absolute http or https URL, or a path and a connection with a base_url", src)
	case conn.BaseURL == "":
		return "", fmt.Errorf("%q is a path, but connection %q has no base_url", src, conn.Name)
	}
	return conn.BaseURL + src, nil
}

// validateShape checks how the request carries the params and the downstream key: the body's
// encoding, templated headers and the key's places in the body (docs/TOOLS.md).
func validateShape(t *Tool, raw *rawHTTP, ec *collector) {
	switch raw.Body {
	case "": // json, none for GET (HTTPSpec.Encoding)
	case BodyJSON, BodyForm, BodyNone:
		t.HTTP.Body = raw.Body
		if t.HTTP.Method == http.MethodGet && raw.Body != BodyNone {
			ec.addf("http.body", "a GET sends no body: leave body out or write none")
		}
	default:
		ec.addf("http.body", "invalid body %q: want json, form or none", raw.Body)
	}
	if raw.IdempotencyHeader != "" && raw.IdempotencyParam != "" {
		ec.addf("http.idempotency_param", "give idempotency_header or idempotency_param, not both")
	}
	t.HTTP.IdempotencyParam = keyPointer(ec, t, "http.idempotency_param", raw.IdempotencyParam)
	t.HTTP.ReferenceParam = keyPointer(ec, t, "http.reference_param", raw.ReferenceParam)
	if p := t.HTTP.IdempotencyParam; p != "" && p == t.HTTP.ReferenceParam {
		ec.addf("http.reference_param", "the same pointer as idempotency_param")
	}
	t.HTTP.Headers = headerTemplates(ec, raw.Headers)
	validateQuery(t, raw.Query, ec)
}

func keyPointer(ec *collector, t *Tool, field, p string) string {
	if p == "" {
		return ""
	}
	tokens, err := parsePointer(p)
	switch {
	case err != nil:
		ec.addf(field, "invalid JSON pointer %q: %v", p, err)
		return ""
	case len(tokens) == 0:
		ec.addf(field, "the empty pointer is the whole body: name a member, e.g. /idempotency_key")
		return ""
	case t.HTTP.Encoding() == BodyNone:
		ec.addf(field, "the request has no body to write the key into (body: none)")
		return ""
	}
	return p
}

// headerTemplates parses http.headers: a mapping of names to templates over TemplateData.
func headerTemplates(ec *collector, raw any) []HeaderTemplate {
	if raw == nil {
		return nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		ec.addf("http.headers", "expected a mapping of header names to templates")
		return nil
	}
	var out []HeaderTemplate
	for name, v := range m {
		field := "http.headers." + name
		src, ok := v.(string)
		canon := http.CanonicalHeaderKey(name)
		switch {
		case !isToken(name):
			ec.addf(field, "invalid header name %q", name)
			continue
		case slices.Contains(reservedHeaders, canon) || canon == "Authorization":
			ec.addf(field, "%q is set by idemgate itself (credentials go in the connection's auth)", name)
			continue
		case !ok:
			ec.addf(field, "expected a string")
			continue
		}
		ct, err := parseTemplate(src, urlRoots)
		if err != nil {
			ec.add(field, err)
			continue
		}
		out = append(out, HeaderTemplate{Name: canon, tmpl: ct})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// paramRefs returns the path below .Params of every param the header refers to.
func (h HeaderTemplate) paramRefs() [][]string {
	var out [][]string
	for _, p := range h.tmpl.parts {
		if len(p.field) > 1 && p.field[0] == "Params" {
			out = append(out, p.field[1:])
		}
	}
	return out
}

// RenderHeaders renders the tool's templated headers for one request. A value holding a
// control character is an error: it would end the header.
func (t *Tool) RenderHeaders(data TemplateData) (http.Header, error) {
	h := http.Header{}
	for _, ht := range t.HTTP.Headers {
		var sb strings.Builder
		for _, p := range ht.tmpl.parts {
			if p.field == nil {
				sb.WriteString(p.text)
				continue
			}
			v, err := lookup(&data, p.field)
			if err != nil {
				return nil, fmt.Errorf("tool %q: render http.headers.%s: %w", t.Name, ht.Name, err)
			}
			s, err := scalarString(v)
			if err != nil {
				return nil, fmt.Errorf("tool %q: render http.headers.%s: %s %w", t.Name, ht.Name, fieldName(p.field), err)
			}
			sb.WriteString(s)
		}
		v := sb.String()
		if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
			return nil, fmt.Errorf("tool %q: render http.headers.%s: the value holds a control character", t.Name, ht.Name)
		}
		h.Set(ht.Name, v)
	}
	return h, nil
}

// keyParamErrors refuses params that set a place where the gateway writes the downstream key.
func (t *Tool) keyParamErrors(params any) []ParamError {
	var errs []ParamError
	for _, p := range t.KeyParams() {
		if _, ok := Resolve(params, p); ok {
			errs = append(errs, ParamError{Pointer: p, Message: "set by the gateway: it writes the downstream key here, so the params may not set it"})
		}
	}
	return errs
}

// PathParams are the top-level params the tool's URL carries ({{.Params.x}} in http.url): a
// request sends them there and not also in its body (docs/TOOLS.md), since an API that refuses
// unknown body fields (Stripe's update endpoints) would refuse the call.
func (t *Tool) PathParams() []string {
	if t.urlTmpl == nil {
		return nil
	}
	var out []string
	for _, ref := range t.urlTmpl.paramRefs() {
		if len(ref) > 0 && !slices.Contains(out, ref[0]) {
			out = append(out, ref[0])
		}
	}
	return out
}

// Encoding is how the params are sent: the body as written, else json (none for a GET).
func (h *HTTPSpec) Encoding() string {
	switch {
	case h.Body != "":
		return h.Body
	case h.Method == http.MethodGet:
		return BodyNone
	}
	return BodyJSON
}
