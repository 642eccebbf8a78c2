// Command idembench drives a gateway over HTTP and reports throughput and latency for the
// paths that matter: new operations, replays, a duplicate storm, and the same calls sent
// straight to the downstream (the zero-overhead baseline). It starts its own gateway, with an
// instant in-process downstream, on the database named by --database.
//
//	go run ./cmd/idembench --database postgres://postgres@127.0.0.1:5432/postgres --concurrency 16 --duration 10s
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"text/tabwriter"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "idembench:", err)
		os.Exit(1)
	}
}

type config struct {
	database    string
	concurrency int
	duration    time.Duration
	storm       int
	jsonOut     bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("idembench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.database, "database", "", "database of the gateway under test (default: a fresh SQLite file in a temporary directory)")
	fs.IntVar(&cfg.concurrency, "concurrency", 16, "requests in flight")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long each scenario runs")
	fs.IntVar(&cfg.storm, "storm", 1000, "concurrent duplicates of one new key in the storm scenario")
	fs.BoolVar(&cfg.jsonOut, "json", false, "print JSON instead of a table")
	if err := fs.Parse(args); err != nil {
		return err
	}
	gw, err := startGateway(ctx, cfg.database)
	if err != nil {
		return err
	}
	defer gw.close()

	var results []result
	for _, sc := range []scenario{
		{name: "baseline (downstream only)", fn: gw.direct},
		{name: "new operations", fn: gw.newOperation},
		{name: "replays", fn: gw.replay},
	} {
		r, err := drive(ctx, sc, cfg.concurrency, cfg.duration)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	storm, err := gw.storm(ctx, cfg.storm)
	if err != nil {
		return err
	}
	results = append(results, storm)

	if cfg.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"database": gw.dialect, "concurrency": cfg.concurrency, "duration": cfg.duration.String(), "results": results})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "scenario\trequests\terrors\treq/s\tp50\tp90\tp99\tnote\t\n")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t\n", r.Name, r.Requests, r.Errors, r.PerSecond,
			r.P50.Round(time.Microsecond), r.P90.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.Note)
	}
	fmt.Fprintf(tw, "(%s ledger, concurrency %d, %s per scenario)\t\t\t\t\t\t\t\t\n", gw.dialect, cfg.concurrency, cfg.duration)
	return tw.Flush()
}
