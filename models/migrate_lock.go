package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// migrateLockID is the PostgreSQL advisory lock that serialises migrations across replicas.
const migrateLockID = 0x1de36a7e

// migrateLock takes the migration lock and returns the function that releases it.
//
// The lock is transaction-scoped (pg_try_advisory_xact_lock), held by a transaction of its own
// on a connection of its own that stays open, idle, while the steps run on other connections,
// and rolls back when the migration ends. That is what works through a transaction pooler
// (PgBouncer with pool_mode = transaction): an open transaction keeps its one server
// connection, where a session lock would be taken on whichever server connection the pooler
// lent one statement and released, or not, on another. A process that dies holding the lock
// loses its connection, and its transaction ends with it.
//
// The idle holder must not keep a snapshot: an index step built CONCURRENTLY waits for every
// transaction holding an older one, and would wait for the holder, which waits for the build.
// Its statements go in the simple protocol, which drops each statement's portal (and its
// snapshot) when it completes; the extended protocol keeps the last one open until the next.
// It also turns off idle_in_transaction_session_timeout for itself (SET LOCAL), so a server
// that sets one does not end it during a long index build.
//
// It asks without waiting, again and again, each try a transaction that ends at once: a
// session blocked on the lock would hold a snapshot, which the holder's index build waits for.
func migrateLock(ctx context.Context, db *gorm.DB) (unlock func(), err error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	for {
		conn, err := sqlDB.Conn(ctx)
		if err != nil {
			return nil, fmt.Errorf("lock: %w", err)
		}
		var got bool
		err = conn.Raw(func(driverConn any) error {
			dc, ok := driverConn.(*stdlib.Conn)
			if !ok {
				return errors.New("the postgres pool does not hold pgx connections")
			}
			c := dc.Conn()
			for _, stmt := range []string{"BEGIN", "SET LOCAL idle_in_transaction_session_timeout = 0"} {
				if _, err := c.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
					return err
				}
			}
			if err := c.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", pgx.QueryExecModeSimpleProtocol, migrateLockID).Scan(&got); err != nil {
				return err
			}
			if !got {
				return rollbackOrClose(c)
			}
			return nil
		})
		if err == nil && got {
			return func() {
				_ = conn.Raw(func(driverConn any) error { return rollbackOrClose(driverConn.(*stdlib.Conn).Conn()) })
				conn.Close()
			}, nil
		}
		if err != nil {
			_ = conn.Raw(func(driverConn any) error {
				if dc, ok := driverConn.(*stdlib.Conn); ok {
					return rollbackOrClose(dc.Conn())
				}
				return nil
			})
			conn.Close()
			return nil, fmt.Errorf("lock: %w", err)
		}
		conn.Close()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("lock: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// rollbackOrClose ends the lock's transaction on c, or closes c when it cannot (the pool then
// discards it: a connection left in a transaction must not be lent again).
func rollbackOrClose(c *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, "ROLLBACK", pgx.QueryExecModeSimpleProtocol); err != nil {
		_ = c.Close(ctx)
		return err
	}
	return nil
}
