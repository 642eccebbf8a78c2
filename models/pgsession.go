package models

import (
	"database/sql"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// PostgreSQL's own deadlines on each of the ledger's sessions (docs/OPERATIONS.md, "When the
// ledger is unreachable"), sent as startup parameters unless the URL sets them:
//
//   - statement_timeout and lock_timeout end a statement that runs, or waits for a lock,
//     longer than anything the ledger does (a migration's index build lifts them for itself);
//   - idle_in_transaction_session_timeout ends a session left inside a transaction, whose
//     client is gone, with its locks;
//   - the TCP keepalives and tcp_user_timeout make the server drop a client that vanished
//     (a partition, a gateway's host powered off) within pgDeadPeer, instead of keeping its
//     backend for the two hours of the kernel's default keepalive: after a partition the
//     server held twice the backends the gateway's pools did (issue 48).
//
// A URL for a transaction pooler (TransactionPooled) gets none: PgBouncer refuses startup
// parameters it does not know, and a SET would stay on whichever server session it lent.
// There they belong on the server or the role (ALTER ROLE … SET).
var sessionParams = []struct {
	name  string
	value string
}{
	{"statement_timeout", ms(60 * time.Second)},
	{"lock_timeout", ms(10 * time.Second)},
	{"idle_in_transaction_session_timeout", ms(60 * time.Second)},
	{"tcp_keepalives_idle", secs(pgDeadPeer / 3)},
	{"tcp_keepalives_interval", secs(pgDeadPeer / 3)},
	{"tcp_keepalives_count", "2"},
	{"tcp_user_timeout", ms(pgDeadPeer)},
}

func ms(d time.Duration) string   { return strconv.FormatInt(d.Milliseconds(), 10) }
func secs(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// setSessionParams adds sessionParams to cfg's startup parameters, except those the URL sets,
// unless cfg is for a transaction pooler.
func setSessionParams(cfg *pgx.ConnConfig) {
	if sessionless(cfg.DefaultQueryExecMode) {
		return
	}
	for _, p := range sessionParams {
		if _, set := cfg.RuntimeParams[p.name]; !set {
			cfg.RuntimeParams[p.name] = p.value
		}
	}
}

// sessionlessPool reports whether c, a handle bound to one connection (gorm's Connection),
// talks to PostgreSQL in a mode a transaction pooler can carry (TransactionPooled).
func sessionlessPool(c *gorm.DB) bool {
	conn, ok := c.Statement.ConnPool.(*sql.Conn)
	if !ok {
		return false
	}
	pooled := false
	_ = conn.Raw(func(driverConn any) error {
		if dc, ok := driverConn.(*stdlib.Conn); ok {
			pooled = sessionless(dc.Conn().Config().DefaultQueryExecMode)
		}
		return nil
	})
	return pooled
}
