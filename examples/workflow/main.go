// Command workflow is an example agent: it resolves a customer complaint in three steps
// (create a ticket, refund the order, email the customer) through idemgate, with operation
// keys derived from a workflow run id and step ids.
//
// Start the demo gateway, then run the workflow, kill it half-way, and run it again:
//
//	go run ./cmd/idemgate serve --demo                  # prints an API key
//	export IDEMGATE_API_KEY=idg_...
//	go run ./examples/workflow -run complaint-1 -kill-after refund
//	go run ./examples/workflow -run complaint-1                # resumes: no step runs twice
//
// See examples/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/idemgate/idemgate/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, errKilled):
		os.Exit(3)
	case err != nil:
		fmt.Fprintln(os.Stderr, "workflow:", err)
		os.Exit(1)
	}
}

// run parses the flags and runs the workflow once.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("workflow", flag.ContinueOnError)
	fs.SetOutput(stderr)
	gateway := fs.String("gateway", orDefault(getenv("IDEMGATE_URL"), "http://127.0.0.1:8080"), "the gateway's base URL")
	apiKey := fs.String("key", getenv("IDEMGATE_API_KEY"), "API key (serve --demo prints one; default $IDEMGATE_API_KEY)")
	runID := fs.String("run", "", "workflow run id; run again with the same id to resume (required)")
	order := fs.String("order", "1042", "the order to refund")
	killAfter := fs.String("kill-after", "", "simulate a crash right after sending this step: create-ticket, refund or email")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *runID == "" || *apiKey == "" {
		fs.Usage()
		return errors.New("-run and -key (or IDEMGATE_API_KEY) are required")
	}
	c, err := client.New(*gateway, *apiKey)
	if err != nil {
		return err
	}
	w := &Workflow{Client: c, RunID: *runID, OrderID: *order, KillAfter: *killAfter, Out: stdout}
	if err := w.Run(ctx); errors.Is(err, errKilled) {
		fmt.Fprintf(stderr, "workflow: simulated crash after sending %s; run again with -run %s to resume\n", *killAfter, *runID)
		return err
	} else if err != nil {
		return err
	}
	return nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
