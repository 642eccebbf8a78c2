package models

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Repeats are the requests that came again with an operation's key and its params: answered
// from the record (a replay, or a wait on the attempt in flight), never sent again. The
// operation page shows them on its timeline ("asked again 6 times"), so that a reviewer sees
// an agent retrying an UNKNOWN refund. They are counted in memory and written in batches
// (KeepRepeats), not by each request: a replay answered from the replay cache costs no round
// trip, and a count in the hot path would cost one. What a process had not written when it
// died is lost; the count is what the console tells a person, not a record the protocol
// reads, and the requests themselves are in the access log.
//
// Two cadences: the counts of operations not yet settled (in flight, UNKNOWN, waiting for a
// reviewer) are written every few seconds, since a reviewer deciding one wants to see an agent
// still asking; those of settled operations, which are history, far less often, or as soon as
// many are waiting. Replays of settled operations are nearly every repeat under load, spread
// over many keys: written every 2 s they were one row per distinct operation per 2 s, which
// cost a replay more than answering it (docs/PERFORMANCE.md).

// maxPendingRepeats bounds the operations a process counts between two writes; beyond it
// (a flood of distinct keys between two writes) the counts of new ones are dropped and said
// in the log.
const maxPendingRepeats = 100_000

// settledRepeatsSoon is how many settled operations' counts may wait for their cadence: with
// more, they are written at the next tick (about 5 MB of counts).
const settledRepeatsSoon = 50_000

// Repeats is what was counted of one operation's repeated requests.
type Repeats struct {
	N           int64
	First, Last time.Time
}

// repeatCount is one operation's repeats: how many, the first and the last (Unix nanoseconds),
// and whether any came while the operation was not settled.
type repeatCount struct {
	tenant          string
	n               int64
	firstNS, lastNS int64
	open            bool
}

// repeatTally holds the counts not yet written, those of open operations apart from those of
// settled ones, so that a tick takes the open ones without looking at the others. An operation
// is in one of the two at most: asked again while open, it is open.
type repeatTally struct {
	mu            sync.Mutex
	open, settled map[string]*repeatCount
	dropped       int64
}

// add counts d's repeats of operation id.
func (t *repeatTally) add(id string, d repeatCount) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.open[id]; ok {
		*c = c.plus(d)
		return
	}
	if c, ok := t.settled[id]; ok {
		if !d.open {
			*c = c.plus(d)
			return
		}
		delete(t.settled, id)
		d = c.plus(d)
	} else if len(t.open)+len(t.settled) >= maxPendingRepeats {
		t.dropped += d.n
		return
	}
	into := &t.settled
	if d.open {
		into = &t.open
	}
	if *into == nil {
		*into = map[string]*repeatCount{}
	}
	(*into)[id] = &d
}

// plus is c and d together: their counts added, the earlier first, the later last, open if
// either is.
func (c repeatCount) plus(d repeatCount) repeatCount {
	if c.n == 0 {
		return d
	}
	if d.n == 0 {
		return c
	}
	return repeatCount{tenant: c.tenant, n: c.n + d.n, firstNS: min(c.firstNS, d.firstNS),
		lastNS: max(c.lastNS, d.lastNS), open: c.open || d.open}
}

// take removes and returns the counts to write now: those of open operations, and the
// settled ones too when settled is true or when too many of them wait.
func (t *repeatTally) take(settled bool) (map[string]*repeatCount, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out, dropped := t.open, t.dropped
	t.open, t.dropped = nil, 0
	if settled || len(t.settled) >= settledRepeatsSoon {
		if out == nil {
			out = t.settled
		} else {
			maps.Copy(out, t.settled) // no id is in both
		}
		t.settled = nil
	}
	return out, dropped
}

// peek is the count not yet written of operation id.
func (t *repeatTally) peek(id string) (repeatCount, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.open[id]
	if !ok {
		c, ok = t.settled[id]
	}
	if !ok {
		return repeatCount{}, false
	}
	return *c, true
}

// NoteRepeat counts a request that came again with op's key and params, now.
func (l *Ledger) NoteRepeat(op *Operation) {
	at := l.clock().UnixNano()
	l.repeats.add(op.ID, repeatCount{tenant: op.Tenant, n: 1, firstNS: at, lastNS: at, open: !op.State.Terminal()})
}

