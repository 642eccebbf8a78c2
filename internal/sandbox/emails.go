package sandbox

import (
	"net/http"
	"strings"
	"time"
)

// email is a queued message: a write with no idempotency support and no way to look it up,
// so an ambiguous send can be neither retried safely nor reconciled.
type email struct {
	ID        string
	Status    string
	To        string
	Subject   string
	Body      string
	Reference string // see referenceOf
	CreatedAt time.Time
}

// createEmail answers POST /emails with 202 {"id","status":"queued"}.
func (s *Sandbox) createEmail(c call) reply {
	var in struct {
		To      *string `json:"to"`
		Subject *string `json:"subject"`
		Body    *string `json:"body"`
	}
	if err := decodeObject(c.body, &in); err != nil {
		return errorReply(http.StatusBadRequest, err.Error())
	}
	switch {
	case in.To == nil || !strings.Contains(*in.To, "@"):
		return errorReply(http.StatusBadRequest, "to is required and must be an email address")
	case in.Subject == nil || strings.TrimSpace(*in.Subject) == "":
		return errorReply(http.StatusBadRequest, "subject is required")
	case in.Body == nil:
		return errorReply(http.StatusBadRequest, "body is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &email{
		ID:        s.newID("E", s.nextEmail),
		Status:    "queued",
		To:        *in.To,
		Subject:   *in.Subject,
		Body:      *in.Body,
		Reference: referenceOf(c.r),
		CreatedAt: time.Now().UTC(),
	}
	s.nextEmail++
	s.emails = append(s.emails, e)
	return jsonReply(http.StatusAccepted, map[string]string{"id": e.ID, "status": e.Status})
}
