package jobs

import (
	"context"
	"math/rand/v2"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
)

// policyInput is what Decide needs about the attempt of c that ended with class: the count of
// the operation's earlier attempts that sent nothing is read from the ledger only when it can
// change the decision (a sent attempt at or past max_attempts by the plain count), which is
// rare; a failed read counts none, which can only end retries sooner.
func (e *Executor) policyInput(ctx context.Context, tool *catalog.Tool, c models.Claimed, class Class) PolicyInput {
	op := c.Op
	in := PolicyInput{Class: class, Attempt: c.Attempt.Number, HadAmbiguous: op.Ambiguous, RetrySafe: tool.RetrySafe(),
		Retry: tool.Retry, Now: e.now(), Jitter: rand.Float64(), Age: e.now().Sub(op.CreatedAt)}
	if class != NotSent && c.Attempt.Number >= tool.Retry.MaxAttempts {
		if n, err := e.ledger.UnsentAttempts(ctx, op.ID); err == nil {
			in.Unsent = n
		}
	}
	return in
}

// attemptsLeft says whether op may run again after reconciliation proved it did not take
// effect: fewer of its attempts than max_attempts sent anything.
func (e *Executor) attemptsLeft(ctx context.Context, tool *catalog.Tool, op *models.Operation) bool {
	if op.Attempts < tool.Retry.MaxAttempts {
		return true
	}
	n, err := e.ledger.UnsentAttempts(ctx, op.ID)
	return err == nil && op.Attempts-n < tool.Retry.MaxAttempts
}
