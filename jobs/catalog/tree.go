package catalog

import "fmt"

// treePaths spells where in a tree of maps and slices a value is: a member of an object, an
// element of an array. The schema (JSON Pointer) and the templates (dotted paths) spell them
// differently.
type treePaths struct {
	member  func(path, key string) string
	element func(path string, i int) string
}

// rebuild copies v, a tree of maps and slices as decoders give it (YAML's map[any]any
// included, whose keys must be strings), with every other value replaced by what leaf makes
// of it.
func (p treePaths) rebuild(v any, path string, leaf func(v any, path string) (any, error)) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			c, err := p.rebuild(e, p.member(path, k), leaf)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("at %q: mapping key %v is not a string", path, k)
			}
			c, err := p.rebuild(e, p.member(path, ks), leaf)
			if err != nil {
				return nil, err
			}
			out[ks] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			c, err := p.rebuild(e, p.element(path, i), leaf)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	default:
		return leaf(v, path)
	}
}
