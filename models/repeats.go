package models

import (
	"context"
	"log/slog"
	"maps"
	"slices"
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

// maxPendingRepeats bounds the operations a process counts between two writes; beyond it
// (a flood of distinct keys between two writes) the counts of new ones are dropped and said
// in the log.
const maxPendingRepeats = 100_000

// Repeats is what was counted of one operation's repeated requests.
type Repeats struct {
	N           int64
	First, Last time.Time
}

// repeatCount is one operation's repeats: how many, the first and the last (Unix nanoseconds).
type repeatCount struct {
	tenant          string
	n               int64
	firstNS, lastNS int64
}

// repeatTally holds the counts not yet written.
type repeatTally struct {
	mu      sync.Mutex
	pending map[string]*repeatCount
	dropped int64
}

// add counts n repeats of operation id of tenant, between first and last.
func (t *repeatTally) add(id, tenant string, n, first, last int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending == nil {
		t.pending = map[string]*repeatCount{}
	}
	add := repeatCount{tenant: tenant, n: n, firstNS: first, lastNS: last}
	c, ok := t.pending[id]
	switch {
	case ok:
		*c = c.plus(add)
	case len(t.pending) >= maxPendingRepeats:
		t.dropped += n
	default:
		t.pending[id] = &add
	}
}

// plus is c and d together: their counts added, the earlier first, the later last.
func (c repeatCount) plus(d repeatCount) repeatCount {
	if c.n == 0 {
		return d
	}
	if d.n == 0 {
		return c
	}
	return repeatCount{tenant: c.tenant, n: c.n + d.n, firstNS: min(c.firstNS, d.firstNS), lastNS: max(c.lastNS, d.lastNS)}
}

// take empties the tally and returns what it held.
func (t *repeatTally) take() (map[string]*repeatCount, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out, dropped := t.pending, t.dropped
	t.pending, t.dropped = nil, 0
	return out, dropped
}

// peek is the count not yet written of operation id.
func (t *repeatTally) peek(id string) (repeatCount, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.pending[id]
	if !ok {
		return repeatCount{}, false
	}
	return *c, true
}

// NoteRepeat counts a request that came again with op's key and params, now.
func (l *Ledger) NoteRepeat(op *Operation) {
	at := l.clock().UnixNano()
	l.repeats.add(op.ID, op.Tenant, 1, at, at)
}

// FlushRepeats writes the counts noted since the last write, one statement per 500
// operations, adding to what other processes wrote, and says how many requests went uncounted
// since (maxPendingRepeats). On failure the counts are kept for the next write.
func (l *Ledger) FlushRepeats(ctx context.Context) (dropped int64, err error) {
	pending, dropped := l.repeats.take()
	ids := slices.Sorted(maps.Keys(pending)) // one order for every writer: no deadlock between replicas
	for i, chunk := range slices.Collect(slices.Chunk(ids, 500)) {
		sql := `INSERT INTO operation_repeats (operation_id, tenant, n, first_ns, last_ns) VALUES `
		args := make([]any, 0, 5*len(chunk))
		for j, id := range chunk {
			if j > 0 {
				sql += ", "
			}
			c := pending[id]
			sql += "(?, ?, ?, ?, ?)"
			args = append(args, id, c.tenant, c.n, c.firstNS, c.lastNS)
		}
		sql += ` ON CONFLICT (operation_id) DO UPDATE SET n = operation_repeats.n + excluded.n,
			first_ns = CASE WHEN excluded.first_ns < operation_repeats.first_ns THEN excluded.first_ns ELSE operation_repeats.first_ns END,
			last_ns = CASE WHEN excluded.last_ns > operation_repeats.last_ns THEN excluded.last_ns ELSE operation_repeats.last_ns END`
		if err := l.scope(ctx).Exec(sql, args...).Error; err != nil {
			for _, id := range ids[i*500:] { // this chunk and the ones after it: kept for the next write
				c := pending[id]
				l.repeats.add(id, c.tenant, c.n, c.firstNS, c.lastNS)
			}
			return dropped, unavailable("write repeated requests", err)
		}
	}
	return dropped, nil
}

// KeepRepeats writes the counted repeats every interval until ctx ends, and once more then.
func (l *Ledger) KeepRepeats(ctx context.Context, every time.Duration, log *slog.Logger) {
	flush := func(ctx context.Context) {
		dropped, err := l.FlushRepeats(ctx)
		if dropped > 0 {
			log.Warn("repeated requests not counted: too many operations between two writes", "dropped", dropped)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("writing the counts of repeated requests; kept for the next write", "err", err)
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			flush(final)
			return
		case <-t.C:
			flush(ctx)
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
