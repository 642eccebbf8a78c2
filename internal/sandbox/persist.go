package sandbox

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
)

// Load returns a sandbox that keeps what it committed (its tickets, refunds and emails, the
// answer it gave each Idempotency-Key, its counters) in the file at path: read now, when the
// file exists, and written again after every request that may have changed it. The demo keeps
// it beside its ledger, so that a restarted demo's sandbox remembers what its ledger does: a
// request the ledger replays is one the sandbox counted. The request log and queued faults are
// not kept.
func Load(path string, opts ...Option) (*Sandbox, error) {
	s := New(opts...)
	s.persistPath = path
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	var snap snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return nil, fmt.Errorf("sandbox: %s: %w", path, err)
	}
	s.tickets, s.refunds, s.emails, s.closes = snap.Tickets, snap.Refunds, snap.Emails, snap.Closes
	s.nextTicket, s.nextRefund, s.nextEmail = snap.NextTicket, snap.NextRefund, snap.NextEmail
	for key, r := range snap.TicketKeys {
		var fp [32]byte
		if n, err := hex.Decode(fp[:], []byte(r.Fingerprint)); err != nil || n != len(fp) {
			return nil, fmt.Errorf("sandbox: %s: the fingerprint of key %q is not 32 bytes of hex", path, key)
		}
		s.ticketKeys[key] = storedReply{fingerprint: fp, reply: reply{status: r.Status, header: r.Header, body: r.Body}}
	}
	return s, nil
}

// snapshot is what Load reads and persist writes.
type snapshot struct {
	Tickets                           []*ticket
	Refunds                           []*refund
	Emails                            []*email
	Closes                            int
	NextTicket, NextRefund, NextEmail int
	TicketKeys                        map[string]storedSnapshot
}

type storedSnapshot struct {
	Fingerprint string
	Status      int
	Header      http.Header
	Body        []byte
}

// persist writes what the sandbox committed to its file, when it has one (Load): a new file
// renamed over the old, so a crash leaves one or the other whole.
func (s *Sandbox) persist() error {
	if s.persistPath == "" {
		return nil
	}
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	s.mu.Lock()
	snap := snapshot{Tickets: s.tickets, Refunds: s.refunds, Emails: s.emails, Closes: s.closes,
		NextTicket: s.nextTicket, NextRefund: s.nextRefund, NextEmail: s.nextEmail, TicketKeys: map[string]storedSnapshot{}}
	for key, r := range s.ticketKeys {
		snap.TicketKeys[key] = storedSnapshot{Fingerprint: hex.EncodeToString(r.fingerprint[:]), Status: r.reply.status,
			Header: r.reply.header, Body: r.reply.body}
	}
	b, err := json.Marshal(snap)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.persistPath), filepath.Base(s.persistPath)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), s.persistPath)
}
