package openapispec

import (
	"fmt"
	"slices"
	"strings"

	"github.com/idemgate/idemgate/handlers/problems"
)

// problem is the schema of every problem details object (RFC 9457). Its type is one of the
// problem types of the problems table; the extension members appear exactly where docs/API.md says.
func problem() obj {
	var types []any
	var table strings.Builder
	table.WriteString("RFC 9457 problem details. `type` names one of these problem types; the gateway " +
		"serves a page explaining each at that path:\n\n| type | status | title |\n|---|---|---|\n")
	for _, t := range problems.All() {
		types = append(types, t.URI())
		fmt.Fprintf(&table, "| `%s` | %d | %s |\n", t.URI(), t.Status, t.Title)
	}
	var opTypes []any
	for _, slug := range operationProblems {
		opTypes = append(opTypes, problems.PathPrefix+slug)
	}
	opMembers := list("operation_id", "state", "safe_to_retry_with_new_key")
	return o("type", "object", "additionalProperties", false,
		"description", table.String(),
		"required", list("type", "title", "status", "detail"),
		"properties", o(
			"type", o("type", "string", "format", "uri-reference", "enum", types),
			"title", o("type", "string"),
			"status", o("type", "integer"),
			"detail", text("What went wrong with this request, for the agent's developer."),
			"operation_id", text("The existing operation the problem concerns: poll it rather than inventing a new key."),
			"state", schemaRef("OperationState"),
			"safe_to_retry_with_new_key", o("type", "boolean", "const", false,
				"description", "Always false: a problem about an existing operation is never solved by a new key."),
			"errors", o("type", "array", "items", schemaRef("ParamError"), "minItems", 1,
				"description", "What is wrong with the params (`invalid-params` only)."),
			"rule", text("The policy rule or budget that refused the call (`policy-denied` only)."),
			"reason", text("Why the policy refuses it, in the operator's words (`policy-denied` only)."),
		),
		"allOf", list(
			o("if", o("properties", o("type", o("const", problems.PathPrefix+problems.PolicyDenied))),
				"then", o("required", list("rule", "reason")),
				"else", o("not", o("anyOf", list(o("required", list("rule")), o("required", list("reason")))))),
			o("if", o("properties", o("type", o("const", problems.PathPrefix+problems.InvalidParams))),
				"then", o("required", list("errors")),
				"else", o("not", o("required", list("errors")))),
			o("if", o("properties", o("type", o("enum", opTypes))),
				"then", o("required", opMembers),
				"else", o("not", o("anyOf", list(
					o("required", list("operation_id")), o("required", list("state")), o("required", list("safe_to_retry_with_new_key")))))),
		),
	)
}

// problemResponse is a response of the given problem types, which must share one status, with
// headers. Its schema narrows Problem to those types, so an answer of any other type fails
// validation.
func problemResponse(headers obj, slugs ...string) obj {
	status := 0
	var desc []string
	for _, slug := range slugs {
		t, ok := problems.Lookup(slug)
		if !ok {
			panic("openapispec: no problem type " + slug)
		}
		if status != 0 && t.Status != status {
			panic(fmt.Sprintf("openapispec: problem types of one response differ in status: %v", slugs))
		}
		status = t.Status
		desc = append(desc, fmt.Sprintf("`%s` (%s)", slug, t.Title))
	}
	description := "Problem " + strings.Join(desc, ", ") + "."
	if allOperationProblems(slugs) {
		description += " It names the existing operation: poll it, never retry with a new key."
	}
	r := o("description", description)
	if len(headers) > 0 {
		r = r.with("headers", headers)
	}
	return r.with("content", o(problemJSON, problemMedia(slugs...)))
}

// problemMedia is the media type object of a problem of the given types, which share one
// status.
func problemMedia(slugs ...string) obj {
	var types []any
	for _, slug := range slugs {
		types = append(types, problems.PathPrefix+slug)
	}
	narrow := o("properties", o("type", o("enum", types), "status", o("const", problemStatus(slugs[0]))))
	return o("schema", o("allOf", list(schemaRef("Problem"), narrow)))
}

func allOperationProblems(slugs []string) bool {
	for _, s := range slugs {
		if !slices.Contains(operationProblems, s) {
			return false
		}
	}
	return true
}

// problemStatus is the status of a problem type.
func problemStatus(slug string) int {
	t, ok := problems.Lookup(slug)
	if !ok {
		panic("openapispec: no problem type " + slug)
	}
	return t.Status
}
