package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// paramsSchema is a compiled params_schema with what Load derives from it.
type paramsSchema struct {
	raw    map[string]any
	schema *jsonschema.Schema
	nulls  *nullShape
	strict map[string]any // nil: strict mode cannot express it
}

// compileParamsSchema turns the params_schema as decoded from YAML into JSON values and compiles
// it as JSON Schema 2020-12. Problems are recorded in ec; the result is nil then.
func compileParamsSchema(name string, raw any, ec *collector) *paramsSchema {
	if raw == nil {
		ec.addf("params_schema", "required")
		return nil
	}
	v, err := toJSONValue(raw)
	if err != nil {
		ec.add("params_schema", err)
		return nil
	}
	doc, ok := v.(map[string]any)
	if !ok {
		ec.addf("params_schema", "expected a mapping")
		return nil
	}
	if typ, _ := doc["type"].(string); typ != "object" {
		ec.addf("params_schema", `the top level must be "type: object" (params are a JSON object)`)
		return nil
	}
	if errs := checkKeywords(doc, "", ec.schemaLine); len(errs) > 0 {
		for _, err := range errs {
			ec.add("params_schema", err)
		}
		return nil
	}
	c, loc := newCompiler(name)
	sch, err := compileSchema(c, loc, doc)
	if err != nil {
		ec.add("params_schema", err)
		return nil
	}
	nulls, err := buildNullShape(c, loc, doc, "")
	if err != nil {
		ec.add("params_schema", err)
		return nil
	}
	ps := &paramsSchema{raw: doc, schema: sch, nulls: nulls}
	if strict, err := strictSchema(doc, nulls, ""); err == nil {
		ps.strict = strict
	}
	return ps
}

func newCompiler(name string) (*jsonschema.Compiler, string) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// An operator who writes "format: email" expects it enforced; 2020-12 only annotates by default.
	c.AssertFormat()
	// Every $ref must resolve inside the schema: compiling must not read files or the network.
	c.UseLoader(noLoader{})
	return c, "urn:idemgate:tool:" + url.PathEscape(name) + ":params_schema"
}

func compileSchema(c *jsonschema.Compiler, loc string, doc map[string]any) (*jsonschema.Schema, error) {
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("invalid schema: %s", schemaProblem(err))
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("invalid schema: %s", schemaProblem(err))
	}
	return sch, nil
}

// schemaProblem says what is wrong with a schema in one line: for a schema that fails the
// metaschema, the failed checks with their places in the schema, not the whole error tree.
func schemaProblem(err error) string {
	var sve *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	if !errors.As(err, &sve) || !errors.As(sve.Err, &verr) {
		return oneLine(err)
	}
	var msgs []string
	collectLeaves(verr, func([]string) bool { return false }, func(pe ParamError) {
		msgs = append(msgs, fmt.Sprintf("at %q: %s", pe.Pointer, pe.Message))
	})
	return strings.Join(msgs, "; ")
}

// noLoader refuses to load any schema that is not part of the tools file.
type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("external schema %q is not allowed: $ref must point inside params_schema", u)
}

// oneLine flattens the multi-line errors of jsonschema into a single line for the start-up message.
func oneLine(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[i]), "- "))
	}
	return strings.Join(lines, "; ")
}

// toJSONValue converts a value decoded from YAML into the values encoding/json produces with
// UseNumber: map[string]any, []any, string, bool, json.Number and nil. YAML allows non-string
// keys and values JSON cannot hold (.inf, .nan); those are errors here, not surprises later.
func toJSONValue(v any) (any, error) {
	v, err := stringKeys(v, "")
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("not representable as JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("not representable as JSON: %w", err)
	}
	return out, nil
}

// pointerPaths spell paths as JSON Pointers (RFC 6901), as schema errors name them.
var pointerPaths = treePaths{
	member:  func(path, key string) string { return path + "/" + escapeToken(key) },
	element: func(path string, i int) string { return fmt.Sprintf("%s/%d", path, i) },
}

// stringKeys turns YAML's map[any]any into map[string]any throughout v.
func stringKeys(v any, path string) (any, error) {
	return pointerPaths.rebuild(v, path, func(v any, _ string) (any, error) { return v, nil })
}
