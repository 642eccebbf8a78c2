package models

import (
	"encoding/json"
	"slices"
)

// Person is someone who acted, as the ledger tells people apart. A console user is their
// stable user id: an email changes (a federated user's at every sign-in, with whatever the
// identity provider lets them choose; a local user's by an admin), so decisions made under two
// emails by one user are one person's, and four eyes, distinct approvers, claims and bulk
// decisions count them once. Actor is what was recorded for people to read (user:<email> at
// the time, worker:…, api:…, cli); it identifies only those without a user id: programs, and
// records kept before user ids were.
type Person struct {
	UserID string
	Actor  string
}

// Is reports whether p and q are the same person: by user id where both have one, else by the
// recorded actor.
func (p Person) Is(q Person) bool {
	if p.UserID != "" && q.UserID != "" {
		return p.UserID == q.UserID
	}
	return p.Actor != "" && p.Actor == q.Actor
}

// Name is how p reads on a page (ActorName).
func (p Person) Name() string { return ActorName(p.Actor) }

// Person is who the requester is.
func (r Requester) Person() Person { return Person{UserID: r.UserID, Actor: r.Actor} }

// Person is who takes the action.
func (a Action) Person() Person { return Person{UserID: a.UserID, Actor: a.Actor} }

// detailUserID is the detail member that keeps the acting user's id on an event.
const detailUserID = "user_id"

// withUserID adds the user id of p to an event's detail, when p has one.
func withUserID(detail map[string]any, p Person) map[string]any {
	if p.UserID == "" {
		return detail
	}
	if detail == nil {
		detail = map[string]any{}
	}
	detail[detailUserID] = p.UserID
	return detail
}

// Person is who recorded the event: its actor, with the user id its detail keeps.
func (e Event) Person() Person {
	p := Person{Actor: e.Actor}
	if e.Detail != nil {
		var d struct {
			UserID string `json:"user_id"`
		}
		if json.Unmarshal([]byte(*e.Detail), &d) == nil {
			p.UserID = d.UserID
		}
	}
	return p
}

// Among reports whether p is one of people.
func (p Person) Among(people []Person) bool {
	return slices.ContainsFunc(people, p.Is)
}
