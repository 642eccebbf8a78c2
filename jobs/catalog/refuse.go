package catalog

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// MaxFunctionNameLen is the longest name OpenAI and Anthropic take for a tool (FunctionName
// shortens a longer one).
const MaxFunctionNameLen = 64

// ReservedParam is the argument MCP's tools/call adds to every tool's input for the operation
// key; a tool's own params may not declare it.
const ReservedParam = "operation_key"

// checkServable refuses what would make a valid tool unsafe or unusable once served: a
// sensitive param that a URL would carry (URLs end up in logs, traces and error messages, where
// masking by value cannot reach every spelling; a GET's params all go there), and a param named
// like the argument MCP adds.
func checkServable(t *Tool, ec *collector) {
	defer func() {
		if t.MCP == nil && t.HTTP.Method == http.MethodGet && len(t.SensitiveParams) > 0 {
			ec.addf("sensitive_params", "a GET sends its params in the URL, where masking by value cannot reach every spelling; use a method with a body")
		}
	}()
	if props, ok := t.ParamsSchemaRaw["properties"].(map[string]any); ok {
		if _, clash := props[ReservedParam]; clash {
			ec.addf("params_schema.properties."+ReservedParam, "%q is reserved: MCP clients pass the operation key in it", ReservedParam)
		}
	}
	if slices.Contains(requiredNames(t.ParamsSchemaRaw), ReservedParam) {
		ec.addf("params_schema.required", "%q is reserved: MCP clients pass the operation key in it", ReservedParam)
	}
	urls := []struct {
		field string
		tmpl  *urlTemplate
	}{{"http.url", t.urlTmpl}, {"reconcile.url", t.reconcileTmpl}, {"reference_url", t.referenceTmpl}}
	for _, u := range urls {
		if u.tmpl == nil {
			continue
		}
		for _, ref := range u.tmpl.paramRefs() {
			if ptr, ok := sensitiveOverlap(t.SensitiveParams, ref); ok {
				ec.addf(u.field, "{{.Params.%s}} would put the sensitive param %s into the URL; send it in the body instead",
					strings.Join(ref, "."), ptr)
			}
		}
	}
	for _, h := range t.HTTP.Headers {
		for _, ref := range h.paramRefs() {
			if ptr, ok := sensitiveOverlap(t.SensitiveParams, ref); ok {
				ec.addf("http.headers."+h.Name, "{{.Params.%s}} would put the sensitive param %s into a header; send it in the body instead",
					strings.Join(ref, "."), ptr)
			}
		}
	}
}

// paramRefs returns the path below .Params of every param the template refers to.
func (ut *urlTemplate) paramRefs() [][]string {
	var out [][]string
	for _, p := range ut.tmpl.parts {
		if len(p.field) > 1 && p.field[0] == "Params" {
			out = append(out, p.field[1:])
		}
	}
	return out
}

// sensitiveOverlap reports the sensitive pointer that ref names, or lies inside, or contains.
func sensitiveOverlap(sensitive []string, ref []string) (string, bool) {
	for _, ptr := range sensitive {
		tokens, err := parsePointer(ptr)
		if err != nil {
			continue
		}
		n := min(len(tokens), len(ref))
		if slices.Equal(tokens[:n], ref[:n]) {
			return ptr, true
		}
	}
	return "", false
}

// compensationLeak finds a leaf of t's compensation template that copies a sensitive param of
// t into a param that target, the compensating tool, does not treat as sensitive: the value
// would then show in clear everywhere the compensation's params do, and be stored unsealed.
// It returns the leaf's path and the sensitive pointer; ok is false when there is none.
func compensationLeak(t, target *Tool) (leaf, ptr string, ok bool) {
	if t.compTmpl == nil {
		return "", "", false
	}
	var walk func(v any, dest []string) bool
	walk = func(v any, dest []string) bool {
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if walk(v[k], append(dest[:len(dest):len(dest)], k)) {
					return true
				}
			}
		case []any:
			for i, e := range v {
				if walk(e, append(dest[:len(dest):len(dest)], strconv.Itoa(i))) {
					return true
				}
			}
		case *compiledTemplate:
			for _, p := range v.parts {
				if len(p.field) < 2 || p.field[0] != "Params" {
					continue
				}
				if s, hit := sensitiveOverlap(t.SensitiveParams, p.field[1:]); hit && !coveredBySensitive(target.SensitiveParams, dest) {
					leaf, ptr = strings.Join(dest, "."), s
					return true
				}
			}
		}
		return false
	}
	return leaf, ptr, walk(t.compTmpl.root, nil)
}

// coveredBySensitive reports whether the param at path is, or lies inside, one of sensitive.
func coveredBySensitive(sensitive []string, path []string) bool {
	for _, ptr := range sensitive {
		tokens, err := parsePointer(ptr)
		if err == nil && len(tokens) <= len(path) && slices.Equal(tokens, path[:len(tokens)]) {
			return true
		}
	}
	return false
}
