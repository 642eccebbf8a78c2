package catalog

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// urlTemplate is a parsed http.url or reconcile.url. Its scheme and host are fixed by the tools
// file: Load rejects a template with an action before the end of the host, and every render is
// checked against them again, so agent input never chooses where a request goes.
type urlTemplate struct {
	tmpl   *compiledTemplate
	scheme string
	host   string
}

// RenderURL renders http.url for one attempt. Values substituted before the "?" are escaped
// with url.PathEscape (a "/" becomes %2F, so a value stays one path segment), values after it
// with url.QueryEscape (so "&", "=" and "#" cannot add parameters or a fragment). A value that is
// empty, "." or ".." in the path is an error, because servers collapse such segments and the
// request would reach another resource.
func (t *Tool) RenderURL(data TemplateData) (string, error) {
	u, err := renderURL(t.urlTmpl, t.HTTP.URL, &data)
	if err != nil {
		return "", fmt.Errorf("tool %q: render http.url: %w", t.Name, err)
	}
	return u, nil
}

// RenderReconcileURL renders reconcile.url, escaped like RenderURL. It is an error to call it
// for a tool without reconcile.
func (t *Tool) RenderReconcileURL(data TemplateData) (string, error) {
	if t.Reconcile == nil {
		return "", fmt.Errorf("tool %q: no reconcile declared", t.Name)
	}
	u, err := renderURL(t.reconcileTmpl, t.Reconcile.URL, &data)
	if err != nil {
		return "", fmt.Errorf("tool %q: render reconcile.url: %w", t.Name, err)
	}
	return u, nil
}

func renderURL(ut *urlTemplate, src string, data *TemplateData) (string, error) {
	if ut == nil {
		var err error
		if ut, err = parseURLTemplate(src); err != nil {
			return "", err
		}
	}
	return ut.render(func(field []string) (any, error) { return lookup(data, field) })
}

// parseURLTemplate parses and checks a URL template: field references only, an absolute
// http(s) URL, and no action before the end of the host.
func parseURLTemplate(src string) (*urlTemplate, error) {
	ct, err := parseTemplate(src, urlRoots)
	if err != nil {
		return nil, err
	}
	var prefix string // the literal text before the first reference
	hasField := false
	for _, p := range ct.parts {
		if p.field != nil {
			hasField = true
			break
		}
		prefix += p.text
	}
	if hasField {
		_, rest, ok := strings.Cut(prefix, "://")
		if !ok || !strings.ContainsAny(rest, "/?#") {
			return nil, fmt.Errorf("invalid URL %q: the scheme and host must be literal, with no {{...}} before the path", src)
		}
	}
	// Render once on sample data: it must make an absolute http(s) URL, which fixes the host.
	ut := &urlTemplate{tmpl: ct}
	sample, err := ut.render(func([]string) (any, error) { return "sample", nil })
	if err != nil {
		return nil, fmt.Errorf("invalid URL %q: %w", src, err)
	}
	u, err := url.Parse(sample)
	if err != nil {
		return nil, fmt.Errorf("invalid URL %q: %w", src, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("invalid URL %q: want an absolute http or https URL", src)
	}
	if u.User != nil {
		return nil, fmt.Errorf("invalid URL %q: credentials in the URL are not allowed", src)
	}
	ut.scheme, ut.host = u.Scheme, u.Host
	return ut, nil
}

func (ut *urlTemplate) render(resolve func([]string) (any, error)) (string, error) {
	var sb strings.Builder
	inQuery := false // past the first "?" or "#" of the literal text
	for _, p := range ut.tmpl.parts {
		if p.field == nil {
			sb.WriteString(p.text)
			inQuery = inQuery || strings.ContainsAny(p.text, "?#")
			continue
		}
		v, err := resolve(p.field)
		if err != nil {
			return "", err
		}
		s, err := scalarString(v)
		if err != nil {
			return "", fmt.Errorf("%s %w", fieldName(p.field), err)
		}
		if inQuery {
			sb.WriteString(url.QueryEscape(s))
			continue
		}
		if s == "" {
			return "", fmt.Errorf("%s is empty, which would change the URL path", fieldName(p.field))
		}
		sb.WriteString(url.PathEscape(s))
	}
	out := sb.String()
	if err := checkRendered(out, ut.scheme, ut.host); err != nil {
		return "", err
	}
	return out, nil
}

// checkRendered is the last line of defence: the scheme and host are the declared ones and the
// path has no dot segments.
func checkRendered(s, scheme, host string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("rendered URL %q: %w", s, err)
	}
	if scheme != "" && (u.Scheme != scheme || u.Host != host) {
		return fmt.Errorf("rendered URL %q leaves %s://%s", s, scheme, host)
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		if seg = strings.ReplaceAll(strings.ToLower(seg), "%2e", "."); seg == "." || seg == ".." {
			return errors.New(`a URL path segment is "." or "..", which would change the URL path`)
		}
	}
	return nil
}

// ChecksBeforeSending reports whether each attempt first asks the reconcile URL whether the
// operation already took effect: true for a write tool whose downstream does not honour keys
// and whose reconcile URL looks the operation up by {{.DownstreamKey}}. The downstream key
// survives the loss of the operation's record (a ledger restored from a backup, an
// asynchronous standby promoted), so such a look-up finds an effect the ledger no longer
// knows of, where sending again would repeat it. Downstreams that honour keys deduplicate by
// themselves, and tools whose look-up names the operation id cannot find it.
func (t *Tool) ChecksBeforeSending() bool {
	// A tool of an MCP server is not looked up first: its reconcile tool is asked only once
	// an outcome is UNKNOWN (README, "Put idemgate in front of an MCP server").
	if t.Effect != EffectWrite || t.HonoursKey() || t.Reconcile == nil || t.MCP != nil {
		return false
	}
	ut := t.reconcileTmpl
	if ut == nil {
		var err error
		if ut, err = parseURLTemplate(t.Reconcile.URL); err != nil {
			return false
		}
	}
	for _, p := range ut.tmpl.parts {
		if len(p.field) > 0 && p.field[0] == "DownstreamKey" {
			return true
		}
	}
	return false
}
