package catalog

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// The raw* types mirror the tools file as written. Durations stay strings and optional numbers
// are pointers, so validation can tell "absent" (take the default) from "zero" (an error).
type rawTool struct {
	Name            string           `yaml:"name"`
	Description     string           `yaml:"description"`
	Effect          string           `yaml:"effect"`
	ParamsSchema    any              `yaml:"params_schema"`
	SensitiveParams []rawSensitive   `yaml:"sensitive_params"`
	HTTP            *rawHTTP         `yaml:"http"`
	Reconcile       *rawReconcile    `yaml:"reconcile"`
	Retry           *rawRetry        `yaml:"retry"`
	Review          *rawReview       `yaml:"review"`
	Compensation    *rawCompensation `yaml:"compensation"`
	Retention       string           `yaml:"retention"`
	Summary         string           `yaml:"summary"`
	ReferenceURL    string           `yaml:"reference_url"`
}

type rawHTTP struct {
	Method            string     `yaml:"method"`
	URL               string     `yaml:"url"`
	Timeout           string     `yaml:"timeout"`
	IdempotencyHeader string     `yaml:"idempotency_header"`
	ResultReference   string     `yaml:"result_reference"`
	Connection        string     `yaml:"connection"`
	Body              string     `yaml:"body"`
	Headers           any        `yaml:"headers"`
	IdempotencyParam  string     `yaml:"idempotency_param"`
	ReferenceParam    string     `yaml:"reference_param"`
	Query             []rawQuery `yaml:"query"`
}

type rawReconcile struct {
	Method     string `yaml:"method"`
	URL        string `yaml:"url"`
	Settle     string `yaml:"settle"`
	Connection string `yaml:"connection"`
	Found      string `yaml:"found"`
}

type rawRetry struct {
	MaxAttempts    *int   `yaml:"max_attempts"`
	InitialBackoff string `yaml:"initial_backoff"`
	MaxBackoff     string `yaml:"max_backoff"`
	UnsentFor      string `yaml:"unsent_for"`
}

type rawReview struct {
	RequireApproval bool     `yaml:"require_approval"`
	Approvals       *int     `yaml:"approvals"`
	ApprovalTTL     string   `yaml:"approval_ttl"`
	EscalateAfter   string   `yaml:"escalate_after"`
	LookalikeOn     []string `yaml:"lookalike_on"`
	LookalikeWindow string   `yaml:"lookalike_window"`
}

type rawCompensation struct {
	Tool   string `yaml:"tool"`
	Params any    `yaml:"params"`
}

// pathError is a decoding error at a field path inside one tool ("http.timeout").
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// decodeStrict decodes node into out (a pointer), rejecting unknown fields and values of the
// wrong kind with the path of the offending field. yaml.v3 offers KnownFields only on a Decoder
// reading a whole document, and its errors carry line numbers but not field paths; walking the
// node ourselves gives every tool its own error naming the field.
func decodeStrict(node *yaml.Node, out any) error {
	return decodeValue(node, reflect.ValueOf(out).Elem(), "")
}

func decodeValue(node *yaml.Node, v reflect.Value, path string) error {
	node = resolveAlias(node)
	if isNull(node) {
		return nil // absent and null are the same: the default applies
	}
	if v.Type() == reflect.TypeFor[rawSensitive]() && node.Kind == yaml.ScalarNode {
		return decodeScalar(node, v.Field(0), path) // a plain name: no safe form
	}
	switch v.Kind() {
	case reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		if err := decodeValue(node, elem.Elem(), path); err != nil {
			return err
		}
		v.Set(elem)
		return nil
	case reflect.Struct:
		return decodeStruct(node, v, path)
	case reflect.Slice:
		if node.Kind != yaml.SequenceNode {
			return &pathError{path, fmt.Errorf("expected a list, got %s", describeNode(node))}
		}
		s := reflect.MakeSlice(v.Type(), len(node.Content), len(node.Content))
		var errs []error
		for i, item := range node.Content {
			if err := decodeValue(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				errs = append(errs, err) // every item's problems, not only the first's
			}
		}
		v.Set(s)
		return errors.Join(errs...)
	case reflect.Interface:
		var x any
		if err := node.Decode(&x); err != nil {
			var te *yaml.TypeError
			if errors.As(err, &te) { // its lines already say where
				return &pathError{path, errors.New(strings.Join(te.Errors, "; "))}
			}
			return &pathError{path, fmt.Errorf("line %d: %w", node.Line, err)}
		}
		v.Set(reflect.ValueOf(&x).Elem())
		return nil
	default:
		return decodeScalar(node, v, path)
	}
}

func decodeStruct(node *yaml.Node, v reflect.Value, path string) error {
	if node.Kind != yaml.MappingNode {
		return &pathError{path, fmt.Errorf("expected a mapping, got %s", describeNode(node))}
	}
	// Every field's problem is reported, each with its line, not only the first (docs/TOOLS.md).
	var errs []error
	seen := make(map[string]bool, len(node.Content)/2)
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, val := resolveAlias(node.Content[i]), node.Content[i+1]
		if key.Kind != yaml.ScalarNode {
			errs = append(errs, &pathError{path, fmt.Errorf("line %d: mapping keys must be strings", key.Line)})
			continue
		}
		fieldPath := joinPath(path, key.Value)
		// yaml.v3 reports duplicate keys only when decoding into Go values, not into nodes.
		if seen[key.Value] {
			errs = append(errs, &pathError{fieldPath, fmt.Errorf("declared twice (line %d)", key.Line)})
			continue
		}
		seen[key.Value] = true
		if key.Value == "<<" {
			errs = append(errs, &pathError{fieldPath, fmt.Errorf("merge keys (<<) are not supported; repeat the fields (line %d)", key.Line)})
			continue
		}
		f, ok := fieldByTag(v, key.Value)
		if !ok {
			errs = append(errs, &pathError{fieldPath, fmt.Errorf("unknown field (line %d)", key.Line)})
			continue
		}
		if err := decodeValue(val, f, fieldPath); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pathErrors lists the problems decodeStrict found, flattened: each a *pathError, or another
// error when one carries no path.
func pathErrors(err error) []error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range joined.Unwrap() {
			out = append(out, pathErrors(e)...)
		}
		return out
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

func decodeScalar(node *yaml.Node, v reflect.Value, path string) error {
	want := map[reflect.Kind]string{reflect.String: "a string", reflect.Bool: "a boolean", reflect.Int: "an integer"}[v.Kind()]
	if want == "" {
		return &pathError{path, fmt.Errorf("internal: cannot decode into %s", v.Type())}
	}
	if node.Kind != yaml.ScalarNode {
		return &pathError{path, fmt.Errorf("expected %s, got %s", want, describeNode(node))}
	}
	p := reflect.New(v.Type())
	if err := node.Decode(p.Interface()); err != nil {
		return &pathError{path, fmt.Errorf("expected %s, got %q", want, node.Value)}
	}
	v.Set(p.Elem())
	return nil
}

// fieldByTag finds the struct field whose yaml tag is name.
func fieldByTag(v reflect.Value, name string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag == name {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	default:
		return "an unexpected node"
	}
}

func joinPath(parent, field string) string {
	if parent == "" {
		return field
	}
	return parent + "." + field
}

// mappingValue returns the value node of key in a mapping node, or nil.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	n = resolveAlias(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return resolveAlias(n.Content[i+1])
		}
	}
	return nil
}
