package catalog

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
