package models

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// notifyChannel carries the ids of operations whose changes just committed.
const notifyChannel = "idemgate_operations"

// keysChannel carries the ids of API keys just revoked, so every replica forgets them.
const keysChannel = "idemgate_api_keys"

// pgArray spells ids as a PostgreSQL text[] literal. Operation ids are ULID-based and contain
// no characters that need quoting.
func pgArray(ids []string) string { return "{" + strings.Join(ids, ",") + "}" }

// Listen relays changes committed by other processes to this ledger's hub, so waiters wake at
// once instead of at their next poll, and their API-key revocations to its key cache, until
// ctx ends. It reconnects after failures. On SQLite (a single process) it returns at once:
// waiters there poll.
func (l *Ledger) Listen(ctx context.Context, dsn string, log *slog.Logger) {
	if l.dialect != Postgres {
		return
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.listenOnce(ctx, dsn)
		if ctx.Err() != nil {
			return
		}
		log.Warn("ledger listener disconnected; waiters fall back to polling until it reconnects", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (l *Ledger) listenOnce(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel+"; LISTEN "+keysChannel); err != nil {
		return err
	}
	// Revocations made while no listener was connected were not heard: believe no key
	// learned before this point.
	l.keys.flush()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		switch n.Channel {
		case keysChannel:
			l.keys.forget(n.Payload)
		default:
			l.changes.Publish(n.Payload)
		}
	}
}
