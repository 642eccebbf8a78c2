package openapispec

// Media types.
const (
	appJSON     = "application/json"
	problemJSON = "application/problem+json"
)

// header is a response header object.
func header(description string, required bool, schema obj) obj {
	return o("description", description, "required", required, "schema", schema)
}

// responseHeaders is components.headers: each response header, and optional variants of
// Location and Retry-After for the responses where only some problems carry them.
func responseHeaders() obj {
	return o(
		"Location", location(true),
		"Retry-After", retryAfter(true),
		"Idempotent-Replayed", replayed(),
		"Preference-Applied", preferenceApplied(),
		"Location-If-In-Flight", location(false),
		"Retry-After-If-In-Flight", retryAfter(false),
		"WWW-Authenticate", wwwAuthenticate(),
	)
}

// headerRef points at a header of components.headers.
func headerRef(name string) obj { return o("$ref", "#/components/headers/"+name) }

// The response headers of the API. Each takes whether it is always present in the response
// it is attached to.
func location(required bool) obj {
	return header("The operation to poll: `/v1/operations/{id}`.", required,
		o("type", "string", "format", "uri-reference", "pattern", "^/v1/operations/op_[0-9A-Z]{26}$"))
}

func retryAfter(required bool) obj {
	return header("Seconds to wait before asking again, with the same key.", required, o("type", "integer", "minimum", 1))
}

func wwwAuthenticate() obj {
	return header("The scheme to authenticate with (RFC 6750 §3): `Bearer realm=\"idemgate\"`, and "+
		"`error=\"invalid_token\"` when the key sent is unknown or revoked.", true,
		o("type", "string", "pattern", "^Bearer realm=\"idemgate\""))
}

func replayed() obj {
	return header("This is the recorded operation of an earlier request with the same key and params: nothing ran again.",
		true, o("type", "string", "enum", list("true")))
}

func preferenceApplied() obj {
	return header("Echoes the `Prefer` that applied: `respond-async` or `wait=N` with the N used (absent when none was sent).",
		false, o("type", "string", "pattern", "^(respond-async|wait=[0-9]+)$"))
}

// parameters is components.parameters.
func parameters() obj {
	return o(
		"IdempotencyKey", o("name", "Idempotency-Key", "in", "header", "required", true,
			"description", "The operation key: names one logical action, stable across retries and restarts "+
				"(e.g. `workflow-8472:create-ticket`), scoped to the tenant. 1–255 printable ASCII characters, "+
				"sent bare (`abc`) or as an RFC 8941 string (`\"abc\"`); both name the key `abc`. Missing: "+
				"`idempotency-key-missing`; malformed: `idempotency-key-invalid`; beginning with `compensate:`, which "+
				"the gateway keeps for the compensations it records: `idempotency-key-reserved`.",
			"schema", o("type", "string", "minLength", 1, "pattern", "^[ -~]+$"),
			"example", "workflow-8472:create-ticket"),
		"CompensationKey", o("name", "Idempotency-Key", "in", "header", "required", false,
			"description", "The compensation's operation key; `compensate:<id>` when absent, so that a repeated "+
				"request returns the same compensation. Another key beginning with `compensate:` is "+
				"`idempotency-key-reserved`.",
			"schema", o("type", "string", "minLength", 1, "pattern", "^[ -~]+$")),
		"Prefer", o("name", "Prefer", "in", "header", "required", false,
			"description", "RFC 7240. `wait=N` (seconds, 0–60, default 10; more is applied as 60): how long the "+
				"request may wait for the operation to become terminal. `respond-async` means `wait=0`.",
			"schema", o("type", "string"),
			"examples", o("wait", o("value", "wait=10"), "async", o("value", "respond-async"))),
		"OperationKey", o("name", "key", "in", "path", "required", true,
			"description", "The operation key, percent-encoded as a path segment (`a/b` is `a%2Fb`).",
			"schema", o("type", "string", "minLength", 1, "maxLength", 255, "pattern", "^[ -~]+$"),
			"example", "workflow-8472:create-ticket"),
		"OperationID", o("name", "id", "in", "path", "required", true,
			"description", "The operation's id (`op_…`). Another tenant's id is not found, exactly as a missing one.",
			"schema", o("type", "string")),
	)
}

// securitySchemes is components.securitySchemes: the bearer API key.
func securitySchemes() obj {
	return o("bearer", o("type", "http", "scheme", "bearer", "bearerFormat", "idg_ + 43 url-safe base64 characters",
		"description", "An API key of one principal of one tenant, scoped to a list of tools. A missing, unknown "+
			"or revoked key is `401 unauthenticated`."))
}
