package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
)

// Templates are written in text/template syntax but may hold only literal text and plain field
// references such as {{.Params.ticket_id}}: no functions, conditionals or loops. Rendering walks
// the parsed tree itself rather than calling Execute, which is what lets every substituted value
// be escaped for its place in the URL and a whole-leaf reference keep its JSON type.

// Roots a template may refer to. Params and Result need a name after them (.Params.subject).
var (
	urlRoots          = map[string]bool{"OperationID": false, "DownstreamKey": false, "Key": false, "Tenant": false, "Params": true}
	compensationRoots = map[string]bool{"OperationID": false, "DownstreamKey": false, "Key": false, "Tenant": false, "Params": true, "Result": true}
)

// tmplPart is literal text, or a field reference when field is non-nil.
type tmplPart struct {
	text  string
	field []string
}

type compiledTemplate struct {
	src   string
	parts []tmplPart
}

func parseTemplate(src string, roots map[string]bool) (*compiledTemplate, error) {
	t, err := template.New("t").Parse(src)
	if err != nil {
		return nil, fmt.Errorf("invalid template %q: %w", src, err)
	}
	if len(t.Templates()) > 1 {
		return nil, fmt.Errorf("invalid template %q: {{define}} and {{block}} are not allowed", src)
	}
	ct := &compiledTemplate{src: src}
	if t.Tree == nil || t.Tree.Root == nil {
		return ct, nil
	}
	for _, n := range t.Tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			if len(n.Text) > 0 {
				ct.parts = append(ct.parts, tmplPart{text: string(n.Text)})
			}
		case *parse.CommentNode:
		case *parse.ActionNode:
			field, err := fieldOf(n, roots)
			if err != nil {
				return nil, fmt.Errorf("invalid template %q: %w", src, err)
			}
			ct.parts = append(ct.parts, tmplPart{field: field})
		default:
			return nil, fmt.Errorf("invalid template %q: %s is not allowed, only references like {{.Params.name}}", src, n)
		}
	}
	return ct, nil
}

// fieldOf returns the field path of an action that is a single field reference ({{.Params.x}} or
// {{$.Params.x}}), and checks it against the allowed roots.
func fieldOf(n *parse.ActionNode, roots map[string]bool) ([]string, error) {
	p := n.Pipe
	var field []string
	if p != nil && len(p.Decl) == 0 && len(p.Cmds) == 1 && len(p.Cmds[0].Args) == 1 {
		switch a := p.Cmds[0].Args[0].(type) {
		case *parse.FieldNode:
			field = a.Ident
		case *parse.VariableNode:
			if len(a.Ident) > 1 && a.Ident[0] == "$" {
				field = a.Ident[1:]
			}
		}
	}
	if len(field) == 0 {
		return nil, fmt.Errorf("%s is not allowed, only references like {{.Params.name}}", n)
	}
	needsName, ok := roots[field[0]]
	switch {
	case !ok:
		return nil, fmt.Errorf("%s: unknown field .%s (allowed: %s)", n, field[0], rootNames(roots))
	case needsName && len(field) < 2:
		return nil, fmt.Errorf("%s: name the field, as in .%s.name", n, field[0])
	case !needsName && len(field) > 1:
		return nil, fmt.Errorf("%s: .%s has no fields", n, field[0])
	}
	return field, nil
}

func rootNames(roots map[string]bool) string {
	var names []string
	for _, r := range []string{"OperationID", "DownstreamKey", "Key", "Tenant", "Params", "Result"} {
		if needsName, ok := roots[r]; ok {
			if needsName {
				r += ".<name>"
			}
			names = append(names, "."+r)
		}
	}
	return strings.Join(names, " ")
}

