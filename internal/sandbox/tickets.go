package sandbox

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ticket is a support ticket, the sandbox's well-behaved resource: creation honours
// Idempotency-Key, so idemgate may retry it safely after an ambiguous attempt.
type ticket struct {
	ID          string     `json:"id"`
	Status      string     `json:"status"` // "open" or "closed"
	Subject     string     `json:"subject"`
	Body        string     `json:"body,omitempty"`
	Priority    string     `json:"priority"`
	Reference   string     `json:"reference"` // see referenceOf
	Operation   string     `json:"operation"` // X-Idemgate-Operation of the creating request
	CreatedAt   time.Time  `json:"created_at"`
	ClosedAt    *time.Time `json:"closed_at,omitempty"`
	CloseReason string     `json:"close_reason,omitempty"`
}

// storedReply is the first answer given for an idempotency key, replayed to every repeat.
type storedReply struct {
	fingerprint [32]byte // of the canonical request body, to spot a key reused for other data
	reply       reply
}

// createTicket answers POST /tickets.
func (s *Sandbox) createTicket(c call) reply {
	var in struct {
		Subject  *string `json:"subject"`
		Body     string  `json:"body"`
		Priority string  `json:"priority"`
	}
	if err := decodeObject(c.body, &in); err != nil {
		return errorReply(http.StatusBadRequest, err.Error())
	}
	if in.Subject == nil || strings.TrimSpace(*in.Subject) == "" {
		return errorReply(http.StatusBadRequest, "subject is required")
	}
	if in.Priority == "" {
		in.Priority = "normal"
	}
	key := c.r.Header.Get("Idempotency-Key")
	fp := fingerprint(c.body)

	// The lock is held from the key check to storing the answer: a concurrent duplicate
	// waits here and then finds the stored answer instead of committing a second ticket.
	s.mu.Lock()
	defer s.mu.Unlock()
	if key != "" {
		if prev, ok := s.ticketKeys[key]; ok {
			if prev.fingerprint != fp {
				return errorReply(http.StatusUnprocessableEntity,
					"idempotency key already used with a different request body")
			}
			rep := prev.reply
			rep.header = rep.header.Clone()
			rep.header.Set("Idempotent-Replayed", "true")
			return rep
		}
	}
	t := &ticket{
		ID:        s.newID("T", s.nextTicket),
		Status:    "open",
		Subject:   *in.Subject,
		Body:      in.Body,
		Priority:  in.Priority,
		Reference: referenceOf(c.r),
		Operation: c.r.Header.Get("X-Idemgate-Operation"),
		CreatedAt: time.Now().UTC(),
	}
	s.nextTicket++
	s.tickets = append(s.tickets, t)
	rep := jsonReply(http.StatusCreated, t)
	if key != "" {
		s.ticketKeys[key] = storedReply{fingerprint: fp, reply: rep}
	}
	return rep
}

// findTicket answers GET /tickets: with ?reference=, the ticket created under that downstream
// key or by that operation (the first one, should a blind retry have created several);
// without it, every ticket.
func (s *Sandbox) findTicket(c call) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	return findByReference(c, "tickets", s.tickets, func(t *ticket) (string, string) { return t.Reference, t.Operation })
}

// getTicket answers GET /tickets/{id}.
func (s *Sandbox) getTicket(c call) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.ticketLocked(c.id); t != nil {
		return jsonReply(http.StatusOK, t)
	}
	return errorReply(http.StatusNotFound, "not found")
}

// closeTicket answers POST /tickets/{id}/close. Closing is naturally idempotent: closing a
// closed ticket answers the same ticket and commits nothing new.
func (s *Sandbox) closeTicket(c call) reply {
	var in struct {
		Reason string `json:"reason"`
	}
	if len(strings.TrimSpace(string(c.body))) > 0 { // the body is optional
		if err := decodeObject(c.body, &in); err != nil {
			return errorReply(http.StatusBadRequest, err.Error())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.ticketLocked(c.id)
	if t == nil {
		return errorReply(http.StatusNotFound, "not found")
	}
	if t.Status != "closed" {
		now := time.Now().UTC()
		t.Status, t.ClosedAt, t.CloseReason = "closed", &now, in.Reason
		s.closes++
	}
	return jsonReply(http.StatusOK, t)
}

func (s *Sandbox) ticketLocked(id string) *ticket {
	// IDs are sequential from T-1001 (after the stamp, if any), so the index is computed
	// rather than searched.
	n, err := strconv.Atoi(strings.TrimPrefix(id, "T-"+s.idStamp))
	if err != nil || id != s.newID("T", n) || n < 1001 || n-1001 >= len(s.tickets) {
		return nil
	}
	return s.tickets[n-1001]
}

// fingerprint hashes a JSON body in canonical form (encoding/json sorts object keys), so the
// same parameters sent with different key order or spacing count as the same request.
func fingerprint(body []byte) [32]byte {
	var v any
	if err := json.Unmarshal(body, &v); err == nil {
		if canon, err := json.Marshal(v); err == nil {
			body = canon
		}
	}
	return sha256.Sum256(body)
}
