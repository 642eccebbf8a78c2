package models

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/jackc/pgx/v5"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	"gorm.io/plugin/dbresolver"
)

// Dialect names the database engine behind a ledger.
type Dialect string

// The supported engines.
const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// DefaultDSN is the embedded default: an SQLite file in the working directory (docs/CLI.md).
const DefaultDSN = "idemgate.db"

// IsPostgresURL reports whether dsn selects PostgreSQL (a postgres:// or postgresql:// URL).
func IsPostgresURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Open connects to the database named by dsn: a postgres:// or postgresql:// URL selects
// PostgreSQL (the URL may name a primary and its standbys: see pgconn.go), anything else is an
// SQLite file path (optionally prefixed with "sqlite:" or "file:"). It does not migrate; see
// Migrate.
func Open(ctx context.Context, dsn string) (*gorm.DB, Dialect, error) {
	return OpenWith(ctx, dsn, Options{})
}

// Options tune OpenWith. The zero value is what Open uses.
type Options struct {
	// QueryTracer sees every statement sent to PostgreSQL, BEGIN and COMMIT included, whether
	// it came through GORM or the ledger's direct reads (tests count round trips with it).
	QueryTracer pgx.QueryTracer
	// WrapSQLite, when set, wraps both of SQLite's connection pools, the writer's and the
	// readers' (tests count round trips with it: SQLite's driver has no tracer).
	WrapSQLite func(gorm.ConnPool) gorm.ConnPool
	// Dial, when set, makes the connections to PostgreSQL in place of the ledger's own dialer
	// (and without its keepalive settings): tests dial from a network namespace with it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, dsn string, opts Options) (*gorm.DB, Dialect, error) {
	if dsn == "" {
		dsn = DefaultDSN
	}
	cfg := &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true, // our functions open the transactions they need, no more
		NowFunc:                func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
		TranslateError:         true,
	}
	if IsPostgresURL(dsn) {
		sqlDB, err := openPostgres(dsn, opts.QueryTracer, opts.Dial)
		if err != nil {
			return nil, "", err
		}
		db, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), cfg)
		if err != nil {
			sqlDB.Close()
			return nil, "", fmt.Errorf("ledger: open postgres: %w", err)
		}
		return db, Postgres, nil
	}
	return openSQLite(ctx, dsn, cfg, opts)
}

// sqliteReaders is how many connections read an SQLite ledger beside its one writer.
const sqliteReaders = 4

// SQLiteReaders is sqliteReaders, for the SQLite floor of cmd/idembench.
const SQLiteReaders = sqliteReaders

// SQLitePragmas are the settings of every connection to an SQLite ledger, appended to its path:
// WAL lets readers proceed beside the writer; busy_timeout makes a second process wait for the
// write lock instead of failing; foreign keys are off by default in SQLite. The readers also
// take SQLiteReaderPragmas. Exported so that cmd/idembench's SQLite floor opens its file as the
// ledger does.
const (
	SQLitePragmas       = "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)"
	SQLiteReaderPragmas = "&_pragma=query_only(1)"
)

// openSQLite opens an SQLite ledger as two pools over one file: one connection that every
// transaction and write goes through, and a few read-only connections for the statements
// outside transactions (GORM's dbresolver sends each where it belongs). SQLite has one
// writer; a single writing connection serialises our transactions in-process, which avoids
// SQLITE_BUSY on lock upgrades (other processes wait on busy_timeout). WAL lets the readers
// proceed beside it. Without the readers, reads and writes queue for the one connection, and
// database/sql hands a freed connection to a random waiter: a storm of a thousand duplicate
// requests polling their operation kept the write that would settle it waiting for seconds.
func openSQLite(ctx context.Context, dsn string, cfg *gorm.Config, opts Options) (*gorm.DB, Dialect, error) {
	path := strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite:"), "file:")
	readPath := path
	if !strings.Contains(path, "?") {
		path += SQLitePragmas
		readPath += SQLitePragmas + SQLiteReaderPragmas
	}
	drv, err := sqliteDriver()
	if err != nil {
		return nil, "", err
	}
	// The writer first: its first connection switches the file to WAL before a reader, which
	// may not write, opens it. Closing the writer's pool (the *sql.DB every caller reaches
	// through db.DB()) closes the readers' too.
	wc := &writerConnector{dsn: path, drv: drv}
	writerDB := sql.OpenDB(wc)
	readerDB := sql.OpenDB(&writerConnector{dsn: readPath, drv: drv})
	wc.readers = readerDB
	fail := func(err error) (*gorm.DB, Dialect, error) {
		writerDB.Close()
		return nil, "", fmt.Errorf("ledger: open sqlite %s: %w", dsn, err)
	}
	writerDB.SetMaxOpenConns(1)
	readerDB.SetMaxOpenConns(sqliteReaders)
	readerDB.SetMaxIdleConns(sqliteReaders)
	if err := pingSQLite(ctx, writerDB); err != nil {
		return fail(err)
	}
	if err := pingSQLite(ctx, readerDB); err != nil {
		return fail(err)
	}
	var writer, reader gorm.ConnPool = writerDB, readerDB
	if opts.WrapSQLite != nil {
		writer, reader = opts.WrapSQLite(writerDB), opts.WrapSQLite(readerDB)
	}
	db, err := gorm.Open(&sqlite.Dialector{DSN: path, Conn: writer}, cfg)
	if err != nil {
		return fail(err)
	}
	if err := db.Use(dbresolver.Register(dbresolver.Config{
		Replicas: []gorm.Dialector{&sqlite.Dialector{DSN: readPath, Conn: reader}},
	})); err != nil {
		return fail(err)
	}
	return db, SQLite, nil
}

// pingSQLite opens db's first connection. Two processes opening one new file at the same
// moment (a serve and a worker started together) can find it locked while the other switches
// it to WAL, and SQLite answers that with SQLITE_BUSY at once rather than through
// busy_timeout (seen in TestLedgerKeyMadeOnceAndShared): the open is tried again for as long
// as busy_timeout would have waited.
func pingSQLite(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(10 * time.Second)
	for wait := 5 * time.Millisecond; ; wait = min(wait*2, 200*time.Millisecond) {
		err := db.PingContext(ctx)
		if err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// sqliteDriver is the pure-Go SQLite driver registered under sqlite.DriverName.
func sqliteDriver() (driver.Driver, error) {
	db, err := sql.Open(sqlite.DriverName, "")
	if err != nil {
		return nil, fmt.Errorf("ledger: sqlite driver: %w", err)
	}
	defer db.Close()
	return db.Driver(), nil
}

// writerConnector opens connections to one SQLite file. The writer's also owns the readers'
// pool: database/sql closes a pool's connector with the pool, so closing the writer closes
// both, whoever holds the handle.
type writerConnector struct {
	dsn     string
	drv     driver.Driver
	readers *sql.DB
}

var _ driver.Connector = (*writerConnector)(nil)

func (c *writerConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c *writerConnector) Driver() driver.Driver                        { return c.drv }

// Close closes the readers' pool, if this is the writer's connector.
func (c *writerConnector) Close() error {
	if c.readers == nil {
		return nil
	}
	return c.readers.Close()
}
