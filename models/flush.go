package models

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// pending is what a ledger transaction defers to its end (Ledger.flush): its events, written
// together, and its webhook announcements, written only when a live subscription may want
// them. A new operation's transactions each append two events and announce one change; writing
// them as they came cost a round trip per event and one for the subscriptions, where the
// database's floor (the minimal SQL of docs/PERFORMANCE.md) pays one INSERT for the events and nothing else.
// Nothing reads an event back within the transaction that appends it.
type pending struct {
	events []Event
	// closing is an attempt to close (closeAttempt), with the events.
	closing       *attemptClose
	announcements []announcement
	// forget names the terminal operations whose cached replay answers the transaction
	// changes (forgetReplays): this process drops them once it has committed.
	forget []string
}

// forgetReplays drops the replay answers of terminal operations ids (or forgetAll) from every
// replica's cache once tx commits: the notification goes out with the commit, and this
// process drops them as soon as the commit returns (see replayCache).
func (l *Ledger) forgetReplays(tx *gorm.DB, ids ...string) error {
	if v, ok := tx.Get(pendingKey); ok {
		p := v.(*pending)
		p.forget = append(p.forget, ids...)
	}
	if l.dialect != Postgres {
		return nil
	}
	for _, id := range ids {
		if err := tx.Exec("SELECT pg_notify(?, ?)", replaysChannel, id).Error; err != nil {
			return fmt.Errorf("ledger: notify the replicas' replay caches: %w", err)
		}
	}
	return nil
}

// announcement is one deferred call of announceNow: op as it stood after its change.
type announcement struct {
	at      time.Time
	op      Operation
	notices []notice
}

const pendingKey = "idemgate:pending"

// flush writes what tx deferred, and on PostgreSQL notifies the other replicas of the changed
// operations that one of their waiters watches (Ledger.Watch), all in one statement:
//
//   - the closing of an open attempt (closeAttempt), whose row count decides whether the
//     transaction stands;
//   - the events, in one multi-row INSERT, in the order they were appended;
//   - pg_notify only for operations whose watched flag is set. A notification makes
//     PostgreSQL serialise the commits of every notifying transaction (the async queue's
//     lock is held from pre-commit to the end of the commit, fsync included), which cost
//     the floor itself 60 % of its rate; without a watcher nobody is listening for it;
//   - whether any tenant it announced to has a live webhook subscription. Only then are the
//     subscriptions read and the outbox written (announceNow), still in this transaction: the
//     answer is the database's within the transaction, so a subscription created on another
//     replica a moment ago is seen exactly as a separate SELECT would see it.
//
// On SQLite (one process: no notifications) the events are one INSERT and the announcements
// read the subscriptions as before.
func (l *Ledger) flush(tx *gorm.DB, p *pending, changed []string) error {
	if l.dialect != Postgres {
		if len(p.events) > 0 {
			if err := tx.CreateInBatches(&p.events, flushEventRows).Error; err != nil {
				return err
			}
		}
		return l.announceAll(tx, p.announcements)
	}
	if len(p.events) == 0 && len(changed) == 0 && len(p.announcements) == 0 && p.closing == nil {
		return nil
	}
	events := p.events
	if len(events) > flushEventRows {
		// A sweep of many operations: the first events in batches (a statement takes at most
		// 65,535 parameters), the last ones with the rest of the statement, in order.
		head := events[:len(events)-flushEventRows]
		if err := tx.CreateInBatches(&head, flushEventRows).Error; err != nil {
			return err
		}
		events = events[len(events)-flushEventRows:]
	}
	var q strings.Builder
	args := make([]any, 0, len(events)*9+3)
	q.WriteString("WITH ")
	closed := "1"
	if c := p.closing; c != nil {
		q.WriteString("fin AS (UPDATE attempts SET finished_at = ?, class = ?, latency_ms = ?, downstream_status = ?, error = ?, trace_id = ? " +
			"WHERE id = ? AND finished_at IS NULL RETURNING 1), ")
		args = append(args, c.finishedAt, c.class, c.latencyMS, c.status, c.err, c.traceID, c.id)
		closed = "(SELECT count(*) FROM fin)"
	}
	if len(events) > 0 {
		q.WriteString("ev AS (INSERT INTO events (operation_id, tenant, at, type, from_state, to_state, attempt, actor, detail) VALUES ")
		for i, e := range events {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
			args = append(args, e.OperationID, e.Tenant, e.At, e.Type, e.FromState, e.ToState, e.Attempt, e.Actor, e.Detail)
		}
		q.WriteString("), ")
	}
	// A watcher's flag is set by an UPDATE of the operation's row (Watch), so it is ordered
	// against this transaction's own UPDATE of that row: either the flag committed first and
	// this transaction's row carries it, or the watcher's UPDATE waited for this commit and
	// reads its outcome.
	//
	// One parameter per id (IN (?, ?)), not one array (= ANY(?)): a generic plan of a
	// statement cannot know an array's length, assumes ten ids and, on a ledger that looked
	// empty when it was planned, prefers reading the whole table to ten probes; with the ids
	// counted it probes operations_watched, which holds only the watched rows
	// (TestHotStatementsDoNotSeqScanAnUnanalyzedLedger).
	q.WriteString("n AS (SELECT pg_notify(?, id) FROM operations WHERE id IN ? AND watched) " +
		"SELECT (SELECT count(*) FROM n), EXISTS (SELECT 1 FROM webhook_subscriptions WHERE tenant IN ? AND deleted_at IS NULL), " + closed)
	args = append(args, notifyChannel, changed, announcedTenants(p.announcements)) // none: IN (NULL)
	subscribed, closedRows, err := flushRow(tx, q.String(), args)
	if err != nil {
		return fmt.Errorf("ledger: write events and notify: %w", err)
	}
	if closedRows != 1 {
		return p.closing.stale // the whole transaction rolls back
	}
	if !subscribed && !l.mailsAbout(p.announcements) {
		return nil
	}
	return l.announceAll(tx, p.announcements)
}

