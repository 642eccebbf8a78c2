package handlers

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
)

// Look-alikes (docs/CONSOLE.md): operations of the same tool and tenant, within the tool's
// review.lookalike_window, whose review.lookalike_on params (every param by default) are equal.
// Approving one needs a ticked confirmation, which the server checks.

// lookAlikeRule is the tool's rule; the defaults for a tool no longer in the catalogue.
func lookAlikeRule(cat *catalog.Catalog, toolName string) models.LookAlikeRule {
	tool, ok := cat.Get(toolName)
	if !ok {
		return models.LookAlikeRule{}
	}
	return models.LookAlikeRule{On: tool.Review.LookalikeOn, Window: tool.Review.LookalikeWindow}
}

// lookAlikesOf reads op's look-alikes by its tool's rule.
func (h *Console) lookAlikesOf(ctx context.Context, s models.Scope, op *models.Operation) ([]models.LookAlike, bool, error) {
	return h.Ledger.LookAlikesBy(ctx, s, op, lookAlikeRule(h.Catalog, op.Tool))
}

// equalFields names what the rule compares: "card_number, amount_cents and currency".
func equalFields(rule models.LookAlikeRule) string {
	if len(rule.On) == 0 {
		return "every param"
	}
	names := make([]string, len(rule.On))
	for i, p := range rule.On {
		names[i] = strings.ReplaceAll(strings.ReplaceAll(strings.TrimPrefix(p, "/"), "~1", "/"), "~0", "~")
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// spanText says a window in words: "a day", "2 h", "30 min".
func spanText(d time.Duration) string {
	switch {
	case d == 24*time.Hour:
		return "a day"
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return d.String()
}

// firstOf says which came first, op or the earliest look-alike shown.
func firstOf(op *models.Operation, alikes []models.LookAlike) string {
	earliest := alikes[0]
	for _, a := range alikes[1:] {
		if a.CreatedAt.Before(earliest.CreatedAt) {
			earliest = a
		}
	}
	if !earliest.CreatedAt.Before(op.CreatedAt) {
		return "This one came first: the others were made after it."
	}
	return fmt.Sprintf("%s came first, %s before this one.", earliest.Key, views.Age(op.CreatedAt.Sub(earliest.CreatedAt)))
}

// lookAlikeConfirm is the approval form's required confirmation while op has look-alikes.
func lookAlikeConfirm(n int) string {
	if n == 1 {
		return "I have checked the operation that looks like this one: both are meant."
	}
	return fmt.Sprintf("I have checked the %d operations that look like this one: all are meant.", n)
}

// checkLookAlikeConfirmed refuses an approval of an operation with look-alikes unless the form's
// confirmation was ticked. The look-alikes are read again: the page's may be old.
func (h *Console) checkLookAlikeConfirmed(ctx context.Context, r actionRequest, confirmed bool) error {
	if confirmed {
		return nil
	}
	alikes, _, err := h.lookAlikesOf(ctx, r.Scope, r.Rec.Op)
	if err != nil {
		return err
	}
	if len(alikes) == 0 {
		return nil
	}
	return &models.Error{Code: models.CodeInvalid, Message: fmt.Sprintf(
		"this operation looks like %s (%s equal): approving it needs your confirmation that you checked both, the box in its approval form; nothing was approved",
		alikes[0].Key, equalFields(lookAlikeRule(h.Catalog, r.Rec.Op.Tool)))}
}
