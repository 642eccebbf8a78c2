package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/idemgate/idemgate/models"
)

// The SQLite floor: the database floor's minimal schema and statements (new_op_spec.sql,
// replay.sql), spelled for SQLite, run through the driver the ledger uses (glebarez/sqlite's
// database/sql driver) on a file opened as the ledger opens its own (models.SQLitePragmas: WAL,
// synchronous NORMAL), with the ledger's arrangement of connections: one writer that every
// transaction goes through, models.SQLiteReaders read-only connections for look-ups. No GORM,
// no gateway: what the database and driver can do for the SQL a gateway cannot avoid.
const sqliteFloorSchema = `
CREATE TABLE operations (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id    TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    params_hash  BLOB    NOT NULL,
    state        TEXT    NOT NULL,
    lease_owner  TEXT,
    lease_until  TIMESTAMP,
    attempt      INTEGER NOT NULL DEFAULT 0,
    result       TEXT,
    created_at   TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at   TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT operations_tenant_key_uq UNIQUE (tenant_id, key)
);
CREATE TABLE attempts (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    operation_id  INTEGER NOT NULL REFERENCES operations(id),
    attempt       INTEGER NOT NULL,
    state         TEXT    NOT NULL,
    lease_owner   TEXT,
    started_at    TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    finished_at   TIMESTAMP,
    error         TEXT,
    CONSTRAINT attempts_op_attempt_uq UNIQUE (operation_id, attempt)
);
CREATE TABLE events (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    operation_id  INTEGER NOT NULL REFERENCES operations(id),
    at            TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    type          TEXT NOT NULL,
    from_state    TEXT,
    to_state      TEXT,
    attempt       INTEGER,
    actor         TEXT NOT NULL,
    detail        TEXT
);
CREATE INDEX events_operation ON events (operation_id, id);
`

// sqliteFloorRows is how many finished operations the replay floor looks up at random, as
// preload.sql's n, unless --preload says otherwise.
const sqliteFloorRows = 200_000

const floorResult = `{"status":200,"headers":{"content-type":"application/json"},"body":{"id":"res_0123456789abcdef","object":"charge","amount":1999,"currency":"usd","status":"succeeded","metadata":{"order":"A-1029384756"}}}`

var floorHash = []byte{0x9f, 0x86, 0xd0, 0x81, 0x88, 0x4c, 0x7d, 0x65, 0x9a, 0x2f, 0xea, 0xa0, 0xc5, 0x5a, 0xd0, 0x15,
	0xa3, 0xbf, 0x4f, 0x1b, 0x2b, 0x0b, 0x82, 0x2c, 0xd1, 0x5d, 0x6c, 0x15, 0xb0, 0xf0, 0x0a, 0x08}

