package models

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// How the ledger talks to PostgreSQL when the URL names a primary and its standbys (docs/CLI.md).
// Finding the primary is pgx's: it tries the hosts in order and, with
// target_session_attrs=read-write, keeps the first that accepts writes. What is ours is
// leaving a server that stopped being the primary, promptly and without a restart:
//
//   - a server that answers "read-only transaction" (SQLSTATE 25006: a standby, or an old
//     primary fenced with default_transaction_read_only) or that ends a session with a FATAL
//     error (57P01 admin shutdown, 57P02 crash shutdown, …) closes that connection, and
//     every other connection opened before it is discarded when next taken from the pool
//     (writerFence): they go to the same server, and a read there may be stale;
//   - a connection idle for more than a second is pinged before reuse (pgx's stdlib does
//     that), and one older than pgMaxLifetime is replaced whatever happens;
//   - a host that vanished without a word (power loss, partition) is noticed by TCP
//     keepalives on idle connections and, on Linux, TCP_USER_TIMEOUT on busy ones.

const (
	// pgConnectTimeout bounds one connection attempt to one host when the URL sets no
	// connect_timeout: a dead host must not hold a request that the next host could serve.
	pgConnectTimeout = 5 * time.Second
	// pgMaxLifetime replaces every pooled connection this often, a backstop for one that sits
	// on an old primary and never hears the news.
	pgMaxLifetime = 5 * time.Minute
	// pgDeadPeer is how long a peer may stay silent (keepalives unanswered, sent data
	// unacknowledged) before its connection is dropped.
	pgDeadPeer = 15 * time.Second
)

// PoolApplicationName is the application_name of the ledger's pooled connections when the
// URL sets none, so operators can find them in pg_stat_activity.
const PoolApplicationName = "idemgate"

// pgConfig parses a PostgreSQL URL into the configuration of every connection the ledger
// opens to it: several hosts mean read-write unless the URL says otherwise, and each
// connection reports to fence.
func pgConfig(dsn, application string, fence *writerFence) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("ledger: postgres dsn: %w", err)
	}
	if cfg.ValidateConnect == nil && severalHosts(cfg) && !strings.Contains(dsn, "target_session_attrs") {
		// Any of several hosts would do only for reads; the ledger writes.
		cfg.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = pgConnectTimeout
	}
	cfg.DialFunc = (&net.Dialer{
		Timeout:         cfg.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: pgDeadPeer / 3, Interval: pgDeadPeer / 3, Count: 2},
		Control:         userTimeout(pgDeadPeer),
	}).DialContext
	if application != "" {
		cfg.RuntimeParams["application_name"] = application
	} else if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = PoolApplicationName
	}
	setSessionParams(cfg)
	if fence != nil {
		cfg.AfterConnect = fence.born
		cfg.OnPgError = fence.onError
	}
	return cfg, nil
}

// TransactionPooled reports whether dsn selects one of pgx's query modes that a transaction
// pooler can carry: default_query_exec_mode=exec or simple_protocol. Such a URL is taken to
// go through one (PgBouncer with pool_mode = transaction): every statement is parsed at each
// run on whichever server connection the pooler lends, and nothing is kept on a server
// session between transactions. PgBouncer forwards the server's own greeting, so it cannot be
// told apart on the wire: the URL says so.
func TransactionPooled(dsn string) bool {
	if !IsPostgresURL(dsn) {
		return false
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return false
	}
	return sessionless(cfg.DefaultQueryExecMode)
}

// sessionless reports whether mode keeps nothing on the server session: no named prepared
// statement, no unnamed one expected to survive a round trip.
func sessionless(mode pgx.QueryExecMode) bool {
	return mode == pgx.QueryExecModeExec || mode == pgx.QueryExecModeSimpleProtocol
}

func severalHosts(cfg *pgx.ConnConfig) bool {
	for _, f := range cfg.Fallbacks {
		if f.Host != cfg.Host || f.Port != cfg.Port {
			return true
		}
	}
	return false
}

// writerFence retires the connections that may sit on a server that no longer takes writes.
// Each connection is stamped with the fence's generation when it opens; a sign that the
// server stopped being the primary raises the generation, and a connection stamped with an
// older one is discarded when next taken from the pool instead of being used.
type writerFence struct {
	gen atomic.Uint64
}

const fenceKey = "idemgate.fence"

// born stamps a new connection (pgconn's AfterConnect).
func (f *writerFence) born(_ context.Context, c *pgconn.PgConn) error {
	c.CustomData()[fenceKey] = f.gen.Load()
	return nil
}

// onError sees every error a server sends (pgconn's OnPgError); false closes the connection.
func (f *writerFence) onError(_ *pgconn.PgConn, e *pgconn.PgError) bool {
	if leftPrimary(e) {
		f.gen.Add(1)
		return false
	}
	return !strings.EqualFold(e.Severity, "FATAL") // pgx's own rule: a FATAL error ends the session
}

// leftPrimary reports whether e says its server no longer accepts writes from us.
func leftPrimary(e *pgconn.PgError) bool {
	switch e.Code {
	case "25006", // read_only_sql_transaction: a standby, or a fenced old primary
		"57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
		return true
	}
	return false
}

// reset runs before a pooled connection is reused (stdlib's ResetSession hook).
func (f *writerFence) reset(_ context.Context, c *pgx.Conn) error {
	if born, _ := c.PgConn().CustomData()[fenceKey].(uint64); born < f.gen.Load() {
		return driver.ErrBadConn
	}
	return nil
}

// openPostgres returns the pool of connections to dsn, fenced.
func openPostgres(dsn string, tracer pgx.QueryTracer, dial pgconn.DialFunc) (*sql.DB, error) {
	fence := &writerFence{}
	cfg, err := pgConfig(dsn, "", fence)
	if err != nil {
		return nil, err
	}
	if dial != nil {
		cfg.DialFunc = dial
	}
	cfg.Tracer = tracer
	opts := []stdlib.OptionOpenDB{stdlib.OptionResetSession(fence.reset)}
	if sessionless(cfg.DefaultQueryExecMode) {
		opts = append(opts, stdlib.OptionAfterConnect(bytesAsText))
	}
	db := stdlib.OpenDB(*cfg, opts...)
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	db.SetConnMaxIdleTime(5 * time.Minute)
	db.SetConnMaxLifetime(pgMaxLifetime)
	return db, nil
}

// bytesAsText sends []byte parameters as text. In the sessionless modes pgx does not ask the
// server for a statement's parameter types; it encodes each value by its Go type, and []byte
// by default as bytea, whose text form ("\x7b22…") a TEXT column would then store as it is:
// params and results, which the ledger keeps as JSON text, would come back as hex. With the
// server describing the statement (the default mode) the parameter is text and the bytes go
// as they are; this makes the sessionless modes do the same. The ledger has no bytea column
// (TestSchemaHasNoByteaColumn keeps it so).
func bytesAsText(_ context.Context, c *pgx.Conn) error {
	c.TypeMap().RegisterDefaultPgType([]byte(nil), "text")
	return nil
}

// checkWritable fails with SQLSTATE 25006 on a server that accepts no writes. Raised by the
// server rather than decided here, so that the error takes the path of every other 25006:
// the readiness probe of an idle gateway retires its connections to an old primary just as
// a failed write would.
const checkWritable = `DO $$BEGIN
	IF current_setting('transaction_read_only') = 'on' THEN
		RAISE EXCEPTION 'the database server accepts no writes (a standby, or an old primary fenced read-only)'
			USING ERRCODE = 'read_only_sql_transaction';
	END IF;
END$$`
