// Package client is the Go client of idemgate's agent API.
//
// An agent changes the world through idemgate by naming each logical action with an operation
// key that stays the same across retries and restarts. The client derives that key from a
// workflow run id and a step id, so that an agent which crashes and starts again asks for the
// same operations, and idemgate runs each at most once:
//
//	c, err := client.New("http://127.0.0.1:8080", os.Getenv("IDEMGATE_API_KEY"))
//	if err != nil { ... }
//	op, err := c.Do(ctx, "tickets.create", map[string]any{"subject": "Printer on fire"},
//		client.Key("workflow-8472", "create-ticket"))
//
// Do sends the call with Prefer: wait=N, waits for the operation to become terminal (polling
// GET /v1/operations/{id} when the gateway answers 202), and on failures that leave the
// outcome open (a transport error or lost answer, 409, 429, 500, 502, 503, 504) sends the same
// request with the same key again, with exponential backoff, full jitter and the gateway's
// Retry-After. It never makes up a new key: a repeated request either finds the operation the
// first one recorded or records it now, so the side effect happens at most once.
//
// After a restart, Resume reads what the ledger holds under a key, so the agent learns which
// steps already took effect from idemgate rather than from its own memory; given the step's
// tool and params, it answers ErrKeyMismatch when the key holds another call.
//
// Every problem type of the API is an error: a *Problem carries the problem details, and
// errors.Is matches it against the sentinels (ErrKeyMismatch, ErrOperationUncertain, …). An
// operation that ended FAILED_FINAL is returned with an error matching ErrOperationFailed; an
// operation still not terminal when the context ends is returned with an error matching its
// state's sentinel (ErrOperationInProgress, ErrOperationUncertain or
// ErrOperationAwaitingApproval) and the context's error.
//
// A Client is safe for concurrent use. The package depends on the standard library only.
package client
