// Package process holds the process-level tests: real idemgate binaries started, stopped and
// killed as production would, against real PostgreSQL (see process_test's package comment).
package process
