// Command idembench drives a gateway over HTTP and reports throughput and latency for the
// paths that matter: new operations, replays, a duplicate storm, and the same calls sent
// straight to the downstream (the zero-overhead baseline). It starts its own gateway, with an
// instant in-process downstream, on the database named by --database.
//
//	go run ./cmd/idembench --database postgres://postgres@127.0.0.1:5432/postgres --concurrency 16 --duration 10s
//
// --only runs some scenarios (baseline, new, replay, replay-old, storm, plan). --preload N first
// writes N finished operations into the ledger, which replay-old then replays at random. plan
// (PostgreSQL, an empty ledger) compares replays on connections that planned while the ledger
// was empty with a fresh process's (plan.go).
//
// --floor sqlite runs no gateway: it measures the database floor on SQLite (sqlitefloor.go),
// the floor's statements (new_op_spec.sql, replay.sql) through the driver the ledger uses, for the
// scenarios new and replay.
// --cpuprofile and --memprofile write pprof profiles of the measured scenarios (the
// in-process gateway and the load it is under, so read the handler's share with -focus).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
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
	only        []string
	cpuProfile  string
	memProfile  string
	preload     int64
	tenant      string
	floor       string
	growth      int64
	window      int64
	policy      string
}

// scenarioNames are the values --only accepts, in the order scenarios run.
var scenarioNames = []string{"baseline", "new", "replay", "replay-old", "storm", "plan", "growth"}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("idembench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.database, "database", "", "database of the gateway under test (default: a fresh SQLite file in a temporary directory)")
	fs.IntVar(&cfg.concurrency, "concurrency", 16, "requests in flight")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long each scenario runs")
	fs.IntVar(&cfg.storm, "storm", 1000, "concurrent duplicates of one new key in the storm scenario")
	fs.BoolVar(&cfg.jsonOut, "json", false, "print JSON instead of a table")
	fs.Int64Var(&cfg.growth, "growth", 100_000, "new operations the growth scenario runs, however long they take")
	fs.Int64Var(&cfg.window, "window", 10_000, "operations per row of the growth scenario's curve")
	only := fs.String("only", "baseline,new,replay,replay-old,storm", "scenarios to run, comma-separated, of "+strings.Join(scenarioNames, ","))
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the scenarios to this file")
	fs.StringVar(&cfg.memProfile, "memprofile", "", "write an allocation profile of the scenarios to this file")
	fs.Int64Var(&cfg.preload, "preload", 0, "first write this many finished operations into the ledger, for the replay-old scenario (with --floor sqlite: the floor's, default 200000)")
	fs.StringVar(&cfg.floor, "floor", "", "measure the database floor instead of a gateway: sqlite")
	fs.StringVar(&cfg.tenant, "tenant", "", "tenant to run as, created unless it exists (default: a new one per run); a later run with the same tenant reuses its preloaded operations")
	fs.StringVar(&cfg.policy, "policy", "none", "policies and budgets of the catalogue under test: none, spread (three rules, a budget over 100 scope values) or one (the same budget on one scope value)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for name := range strings.SplitSeq(*only, ",") {
		if !slices.Contains(scenarioNames, name) {
			return fmt.Errorf("--only: unknown scenario %q (want some of %s)", name, strings.Join(scenarioNames, ","))
		}
		cfg.only = append(cfg.only, name)
	}
	if cfg.floor != "" {
		if cfg.floor != "sqlite" {
			return fmt.Errorf("--floor: only sqlite (PostgreSQL's floor is pgbench's: see run.sh)")
		}
		results, err := sqliteFloor(ctx, cfg)
		if err != nil {
			return err
		}
		return report(stdout, "sqlite floor", cfg, results)
	}
	gw, err := startGateway(ctx, cfg.database, cfg.tenant, cfg.policy)
	if err != nil {
		return err
	}
	defer gw.close()
	if err := gw.preload(ctx, gw.db, cfg.preload, stderr); err != nil {
		return err
	}
	gw.preloaded = cfg.preload

	results, err := measure(ctx, gw, cfg)
	if err != nil {
		return err
	}

	return report(stdout, gw.dialect, cfg, results)
}

func report(stdout io.Writer, dialect string, cfg config, results []result) error {
	if cfg.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"database": dialect, "concurrency": cfg.concurrency, "duration": cfg.duration.String(), "results": results})
	}
	return printTable(stdout, dialect, cfg, results)
}

// measure runs the chosen scenarios, under the profiler when asked.
func measure(ctx context.Context, gw *gateway, cfg config) ([]result, error) {
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if cfg.memProfile != "" {
		runtime.MemProfileRate = 4096
		defer func() {
			if f, err := os.Create(cfg.memProfile); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	var results []result
	for _, sc := range []scenario{
		{id: "baseline", name: "baseline (downstream only)", fn: gw.direct},
		{id: "new", name: "new operations", fn: gw.newOperation},
		{id: "replay", name: "replays", fn: gw.replay},
		{id: "replay-old", name: "replays across the ledger", fn: gw.replayOld},
	} {
		if !slices.Contains(cfg.only, sc.id) || sc.id == "replay-old" && gw.preloaded == 0 {
			continue // replay-old needs --preload
		}
		r, err := drive(ctx, sc, cfg.concurrency, cfg.duration)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	if slices.Contains(cfg.only, "plan") {
		plan, err := planScenario(ctx, gw, cfg.database, cfg.concurrency, cfg.duration)
		if err != nil {
			return nil, err
		}
		results = append(results, plan...)
	}
	if slices.Contains(cfg.only, "growth") {
		curve, err := growth(ctx, scenario{name: "new operations", fn: gw.newOperation}, cfg.concurrency, cfg.growth, cfg.window)
		results = append(results, curve...)
		if err != nil {
			return results, err
		}
	}
	if slices.Contains(cfg.only, "storm") {
		storm, err := gw.storm(ctx, cfg.storm)
		if err != nil {
			return nil, err
		}
		results = append(results, storm)
	}
	return results, nil
}

// orBlank is d to the microsecond, or nothing for a figure a row does not measure (the growth
// curve's windows time no single request).
func orBlank(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.Round(time.Microsecond).String()
}

func printTable(stdout io.Writer, dialect string, cfg config, results []result) error {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "scenario\trequests\terrors\treq/s\tp50\tp90\tp99\tCPU/req\tnote\t\n")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n", r.Name, r.Requests, r.Errors, r.PerSecond,
			orBlank(r.P50), orBlank(r.P90), orBlank(r.P99), orBlank(r.CPUPerRequest), r.Note)
	}
	fmt.Fprintf(tw, "(%s ledger, concurrency %d, %s per scenario)\t\t\t\t\t\t\t\t\t\n", dialect, cfg.concurrency, cfg.duration)
	return tw.Flush()
}
