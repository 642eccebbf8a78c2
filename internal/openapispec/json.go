package openapispec

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// obj is a JSON object whose members keep the order they were written in, so the document
// reads top-down (openapi, info, paths, components) instead of alphabetically.
type obj []member

type member struct {
	name  string
	value any
}

// o builds an obj from alternating names and values; it panics on a malformed list, which is
// a mistake in this package's source.
func o(pairs ...any) obj {
	if len(pairs)%2 != 0 {
		panic(fmt.Sprintf("openapispec: odd number of arguments to o: %v", pairs))
	}
	out := make(obj, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		name, ok := pairs[i].(string)
		if !ok {
			panic(fmt.Sprintf("openapispec: member name %v is not a string", pairs[i]))
		}
		out = append(out, member{name, pairs[i+1]})
	}
	return out
}

// with returns a copy of x with the members of pairs appended.
func (x obj) with(pairs ...any) obj {
	return append(append(obj{}, x...), o(pairs...)...)
}

// MarshalJSON writes the members in order.
func (x obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range x {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := encode(&b, m.name); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		if err := encode(&b, m.value); err != nil {
			return nil, fmt.Errorf("openapispec: member %s: %w", m.name, err)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// encode appends v as JSON to b, leaving <, > and & as they are: the document is read by
// people, never embedded in HTML.
func encode(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode ends with a newline
	return nil
}

// list is a JSON array of any values; with none it is [], not null.
func list(values ...any) []any {
	if values == nil {
		return []any{}
	}
	return values
}

// schemaRef points at a schema of components.schemas.
func schemaRef(name string) obj { return o("$ref", "#/components/schemas/"+name) }

// nullable allows null besides what s allows.
func nullable(s obj) obj { return o("anyOf", list(s, o("type", "null"))) }

// text is a string schema with a description.
func text(description string) obj { return o("type", "string", "description", description) }
