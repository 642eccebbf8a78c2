package handlers

import (
	"testing"

	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
)

// A list's evidence line: the look-ups first (the latest word), then the attempts and what the
// last one saw, each cause in its own words. Look-ups that all failed say they told nothing
// either way (issue 51 item 4).
func TestEvidenceLine(t *testing.T) {
	str := func(s string) *string { return &s }
	status := func(n int) *int { return &n }
	for _, tc := range []struct {
		name string
		ev   models.Evidence
		want string
	}{
		{"nothing tried", models.Evidence{}, ""},
		{"running, nothing seen yet", models.Evidence{Attempts: 1}, "1 attempt"},
		{"an answer", models.Evidence{Attempts: 1, LastClass: str(models.ErrorAmbiguous), LastStatus: status(504)}, "1 attempt · HTTP 504"},
		{"timeout", models.Evidence{Attempts: 3, LastClass: str(models.ErrorAmbiguous), LastError: str("context deadline exceeded")}, "3 attempts · timeout"},
		{"closed", models.Evidence{Attempts: 1, LastClass: str(models.ErrorAmbiguous), LastError: str(`Post "http://x/refunds": EOF`)}, "1 attempt · connection closed"},
		{"worker lost", models.Evidence{Attempts: 2, LastClass: str(models.ErrorAmbiguous), LastError: str("lease expired")}, "2 attempts · worker stopped"},
		{"not reached", models.Evidence{Attempts: 1, LastClass: str(models.ErrorNotSent), LastError: str("dial tcp: connection refused")}, "1 attempt · not reached"},
		{"unclear", models.Evidence{Attempts: 1, LastClass: str(models.ErrorAmbiguous)}, "1 attempt · no clear answer"},
		{"look-ups all alike", models.Evidence{Attempts: 1, LastClass: str(models.ErrorAmbiguous), LastStatus: status(502),
			Lookups: []models.LookupCount{{Outcome: "error", Status: "500", N: 14}}}, "14 look-ups told nothing either way (HTTP 500) · 1 attempt · HTTP 502"},
		{"failed look-ups that differ", models.Evidence{Lookups: []models.LookupCount{{Outcome: "error", Status: "500", N: 3},
			{Outcome: "error", N: 1}}}, "4 look-ups told nothing either way (3 × HTTP 500, 1 × no answer)"},
		{"look-ups that differ", models.Evidence{Lookups: []models.LookupCount{{Outcome: "error", Status: "500", N: 2},
			{Outcome: jobs.ProbeNotFound, N: 1}}}, "3 look-ups: 2 × HTTP 500, 1 × not found"},
		{"one look-up", models.Evidence{Lookups: []models.LookupCount{{Outcome: "error", N: 1}}}, "1 look-up told nothing either way (no answer)"},
		{"one telling look-up", models.Evidence{Lookups: []models.LookupCount{{Outcome: jobs.ProbeFound, N: 1}}}, "1 look-up: found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, evidenceLine(tc.ev))
		})
	}
}