// sqliteFloor measures the SQLite floor's scenarios named by cfg.only (new, replay) on a fresh
// file in a temporary directory, or cfg.database when given.
func sqliteFloor(ctx context.Context, cfg config) ([]result, error) {
	path := cfg.database
	if path == "" {
		dir, err := os.MkdirTemp("", "idembench-floor")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "floor.db")
	}
	writer, err := sql.Open(sqlite.DriverName, path+models.SQLitePragmas)
	if err != nil {
		return nil, err
	}
	defer writer.Close()
	writer.SetMaxOpenConns(1)
	if _, err := writer.ExecContext(ctx, sqliteFloorSchema); err != nil {
		return nil, fmt.Errorf("sqlite floor schema: %w", err)
	}
	readers, err := sql.Open(sqlite.DriverName, path+models.SQLitePragmas+models.SQLiteReaderPragmas)
	if err != nil {
		return nil, err
	}
	defer readers.Close()
	readers.SetMaxOpenConns(models.SQLiteReaders)
	readers.SetMaxIdleConns(models.SQLiteReaders)

	rows := int64(sqliteFloorRows)
	if cfg.preload > 0 {
		rows = cfg.preload
	}
	var results []result
	if slices.Contains(cfg.only, "new") {
		r, err := drive(ctx, scenario{name: "sqlite floor: new operations (new_op_spec.sql)", fn: func(ctx context.Context, i int64) error {
			return floorNewOperation(ctx, writer, i)
		}}, cfg.concurrency, cfg.duration)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	if slices.Contains(cfg.only, "replay") {
		if err := floorPreload(ctx, writer, rows); err != nil {
			return nil, err
		}
		r, err := drive(ctx, scenario{name: "sqlite floor: replays (replay.sql)", fn: func(ctx context.Context, _ int64) error {
			i := rand.Int64N(rows) + 1
			var id, attempt int64
			var state, result string
			var hash []byte
			var updated any
			return readers.QueryRowContext(ctx, `SELECT id, state, params_hash, attempt, result, updated_at FROM operations WHERE tenant_id = ? AND key = ?`,
				"t"+strconv.FormatInt(i%100+1, 10), "k"+strconv.FormatInt(i, 10)).Scan(&id, &state, &hash, &attempt, &result, &updated)
		}}, cfg.concurrency, cfg.duration)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	return results, nil
}

// floorNewOperation is new_op_spec.sql: two transactions, the claim with its attempt and two
// events, then the outcome with its two events.
func floorNewOperation(ctx context.Context, db *sql.DB, i int64) error {
	worker := "gw-" + strconv.FormatInt(i%16, 10)
	tenant := "t" + strconv.Itoa(rand.IntN(100)+1)
	key := strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(i, 10)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var id int64
	err = tx.QueryRowContext(ctx, `INSERT INTO operations (tenant_id, key, params_hash, state, lease_owner, lease_until, attempt)
		VALUES (?, ?, ?, 'RUNNING', ?, ?, 1) ON CONFLICT (tenant_id, key) DO NOTHING RETURNING id`,
		tenant, key, floorHash, worker, time.Now().Add(30*time.Second).UTC()).Scan(&id)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO attempts (operation_id, attempt, state, lease_owner) VALUES (?, 1, 'RUNNING', ?)`, id, worker); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO events (operation_id, type, to_state, attempt, actor, detail) VALUES
		(?, 'created', 'RUNNING', 1, 'api:agent', '{"fingerprint":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}'),
		(?, 'attempt_started', NULL, 1, 'worker:gw', '{"fence": 1}')`, id, id); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	now := time.Now().UTC()
	if _, err := tx.ExecContext(ctx, `UPDATE attempts SET state = 'SUCCEEDED', finished_at = ? WHERE operation_id = ? AND attempt = 1`, now, id); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE operations SET state = 'SUCCEEDED', result = ?, lease_owner = NULL, lease_until = NULL, updated_at = ?
		WHERE id = ? AND state = 'RUNNING' AND attempt = 1`, floorResult, now, id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("compare-and-set touched %d rows: %v", n, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO events (operation_id, type, from_state, to_state, attempt, actor, detail) VALUES
		(?, 'attempt_finished', NULL, NULL, 1, 'worker:gw', '{"class": "succeeded", "status": 201}'),
		(?, 'state_changed', 'RUNNING', 'SUCCEEDED', 1, 'worker:gw', NULL)`, id, id); err != nil {
		return err
	}
	return tx.Commit()
}

// floorPreload is preload.sql: n finished operations, keys reproducible from i.
func floorPreload(ctx context.Context, db *sql.DB, n int64) error {
	_, err := db.ExecContext(ctx, `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?)
		INSERT INTO operations (tenant_id, key, params_hash, state, attempt, result)
		SELECT 't' || (i % 100 + 1), 'k' || i, ?, 'SUCCEEDED', 1, ? FROM s`, n, floorHash, floorResult)
	if err != nil {
		return fmt.Errorf("sqlite floor preload: %w", err)
	}
	_, err = db.ExecContext(ctx, "ANALYZE")
	return err
}
