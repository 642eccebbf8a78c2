// Package e2e holds the end-to-end tests and benchmarks of the agent API: a whole gateway
// (internal/gatewaytest, built by internal/app exactly as serve builds it) on PostgreSQL and
// on SQLite, with the sandbox downstream counting the side effects it actually commits.
package e2e
