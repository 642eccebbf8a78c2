package models

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Dialect names the database engine behind a ledger.
type Dialect string

// The supported engines.
const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// DefaultDSN is the embedded default: an SQLite file in the working directory (SPEC §9).
const DefaultDSN = "idemgate.db"

// Open connects to the database named by dsn: a postgres:// or postgresql:// URL selects
// PostgreSQL, anything else is an SQLite file path (optionally prefixed with "sqlite:" or
// "file:"). It does not migrate; see Migrate.
func Open(ctx context.Context, dsn string) (*gorm.DB, Dialect, error) {
	return OpenWith(ctx, dsn, Options{})
}

// Options tune OpenWith. The zero value is what Open uses.
type Options struct {
	// QueryTracer sees every statement sent to PostgreSQL, BEGIN and COMMIT included, whether
	// it came through GORM or the ledger's direct reads (tests count round trips with it).
	QueryTracer pgx.QueryTracer
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
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		pgCfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, "", fmt.Errorf("ledger: postgres dsn: %w", err)
		}
		pgCfg.Tracer = opts.QueryTracer
		sqlDB := stdlib.OpenDB(*pgCfg)
		db, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), cfg)
		if err != nil {
			sqlDB.Close()
			return nil, "", fmt.Errorf("ledger: open postgres: %w", err)
		}
		sqlDB.SetMaxOpenConns(32)
		sqlDB.SetMaxIdleConns(32)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
		return db, Postgres, nil
	}
	path := strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite:"), "file:")
	if !strings.Contains(path, "?") {
		// WAL lets readers proceed beside the writer; busy_timeout makes a second process wait
		// for the write lock instead of failing; foreign keys are off by default in SQLite.
		path += "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)"
	}
	db, err := gorm.Open(sqlite.Open(path), cfg)
	if err != nil {
		return nil, "", fmt.Errorf("ledger: open sqlite %s: %w", dsn, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, "", fmt.Errorf("ledger: sqlite pool: %w", err)
	}
	// SQLite has one writer. A single connection serialises our transactions in-process, which
	// avoids SQLITE_BUSY on lock upgrades; other processes wait on busy_timeout.
	sqlDB.SetMaxOpenConns(1)
	if err := sqlDB.PingContext(ctx); err != nil {
		return nil, "", fmt.Errorf("ledger: open sqlite %s: %w", dsn, err)
	}
	return db, SQLite, nil
}
