// Package openapispec builds the OpenAPI 3.1 document of idemgate's agent API (docs/API.md): every
// path, header, status and problem type. The problem types, their statuses and titles come from
// the problems table, so the document cannot name one the gateway does not have; the
// conformance test in e2e validates real answers of a running gateway against it.
//
// The document is committed as docs/openapi.json and embedded by package static; run
// `go generate ./static` after changing this package.
package openapispec

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Build returns the document as indented JSON, ending in a newline.
func Build() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(document()); err != nil {
		return nil, fmt.Errorf("openapispec: %w", err)
	}
	return b.Bytes(), nil
}

func document() obj {
	return o(
		"openapi", "3.1.0",
		"info", o(
			"title", "idemgate agent API",
			"version", "1.0.0",
			"summary", "Run agents' state-changing tool calls at most once per operation key.",
			"description", description,
			// The LICENSE file at the repository's root.
			"license", o("name", "Apache License 2.0", "identifier", "Apache-2.0"),
		),
		"servers", list(o("url", "/", "description", "The gateway that serves this document at /openapi.json.")),
		"tags", list(
			o("name", "operations", "description", "Operations: record, run, read, cancel, compensate."),
			o("name", "tools", "description", "The tool catalogue, in several formats."),
			o("name", "mcp", "description", "The Model Context Protocol endpoint."),
			o("name", "service", "description", "Probes and documentation; no API key. (Metrics are served on a listener of their own: serve --metrics-addr.)"),
		),
		"security", list(o("bearer", list())),
		"paths", paths(),
		"components", o(
			"schemas", schemas(),
			"parameters", parameters(),
			"headers", responseHeaders(),
			"securitySchemes", securitySchemes(),
		),
	)
}

const description = "idemgate sits between AI agents and the systems they change. Send each state-changing tool " +
	"call to `POST /v1/operations` with an `Idempotency-Key` naming the logical action, stable across retries and " +
	"restarts. idemgate records it in a durable ledger and runs the downstream side effect at most once per key.\n\n" +
	"**Retry the same logical operation, never a new request that merely looks similar.** After a timeout, a lost " +
	"answer, `409`, `429` or `503`, send the same request with the same key: you get the one operation's outcome. " +
	"Every problem about an existing operation carries `operation_id`, `state` and " +
	"`safe_to_retry_with_new_key: false`: poll that operation, never invent a new key.\n\n" +
	"Errors are RFC 9457 problem details (`application/problem+json`); each `type` is a page at `/problems/<slug>`."
