package downstream

import (
	"net/url"
	"sort"
	"strings"

	"github.com/idemgate/idemgate/jobs/catalog"
)

// EncodeQuery writes the params that http.query lists, each given and not null, in the order
// listed, as OpenAPI 3 spells a query parameter of its style (docs/TOOLS.md):
//
//	form, explode         ids=a&ids=b         an object: its members' own pairs, color=red&size=2
//	form, no explode      ids=a,b             an object: color=red,size,2
//	spaceDelimited        ids=a%20b           (explode: as form's)
//	pipeDelimited         ids=a|b             (explode: as form's)
//	deepObject            filter[color]=red   nested as a form body is (EncodeForm), lists indexed
//
// A scalar is name=value in every style. What OpenAPI leaves undefined (a list inside a
// form's list, an object in a delimited style) is written as a form body nests it.
func EncodeQuery(params map[string]any, query []catalog.QueryParam) string {
	var parts []string
	for _, q := range query {
		v, ok := params[q.Param]
		if !ok || v == nil {
			continue
		}
		if s := encodeQueryParam(q, v); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "&")
}

func encodeQueryParam(q catalog.QueryParam, v any) string {
	name := url.QueryEscape(q.Name)
	pair := func(n string, s string) string { return n + "=" + url.QueryEscape(s) }
	if q.Style == catalog.QueryDeepObject {
		return EncodeForm(map[string]any{q.Name: v})
	}
	switch x := v.(type) {
	case []any:
		var vals []string
		for _, e := range x {
			if e == nil {
				continue
			}
			if !isScalar(e) {
				return EncodeForm(map[string]any{q.Name: v})
			}
			vals = append(vals, scalar(e))
		}
		if len(vals) == 0 {
			return ""
		}
		if q.Explode {
			out := make([]string, len(vals))
			for i, s := range vals {
				out[i] = pair(name, s)
			}
			return strings.Join(out, "&")
		}
		sep := map[string]string{catalog.QueryForm: ",", catalog.QuerySpaceDelimited: " ", catalog.QueryPipeDelimited: "|"}[q.Style]
		return pair(name, strings.Join(vals, sep))
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k, e := range x {
			if e != nil {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		if len(keys) == 0 {
			return ""
		}
		for _, k := range keys {
			if !isScalar(x[k]) || q.Style != catalog.QueryForm {
				return EncodeForm(map[string]any{q.Name: v})
			}
		}
		if q.Explode {
			out := make([]string, len(keys))
			for i, k := range keys {
				out[i] = pair(url.QueryEscape(k), scalar(x[k]))
			}
			return strings.Join(out, "&")
		}
		var vals []string
		for _, k := range keys {
			vals = append(vals, k, scalar(x[k]))
		}
		return pair(name, strings.Join(vals, ","))
	}
	return pair(name, scalar(v))
}

func isScalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any, nil:
		return false
	}
	return true
}
