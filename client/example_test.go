package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/idemgate/idemgate/client"
)

// A workflow run id and a step id name one logical action, whatever happens to the process
// that performs it.
func ExampleKey() {
	k := client.Key("workflow-8472", "create-ticket")
	fmt.Println(k.Key)
	fmt.Println(k.WorkflowRunID, k.StepID)
	// Output:
	// workflow-8472:create-ticket
	// workflow-8472 create-ticket
}

// Do runs a tool call at most once per key and waits for its outcome. Its errors say whether
// the action took effect, failed, or is not settled yet; none of them calls for a new key.
func ExampleClient_Do() {
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("IDEMGATE_API_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	op, err := c.Do(ctx, "tickets.create", map[string]any{"subject": "Printer on fire"},
		client.Key("workflow-8472", "create-ticket"))
	switch {
	case err == nil:
		var ticket struct{ ID string }
		if err := op.DecodeResult(&ticket); err != nil {
			log.Fatal(err)
		}
		fmt.Println("created", ticket.ID, "replayed:", op.Replayed)
	case errors.Is(err, client.ErrOperationFailed):
		fmt.Println("the ticket system refused it:", op.Error.Message)
	case errors.Is(err, client.ErrOperationUncertain):
		// The ticket may exist; idemgate is finding out. Ask again later with the same key.
		fmt.Println("not settled yet:", err)
	case errors.Is(err, client.ErrInvalidParams):
		var p *client.Problem
		errors.As(err, &p)
		fmt.Println("fix the params:", p.Errors)
	default:
		log.Fatal(err)
	}
}

// After a restart an agent asks the ledger which steps already took effect, and runs only the
// others, under the same keys.
func ExampleClient_Resume() {
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("IDEMGATE_API_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	run := "workflow-8472" // kept by the orchestrator that restarted the agent
	steps := []struct {
		id, tool string
		params   map[string]any
	}{
		{"create-ticket", "tickets.create", map[string]any{"subject": "Refund for order 1042"}},
		{"refund", "refunds.issue", map[string]any{"order_id": "1042", "amount_cents": 1999, "currency": "EUR"}},
	}
	for _, step := range steps {
		op, err := c.Resume(ctx, step.tool, step.params, client.Key(run, step.id))
		switch {
		case errors.Is(err, client.ErrNotFound):
			fmt.Println(step.id, "was never sent: run it with Do and the same key")
		case errors.Is(err, client.ErrKeyMismatch):
			log.Fatalf("%s: the key was used for another call (%v): choose another run id", step.id, err)
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Println(step.id, "is", op.State)
		}
	}
}

// Every problem of the API is a *client.Problem that matches its sentinel with errors.Is.
func ExampleProblem() {
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"type":"/problems/idempotency-key-mismatch","title":"Idempotency key reused with different params",`+
			`"status":422,"detail":"this Idempotency-Key was first used with another tool or other params; nothing was run",`+
			`"operation_id":"op_01JD7X4T6V8Q0W9M3K5N2P1R8S","state":"SUCCEEDED","safe_to_retry_with_new_key":false}`)
	}))
	defer gateway.Close()

	c, err := client.New(gateway.URL, "idg_example")
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Do(context.Background(), "refunds.issue", map[string]any{"order_id": "1042", "amount_cents": 500, "currency": "EUR"},
		client.Key("workflow-8472", "refund"))
	var p *client.Problem
	if errors.Is(err, client.ErrKeyMismatch) && errors.As(err, &p) {
		fmt.Println("this step already ran with other params as", p.OperationID, "which", p.State)
		fmt.Println("safe to retry with a new key:", p.SafeToRetryWithNewKey)
	}
	// Output:
	// this step already ran with other params as op_01JD7X4T6V8Q0W9M3K5N2P1R8S which SUCCEEDED
	// safe to retry with a new key: false
}
