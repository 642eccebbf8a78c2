package models

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A tick takes the open operations' counts and leaves the settled ones, unless it is their turn
// or so many wait that memory, not the cadence, decides; an operation asked again while open
// and again once settled counts as open.
func TestRepeatTallyTakesOpenCountsFirst(t *testing.T) {
	var tally repeatTally
	tally.add("open", repeatCount{tenant: "acme", n: 1, firstNS: 1, lastNS: 1, open: true})
	tally.add("open", repeatCount{tenant: "acme", n: 1, firstNS: 5, lastNS: 5})
	tally.add("settled", repeatCount{tenant: "acme", n: 1, firstNS: 2, lastNS: 2})

	got, _ := tally.take(false)
	assert.Equal(t, map[string]*repeatCount{"open": {tenant: "acme", n: 2, firstNS: 1, lastNS: 5, open: true}}, got)
	got, _ = tally.take(false)
	assert.Empty(t, got, "nothing open is left")
	got, _ = tally.take(true)
	assert.Equal(t, map[string]*repeatCount{"settled": {tenant: "acme", n: 1, firstNS: 2, lastNS: 2}}, got)

	// Counted settled first, then as open (two requests racing: one read the operation before it
	// settled, the other after, and the later read was noted first): it moves to the open counts.
	tally.add("moved", repeatCount{tenant: "acme", n: 1, firstNS: 3, lastNS: 3})
	tally.add("moved", repeatCount{tenant: "acme", n: 1, firstNS: 4, lastNS: 4, open: true})
	got, _ = tally.take(false)
	assert.Equal(t, map[string]*repeatCount{"moved": {tenant: "acme", n: 2, firstNS: 3, lastNS: 4, open: true}}, got)
	assert.Empty(t, tally.settled)

	for i := range settledRepeatsSoon {
		tally.add(fmt.Sprint(i), repeatCount{tenant: "acme", n: 1})
	}
	got, _ = tally.take(false)
	assert.Len(t, got, settledRepeatsSoon, "too many settled counts waiting: written at the next tick")
	assert.Empty(t, tally.settled)
}
