package catalog

import (
	"fmt"
	"maps"
	"slices"
)

// strictKeywords are the keywords a schema may use for StrictParameters to rewrite it: those
// OpenAI's strict mode (Structured Outputs) supports, and annotations. A schema with any other
// keyword (anyOf, $ref, patternProperties, ...) is offered non-strict, as it is.
var strictKeywords = []string{"type", "properties", "required", "additionalProperties", "items", "enum",
	"const", "pattern", "format", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
	"exclusiveMaximum", "multipleOf", "minItems", "maxItems", "title", "description", "default", "examples",
	"deprecated", "readOnly", "writeOnly", "$comment", "$schema"}

// StrictParameters returns the tool's params schema as OpenAI's strict mode takes it, and
// true; or the schema as written and false when strict mode cannot say what it says. In the
// strict schema every object lists all its members in "required" and has additionalProperties
// false, and each member that was optional and refused null now also accepts null: the
// gateway reads that null as "absent" (DropAbsentNulls), so the strict schema accepts exactly
// what the tool accepts, spelled the way strict mode needs. The schema is computed once by
// Load and shared: callers must not modify it.
func (t *Tool) StrictParameters() (map[string]any, bool) {
	if t.strict == nil {
		return t.ParamsSchemaRaw, false
	}
	return t.strict, true
}

// strictSchema rewrites s (a schema of params_schema) for strict mode, following shape. The
// error says what strict mode cannot express; the tool is then offered non-strict.
func strictSchema(s map[string]any, shape *nullShape, at string) (map[string]any, error) {
	for k := range s {
		if !slices.Contains(strictKeywords, k) {
			return nil, fmt.Errorf("at %q: strict mode has no %q", at, k)
		}
	}
	if _, ok := s["type"]; !ok && s["enum"] == nil && s["const"] == nil {
		return nil, fmt.Errorf("at %q: strict mode needs a type", at)
	}
	out := maps.Clone(s)
	if hasType(s, "object") || s["properties"] != nil {
		if err := strictObject(out, shape, at); err != nil {
			return nil, err
		}
	}
	if hasType(s, "array") {
		items, ok := s["items"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("at %q: strict mode needs one schema for the items", at)
		}
		var inner *nullShape
		if shape != nil {
			inner = shape.items
		}
		si, err := strictSchema(items, inner, at+"/items")
		if err != nil {
			return nil, err
		}
		out["items"] = si
	}
	return out, nil
}

// strictObject closes the object schema out and makes every member required, the optional
// ones that refuse null nullable.
func strictObject(out map[string]any, shape *nullShape, at string) error {
	props, _ := out["properties"].(map[string]any)
	if ap, ok := out["additionalProperties"]; ok && ap != false {
		return fmt.Errorf("at %q: strict mode cannot allow members besides the declared ones", at)
	}
	if len(props) == 0 && out["additionalProperties"] != false {
		return fmt.Errorf("at %q: strict mode cannot take a free-form object", at)
	}
	out["additionalProperties"] = false
	if props == nil {
		return nil
	}
	strictProps := make(map[string]any, len(props))
	names := make([]any, 0, len(props))
	for _, name := range sortedKeys(props) {
		sub, ok := props[name].(map[string]any)
		if !ok {
			return fmt.Errorf("at %q: strict mode needs a schema object for %q", at, name)
		}
		var p *nullProp
		if shape != nil {
			p = shape.props[name]
		}
		if p == nil {
			return fmt.Errorf("internal: no null analysis for %q at %q", name, at)
		}
		s, err := strictSchema(sub, p.shape, at+"/properties/"+escapeToken(name))
		if err != nil {
			return err
		}
		if p.absent {
			s = orNull(s)
		}
		strictProps[name] = s
		names = append(names, name)
	}
	out["properties"], out["required"] = strictProps, names
	return nil
}

// orNull returns s allowing null as well: in its type (and enum), or else as an alternative.
func orNull(s map[string]any) map[string]any {
	out := maps.Clone(s)
	switch typ := s["type"].(type) {
	case string:
		if _, isConst := s["const"]; !isConst {
			out["type"] = []any{typ, "null"}
			if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, nil) {
				out["enum"] = append(slices.Clone(enum), nil)
			}
			return out
		}
	case []any:
		if _, isConst := s["const"]; !isConst {
			if !slices.Contains(typ, any("null")) {
				out["type"] = append(slices.Clone(typ), "null")
			}
			if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, nil) {
				out["enum"] = append(slices.Clone(enum), nil)
			}
			return out
		}
	}
	return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
}

// hasType reports whether s's type is name or a list holding name.
func hasType(s map[string]any, name string) bool {
	switch typ := s["type"].(type) {
	case string:
		return typ == name
	case []any:
		return slices.Contains(typ, any(name))
	}
	return false
}
