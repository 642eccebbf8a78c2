package client

import "strings"

// OperationKey names one logical action. Key is what idemgate deduplicates on; the workflow run
// and step, when set, are recorded with the operation so people can see a workflow's steps
// together in the console.
type OperationKey struct {
	Key           string
	WorkflowRunID string
	StepID        string
}

// Key derives the operation key of step stepID of workflow run runID: "<runID>:<stepID>",
// such as "workflow-8472:create-ticket". Both parts come from the agent's workflow, not from
// the request, so a retry or a restarted agent derives the same key for the same action.
// The key must be at most 255 printable ASCII characters.
func Key(runID, stepID string) OperationKey {
	return OperationKey{Key: runID + ":" + stepID, WorkflowRunID: runID, StepID: stepID}
}

// PlainKey is an operation key that belongs to no workflow.
func PlainKey(key string) OperationKey { return OperationKey{Key: key} }

// String returns the key.
func (k OperationKey) String() string { return k.Key }

// headerValue writes key as an RFC 8941 string, so that every printable key, one starting with
// a quote or with spaces at its ends included, arrives exactly as it is.
func headerValue(key string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
}
