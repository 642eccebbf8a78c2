package catalog

import (
	"fmt"
	"slices"
	"strings"
)

// The keywords of JSON Schema 2020-12 (core, applicator, unevaluated, validation, meta-data,
// format and content vocabularies), plus "definitions", which 2020-12 no longer names but
// whose members a $ref can still point at.
var (
	// Keywords whose value is one schema.
	schemaKeywords = []string{"items", "contains", "additionalProperties", "propertyNames", "if", "then",
		"else", "not", "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
	// Keywords whose value is a list of schemas.
	schemaListKeywords = []string{"prefixItems", "allOf", "anyOf", "oneOf"}
	// Keywords whose value maps names to schemas.
	schemaMapKeywords = []string{"$defs", "definitions", "properties", "patternProperties", "dependentSchemas"}
	// Keywords whose value is data or a plain constraint: never a schema, never walked.
	valueKeywords = []string{"$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor",
		"$vocabulary", "$comment", "type", "const", "enum", "multipleOf", "maximum", "exclusiveMaximum",
		"minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
		"uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties", "required",
		"dependentRequired", "title", "description", "default", "deprecated", "readOnly", "writeOnly",
		"examples", "format", "contentEncoding", "contentMediaType"}
)

// checkKeywords refuses a schema with a keyword JSON Schema 2020-12 does not define, as Ajv's
// strict mode does. The validator ignores unknown keywords, so a typo ("maxlength") or an
// older draft's keyword ("dependencies") would quietly enforce nothing; and the schema is
// served to agents' tools as it is, which refuse it too. doc is a schema as toJSONValue
// returns it; at is its JSON pointer inside params_schema.
//
// Every unknown keyword is reported, in the order of the schema's pointers, with the line
// lineOf gives the keyword at its pointer (0: unknown, not said).
func checkKeywords(doc any, at string, lineOf func(pointer string) int) []error {
	s, ok := doc.(map[string]any)
	if !ok {
		return nil // true, false, or a wrong type the metaschema check reports
	}
	var errs []error
	for _, k := range sortedKeys(s) {
		v, here := s[k], at+"/"+escapeToken(k)
		switch {
		case slices.Contains(schemaKeywords, k):
			errs = append(errs, checkKeywords(v, here, lineOf)...)
		case slices.Contains(schemaListKeywords, k):
			list, _ := v.([]any)
			for i, sub := range list {
				errs = append(errs, checkKeywords(sub, fmt.Sprintf("%s/%d", here, i), lineOf)...)
			}
		case slices.Contains(schemaMapKeywords, k):
			m, _ := v.(map[string]any)
			for _, name := range sortedKeys(m) {
				errs = append(errs, checkKeywords(m[name], here+"/"+escapeToken(name), lineOf)...)
			}
		case slices.Contains(valueKeywords, k):
		default:
			err := unknownKeyword(k, at)
			if line := lineOf(here); line > 0 {
				err = fmt.Errorf("%w (line %d)", err, line)
			}
			errs = append(errs, err)
		}
	}
	return errs
}

func unknownKeyword(k, at string) error {
	where := at
	if where == "" {
		where = "/"
	}
	hint := ""
	if strings.ContainsAny(k, " ,") {
		// `description: ISO 4217 code, e.g. EUR` inside {...} is two members in YAML.
		hint = ` (in a YAML flow mapping {...} a ", " splits a value into a new key: quote the value)`
	}
	return fmt.Errorf("at %q: unknown keyword %q: JSON Schema 2020-12 has no such keyword%s", where, k, hint)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
