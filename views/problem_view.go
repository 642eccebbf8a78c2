package views

import (
	"fmt"
	"net/http"
)

// ProblemType is what a problem type's public page shows: its address, status, title, the
// text for the agent's developer and an example answer carrying it.
type ProblemType struct {
	Slug        string
	URI         string
	Status      int
	Title       string
	Explanation string
	WhatToDo    string
	Example     string
}

// statusLine shows an HTTP status with its reason phrase, such as "409 Conflict".
func statusLine(status int) string {
	return fmt.Sprintf("%d %s", status, http.StatusText(status))
}