// FlushRepeats writes every count noted since the last write and says how many requests went
// uncounted since (maxPendingRepeats). On failure the counts are kept for the next write.
func (l *Ledger) FlushRepeats(ctx context.Context) (dropped int64, err error) {
	return l.flushRepeats(ctx, true)
}

// flushRepeats writes the counts of open operations, and of settled ones too when settled is
// true (or too many wait): one statement per 500 operations, adding to what other processes
// wrote.
func (l *Ledger) flushRepeats(ctx context.Context, settled bool) (dropped int64, err error) {
	pending, dropped := l.repeats.take(settled)
	ids := slices.Sorted(maps.Keys(pending)) // one order for every writer: no deadlock between replicas
	const chunkSize = 500
	var sql strings.Builder
	for i := 0; i < len(ids); i += chunkSize {
		chunk := ids[i:min(i+chunkSize, len(ids))]
		sql.Reset()
		sql.WriteString(`INSERT INTO operation_repeats (operation_id, tenant, n, first_ns, last_ns) VALUES `)
		args := make([]any, 0, 5*len(chunk))
		for j, id := range chunk {
			if j > 0 {
				sql.WriteString(", ")
			}
			c := pending[id]
			sql.WriteString("(?, ?, ?, ?, ?)")
			args = append(args, id, c.tenant, c.n, c.firstNS, c.lastNS)
		}
		sql.WriteString(` ON CONFLICT (operation_id) DO UPDATE SET n = operation_repeats.n + excluded.n,
			first_ns = CASE WHEN excluded.first_ns < operation_repeats.first_ns THEN excluded.first_ns ELSE operation_repeats.first_ns END,
			last_ns = CASE WHEN excluded.last_ns > operation_repeats.last_ns THEN excluded.last_ns ELSE operation_repeats.last_ns END`)
		if err := l.scope(ctx).Exec(sql.String(), args...).Error; err != nil {
			for _, id := range ids[i:] { // this chunk and the ones after it: kept for the next write
				l.repeats.add(id, *pending[id])
			}
			return dropped, unavailable("write repeated requests", err)
		}
	}
	return dropped, nil
}

// KeepRepeats writes the counts of open operations every open interval and those of settled
// ones every settled interval (sooner when many wait) until ctx ends, and everything once more
// then.
func (l *Ledger) KeepRepeats(ctx context.Context, open, settled time.Duration, log *slog.Logger) {
	flush := func(ctx context.Context, all bool) {
		dropped, err := l.flushRepeats(ctx, all)
		if dropped > 0 {
			log.Warn("repeated requests not counted: too many operations between two writes", "dropped", dropped)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("writing the counts of repeated requests; kept for the next write", "err", err)
		}
	}
	t := time.NewTicker(open)
	defer t.Stop()
	lastAll := time.Now()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			flush(final, true)
			return
		case now := <-t.C:
			all := now.Sub(lastAll) >= settled
			if all {
				lastAll = now
			}
			flush(ctx, all)
		}
	}
}

// RepeatsOf is what was counted of operation id's repeated requests, within s: what the
// processes wrote, and what this one has not written yet. Zero N when none came.
func (l *Ledger) RepeatsOf(ctx context.Context, s Scope, id string) (Repeats, error) {
	var rows []struct {
		Tenant          string
		N               int64
		FirstNS, LastNS int64
	}
	err := l.scope(ctx).Raw(`SELECT tenant, n, first_ns, last_ns FROM operation_repeats WHERE operation_id = ?`, id).Scan(&rows).Error
	if err != nil {
		return Repeats{}, unavailable("read repeated requests", err)
	}
	c, _ := l.repeats.peek(id) // this process's, not written yet
	for _, r := range rows {
		c = c.plus(repeatCount{tenant: r.Tenant, n: r.N, firstNS: r.FirstNS, lastNS: r.LastNS})
	}
	if c.n == 0 || !s.Allows(c.tenant) {
		return Repeats{}, nil
	}
	return Repeats{N: c.n, First: time.Unix(0, c.firstNS).UTC(), Last: time.Unix(0, c.lastNS).UTC()}, nil
}