// lookup resolves a field path against TemplateData. Missing names are errors, like
// text/template's missingkey=error: a typo must not silently become an empty string.
func lookup(data *TemplateData, field []string) (any, error) {
	var cur any
	switch field[0] {
	case "OperationID":
		return data.OperationID, nil
	case "DownstreamKey":
		return data.DownstreamKey, nil
	case "Key":
		return data.Key, nil
	case "Tenant":
		return data.Tenant, nil
	case "Params":
		cur = data.Params
	case "Result":
		cur = data.Result
	default:
		return nil, fmt.Errorf("unknown field .%s", field[0])
	}
	for i, name := range field[1:] {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf(".%s is not an object", strings.Join(field[:i+1], "."))
		}
		if cur, ok = m[name]; !ok {
			return nil, fmt.Errorf(".%s is missing", strings.Join(field[:i+2], "."))
		}
	}
	return cur, nil
}

// scalarString spells a scalar JSON value for a URL or a text.
func scalarString(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		return strconv.FormatBool(v), nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "", errors.New("is not a finite number")
		}
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(v), nil
	case nil:
		return "", errors.New("is null")
	default:
		return "", errors.New("is not a string, number or boolean")
	}
}

func fieldName(field []string) string {
	return "." + strings.Join(field, ".")
}

// RenderCompensation renders the compensation params for a succeeded operation: every string
// leaf is rendered as a template, without escaping; other values are copied. A leaf that is
// exactly one reference ("{{.Result.amount}}") takes the referenced value with its JSON type, so
// a number stays a number and an object stays an object.
func (t *Tool) RenderCompensation(data TemplateData) (map[string]any, error) {
	if t.Compensation == nil {
		return nil, fmt.Errorf("tool %q: no compensation declared", t.Name)
	}
	pt := t.compTmpl
	if pt == nil {
		var err error
		if pt, err = parseParamsTemplate(t.Compensation.Params); err != nil {
			return nil, fmt.Errorf("tool %q: compensation params: %w", t.Name, err)
		}
	}
	out, err := pt.render(&data)
	if err != nil {
		return nil, fmt.Errorf("tool %q: render compensation params: %w", t.Name, err)
	}
	return out, nil
}

// paramsTemplate is a params map whose string leaves were replaced by compiled templates.
type paramsTemplate struct {
	root map[string]any
}

func parseParamsTemplate(params map[string]any) (*paramsTemplate, error) {
	root, err := compileLeaves(params, "", compensationRoots)
	if err != nil {
		return nil, err
	}
	return &paramsTemplate{root: root.(map[string]any)}, nil
}

// templatePaths spell paths as the templates' errors name them: a.b[0].c.
var templatePaths = treePaths{
	member:  joinPath,
	element: func(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) },
}

// compileLeaves parses every string of v as a template over roots.
func compileLeaves(v any, path string, roots map[string]bool) (any, error) {
	return templatePaths.rebuild(v, path, func(v any, path string) (any, error) {
		s, ok := v.(string)
		if !ok {
			return v, nil
		}
		ct, err := parseTemplate(s, roots)
		if err != nil {
			return nil, &pathError{path, err}
		}
		return ct, nil
	})
}

func (pt *paramsTemplate) render(data *TemplateData) (map[string]any, error) {
	out, err := renderLeaves(pt.root, data, "")
	if err != nil {
		return nil, err
	}
	return out.(map[string]any), nil
}

func renderLeaves(v any, data *TemplateData, path string) (any, error) {
	switch v := v.(type) {
	case *compiledTemplate:
		s, err := v.renderValue(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return s, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			r, err := renderLeaves(e, data, joinPath(path, k))
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			r, err := renderLeaves(e, data, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	default:
		return v, nil
	}
}

// renderValue renders a compensation leaf: a lone reference keeps its type, anything else is text.
func (ct *compiledTemplate) renderValue(data *TemplateData) (any, error) {
	if len(ct.parts) == 1 && ct.parts[0].field != nil {
		v, err := lookup(data, ct.parts[0].field)
		if err != nil {
			return nil, err
		}
		return deepCopy(v), nil
	}
	var sb strings.Builder
	for _, p := range ct.parts {
		if p.field == nil {
			sb.WriteString(p.text)
			continue
		}
		v, err := lookup(data, p.field)
		if err != nil {
			return nil, err
		}
		s, err := scalarString(v)
		if err != nil {
			return nil, fmt.Errorf("%s %w", fieldName(p.field), err)
		}
		sb.WriteString(s)
	}
	return sb.String(), nil
}
