package models

import "strings"

// SQLitePath returns the file of an SQLite ledger's DSN (DefaultDSN when dsn is empty), and
// false for a PostgreSQL URL or an in-memory database.
func SQLitePath(dsn string) (string, bool) {
	if dsn == "" {
		dsn = DefaultDSN
	}
	if IsPostgresURL(dsn) {
		return "", false
	}
	path, query, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite:"), "file:"), "?")
	if path == "" || path == ":memory:" || strings.Contains(query, "mode=memory") {
		return "", false
	}
	return path, true
}
