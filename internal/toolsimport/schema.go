package toolsimport

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
)

// Bounds on how far a schema is expanded. A document's $refs may be recursive (a node whose
// children are nodes) or merely deep; either way the printed params_schema must be finite and
// small enough for a person to review and for a model to read.
const (
	// maxRefDepth is how many $refs deep a schema is inlined: a $ref reached through more
	// than this many others is cut.
	maxRefDepth = 4
	// maxDepth cuts any schema nested deeper than this, $refs or not.
	maxDepth = 24
)

// truncatedComment marks a schema cut by the bounds above, so a reviewer sees where the
// document said more.
const truncatedComment = "not expanded further: recursive, or nested too deep to print; the document says more"

// schemaConverter turns OpenAPI schemas (3.0 or 3.1, $refs resolved by kin-openapi) into JSON
// Schema 2020-12 as jobs/catalog compiles it: only 2020-12 keywords (the catalog refuses any
// other), "nullable" as a "null" type, 3.0's boolean exclusive bounds as numbers, and regular
// expressions Go can compile. It describes a request, so readOnly properties are left out.
type schemaConverter struct {
	// onPath holds the schemas being converted, outermost first: meeting one again is a cycle.
	onPath []*openapi3.Schema
	refs   int // $refs followed to reach the current schema
	// cut counts the schemas left unexpanded, for the tool's notes.
	cut int
	// dropped lists the patterns Go's regexp cannot compile; the catalog would refuse them.
	dropped []string
	// budget bounds the whole import's expansion; nil for none.
	budget *expansion
}

// The bounds of one import's expansion of schemas (docs/MCP.md): a document whose $refs fan out
// (each schema naming dozens of others, four deep) expands past any size a person could
// review long before it ends. Stripe's whole document expands to about 2 MB.
//
// maxExpandedSchemas bounds the importer's memory itself: each schema expanded is a map held
// until the file is printed (about 400 bytes), whatever its printed size, so a document of a few
// kilobytes whose $refs fan out 25 ways (13 KB, 400,000 schemas to a depth of four $refs) took
// 512 MB within a second while its printed size stayed under the bytes' bound. The largest
// import of the directory's sample expands about 13,000 schemas, Stripe's whole document 16,500.
const (
	maxExpansionBytes  = 64 << 20
	maxExpansionTime   = 10 * time.Second
	maxExpandedSchemas = 100_000
)

// expansion is what an import has expanded so far, in bytes as printed (about), against its
// bounds.
type expansion struct {
	bytes, limit int64
	schemas      int // schemas expanded, against maxExpandedSchemas
	deadline     time.Time
	took         time.Duration // the time bound, for its message
	over         error
}

func newExpansion(limit int64, d time.Duration) *expansion {
	return &expansion{limit: limit, deadline: time.Now().Add(d), took: d}
}

// spend counts n more bytes, and reports whether the import is still within its bounds.
func (e *expansion) spend(n int) bool {
	if e == nil {
		return true
	}
	if e.over != nil {
		return false
	}
	e.bytes += int64(n)
	e.schemas++
	switch {
	case e.schemas > maxExpandedSchemas:
		e.over = fmt.Errorf("its $refs expand past %d schemas: the document is refused (import fewer operations with --operations, or simplify the schemas)", maxExpandedSchemas)
	case e.bytes > e.limit:
		e.over = fmt.Errorf("its $refs expand past %d MiB of schemas: the document is refused (import fewer operations with --operations, or simplify the schemas)", e.limit>>20)
	case time.Now().After(e.deadline):
		e.over = fmt.Errorf("expanding its $refs took more than %s: the document is refused (import fewer operations with --operations, or simplify the schemas)", e.took)
	}
	return e.over == nil
}

func (e *expansion) err() error {
	if e == nil {
		return nil
	}
	return e.over
}

// convert returns ref's schema as a JSON Schema value: a map, or true for an absent schema.
func (c *schemaConverter) convert(ref *openapi3.SchemaRef) any {
	if ref == nil || ref.Value == nil {
		return true
	}
	s := ref.Value
	if s.Always != nil {
		return *s.Always
	}
	if !c.budget.spend(64 + len(s.Title) + len(s.Description) + len(s.Pattern) + 16*len(s.Enum)) {
		return true // the import is refused; what is returned here is never printed
	}
	followsRef := ref.Ref != ""
	if slices.Contains(c.onPath, s) || len(c.onPath) >= maxDepth || (followsRef && c.refs >= maxRefDepth) {
		c.cut++
		return c.shallow(s)
	}
	c.onPath = append(c.onPath, s)
	if followsRef {
		c.refs++
	}
	defer func() {
		c.onPath = c.onPath[:len(c.onPath)-1]
		if followsRef {
			c.refs--
		}
	}()
	out := c.shallow(s)
	delete(out, "$comment")
	c.subschemas(s, out)
	return out
}

