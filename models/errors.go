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
	// not set (SPEC §4a); nothing was recorded.
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

// unavailable wraps a database failure. Every database error that is not a recognised answer
// (not found, duplicate, lost compare-and-set) becomes CodeUnavailable: the gateway fails closed.
func unavailable(what string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Code: CodeUnavailable, Message: "ledger: " + what, Err: err}
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