// flushEventRows is how many events flush writes in its one statement (9 parameters each).
const flushEventRows = 1000

// announcedTenants lists the distinct tenants of announcements, never empty (no tenant is
// named "").
func announcedTenants(list []announcement) []string {
	out := []string{""}
	for _, a := range list {
		if !slices.Contains(out, a.op.Tenant) {
			out = append(out, a.op.Tenant)
		}
	}
	return out
}

// announceAll writes the outbox messages of the deferred announcements, in order.
func (l *Ledger) announceAll(tx *gorm.DB, list []announcement) error {
	for i := range list {
		if err := l.announceNow(tx, list[i].at, &list[i].op, list[i].notices...); err != nil {
			return err
		}
	}
	return nil
}

// flushRow runs flush's statement and reads whether a subscription may want its announcements
// and how many attempts it closed (1 when it closed none: none was asked).
func flushRow(tx *gorm.DB, q string, args []any) (subscribed bool, closed int64, err error) {
	rows, err := tx.Raw(q, args...).Rows()
	if err != nil {
		return false, 0, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return false, 0, err
		}
		return false, 0, errors.New("no row")
	}
	var notified int64
	if err := rows.Scan(&notified, &subscribed, &closed); err != nil {
		return false, 0, err
	}
	return subscribed, closed, rows.Close()
}

// mailsAbout reports whether the announcements include one that emails reviewers: then they
// are written whether or not a webhook subscription wants them.
func (l *Ledger) mailsAbout(list []announcement) bool {
	if !l.mail {
		return false
	}
	for _, a := range list {
		for _, n := range a.notices {
			if slices.Contains(EmailEvents, n.typ) {
				return true
			}
		}
	}
	return false
}