// shallow returns the keywords of s that hold no subschema, and a $comment saying the rest
// was not expanded; convert deletes the comment when it goes on.
func (c *schemaConverter) shallow(s *openapi3.Schema) map[string]any {
	out := map[string]any{"$comment": truncatedComment}
	if t := schemaTypes(s); t != nil {
		out["type"] = t
	}
	set := func(k string, v any, ok bool) {
		if ok {
			out[k] = v
		}
	}
	set("title", s.Title, s.Title != "")
	set("description", s.Description, s.Description != "")
	set("format", s.Format, s.Format != "")
	set("enum", s.Enum, len(s.Enum) > 0)
	set("const", s.Const, s.Const != nil)
	set("default", s.Default, s.Default != nil)
	set("deprecated", true, s.Deprecated)
	switch {
	case len(s.Examples) > 0:
		out["examples"] = s.Examples
	case s.Example != nil: // 3.0's one example is 2020-12's list of examples
		out["examples"] = []any{s.Example}
	}
	set("multipleOf", derefFloat(s.MultipleOf), s.MultipleOf != nil)
	bound(out, "minimum", "exclusiveMinimum", s.Min, s.ExclusiveMin)
	bound(out, "maximum", "exclusiveMaximum", s.Max, s.ExclusiveMax)
	set("minLength", s.MinLength, s.MinLength > 0)
	set("maxLength", derefUint(s.MaxLength), s.MaxLength != nil)
	if s.Pattern != "" {
		if _, err := regexp.Compile(s.Pattern); err == nil {
			out["pattern"] = s.Pattern
		} else if !slices.Contains(c.dropped, s.Pattern) {
			c.dropped = append(c.dropped, s.Pattern)
		}
	}
	set("minItems", s.MinItems, s.MinItems > 0)
	set("maxItems", derefUint(s.MaxItems), s.MaxItems != nil)
	set("uniqueItems", true, s.UniqueItems)
	set("minContains", derefUint(s.MinContains), s.MinContains != nil)
	set("maxContains", derefUint(s.MaxContains), s.MaxContains != nil)
	set("minProperties", s.MinProps, s.MinProps > 0)
	set("maxProperties", derefUint(s.MaxProps), s.MaxProps != nil)
	set("dependentRequired", s.DependentRequired, len(s.DependentRequired) > 0)
	return out
}

// subschemas adds the keywords of s that hold schemas to out.
func (c *schemaConverter) subschemas(s *openapi3.Schema, out map[string]any) {
	if len(s.Properties) > 0 {
		props := make(map[string]any, len(s.Properties))
		for name, p := range s.Properties {
			if p != nil && p.Value != nil && p.Value.ReadOnly {
				continue // the server sets it; a request must not
			}
			props[name] = c.convert(p)
		}
		out["properties"] = props
	}
	if req := c.required(s); len(req) > 0 {
		out["required"] = req
	}
	for k, list := range map[string]openapi3.SchemaRefs{"allOf": s.AllOf, "anyOf": s.AnyOf, "oneOf": s.OneOf, "prefixItems": s.PrefixItems} {
		if len(list) > 0 {
			conv := make([]any, len(list))
			for i, sub := range list {
				conv[i] = c.convert(sub)
			}
			out[k] = conv
		}
	}
	for k, sub := range map[string]*openapi3.SchemaRef{"not": s.Not, "items": s.Items, "contains": s.Contains,
		"propertyNames": s.PropertyNames, "if": s.If, "then": s.Then, "else": s.Else} {
		if sub != nil {
			out[k] = c.convert(sub)
		}
	}
	for k, m := range map[string]openapi3.Schemas{"patternProperties": s.PatternProperties, "dependentSchemas": s.DependentSchemas} {
		if len(m) > 0 {
			conv := make(map[string]any, len(m))
			for name, sub := range m {
				conv[name] = c.convert(sub)
			}
			out[k] = conv
		}
	}
	for k, b := range map[string]openapi3.BoolSchema{"additionalProperties": s.AdditionalProperties,
		"unevaluatedProperties": s.UnevaluatedProperties, "unevaluatedItems": s.UnevaluatedItems} {
		switch {
		case b.Has != nil:
			out[k] = *b.Has
		case b.Schema != nil:
			out[k] = c.convert(b.Schema)
		}
	}
}

// required is s.required without the readOnly properties subschemas leaves out, each name
// once.
func (c *schemaConverter) required(s *openapi3.Schema) []string {
	var out []string
	for _, name := range s.Required {
		if p := s.Properties[name]; p != nil && p.Value != nil && p.Value.ReadOnly || slices.Contains(out, name) {
			continue // a document may name a field twice
		}
		out = append(out, name)
	}
	return out
}

// schemaTypes is s's type as 2020-12 spells it: a string, or a list when there are several
// (3.0's nullable adds "null"); nil when the schema names none.
func schemaTypes(s *openapi3.Schema) any {
	if s.Type == nil || len(*s.Type) == 0 {
		return nil
	}
	types := slices.Clone([]string(*s.Type))
	if s.Nullable && !slices.Contains(types, "null") {
		types = append(types, "null")
	}
	if len(types) == 1 {
		return types[0]
	}
	return types
}

// bound writes a minimum or maximum: 3.0 spells an exclusive one as a boolean beside the
// value, 3.1 (and 2020-12) as the exclusive keyword holding the value.
func bound(out map[string]any, inclusive, exclusive string, v *float64, ex openapi3.ExclusiveBound) {
	switch {
	case ex.Value != nil:
		out[exclusive] = *ex.Value
		if v != nil {
			out[inclusive] = *v
		}
	case v != nil && ex.IsTrue():
		out[exclusive] = *v
	case v != nil:
		out[inclusive] = *v
	}
}

func derefFloat(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func derefUint(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}
