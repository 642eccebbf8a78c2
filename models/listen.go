package models

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// notifyChannel carries the ids of operations whose changes just committed.
const notifyChannel = "idemgate_operations"

// ListenerApplicationName is the application_name of a gateway's LISTEN connection, so that
// operators (and tests) can tell it apart in pg_stat_activity.
const ListenerApplicationName = "idemgate-listener"

// keysChannel carries the ids of API keys just revoked, so every replica forgets them.
const keysChannel = "idemgate_api_keys"

// listenerCheck is how often an idle listener makes sure it still sits on the primary: after
// a switchover that left the old primary running, it would otherwise go on listening there
// and hear nothing the new primary sends.
const listenerCheck = 5 * time.Second

// ListenURL is the URL a gateway's listener connects to, given the database URL and the
// listen URL an operator set (IDEMGATE_DATABASE_LISTEN_URL). LISTEN needs a session of its
// own: the listen URL when one is set; else the database URL itself, unless that one goes
// through a transaction pooler (TransactionPooled), which lends each transaction whichever
// server connection is free, so that notifications would arrive on a connection nobody
// listens on. Then it is "": no listener, waiters poll (docs/CLI.md).
func ListenURL(databaseURL, listenURL string) string {
	switch {
	case listenURL != "":
		return listenURL
	case TransactionPooled(databaseURL):
		return ""
	}
	return databaseURL
}

// Listen relays changes committed by other processes to this ledger's hub, so waiters wake at
// once instead of at their next poll, and their API-key revocations to its key cache, until
// ctx ends. It reconnects after failures, to whichever host of dsn is the primary by then. On
// SQLite (a single process) it returns at once: waiters there poll.
func (l *Ledger) Listen(ctx context.Context, dsn string, log *slog.Logger) {
	if l.dialect != Postgres {
		return
	}
	cfg, err := pgConfig(dsn, ListenerApplicationName, nil)
	if err != nil {
		log.Error("ledger listener cannot start; waiters poll", "err", err)
		return
	}
	const first, most = 100 * time.Millisecond, 2 * time.Second
	backoff, down := first, false
	for ctx.Err() == nil {
		err := l.listenOnce(ctx, cfg, func() {
			backoff = first
			if down {
				log.Info("ledger listener connected again")
				down = false
			}
		})
		if ctx.Err() != nil {
			return
		}
		if !down {
			// Once per outage: while no primary answers, every retry would fail alike.
			log.Warn("ledger listener disconnected; waiters fall back to polling until it reconnects", "err", err)
			down = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, most)
	}
}

// listenOnce listens on one connection until it fails; connected is called once LISTEN holds.
func (l *Ledger) listenOnce(ctx context.Context, cfg *pgx.ConnConfig, connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel+"; LISTEN "+keysChannel+"; LISTEN "+replaysChannel); err != nil {
		return err
	}
	// Revocations and changed answers made while no listener was connected were not heard:
	// believe no key and no replay answer learned before this point. From here every one is
	// heard, until this connection fails: then the replay cache stops until the next one.
	l.keys.flush()
	l.replays.setLive(true)
	defer l.replays.setLive(false)
	connected()
	for {
		wctx, cancel := context.WithTimeout(ctx, listenerCheck)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			if err := stillPrimary(ctx, conn); err != nil {
				return err
			}
			continue
		default:
			return err
		}
		switch n.Channel {
		case keysChannel:
			l.keys.forget(n.Payload)
		case replaysChannel:
			l.replays.forget(n.Payload)
		default:
			l.changes.Publish(n.Payload)
		}
	}
}

// stillPrimary fails when conn's server no longer accepts writes, or does not answer.
func stillPrimary(ctx context.Context, conn *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, listenerCheck)
	defer cancel()
	var readOnly string
	if err := conn.QueryRow(ctx, "SHOW transaction_read_only").Scan(&readOnly); err != nil {
		return fmt.Errorf("listener health check: %w", err)
	}
	if readOnly == "on" {
		return errors.New("the server the listener is on accepts no writes any more: it is no longer the primary")
	}
	return nil
}
