package models

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Code classifies a ledger error. The web layer maps each code to one HTTP status and problem
// type in a single table; nothing else inspects error strings.
type Code string

// The codes the ledger returns.
const (
	// CodeNotFound: no such record within the caller's tenant.
	CodeNotFound Code = "not_found"
	// CodeConflict: a record with that identity already exists (tenant name, API key prefix).
	CodeConflict Code = "conflict"
	// CodeInvalid: the caller's input breaks a ledger rule.
	CodeInvalid Code = "invalid"
	// CodeStale: a compare-and-set found another state or fencing token: someone else decided
	// first. It is an answer, not something to retry blindly.
	CodeStale Code = "stale"
	// CodeKeyMismatch: the operation key is known with another fingerprint.
	CodeKeyMismatch Code = "key_mismatch"
	// CodeKeyExpired: the key's record passed its retention; only a tombstone remains.
	CodeKeyExpired Code = "key_expired"
	// CodeNotCancellable: the operation is past the point where it may be cancelled.
	CodeNotCancellable Code = "not_cancellable"
	// CodeNotCompensable: the operation cannot be compensated (not SUCCEEDED, no template).
	CodeNotCompensable Code = "not_compensable"
	// CodeConnectionNotConfigured: the tool's connection needs a tenant secret the tenant has
	// not set (docs/TOOLS.md); nothing was recorded.
	CodeConnectionNotConfigured Code = "connection_not_configured"
	// CodeUnavailable: the database could not be reached or answered unexpectedly. Callers
	// fail closed: nothing may be executed on an answer the ledger could not give.
	CodeUnavailable Code = "unavailable"
)

// Error is the ledger's one error type.
type Error struct {
	Code    Code
	Message string
	// Op is the operation concerned, when there is one, so that problems can carry its id and
	// state.
	Op  *Operation
	Err error
	// MaybeRecorded says that a write's commit was cut off on its way (CodeUnavailable):
	// the connection broke after COMMIT was sent and before the server's answer came, so
	// the write may be durable or not. Nothing else tells which; a retry with the same
	// Idempotency-Key finds out safely (docs/API.md).
	MaybeRecorded bool
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Message, e.Err)
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the Code of err, or "" when err is not a ledger error.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// ErrorOperation returns the operation a ledger error concerns, or nil.
func ErrorOperation(err error) *Operation {
	var e *Error
	if errors.As(err, &e) {
		return e.Op
	}
	return nil
}

// Errorf returns a ledger error of code, for the layers that decide a refusal of their own
// in the ledger's terms (jobs: a tenant without its connection's secret).
func Errorf(code Code, format string, args ...any) error { return errorf(code, format, args...) }

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// MaybeRecorded reports whether err is a write whose commit was cut off on its way, so that
// what it wrote may be durable (see Error.MaybeRecorded).
func MaybeRecorded(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.MaybeRecorded
}

// unavailable wraps a database failure. Every database error that is not a recognised answer
// (not found, duplicate, lost compare-and-set) becomes CodeUnavailable: the gateway fails closed.
func unavailable(what string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Code: CodeUnavailable, Message: "ledger: " + what + poolerHint(err), Err: err}
}

// commitCutOff wraps the failure of a commit that was sent: unless the server answered it (a
// PostgreSQL error: it rolled back), the connection broke with the COMMIT in flight, and the
// transaction may have committed. On SQLite a failed commit did not commit.
func commitCutOff(d Dialect, what string, err error) error {
	var pgErr *pgconn.PgError
	if d != Postgres || errors.As(err, &pgErr) {
		return unavailable(what, err)
	}
	return &Error{Code: CodeUnavailable, MaybeRecorded: true, Err: err,
		Message: "ledger: " + what + ": the connection broke while the commit was in flight; it may have been recorded"}
}

// poolerHint explains the errors a transaction pooler causes when the URL does not say it is
// there: pgx's cached prepared statements, made on one server connection, meet another one
// (42P05 duplicate_prepared_statement, 26000 invalid_sql_statement_name).
func poolerHint(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P05" || pgErr.Code == "26000") {
		return " (prepared statements do not survive here: if the database URL goes through a transaction pooler " +
			"such as PgBouncer with pool_mode = transaction, add default_query_exec_mode=exec to it)"
	}
	return ""
}

// isUniqueViolation reports whether err is a unique constraint refusing an insert: SQLSTATE
// 23505 on PostgreSQL, SQLITE_CONSTRAINT_UNIQUE (2067) on SQLite.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23505"
	}
	var sqliteErr interface{ Code() int }
	if errors.As(err, &sqliteErr) {
		return sqliteErr.Code() == 2067
	}
	return false
}
