// Package testdb gives each test its own real database: a fresh PostgreSQL schema and a fresh
// SQLite file, migrated, through the same helpers, so every ledger rule is proved on both
// engines.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/fingerprint"
	"gorm.io/gorm"
)

// PostgresEnv names the admin DSN of the test PostgreSQL. Set it to "off" to skip the
// PostgreSQL half of the suite on a machine without one (CI never does).
const PostgresEnv = "IDEMGATE_TEST_POSTGRES"

const defaultPostgres = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Dialects are the engines every ledger test runs on.
var Dialects = []models.Dialect{models.Postgres, models.SQLite}

// AdminDSN is the DSN of the test PostgreSQL's admin database (IDEMGATE_TEST_POSTGRES, or the
// local default), "off" when its tests are skipped.
func AdminDSN() string {
	if admin := os.Getenv(PostgresEnv); admin != "" {
		return admin
	}
	return defaultPostgres
}

// DSN creates an empty database for t on engine d and returns the DSN that selects it. The
// PostgreSQL one is a schema of its own (search_path), dropped when the test ends.
func DSN(t testing.TB, d models.Dialect) string {
	t.Helper()
	if d == models.SQLite {
		return filepath.Join(t.TempDir(), "idemgate.db")
	}
	admin := AdminDSN()
	if admin == "off" {
		t.Skipf("%s=off: PostgreSQL tests skipped", PostgresEnv)
	}
	ctx := context.Background()
	db, _, err := models.Open(ctx, admin)
	if err != nil {
		t.Fatalf("testdb: PostgreSQL is required (set %s, or %s=off to skip): %v", PostgresEnv, PostgresEnv, err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	if err := db.Exec("CREATE SCHEMA " + schema).Error; err != nil {
		t.Fatalf("testdb: PostgreSQL is required (set %s, or %s=off to skip): create schema: %v", PostgresEnv, PostgresEnv, err)
	}
	t.Cleanup(func() {
		db, _, err := models.Open(context.Background(), admin)
		if err != nil {
			return
		}
		sqlDB, _ := db.DB()
		defer sqlDB.Close()
		db.Exec("DROP SCHEMA " + schema + " CASCADE")
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("testdb: %s: %v", PostgresEnv, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Open returns a migrated database of its own for t on engine d, closed when t ends.
func Open(t testing.TB, d models.Dialect) *gorm.DB {
	t.Helper()
	dsn := DSN(t, d)
	db, dialect, err := models.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("testdb: open %s: %v", d, err)
	}
	if dialect != d {
		t.Fatalf("testdb: opened %s, want %s", dialect, d)
	}
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	if err := models.Migrate(context.Background(), db, d); err != nil {
		t.Fatalf("testdb: migrate %s: %v", d, err)
	}
	return db
}

// Ledger returns a ledger over a fresh, migrated database of its own, with its key.
func Ledger(t testing.TB, d models.Dialect) *models.Ledger {
	t.Helper()
	db := Open(t, d)
	return models.New(models.Config{DB: db, Dialect: d, Key: Key(t, db)})
}

// Key returns the key of the migrated ledger in db.
func Key(t testing.TB, db *gorm.DB) *fingerprint.Key {
	t.Helper()
	k, err := models.LedgerKey(context.Background(), db, nil)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	return k
}

// Each runs fn as a subtest on every engine.
func Each(t *testing.T, fn func(t *testing.T, d models.Dialect)) {
	for _, d := range Dialects {
		t.Run(string(d), func(t *testing.T) { fn(t, d) })
	}
}

// Name returns a short random name for tenants and keys in tests.
func Name(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%s", prefix, hex.EncodeToString(b[:]))
}
