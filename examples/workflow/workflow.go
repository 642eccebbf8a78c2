package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/idemgate/idemgate/client"
)

// The steps of the workflow, in order.
const (
	StepTicket = "create-ticket"
	StepRefund = "refund"
	StepEmail  = "email"
)

// errKilled is returned when the workflow stops itself to simulate a crash.
var errKilled = errors.New("simulated crash")

// Workflow resolves a complaint about an order: it opens a ticket, refunds the order and
// emails the customer. Each step is one operation whose key is "<RunID>:<step>", so running
// the workflow again with the same RunID, after a crash or on purpose, asks for the same
// operations: steps that took effect are read back from the ledger, not repeated.
type Workflow struct {
	Client  *client.Client
	RunID   string
	OrderID string
	// KillAfter, when it names a step, makes Run stop right after sending that step, before
	// looking at its answer: as if the process were killed while the step was in flight.
	KillAfter string
	Out       io.Writer
}

// Run runs the steps that have not taken effect yet, in order.
func (w *Workflow) Run(ctx context.Context) error {
	ticket, err := w.step(ctx, StepTicket, "tickets.create", map[string]any{
		"subject":  "Refund for order " + w.OrderID,
		"body":     "The customer was charged twice; refunding the second charge.",
		"priority": "high",
	})
	if err != nil {
		return err
	}
	refund, err := w.step(ctx, StepRefund, "refunds.issue", map[string]any{
		"order_id": w.OrderID, "amount_cents": 1999, "currency": "EUR",
	})
	if err != nil {
		return err
	}
	email, err := w.step(ctx, StepEmail, "email.send", map[string]any{
		"to":      "customer@example.com",
		"subject": "Your refund for order " + w.OrderID,
		"body":    fmt.Sprintf("We refunded 19.99 EUR (%s); ticket %s tracks it.", refund, ticket),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w.Out, "workflow %s complete: ticket %s, refund %s, email %s\n", w.RunID, ticket, refund, email)
	return nil
}

// step runs one step and returns the id of what it made downstream. It first asks the ledger
// whether the step already took effect, as an agent that just restarted must: its own memory
// died with the process that sent the step.
func (w *Workflow) step(ctx context.Context, id, tool string, params map[string]any) (string, error) {
	key := client.Key(w.RunID, id)
	op, err := w.Client.Resume(ctx, tool, params, key)
	switch {
	case errors.Is(err, client.ErrKeyMismatch):
		// The key holds another call: another workflow ran under this run id before.
		return "", fmt.Errorf("step %s: run %q already used the key %s for another call (%s; choose another -run): %w", id, w.RunID, key.Key, op.ID, err)
	case err == nil && op.State == client.StateSucceeded:
		ref, err := resultID(op)
		fmt.Fprintf(w.Out, "%-13s already done: %s (%s), not repeated\n", id, ref, op.ID)
		return ref, err
	case err == nil, errors.Is(err, client.ErrNotFound):
		// Not done yet, or never sent: send it. For a step in flight, the same key makes Do
		// wait for that one operation rather than start another.
	default:
		return "", fmt.Errorf("step %s: %w", id, err)
	}

	op, err = w.Client.Do(ctx, tool, params, key)
	if w.KillAfter == id {
		return "", errKilled
	}
	if err != nil {
		return "", fmt.Errorf("step %s: %w", id, err)
	}
	ref, err := resultID(op)
	fmt.Fprintf(w.Out, "%-13s %s: %s (%s)\n", id, op.State, ref, op.ID)
	return ref, err
}

// resultID is the id the downstream gave what it made ("T-1001", "R-5001", …).
func resultID(op *client.Operation) (string, error) {
	var made struct {
		ID string `json:"id"`
	}
	if err := op.DecodeResult(&made); err != nil {
		return "", err
	}
	return made.ID, nil
}
