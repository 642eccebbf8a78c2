// Package rules compiles and evaluates the tools file's policies and budgets (docs/POLICY.md):
// expressions in CEL (cel.dev/cel-go) over a call's params, principal, tenant, tool, time and
// justification, type-checked once per tool against the tool's params_schema, so that a
// misspelt field or a type error stops the server at load instead of denying calls later.
package rules

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
)

// CostLimit bounds one evaluation (CEL's cost units: roughly one per operation, list element
// visited or byte compared). An expression that passes it, on a hostile list or string, stops
// and counts as deny: a policy fails closed.
const CostLimit = 100_000

// schemaTypes is a CEL type provider that knows one tool's params as a struct type: each object
// of its params_schema with named properties is a struct whose fields have the properties' types,
// so `params.amount_cent` (a typo) or `params.amount_cents > "x"` is refused when the expression
// is checked. At run time params are plain maps, which CEL selects fields of alike.
type schemaTypes struct {
	*types.Registry
	structs map[string]map[string]*types.Type // type name → field → type
}

// newSchemaTypes declares the params of tool from its schema; the root type's name is returned.
func newSchemaTypes(tool string, schema map[string]any) (*schemaTypes, *types.Type, error) {
	reg, err := types.NewRegistry()
	if err != nil {
		return nil, nil, err
	}
	p := &schemaTypes{Registry: reg, structs: map[string]map[string]*types.Type{}}
	root := p.typeOf("params."+typeName(tool), schema)
	return p, root, nil
}

// typeName makes a tool's name a CEL identifier path.
func typeName(tool string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, tool)
}

// typeOf is the CEL type of a JSON schema: an object with properties a struct of name, one
// without a map, an array a list, the scalars their types, anything else (oneOf, several types)
// dyn, which the checker takes as anything.
func (p *schemaTypes) typeOf(name string, schema map[string]any) *types.Type {
	switch schemaType(schema) {
	case "object":
		props, _ := schema["properties"].(map[string]any)
		if len(props) == 0 {
			return types.NewMapType(types.StringType, types.DynType)
		}
		fields := map[string]*types.Type{}
		p.structs[name] = fields
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub, _ := props[k].(map[string]any)
			fields[k] = p.typeOf(name+"."+typeName(k), sub)
		}
		return types.NewObjectType(name)
	case "array":
		items, _ := schema["items"].(map[string]any)
		return types.NewListType(p.typeOf(name+".item", items))
	case "integer":
		return types.IntType
	case "number":
		return types.DoubleType
	case "string":
		return types.StringType
	case "boolean":
		return types.BoolType
	}
	return types.DynType
}

// schemaType is a schema's one type, "" when it has none or several.
func schemaType(schema map[string]any) string {
	switch t := schema["type"].(type) {
	case string:
		return t
	case []any:
		var named []string
		for _, v := range t {
			if s, ok := v.(string); ok && s != "null" {
				named = append(named, s)
			}
		}
		if len(named) == 1 {
			return named[0]
		}
	}
	if _, ok := schema["properties"]; ok {
		return "object"
	}
	return ""
}

// FindStructType answers for the params' struct types, then CEL's own.
func (p *schemaTypes) FindStructType(name string) (*types.Type, bool) {
	if _, ok := p.structs[name]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Registry.FindStructType(name)
}

// FindStructFieldNames lists a params struct's fields.
func (p *schemaTypes) FindStructFieldNames(name string) ([]string, bool) {
	if f, ok := p.structs[name]; ok {
		names := make([]string, 0, len(f))
		for k := range f {
			names = append(names, k)
		}
		slices.Sort(names)
		return names, true
	}
	return p.Registry.FindStructFieldNames(name)
}

// FindStructFieldType is a field's type. Its accessors read the plain map a call's params are.
func (p *schemaTypes) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	f, ok := p.structs[name]
	if !ok {
		return p.Registry.FindStructFieldType(name, field)
	}
	t, ok := f[field]
	if !ok {
		return nil, false
	}
	return &types.FieldType{Type: t,
		IsSet: func(target any) bool {
			m, ok := target.(map[string]any)
			if !ok {
				return false
			}
			_, set := m[field]
			return set
		},
		GetFrom: func(target any) (any, error) {
			m, ok := target.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("no such field %q", field)
			}
			v, set := m[field]
			if !set {
				return nil, fmt.Errorf("no such key: %s", field)
			}
			return v, nil
		}}, true
}

// NewValue refuses to build params: an expression reads them, never makes them.
func (p *schemaTypes) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := p.structs[name]; ok {
		return types.NewErr("cannot construct %s", name)
	}
	return p.Registry.NewValue(name, fields)
}

// env is the CEL environment of one tool: its params typed by its schema, and the call's
// principal, tenant, tool, now and justification.
func env(tool string, schema map[string]any) (*cel.Env, error) {
	p, root, err := newSchemaTypes(tool, schema)
	if err != nil {
		return nil, err
	}
	return cel.NewEnv(
		cel.CustomTypeProvider(p),
		cel.CustomTypeAdapter(p),
		cel.Variable("params", root),
		cel.Variable("principal", cel.StringType),
		cel.Variable("tenant", cel.StringType),
		cel.Variable("tool", cel.StringType),
		cel.Variable("now", cel.TimestampType),
		cel.Variable("justification", cel.StringType),
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(), // lowerAscii, split, trim, …: what rules on names and addresses need
	)
}

// compile parses and checks src for tool, requiring the result type want (nil: any), and
// returns the program, bounded by CostLimit.
func compile(tool string, schema map[string]any, src string, want *types.Type) (cel.Program, error) {
	e, err := env(tool, schema)
	if err != nil {
		return nil, err
	}
	ast, iss := e.Compile(src)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%s", strings.TrimSpace(iss.Err().Error()))
	}
	if want != nil && !ast.OutputType().IsExactType(want) && !ast.OutputType().IsExactType(types.DynType) {
		return nil, fmt.Errorf("is %s, not %s", ast.OutputType(), want)
	}
	return e.Program(ast, cel.CostLimit(CostLimit), cel.EvalOptions(cel.OptOptimize))
}
