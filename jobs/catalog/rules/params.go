package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Params decodes a call's params for evaluation, each number typed as its schema says: an
// integer field an int (amounts are counted exactly), a number a double, and a number the
// schema says nothing of an int when it is whole. CEL compares and adds ints and doubles apart.
func Params(raw []byte, schema map[string]any) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	m, ok := typed(v, schema).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("params are not an object")
	}
	return m, nil
}

func typed(v any, schema map[string]any) any {
	switch x := v.(type) {
	case json.Number:
		if schemaType(schema) != "number" {
			if n, err := x.Int64(); err == nil {
				return n
			}
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		for k, e := range x {
			sub, _ := props[k].(map[string]any)
			x[k] = typed(e, sub)
		}
		return x
	case []any:
		items, _ := schema["items"].(map[string]any)
		for i, e := range x {
			x[i] = typed(e, items)
		}
		return x
	}
	return v
}
