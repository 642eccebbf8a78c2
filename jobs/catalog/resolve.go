package catalog

import "fmt"

// Resolve returns the value at JSON pointer p (RFC 6901) inside doc, a value decoded from JSON.
func Resolve(doc any, p string) (any, bool) {
	tokens, err := parsePointer(p)
	if err != nil {
		return nil, false
	}
	cur := doc
	for _, tok := range tokens {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, ok := arrayIndex(tok, len(v))
			if !ok {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// SetMember writes value at JSON pointer p inside doc, creating the objects on the way. Every
// step of p names an object member (the tools file's key pointers are checked so at load).
func SetMember(doc map[string]any, p string, value any) error {
	tokens, err := parsePointer(p)
	if err != nil || len(tokens) == 0 {
		return fmt.Errorf("invalid member pointer %q", p)
	}
	cur := doc
	for _, tok := range tokens[:len(tokens)-1] {
		next, ok := cur[tok]
		if !ok || next == nil {
			m := map[string]any{}
			cur[tok] = m
			cur = m
			continue
		}
		m, ok := next.(map[string]any)
		if !ok {
			return fmt.Errorf("cannot write %s: %q is not an object", p, tok)
		}
		cur = m
	}
	cur[tokens[len(tokens)-1]] = value
	return nil
}
