package opview

import (
	"encoding/json"
	"time"

	"github.com/idemgate/idemgate/models"
)

// Event is one line of an operation's timeline as GET /v1/operations/{id}/events answers it.
type Event struct {
	ID        int64           `json:"id"`
	At        time.Time       `json:"at"`
	Type      string          `json:"type"`
	FromState *models.State   `json:"from_state"`
	ToState   *models.State   `json:"to_state"`
	Attempt   *int            `json:"attempt"`
	Actor     string          `json:"actor"`
	Detail    json.RawMessage `json:"detail"`
}

// RenderEvent builds the public view of an event.
func RenderEvent(e models.Event) Event {
	out := Event{ID: e.ID, At: e.At.UTC(), Type: e.Type, FromState: e.FromState, ToState: e.ToState,
		Attempt: e.Attempt, Actor: e.Actor, Detail: jsonNull}
	if e.Detail != nil {
		out.Detail = json.RawMessage(*e.Detail)
	}
	return out
}

// Attempt is one try at the downstream call. Its id is the X-Request-Id that was sent.
type Attempt struct {
	ID               string     `json:"id"`
	Number           int        `json:"number"`
	StartedAt        time.Time  `json:"started_at"`
	FinishedAt       *time.Time `json:"finished_at"`
	Class            *string    `json:"class"`
	DownstreamStatus *int       `json:"downstream_status"`
	LatencyMS        *int64     `json:"latency_ms"`
	Error            *string    `json:"error"`
	TraceID          *string    `json:"trace_id"`
}

// RenderAttempt builds the public view of an attempt.
func RenderAttempt(a models.Attempt) Attempt {
	return Attempt{ID: a.ID, Number: a.Number, StartedAt: a.StartedAt.UTC(), FinishedAt: utc(a.FinishedAt),
		Class: a.Class, DownstreamStatus: a.DownstreamStatus, LatencyMS: a.LatencyMS, Error: a.Error, TraceID: a.TraceID}
}
