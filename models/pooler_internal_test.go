package models

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
)

func TestTransactionPooledAndListenURL(t *testing.T) {
	const (
		direct = "postgres://idemgate@db:5432/idemgate?sslmode=disable"
		pooled = "postgres://idemgate@pgbouncer:6432/idemgate?sslmode=disable&default_query_exec_mode=exec"
		simple = "postgres://idemgate@pgbouncer:6432/idemgate?default_query_exec_mode=simple_protocol"
		listen = "postgres://idemgate@db1:5432,db2:5432/idemgate?target_session_attrs=read-write"
	)
	for _, c := range []struct {
		name          string
		url, listen   string
		pooled        bool
		wantListenURL string
	}{
		{"direct: listens on the database URL", direct, "", false, direct},
		{"direct with a listen URL: that one", direct, listen, false, listen},
		{"pooled (exec): no listener, waiters poll", pooled, "", true, ""},
		{"pooled (simple protocol): no listener", simple, "", true, ""},
		{"pooled with a listen URL: that one", pooled, listen, true, listen},
		{"describe_exec is no pooler's mode", "postgres://db/x?default_query_exec_mode=describe_exec", "", false,
			"postgres://db/x?default_query_exec_mode=describe_exec"},
		{"sqlite", "idemgate.db", "", false, "idemgate.db"},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.pooled, TransactionPooled(c.url))
			assert.Equal(t, c.wantListenURL, ListenURL(c.url, c.listen))
		})
	}
}

func TestCommitCutOffSaysWhatMayHaveBeenRecorded(t *testing.T) {
	broken := commitCutOff(Postgres, "submit", io.ErrUnexpectedEOF)
	assert.Equal(t, CodeUnavailable, ErrorCode(broken))
	assert.True(t, MaybeRecorded(broken), "the connection broke with COMMIT in flight: it may have committed")
	assert.Contains(t, broken.Error(), "may have been recorded")

	answered := commitCutOff(Postgres, "submit", &pgconn.PgError{Code: "40001", Message: "could not serialize access"})
	assert.False(t, MaybeRecorded(answered), "the server answered the COMMIT: it rolled back")
	assert.Equal(t, CodeUnavailable, ErrorCode(answered))

	assert.False(t, MaybeRecorded(commitCutOff(SQLite, "submit", errors.New("database is locked"))),
		"a failed SQLite commit did not commit")
	assert.False(t, MaybeRecorded(unavailable("submit", context.DeadlineExceeded)))
}

func TestPoolerErrorsSayWhatToChange(t *testing.T) {
	for _, code := range []string{"42P05", "26000"} {
		err := unavailable("authenticate", &pgconn.PgError{Code: code, Message: `prepared statement "stmtcache_1" already exists`})
		assert.Contains(t, err.Error(), "default_query_exec_mode=exec", code)
	}
	assert.NotContains(t, unavailable("authenticate", &pgconn.PgError{Code: "57P01"}).Error(), "default_query_exec_mode")
}
