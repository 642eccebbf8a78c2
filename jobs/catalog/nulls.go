package catalog

import (
	"bytes"
	"fmt"
	"net/url"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// A null where the schema does not allow one, sent for a param the schema does not require,
// means "absent": OpenAI's strict mode makes every param required, so a model that has nothing
// to say for an optional param sends null (see StrictParameters). The gateway removes such
// nulls before it validates, fingerprints and records the params, so {"priority": null} and {}
// are one request, with one fingerprint, and replay each other. A null the schema allows is a
// value and is kept. A null that used to be refused is the only input whose meaning changes,
// so no recorded operation's fingerprint does.

// nullShape says where in params a null means absent: for the members an object schema
// declares, and for the items of an array schema, recursively. Only "properties" and "items"
// are followed; that is also all StrictParameters rewrites.
type nullShape struct {
	props map[string]*nullProp
	items *nullShape
	// some is true when a null somewhere below may be removed; DropAbsentNulls skips the rest.
	some bool
}

type nullProp struct {
	required bool
	absent   bool // not required, and the member's schema refuses null: a null means absent
	shape    *nullShape
}

// buildNullShape walks schema (at JSON pointer ptr of the document compiled at loc by c) and
// asks the validator, for each declared member, whether its schema accepts null.
func buildNullShape(c *jsonschema.Compiler, loc string, schema any, ptr string) (*nullShape, error) {
	s, ok := schema.(map[string]any)
	if !ok {
		return nil, nil
	}
	out := &nullShape{}
	if props, ok := s["properties"].(map[string]any); ok {
		required := requiredNames(s)
		out.props = make(map[string]*nullProp, len(props))
		for _, name := range sortedKeys(props) {
			sub := ptr + "/properties/" + escapeToken(name)
			p := &nullProp{required: slices.Contains(required, name)}
			if !p.required {
				nullOK, err := acceptsNull(c, loc, sub)
				if err != nil {
					return nil, err
				}
				p.absent = !nullOK
			}
			inner, err := buildNullShape(c, loc, props[name], sub)
			if err != nil {
				return nil, err
			}
			p.shape = inner
			out.props[name] = p
			out.some = out.some || p.absent || (inner != nil && inner.some)
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		inner, err := buildNullShape(c, loc, items, ptr+"/items")
		if err != nil {
			return nil, err
		}
		out.items = inner
		out.some = out.some || (inner != nil && inner.some)
	}
	return out, nil
}

// acceptsNull compiles the subschema at ptr and validates null against it: exact, whatever
// the subschema uses ($ref, anyOf, enum, ...).
func acceptsNull(c *jsonschema.Compiler, loc, ptr string) (bool, error) {
	tokens, _ := parsePointer(ptr)
	frag := ""
	for _, tok := range tokens {
		frag += "/" + url.PathEscape(escapeToken(tok))
	}
	sch, err := c.Compile(loc + "#" + frag)
	if err != nil {
		return false, fmt.Errorf("invalid schema at %q: %s", ptr, oneLine(err))
	}
	return sch.Validate(nil) == nil, nil
}

func requiredNames(s map[string]any) []string {
	list, _ := s["required"].([]any)
	out := make([]string, 0, len(list))
	for _, v := range list {
		if name, ok := v.(string); ok {
			out = append(out, name)
		}
	}
	return out
}

// drop removes, in place, the nulls of v that mean absent, and reports whether it removed any.
func (s *nullShape) drop(v any) bool {
	if s == nil || !s.some {
		return false
	}
	changed := false
	switch v := v.(type) {
	case map[string]any:
		for name, p := range s.props {
			m, ok := v[name]
			switch {
			case !ok:
			case m == nil && p.absent:
				delete(v, name)
				changed = true
			default:
				changed = p.shape.drop(m) || changed
			}
		}
	case []any:
		for _, item := range v {
			changed = s.items.drop(item) || changed
		}
	}
	return changed
}

// DropAbsentNulls returns params (canonical JSON, as CheckCanonical takes them) without the
// nulls that mean absent (see the comment at the top of this file), and whether it removed
// any. The result is valid JSON but not canonical: the caller normalises it again. A tool
// whose schema has no such param, or params without a null, are returned as they are.
func (t *Tool) DropAbsentNulls(params []byte) ([]byte, bool, error) {
	if t.nulls == nil || !t.nulls.some || !bytes.Contains(params, []byte("null")) {
		return params, false, nil
	}
	v, err := decodeJSON(params)
	if err != nil {
		return nil, false, err
	}
	if !t.nulls.drop(v) {
		return params, false, nil
	}
	out, err := encodeJSON(v)
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}
