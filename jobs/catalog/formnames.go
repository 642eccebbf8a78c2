package catalog

import (
	"slices"
	"strconv"
	"strings"
)

// formNameErrors refuses, for a tool whose body is a form, params whose member names a form
// parser would read otherwise than the gateway wrote them. Every form parser (Rack, PHP, Go's
// url.ParseQuery, Python's parse_qs) percent-decodes a name before it reads its brackets, so a
// member named "metadata[reference]" arrives as a second metadata[reference], and a parser
// that keeps the last value lets the agent set the field where the gateway writes the
// downstream key: the look-up before a retry then finds nothing, and an ambiguous attempt is
// sent again. The same spelling gets round a nested schema's rules (additionalProperties,
// maxLength), so a name that holds a bracket is refused at any depth, and so is one that reads
// the same as another member, or as the key's place, once a parser has read it.
func (t *Tool) formNameErrors(params any) []ParamError {
	if t.MCP != nil || t.HTTP.Encoding() != BodyForm {
		return nil
	}
	var errs []ParamError
	taken := map[string]string{} // a form name as a parser reads it → the pointer that owns it
	for _, p := range t.KeyParams() {
		if tokens, err := parsePointer(p); err == nil {
			taken[readFormName(tokens)] = p
		}
	}
	var walk func(v any, path []string)
	walk = func(v any, path []string) {
		switch x := v.(type) {
		case map[string]any:
			names := make([]string, 0, len(x))
			for k := range x {
				names = append(names, k)
			}
			slices.Sort(names)
			for _, k := range names {
				p := append(path[:len(path):len(path)], k)
				if strings.ContainsAny(k, "[]") {
					errs = append(errs, ParamError{Pointer: pointerOf(p),
						Message: "a form body cannot carry a name with \"[\" or \"]\": form parsers read them as nesting; send the nested object instead"})
					continue
				}
				walk(x[k], p)
			}
		case []any:
			for i, e := range x {
				walk(e, append(path[:len(path):len(path)], strconv.Itoa(i)))
			}
		case nil:
			// Not sent (EncodeForm leaves nulls out), so it can collide with nothing.
		default:
			name := readFormName(path)
			if owner, ok := taken[name]; ok {
				errs = append(errs, ParamError{Pointer: pointerOf(path),
					Message: "a form parser reads this name as " + owner + "'s, which the params may not set"})
				return
			}
			taken[name] = pointerOf(path)
		}
	}
	walk(params, nil)
	return errs
}

// readFormName is the name a form parser reads for the member at path, as EncodeForm nests it
// (metadata[order], items[0][price]), with the one rewrite a common parser makes: PHP turns
// "." and " " in the outermost name into "_", so "a.b" and "a_b" are one field there.
func readFormName(path []string) string {
	if len(path) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString(strings.NewReplacer(".", "_", " ", "_").Replace(path[0]))
	for _, p := range path[1:] {
		sb.WriteString("[" + p + "]")
	}
	return sb.String()
}
