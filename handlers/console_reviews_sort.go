package handlers

import (
	"math/big"
	"slices"

	"github.com/idemgate/idemgate/views"
)

// The review queue's orders, by their value in the query's sort=: the longest waiting first
// (the default, the ledger's own order), or the largest amount first.
const (
	sortWaiting = "waiting"
	sortAmount  = "amount"
)

var reviewSorts = []string{sortWaiting, sortAmount}

// sortLabels name the queue's orders in its filters.
var sortLabels = map[string]string{
	sortWaiting: "Waiting longest",
	sortAmount:  "Largest amount",
}

// reviewSort is the order the query asks for; anything else is the default.
func reviewSort(q string) string {
	if s := oneOf(q, reviewSorts); s != "" {
		return s
	}
	return sortWaiting
}

func sortOptions(selected string) []views.Option {
	out := make([]views.Option, len(reviewSorts))
	for i, s := range reviewSorts {
		out[i] = views.Option{Value: s, Label: sortLabels[s], Selected: s == selected}
	}
	return out
}

// queued is a queue row with the amount it puts at stake, to sort by.
type queued struct {
	row      views.ReviewRow
	minor    *big.Int // nil without an amount
	currency string
}

// sortByAmount orders rows by amount, largest first, within each currency (amounts in
// different currencies are not compared: there is no rate to compare them by, so the currencies
// come in alphabetical order); rows without an amount come last, oldest first as before.
func sortByAmount(rows []queued) {
	slices.SortStableFunc(rows, func(a, b queued) int {
		switch {
		case a.minor == nil && b.minor == nil:
			return 0
		case a.minor == nil:
			return 1
		case b.minor == nil:
			return -1
		case a.currency != b.currency:
			if a.currency < b.currency {
				return -1
			}
			return 1
		}
		return b.minor.Cmp(a.minor)
	})
}
